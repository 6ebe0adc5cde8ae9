// SPDX-License-Identifier: MIT
#pragma once
/// Thrust conveniences: MatrixViews over thrust::device_vector, workspaces held in one, and device_vector overloads
/// of sketch / unsketch_grad / compressed_grad for contiguous row-major data.
///
/// These only wrap pointers and never resize: allocating a device_vector is the caller's explicit act (and, as
/// Thrust does, value-initializes on the legacy default stream). The projectors themselves never allocate.

#include <cstddef>

#include <thrust/device_vector.h>

#include "compact/config.hpp"
#include "compact/api/projector_fwd.hpp"
#include "compact/api/view.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/compressed_grad.cuh"
#include "compact/cuda/dense_projector.cuh"
#include "compact/cuda/materialized_p.cuh"
#include "compact/cuda/srht_projector.cuh"

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

namespace detail {
/// Rows of a contiguous device_vector with `cols` columns; refuses a size that is not a multiple.
inline index_t rows_of(const char* fn, const char* name, std::size_t size, index_t cols) {
  COMPACT_REQUIRE(cols > 0 && static_cast<index_t>(size) % cols == 0,
                  fn << ": device_vector " << name << " has " << size << " elements, not a multiple of " << cols);
  return static_cast<index_t>(size) / cols;
}
}  // namespace detail

/// z = x P for contiguous row-major device_vectors: x holds B x n values, z exactly B x r (not resized).
template <class Dist, class T, class A1, class A2>
void sketch(const Projector<Cuda, Dist, T>& p, const thrust::device_vector<T, A1>& x, thrust::device_vector<T, A2>& z) {
  const index_t rows = detail::rows_of("sketch", "x", x.size(), p.in_dim());
  p.sketch(device_view(x, rows, p.in_dim()), device_view(z, rows, p.rank()));
}

/// out = alpha g P^T + beta out for contiguous row-major device_vectors: g holds m x r values, out exactly m x n.
template <class Dist, class T, class A1, class A2>
void unsketch_grad(const Projector<Cuda, Dist, T>& p, const thrust::device_vector<T, A1>& g,
                   thrust::device_vector<T, A2>& out, float alpha = 1.0f, float beta = 0.0f) {
  const index_t rows = detail::rows_of("unsketch_grad", "g", g.size(), p.rank());
  p.unsketch_grad(device_view(g, rows, p.rank()), device_view(out, rows, p.in_dim()), alpha, beta);
}

/// g = dy^T z + beta g for contiguous row-major device_vectors of `batch` rows: dy holds batch x m values, z
/// batch x r, g exactly m x r (batch >= 1, so that m and r follow from the sizes). G, the type of g, is T or float.
template <class T, class G, class A1, class A2, class A3>
void compressed_grad(const Cuda& backend, const thrust::device_vector<T, A1>& dy, const thrust::device_vector<T, A2>& z,
                     thrust::device_vector<G, A3>& g, index_t batch, float beta = 0.0f) {
  COMPACT_REQUIRE(batch >= 1, "compressed_grad: batch = " << batch << " must be >= 1 for the device_vector overload");
  const index_t m = detail::rows_of("compressed_grad", "dy", dy.size(), batch);
  const index_t r = detail::rows_of("compressed_grad", "z", z.size(), batch);
  compressed_grad<T>(backend, device_view(dy, batch, m), device_view(z, batch, r), device_view(g, m, r), beta);
}

}  // namespace compact
