// SPDX-License-Identifier: MIT
#pragma once
/// The 8-bit AdamW step on the GPU: adamw8_step of float, __half and __nv_bfloat16 gradients (and parameters),
/// asynchronous on the caller's stream, bit for bit the reference of spec/moment8.hpp (hence the CPU's). The
/// __global__ function only reads the CUDA built-in indices and calls its body in kernels/moment8.hpp.

#include <cstdint>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/spec/moment8.hpp"
#include "compact/api/moment8_checks.hpp"
#include "compact/kernels/moment8.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/block.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

template <class G, class P>
__global__ void __launch_bounds__(kMoment8Threads)
    adamw8_kernel(Adamw8Consts c, const G* grad, index_t count, std::int8_t* mq, float* ms, std::uint8_t* vq, float* vs,
                  P* param, float* out) {
  DeviceBlock b;
  adamw8_blocks(b, c, grad, count, mq, ms, vq, vs, param, out, ToFloat<G>{}, ToFloat<P>{}, FromFloat<P>{});
}

}  // namespace detail

/// One 8-bit AdamW step over `count` values in device memory (docs/spec.md, "The moment8 codec and the 8-bit AdamW
/// step"): the codes and scales are updated in place; with `param` (Scalar, out null) the dense update is applied to
/// it (the decayed and the updated parameter each rounded to Scalar), with `out` (param null) N is written (fp32).
/// The gradient has type Scalar (float, __half, __nv_bfloat16; converted exactly to fp32). The bits of the CPU's
/// adamw8_step for the same values. One kernel launch on `stream`, asynchronous, no allocation. Throws
/// compact::error, before anything is enqueued, for the arguments adamw8_step(Cpu, ...) refuses; and when the launch
/// fails.
template <class Scalar>
void adamw8_step(const Cuda& backend, const Adamw8Consts& c, const Scalar* grad, index_t count, std::int8_t* m_q,
                 float* m_scales, std::uint8_t* v_q, float* v_scales, Scalar* param, float* out, cudaStream_t stream) {
  static_assert(detail::is_cuda_scalar<Scalar>,
                "compact::adamw8_step(Cuda, ...): Scalar must be float, __half or __nv_bfloat16");
  (void)backend;
  detail::check_adamw8_args("adamw8_step", c, grad, count, m_q, m_scales, v_q, v_scales, param, out);
  if (count == 0) return;
  const detail::Launch1d l = detail::adamw8_launch(count);
  detail::launch_kernel("adamw8_kernel", [&] {
    detail::adamw8_kernel<Scalar, Scalar>
        <<<static_cast<unsigned>(l.blocks), static_cast<unsigned>(l.threads), detail::moment8_shared_bytes(l.threads),
           stream>>>(c, grad, count, m_q, m_scales, v_q, v_scales, param, out);
  });
}

}  // namespace compact
