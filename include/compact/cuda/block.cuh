// SPDX-License-Identifier: MIT
#pragma once
/// DeviceBlock: the Block concept of kernels/block.hpp on the GPU, for the kernel bodies written in kernels/.

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/kernels/block.hpp"
#include "compact/kernels/grid.hpp"

namespace compact {
namespace detail {

/// The calling thread's position in a 1-D launch, for the non-cooperative kernel bodies.
__device__ inline Thread1d this_thread_1d() { return Thread1d{blockIdx.x, threadIdx.x, gridDim.x, blockDim.x}; }

/// The calling thread's block of a 1-D launch. each() runs its function for this thread only, sync() is
/// __syncthreads(), local<T>() is one T in the thread's registers. The members are
/// COMPACT_HOST_DEVICE so that the host/device kernel bodies instantiate with it; they do nothing in host code,
/// which never calls them.
struct DeviceBlock {
  template <class T>
  struct Local {
    T value;
    COMPACT_HOST_DEVICE T& operator[](index_t) { return value; }
  };

  COMPACT_HOST_DEVICE index_t index() const {
#if defined(__CUDA_ARCH__)
    return blockIdx.x;
#else
    return 0;
#endif
  }
  COMPACT_HOST_DEVICE index_t count() const {
#if defined(__CUDA_ARCH__)
    return gridDim.x;
#else
    return 0;
#endif
  }
  COMPACT_HOST_DEVICE index_t size() const {
#if defined(__CUDA_ARCH__)
    return blockDim.x;
#else
    return 0;
#endif
  }

  template <class F>
  COMPACT_HOST_DEVICE void each(F&& f) const {
#if defined(__CUDA_ARCH__)
    f(static_cast<index_t>(threadIdx.x));
#else
    (void)f;
#endif
  }

  COMPACT_HOST_DEVICE void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }

  /// The dynamic shared memory of the launch (16-byte aligned).
  template <class T>
  COMPACT_HOST_DEVICE T* shared() const {
#if defined(__CUDA_ARCH__)
    extern __shared__ __align__(16) unsigned char compact_dynamic_shared[];
    return reinterpret_cast<T*>(compact_dynamic_shared);
#else
    return nullptr;
#endif
  }

  template <class T>
  COMPACT_HOST_DEVICE Local<T> local() const {
    return Local<T>{};
  }

  template <class T>
  COMPACT_HOST_DEVICE void atomic_add(T* p, T v) const {
#if defined(__CUDA_ARCH__)
    atomicAdd(p, v);
#else
    (void)p;
    (void)v;
#endif
  }
};

}  // namespace detail
}  // namespace compact
