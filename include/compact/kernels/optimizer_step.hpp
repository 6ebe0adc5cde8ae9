// SPDX-License-Identifier: MIT
#pragma once
/// The per-element moment updates of CompressedAdamW and CompressedSgd, and the fused step kernel bodies that apply
/// them to a whole m x r buffer: one copy of the math for the CPU optimizers and the CUDA kernel.
///
/// Every operation is one IEEE-754 operation rounded to nearest (rn::mul, add, div, sqrt). On the device these are
/// CUDA's __fmul_rn / __fadd_rn / __fdiv_rn / __fsqrt_rn, which nvcc never contracts into an fma (whatever --fmad
/// says) and which ignore --use_fast_math, so the kernel computes exactly the host loop's operations. On the host
/// they are the plain operators: a host build that contracts a*b + c into an fma (g++ with an FMA target such as
/// -march=haswell or native *and* -ffp-contract=fast, g++'s default in GNU modes) can differ from the device in the
/// last bit of M, V and the update; a build without FMA in the target (the x86-64 default, this project's tests) or
/// with -ffp-contract=off cannot. docs/cuda.md ("The optimizer on the GPU") discusses it.

#include <cmath>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/portability.hpp"
#include "compact/spec/fp32_math.hpp"
#include "compact/api/optimizer_options.hpp"
#include "compact/kernels/convert.hpp"
#include "compact/kernels/grid.hpp"

namespace compact {
namespace detail {

/// One element of an AdamW step: M <- b1 M + (1 - b1) g, V <- b2 V + (1 - b2) g², and returns the update
/// N = (M / (1 - b1^a)) / (sqrt(V / (1 - b2^b)) + eps), each operation rounded once in T (no fma).
template <class T>
COMPACT_HOST_DEVICE inline T adamw_element(T g, T* m, T* v, const AdamWStepScalars<T>& s) {
  *m = rn::add(rn::mul(s.beta1, *m), rn::mul(s.one_minus_beta1, g));
  *v = rn::add(rn::mul(s.beta2, *v), rn::mul(s.one_minus_beta2, rn::mul(g, g)));
  return rn::div(rn::mul(*m, s.inv_bias1), rn::add(rn::sqrt(rn::mul(*v, s.inv_bias2)), s.eps));
}

/// One element of an SGD step: B <- g on the first update after a reset, else B <- momentum B + g; returns B.
template <class T>
COMPACT_HOST_DEVICE inline T sgd_element(T g, T* b, T momentum, bool first) {
  *b = first ? g : rn::add(rn::mul(momentum, *b), g);
  return *b;
}

/// The fused AdamW step of `count` (= m·r) contiguous entries, as the work of one thread of a grid-stride launch:
/// for each of its entries i, reads Ĝ[i] and zeroes it, updates M[i], V[i] (adamw_element) and writes
/// update[i] = encode(N) (N rounded to W's type Out by `encode`, e.g. FromFloat<__nv_bfloat16>). The CUDA optimizer
/// launches it as one kernel; the host tests run it for every (block, thread) with host_launch_threads.
template <class T, class Out, class Encode>
COMPACT_HOST_DEVICE inline void adamw_step_body(const Thread1d& t, T* grad, T* m, T* v, Out* update, index_t count,
                                                const AdamWStepScalars<T>& s, Encode encode) {
  for (index_t i = t.first(); i < count; i += t.step()) {
    const T g = grad[i];
    grad[i] = T(0);
    T mi = m[i], vi = v[i];
    const T n = adamw_element(g, &mi, &vi, s);
    m[i] = mi;
    v[i] = vi;
    update[i] = encode(n);
  }
}

/// The fused SGD step of `count` contiguous entries, one thread's share: reads and zeroes Ĝ[i], updates B[i]
/// (sgd_element) and writes update[i] = encode(B[i]).
template <class T, class Out, class Encode>
COMPACT_HOST_DEVICE inline void sgd_step_body(const Thread1d& t, T* grad, T* b, Out* update, index_t count, T momentum,
                                              bool first, Encode encode) {
  for (index_t i = t.first(); i < count; i += t.step()) {
    const T g = grad[i];
    grad[i] = T(0);
    T bi = b[i];
    const T n = sgd_element(g, &bi, momentum, first);
    b[i] = bi;
    update[i] = encode(n);
  }
}

/// Threads per block of the fused step kernels, and their __launch_bounds__.
inline constexpr int kOptimizerThreads = 256;

/// The launch of the fused step kernels over `count` entries: kOptimizerThreads threads, grid-stride beyond 2^16
/// blocks.
inline Launch1d optimizer_step_launch(index_t count) { return grid_stride_launch(count, kOptimizerThreads); }

/// An `encode` of the step bodies that first multiplies by `scale` (one correctly rounded fp32 product), then
/// applies `encode`.
template <class Encode>
struct ScaledEncode {
  float scale;
  Encode encode;
  template <class T>
  COMPACT_HOST_DEVICE auto operator()(T v) const {
    return encode(rn::mul(scale, v));
  }
};

/// How an SGD step splits its factor -lr·alpha between the update N it stores in W's type and the unsketch_grad that
/// applies it (W <- beta W + gemm_alpha · N P^T with N = encode(store_scale · B)).
///
/// fp16 W: N = fp16(float(-lr·alpha) · B), gemm_alpha = 1. B is an accumulated gradient, whose magnitude has nothing
/// to do with fp16's range (normal values 6.1e-5 to 65504): a B above 65504 would be stored as inf and turn W into
/// inf/NaN, and a B scaled by lr·alpha > 1 would carry its subnormal rounding into W amplified. Stored as the
/// increment, N has the magnitude of the change applied to W, which W's own fp16 must hold anyway: its rounding is
/// at most half an fp16 ulp of the increment, never larger than the rounding of W itself. Every other W type (fp32,
/// and bf16 with fp32's exponent range) stores B itself (store_scale = 1, gemm_alpha = float(-lr·alpha)), as the CPU
/// optimizer does. AdamW's N = M̂/(√V̂ + ε) is bounded near 1 and stored as is for every type.
struct SgdUpdateScales {
  float store_scale;
  float gemm_alpha;
};
inline SgdUpdateScales sgd_update_scales(bool fp16_weights, double lr, double alpha) {
  const float increment = static_cast<float>(-lr * alpha);
  return fp16_weights ? SgdUpdateScales{increment, 1.0f} : SgdUpdateScales{1.0f, increment};
}

}  // namespace detail
}  // namespace compact
