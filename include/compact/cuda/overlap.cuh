// SPDX-License-Identifier: MIT
#pragma once
/// CudaOverlap: owns the side stream and the two events of the overlapped dense panel schedule
/// (PanelSchedule::kOverlap), for a caller to lend to its Cuda backends.

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/device.cuh"

namespace compact {

/// A non-blocking side stream (no implicit ordering with the legacy default stream) and two events without timing,
/// created on the device current at construction and destroyed with the object (CUDA releases them once their
/// pending work is done). Creating one is the caller's explicit act, like allocating a workspace; compact creates no
/// stream or event itself.
///
/// Lend it with `backend.overlap = overlap.handles()`. Projectors on that backend then generate panels on the side
/// stream while the caller's stream runs the GEMMs, ordered by the events alone (no host synchronization). The
/// events are recorded and waited on while an operation is issued, so operations that share one CudaOverlap must
/// be issued by one host thread at a time; their device work may overlap freely. Use it only with projectors of its
/// device. Non-copyable; movable.
class CudaOverlap {
 public:
  CudaOverlap() {
    device_ = detail::current_device("CudaOverlap: cudaGetDevice");
    check_cuda(cudaStreamCreateWithFlags(&handles_.side, cudaStreamNonBlocking),
               "CudaOverlap: cudaStreamCreateWithFlags");
    const cudaError_t a = cudaEventCreateWithFlags(&handles_.generated, cudaEventDisableTiming);
    const cudaError_t b = a == cudaSuccess ? cudaEventCreateWithFlags(&handles_.consumed, cudaEventDisableTiming) : a;
    if (b != cudaSuccess) {
      release();
      check_cuda(b, "CudaOverlap: cudaEventCreateWithFlags");
    }
  }
  ~CudaOverlap() { release(); }
  CudaOverlap(const CudaOverlap&) = delete;
  CudaOverlap& operator=(const CudaOverlap&) = delete;
  CudaOverlap(CudaOverlap&& other) noexcept : handles_(other.handles_), device_(other.device_) {
    other.handles_ = PanelOverlap{};
  }
  CudaOverlap& operator=(CudaOverlap&& other) noexcept {
    if (this != &other) {
      release();
      handles_ = other.handles_;
      device_ = other.device_;
      other.handles_ = PanelOverlap{};
    }
    return *this;
  }

  /// The stream and events to put in Cuda::overlap.
  PanelOverlap handles() const { return handles_; }
  /// The device the stream and events belong to.
  int device() const { return device_; }

 private:
  void release() {
    if (handles_.consumed != nullptr) cudaEventDestroy(handles_.consumed);
    if (handles_.generated != nullptr) cudaEventDestroy(handles_.generated);
    if (handles_.side != nullptr) cudaStreamDestroy(handles_.side);
    handles_ = PanelOverlap{};
  }

  PanelOverlap handles_{};
  int device_ = -1;
};

}  // namespace compact
