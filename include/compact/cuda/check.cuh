// SPDX-License-Identifier: MIT
#pragma once
/// Turns cudaError_t and cublasStatus_t into compact::error, naming the call that failed, and launches kernels so
/// that an error left by earlier, unrelated work is not reported as the launch's.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "compact/config.hpp"

namespace compact {

/// Throws compact::error when `status` is not cudaSuccess: "compact: <what>: <name> (<description>)", e.g.
/// "compact: cudaEventRecord: cudaErrorInvalidResourceHandle (invalid resource handle)". Public so that an
/// integration's own CUDA calls (events, streams, copies around compact's) fail the way compact's do.
inline void check_cuda(cudaError_t status, const char* what) {
  COMPACT_REQUIRE(status == cudaSuccess,
                  what << ": " << cudaGetErrorName(status) << " (" << cudaGetErrorString(status) << ")");
}

/// Throws compact::error when `status` is not CUBLAS_STATUS_SUCCESS: "compact: <what>: <name> (<description>)"
/// (public for the same reason as check_cuda).
inline void check_cublas(cublasStatus_t status, const char* what) {
  COMPACT_REQUIRE(status == CUBLAS_STATUS_SUCCESS,
                  what << ": " << cublasGetStatusName(status) << " (" << cublasGetStatusString(status) << ")");
}

namespace detail {

/// Enqueues the kernel launch that `launch()` performs and checks that it was accepted, without waiting for it.
///
/// CUDA keeps one "last error" per thread. Before launching, a pending error is read and cleared
/// (cudaGetLastError): a non-sticky error of earlier, unrelated work (say, a failed launch by another library
/// that nobody checked) is discarded there rather than reported as this launch's. A sticky error (an earlier
/// kernel's fault: illegal address, misaligned access, trap) cannot be cleared: the context is unusable, every
/// later call fails with it, and so does this launch; the message then says the error was already pending. The
/// kernel's own asynchronous faults surface at the caller's next synchronizing call, as with any CUDA library.
template <class Launch>
void launch_kernel(const char* kernel, Launch&& launch) {
  const cudaError_t earlier = cudaGetLastError();
  launch();
  const cudaError_t status = cudaGetLastError();
  COMPACT_REQUIRE(status == cudaSuccess,
                  kernel << " launch: " << cudaGetErrorName(status) << " (" << cudaGetErrorString(status) << ")"
                         << (status == earlier ? "; this error was already pending before the launch, a sticky "
                                                 "error of earlier work (the CUDA context is unusable)"
                                               : ""));
}

}  // namespace detail
}  // namespace compact
