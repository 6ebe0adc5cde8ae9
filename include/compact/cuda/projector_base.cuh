// SPDX-License-Identifier: MIT
#pragma once
/// What every CUDA projector holds beyond ProjectorCore (n, r, the state, the shape check): the backend, the
/// workspace and the device the projector was built on.

#include <cstddef>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/spec/state.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/workspace.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/device.cuh"

namespace compact {
namespace detail {

/// The members and accessors of a CUDA projector. ProjectorCore checks the shape first; the derived constructor
/// checks its other arguments and then calls record_device(), so that a bad argument is refused before any CUDA call
/// (and without a device).
///
/// Class invariant (once constructed): that of ProjectorCore; the workspace is non-null, large enough for the derived
/// projector and kWorkspaceAlign-aligned; device() is the device that was current at construction, and every
/// operation makes it current around its work (DeviceGuard) and restores the caller's device after.
class CudaProjectorBase : public ProjectorCore {
 public:
  /// The backend given at construction: the default stream of the operations, and the cuBLAS handle.
  const Cuda& backend() const { return backend_; }
  /// The device the projector was built on; its operations run there whatever device is current.
  int device() const { return device_; }

 protected:
  template <class Dist>
  CudaProjectorBase(Dist dist, index_t n, index_t r, SketchState state, Cuda backend, Workspace workspace)
      : ProjectorCore(dist, "Projector", n, r, state), backend_(backend), workspace_(workspace) {}

  void record_device(const char* fn) { device_ = current_device(fn); }

  Cuda backend_;
  Workspace workspace_;
  int device_ = -1;
};

}  // namespace detail
}  // namespace compact
