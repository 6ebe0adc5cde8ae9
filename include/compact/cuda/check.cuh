// SPDX-License-Identifier: MIT
#pragma once
/// Turns cudaError_t and cublasStatus_t into compact::error, naming the call that failed.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "compact/config.hpp"

namespace compact {
namespace detail {

/// Throws compact::error when `status` is not cudaSuccess: "compact: <what>: <name> (<description>)".
inline void check_cuda(cudaError_t status, const char* what) {
  COMPACT_REQUIRE(status == cudaSuccess,
                  what << ": " << cudaGetErrorName(status) << " (" << cudaGetErrorString(status) << ")");
}

/// Throws compact::error when `status` is not CUBLAS_STATUS_SUCCESS: "compact: <what>: <name> (<description>)".
inline void check_cublas(cublasStatus_t status, const char* what) {
  COMPACT_REQUIRE(status == CUBLAS_STATUS_SUCCESS,
                  what << ": " << cublasGetStatusName(status) << " (" << cublasGetStatusString(status) << ")");
}

/// Checks that the kernel launch just issued was accepted (bad configuration, missing device, ...). Reads the
/// launch error only (cudaGetLastError), so it never waits for the kernel.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace detail
}  // namespace compact
