// SPDX-License-Identifier: MIT
#pragma once
/// The CUDA backend tag (stream, cuBLAS handle and the handle's workspace) and the caller-owned device workspace.

#include <cstddef>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace compact {

/// The CUDA backend: every kernel and cuBLAS call of an operation is issued on `stream`, in order, and nothing
/// waits for it (no cudaDeviceSynchronize, no cudaStreamSynchronize, no blocking copies). Copyable, non-owning.
///
/// `cublas` is the caller's handle, needed only by operations that run a GEMM (dense sketch/unsketch_grad,
/// compressed_grad). Before a GEMM compact points it at the operation's stream with cublasSetStream, but only when
/// it is on another stream: cublasSetStream also resets the handle's workspace to cuBLAS's own pool, so after such
/// a change compact gives the handle `cublas_workspace` again (cublasSetWorkspace) when it is set. A caller that
/// gives its handle a workspace and calls compact on another stream than the handle's should therefore name that
/// workspace here. The pointer mode is set to host for compact's calls and restored; the math mode is the caller's.
struct Cuda {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;  ///< the handle's workspace (256-byte aligned), or null for cuBLAS's pool
  std::size_t cublas_workspace_bytes = 0;

  /// The same backend on another stream (as thrust::cuda::par.on(stream)).
  Cuda on(cudaStream_t other) const {
    Cuda c = *this;
    c.stream = other;
    return c;
  }
};

/// Device memory the caller lends to a projector: `bytes` bytes at `data`, 256-byte aligned (as cudaMalloc gives;
/// the constructor checks it), which must stay allocated, and must not be used by anyone else, while the
/// projector's work is in flight.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

}  // namespace compact
