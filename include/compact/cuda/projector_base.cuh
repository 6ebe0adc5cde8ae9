// SPDX-License-Identifier: MIT
#pragma once
/// What every CUDA projector holds and checks: n, r, the state and its entry parameters, the backend, the workspace
/// and the device the projector was built on.

#include <cstddef>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/state.hpp"
#include "compact/core/workspace.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/device.cuh"

namespace compact {
namespace detail {

/// Checks the dimensions shared by every CUDA projector (same rule and message as the CPU).
inline void check_cuda_dims(const char* fn, index_t n, index_t r) {
  COMPACT_REQUIRE(n >= 1 && n <= kMaxDim, fn << ": input dimension n = " << n << " must be in [1, " << kMaxDim << "]");
  COMPACT_REQUIRE(r >= 1 && r <= n, fn << ": rank r = " << r << " must satisfy 1 <= r <= n = " << n);
}

/// The members and accessors of a CUDA projector. The derived constructor checks its arguments and then calls
/// record_device(), so that a bad argument is refused before any CUDA call (and without a device).
///
/// Class invariant (once constructed): 1 <= r <= n; the workspace is non-null, large enough for the derived
/// projector and kWorkspaceAlign-aligned; device() is the device that was current at construction, and every
/// operation makes it current around its work (DeviceGuard) and restores the caller's device after.
class CudaProjectorBase {
 public:
  index_t in_dim() const { return n_; }
  index_t rank() const { return r_; }
  SketchState state() const { return state_; }
  /// The backend given at construction: the default stream of the operations, and the cuBLAS handle.
  const Cuda& backend() const { return backend_; }
  /// The device the projector was built on; its operations run there whatever device is current.
  int device() const { return device_; }

 protected:
  CudaProjectorBase(index_t n, index_t r, SketchState state, Cuda backend, Workspace workspace)
      : n_(n), r_(r), state_(state), backend_(backend), workspace_(workspace), params_(entry_params(state, r)) {}

  void record_device(const char* fn) { device_ = current_device(fn); }

  index_t n_;
  index_t r_;
  SketchState state_;
  Cuda backend_;
  Workspace workspace_;
  EntryParams params_;
  int device_ = -1;
};

}  // namespace detail
}  // namespace compact
