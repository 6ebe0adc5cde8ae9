// SPDX-License-Identifier: MIT
#pragma once
/// The CUDA backend tag: stream, cuBLAS handle and its workspace, the overlap's side stream and events (the device
/// workspace a projector is lent is core/workspace.hpp's Workspace).

#include <cstddef>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "compact/core/workspace.hpp"

namespace compact {

/// The side stream and the two events of the overlapped panel schedule (PanelSchedule::kOverlap), borrowed from a
/// CudaOverlap (compact/cuda/overlap.cuh) that the caller owns. All null (the default): dense projectors run every
/// operation on one stream.
struct PanelOverlap {
  cudaStream_t side = nullptr;
  cudaEvent_t generated = nullptr;
  cudaEvent_t consumed = nullptr;
  bool enabled() const { return side != nullptr; }
};

/// The CUDA backend: every kernel and cuBLAS call of an operation is issued on `stream`, in order, and nothing
/// waits for it on the host (no cudaDeviceSynchronize, no cudaStreamSynchronize, no blocking copies). Copyable,
/// non-owning. With `overlap` set, a dense projector also generates panels on overlap.side, ordered against
/// `stream` by overlap's events only (see core/panel_schedule.hpp): the caller's stream still sees the operation
/// as one piece of stream-ordered work.
///
/// `cublas` is the caller's handle, needed only by operations that run a GEMM (dense sketch/unsketch_grad,
/// compressed_grad). Before a GEMM compact points it at the operation's stream with cublasSetStream, but only when
/// it is on another stream: cublasSetStream also resets the handle's workspace to cuBLAS's own pool.
///
/// `cublas_workspace` belongs to `stream`: after moving the handle to `stream`, compact gives it this workspace back
/// (cublasSetWorkspace); on any other stream (a per-call stream, or `on(other)`) the handle keeps cuBLAS's pool. One
/// buffer lent to GEMMs on two streams that may run at the same time would be a data race inside cuBLAS (PyTorch
/// keeps one workspace per handle and stream for the same reason). A caller that gives its handle a workspace and
/// calls compact on another stream than the handle's should name the workspace here.
///
/// The pointer mode is set to host for compact's calls and restored. The math mode is the caller's for GEMMs of
/// 16-bit operands; for fp32 operands compact runs fp32 arithmetic whatever the handle says: it clears the TF32,
/// deprecated tensor-op and bf16x9-emulation modes around its call (detail::fp32_math_mode) and restores the mode.
struct Cuda {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;  ///< the handle's workspace on `stream` (256-byte aligned), or null (cuBLAS's pool)
  std::size_t cublas_workspace_bytes = 0;
  PanelOverlap overlap{};  ///< set (from a CudaOverlap): dense projectors run PanelSchedule::kOverlap

  /// The same backend on another stream (as thrust::cuda::par.on(stream)). The cuBLAS workspace belongs to `stream`:
  /// on another stream the result names none (cuBLAS's pool), so no two streams share it.
  Cuda on(cudaStream_t other) const {
    Cuda c = *this;
    c.stream = other;
    if (other != stream) {
      c.cublas_workspace = nullptr;
      c.cublas_workspace_bytes = 0;
    }
    return c;
  }
};

}  // namespace compact
