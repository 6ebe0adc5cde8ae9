// SPDX-License-Identifier: MIT
#pragma once
/// The sr8 codec on the GPU: sr8_encode / sr8_decode of float, __half and __nv_bfloat16 values, asynchronous on the
/// caller's stream, bit for bit the reference of spec/sr8.hpp (hence the CPU's). The __global__ functions only read
/// the CUDA built-in indices and call their bodies in kernels/sr8.hpp, which the host tests run too.

#include <cstdint>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/spec/sr8.hpp"
#include "compact/api/sr8_checks.hpp"
#include "compact/kernels/sr8.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/block.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

template <class Scalar>
__global__ void __launch_bounds__(kSr8Threads)
    sr8_encode_kernel(Sr8Params p, const Scalar* x, index_t count, std::int8_t* q, float* scales) {
  DeviceBlock b;
  sr8_encode_tiles(b, p, x, count, q, scales, ToFloat<Scalar>{});
}

template <class Scalar>
__global__ void __launch_bounds__(kSr8Threads)
    sr8_decode_kernel(const std::int8_t* q, const float* scales, index_t count, Scalar* out) {
  sr8_decode_thread(this_thread_1d(), q, scales, count, out, FromFloat<Scalar>{});
}

}  // namespace detail

/// Encodes `count` values x (device memory, contiguous; float, __half or __nv_bfloat16, converted exactly to fp32)
/// with the sr8 codec (docs/spec.md, "The sr8 codec"): q[count] int8 and scales[sr8_scale_count(count)] fp32 in
/// device memory, the bits of the CPU's sr8_encode for the same fp32 values and state. One kernel launch on `stream`
/// (the backend's own stream is not used: pass backend.stream for it) on the current device; asynchronous, no host
/// synchronization, no allocation. Any alignment of the pointers (16-byte aligned ones are read and written in
/// 16-byte vectors). Throws compact::error, before anything is enqueued, for count < 0, a null pointer with
/// count > 0 or an output that aliases x or the other output; and when the launch fails.
template <class Scalar>
void sr8_encode(const Cuda& backend, const Scalar* x, index_t count, const SketchState& state, std::int8_t* q,
                float* scales, cudaStream_t stream) {
  static_assert(detail::is_cuda_scalar<Scalar>,
                "compact::sr8_encode(Cuda, ...): Scalar must be float, __half or __nv_bfloat16");
  (void)backend;
  detail::check_sr8_encode_args("sr8_encode", x, count, q, scales);
  if (count == 0) return;
  const detail::Launch1d l = detail::sr8_encode_launch(count);
  const Sr8Params p = sr8_params(state);
  detail::launch_kernel("sr8_encode_kernel", [&] {
    detail::sr8_encode_kernel<Scalar><<<static_cast<unsigned>(l.blocks), static_cast<unsigned>(l.threads),
                                        detail::sr8_encode_shared_bytes(l.threads), stream>>>(p, x, count, q, scales);
  });
}

/// Decodes `count` values of the sr8 codec (q, scales in device memory) into out (device memory): out[i] =
/// float(q[i]) * scales[i / 64] in fp32, rounded to Scalar to nearest even (float, __half, __nv_bfloat16); the bits of
/// the CPU's sr8_decode for float, except that a NaN's payload is the device's. One kernel launch on `stream`,
/// asynchronous, no allocation, any alignment. Throws compact::error, before anything is enqueued, for count < 0, a
/// null pointer with count > 0 or an out that aliases q or scales; and when the launch fails.
template <class Scalar>
void sr8_decode(const Cuda& backend, const std::int8_t* q, const float* scales, index_t count, Scalar* out,
                cudaStream_t stream) {
  static_assert(detail::is_cuda_scalar<Scalar>,
                "compact::sr8_decode(Cuda, ...): Scalar must be float, __half or __nv_bfloat16");
  (void)backend;
  detail::check_sr8_decode_args("sr8_decode", q, scales, count, out);
  if (count == 0) return;
  const detail::Launch1d l = detail::sr8_decode_launch<Scalar>(count);
  detail::launch_kernel("sr8_decode_kernel", [&] {
    detail::sr8_decode_kernel<Scalar>
        <<<static_cast<unsigned>(l.blocks), static_cast<unsigned>(l.threads), 0, stream>>>(q, scales, count, out);
  });
}

}  // namespace compact
