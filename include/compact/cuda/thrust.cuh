// SPDX-License-Identifier: MIT
#pragma once
/// Thrust conveniences: MatrixViews over thrust::device_vector and workspaces held in one.
///
/// These only wrap pointers; allocating a device_vector is the caller's explicit act (and, as Thrust does,
/// value-initializes on the legacy default stream). The projectors themselves never allocate.

#include <cstddef>

#include <thrust/device_vector.h>

#include "compact/config.hpp"
#include "compact/core/view.hpp"
#include "compact/cuda/backend.cuh"

namespace compact {

/// Contiguous rows x cols row-major view of a device_vector holding exactly rows * cols elements.
template <class T, class Alloc>
MatrixView<T> device_view(thrust::device_vector<T, Alloc>& v, index_t rows, index_t cols) {
  COMPACT_REQUIRE(rows >= 0 && cols >= 0 && static_cast<index_t>(v.size()) == rows * cols,
                  "device_view: device_vector of size " << v.size() << " is not " << rows << " x " << cols);
  return MatrixView<T>(thrust::raw_pointer_cast(v.data()), rows, cols, cols);
}

/// Read-only contiguous view of a const device_vector holding exactly rows * cols elements.
template <class T, class Alloc>
MatrixView<const T> device_view(const thrust::device_vector<T, Alloc>& v, index_t rows, index_t cols) {
  COMPACT_REQUIRE(rows >= 0 && cols >= 0 && static_cast<index_t>(v.size()) == rows * cols,
                  "device_view: device_vector of size " << v.size() << " is not " << rows << " x " << cols);
  return MatrixView<const T>(thrust::raw_pointer_cast(v.data()), rows, cols, cols);
}

/// A Workspace over all of a byte device_vector (cudaMalloc-aligned storage).
template <class Alloc>
Workspace as_workspace(thrust::device_vector<unsigned char, Alloc>& bytes) {
  return Workspace{thrust::raw_pointer_cast(bytes.data()), bytes.size()};
}

}  // namespace compact
