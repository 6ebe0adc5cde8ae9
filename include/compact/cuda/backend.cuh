// SPDX-License-Identifier: MIT
#pragma once
/// The CUDA backend tag (stream + cuBLAS handle) and the caller-owned device workspace.

#include <cstddef>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace compact {

/// The CUDA backend: every kernel and cuBLAS call of an operation is issued on `stream`, in order, and nothing
/// waits for it (no cudaDeviceSynchronize, no cudaStreamSynchronize, no blocking copies). `cublas` is the caller's
/// handle; compact points it at `stream` (cublasSetStream) and sets host pointer mode before each GEMM, and changes
/// nothing else (math mode and cuBLAS workspace stay the caller's). It is only
/// needed by operations that run a GEMM (dense sketch/unsketch_grad, compressed_grad). Copyable, non-owning.
struct Cuda {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
};

/// Device memory the caller lends to a projector: `bytes` bytes at `data` (256-byte aligned, as cudaMalloc gives),
/// which must stay allocated, and must not be used by anyone else, while the projector's work is in flight.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

}  // namespace compact
