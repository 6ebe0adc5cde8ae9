// SPDX-License-Identifier: MIT
#pragma once
/// The CUDA device a projector belongs to: recorded at construction, made current around its work, and asked for
/// the limits the projector depends on.

#include <cstddef>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/launch_limits.hpp"
#include "compact/cuda/check.cuh"

namespace compact {
namespace detail {

/// The calling thread's current device (cudaGetDevice; a compact::error when there is none).
inline int current_device(const char* fn) {
  int device = -1;
  check_cuda(cudaGetDevice(&device), fn);
  return device;
}

/// Makes `device` current for the guard's lifetime and restores the previous device after; when `device` is
/// already current (the usual case) it costs one cudaGetDevice, a host-side read.
class DeviceGuard {
 public:
  DeviceGuard(int device, const char* fn) : device_(device), previous_(current_device(fn)) {
    if (previous_ != device_) check_cuda(cudaSetDevice(device_), fn);
  }
  ~DeviceGuard() {
    if (previous_ != device_) cudaSetDevice(previous_);  // cannot fail for a device that was current before
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_;
  int previous_;
};

/// Shared memory one block may use on `device` when the kernel opts in (cudaDevAttrMaxSharedMemoryPerBlockOptin).
inline std::size_t max_shared_bytes_per_block(int device, const char* fn) {
  int bytes = 0;
  check_cuda(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), fn);
  return static_cast<std::size_t>(bytes);
}

/// Lets `kernel` use `bytes` of dynamic shared memory on the current device (needed above 48 KiB), raising its
/// cudaFuncAttributeMaxDynamicSharedMemorySize when it is below `bytes` and never lowering it
/// (core/launch_limits.hpp's raise_shared_memory_limit: one lock around the read and the raise).
template <class Kernel>
void allow_shared_bytes(Kernel kernel, std::size_t bytes, const char* fn) {
  if (bytes <= 48 * 1024) return;
  raise_shared_memory_limit(
      bytes,
      [&] {
        cudaFuncAttributes a{};
        check_cuda(cudaFuncGetAttributes(&a, kernel), fn);
        return static_cast<std::size_t>(a.maxDynamicSharedSizeBytes);
      },
      [&](std::size_t b) {
        check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(b)), fn);
      });
}

}  // namespace detail
}  // namespace compact
