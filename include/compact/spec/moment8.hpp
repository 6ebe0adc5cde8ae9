// SPDX-License-Identifier: MIT
#pragma once
/// The moment8 codec and the fused 8-bit AdamW step, specification v1: AdamW's moments stored in 8 bits per value,
/// blockwise with a dynamic (float-like) code, every bit a pure function of the values of a block, host and device
/// alike (docs/spec.md, "The moment8 codec and the 8-bit AdamW step").
///
/// A moment tensor is cut into blocks of kMoment8Block = 256 consecutive values (the last one may be shorter). A block
/// keeps one fp32 scale s = its amax (0 for an all-zero block, NaN when a value is non-finite) and one 8-bit code per
/// value: the first moment m as int8 q = sign * k with k in [0, 120] ("E4M3" magnitudes), the second moment v as
/// uint8 k in [0, 248] ("E5M3" magnitudes). A magnitude code k stands for moment8_code_value(k, bias) in [0, 1], a
/// float with 3 mantissa bits: k / 8 * 2^(1 - bias) below 8 (subnormal), (1 + (k % 8) / 8) * 2^(k / 8 - bias) from 8
/// on; bias 15 for m, 31 for v; the top code (8 * bias) is 1 exactly. Encode: r = |x| / s (one correctly rounded
/// division, r in [0, 1]), k = the code nearest r, ties to the even k; decode: value(k) * s, one correctly rounded
/// multiply (negated for q < 0).
///
/// The step (adamw8_block): decode m and v, m = b1 m + (1 - b1) g, v = b2 v + ((1 - b2) g) g, then either
/// N = (m / bc1) / (sqrt(v / bc2) + eps) (a compressed layer's update, CompressedAdamW's fp32 order) or the dense
/// AdamW update of a parameter p: p = p (1 - lr wd), p = p + ((-lr / bc1) m) / (sqrt(v) / sqrt(bc2) + eps); then the
/// block's new m and v are encoded. Every operation is one IEEE fp32 operation, correctly rounded, in that order.
///
/// The reference is here (moment8_code_of, moment8_code_value, moment8_encode_block, adamw8_block); the CPU's
/// (cpu/moment8.hpp, cpu/moment8_blocks.inl) and the GPU's (kernels/moment8.hpp) paths give its bits.

#include <cmath>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/portability.hpp"
#include "compact/spec/fp32_math.hpp"

namespace compact {

/// Values per block: one fp32 scale per 256 values.
inline constexpr index_t kMoment8Block = 256;
/// Exponent bias of the first moment's magnitudes (E4M3: 2^-17 .. 1) and of the second moment's (E5M3: 2^-33 .. 1).
inline constexpr int kMoment8BiasM = 15;
inline constexpr int kMoment8BiasV = 31;
/// The largest magnitude codes: 8 * bias, the code of 1.0 (int8 m in [-120, 120], uint8 v in [0, 248]).
inline constexpr int kMoment8MaxM = 8 * kMoment8BiasM;
inline constexpr int kMoment8MaxV = 8 * kMoment8BiasV;
/// |x| bits at or above this (infinity) are non-finite.
inline constexpr std::uint32_t kMoment8InfBits = 0x7F800000u;
/// The scale of a block holding a non-finite value: the quiet NaN (every code 0, decoded as NaN).
inline constexpr std::uint32_t kMoment8NanScaleBits = 0x7FC00000u;
/// 2^23: t + 2^23 - 2^23 rounds a float t in [0, 2^22) to the nearest integer, ties to even (exactly).
inline constexpr float kMoment8RoundMagic = 8388608.0f;

/// Number of scales of `count` values: ceil(count / 256). Throws compact::error for count < 0.
inline index_t moment8_scale_count(index_t count) {
  COMPACT_REQUIRE(count >= 0, "moment8_scale_count: argument count = " << count << " must be >= 0");
  return count / kMoment8Block + (count % kMoment8Block != 0 ? 1 : 0);
}

/// The value of magnitude code k (0 <= k <= 8 bias) relative to the block's scale, exact in fp32:
/// k * 2^(-bias - 2) for k < 8, (8 + k % 8) * 2^(k / 8 - bias - 3) for k >= 8 (its bits built directly).
COMPACT_HOST_DEVICE inline float moment8_code_value(int k, int bias) {
  if (k < 8)
    return detail::rn::mul(static_cast<float>(k), fp32::from_bits(static_cast<std::uint32_t>(125 - bias) << 23));
  return fp32::from_bits(static_cast<std::uint32_t>(k + 8 * (127 - bias)) << 20);
}

/// The code nearest r (0 <= r <= 1, a float), ties to the even code: below 2^(1 - bias) it is r 2^(bias + 2)
/// (exact) rounded to an integer, ties to even (the 2^23 addition); from 2^(1 - bias) on, the bits of r rounded to
/// 3 mantissa bits, ties to even, whose exponent and mantissa fields are the code (k = (rounded bits >> 20) -
/// 8 (127 - bias)). Both are "nearest code, ties to even k": the codes are the floats with 3 mantissa bits, and the
/// parity of a code is the parity of its last mantissa bit.
COMPACT_HOST_DEVICE inline int moment8_code_of(float r, int bias) {
  const float normal_min = fp32::from_bits(static_cast<std::uint32_t>(128 - bias) << 23);  // 2^(1 - bias)
  if (r < normal_min) {
    const float t = detail::rn::mul(r, fp32::from_bits(static_cast<std::uint32_t>(129 + bias) << 23));
    return static_cast<int>(detail::rn::add(detail::rn::add(t, kMoment8RoundMagic), -kMoment8RoundMagic));
  }
  const std::uint32_t b = fp32::bits_of(r);
  const std::uint32_t rounded = (b + 0x7FFFFu + ((b >> 20) & 1u)) >> 20;
  return static_cast<int>(rounded) - 8 * (127 - bias);
}

/// |x| as bits; the block's amax is the largest (non-finite when >= kMoment8InfBits; NaNs are above infinity).
COMPACT_HOST_DEVICE inline std::uint32_t moment8_abs_bits(float x) { return fp32::bits_of(x) & ~fp32::kSignBit; }

/// The scale of a block from the bits of its amax: the quiet NaN when a value is non-finite, else amax itself.
COMPACT_HOST_DEVICE inline float moment8_scale(std::uint32_t amax_bits) {
  return amax_bits >= kMoment8InfBits ? fp32::from_bits(kMoment8NanScaleBits) : fp32::from_bits(amax_bits);
}

/// The int8 code of a first-moment value x in a block of scale s: sign(x) * moment8_code_of(|x| / s, 15); 0 unless
/// s > 0 (a zero block or a non-finite one).
COMPACT_HOST_DEVICE inline std::int8_t moment8_encode_m(float x, float s) {
  if (!(s > 0.0f)) return 0;
  const float r = detail::rn::div(fp32::from_bits(moment8_abs_bits(x)), s);
  const int k = moment8_code_of(r, kMoment8BiasM);
  return static_cast<std::int8_t>((fp32::bits_of(x) & fp32::kSignBit) != 0 ? -k : k);
}

/// The uint8 code of a second-moment value x in a block of scale s: moment8_code_of(|x| / s, 31) (x >= 0 in the
/// step; a negative x encodes as |x|); 0 unless s > 0.
COMPACT_HOST_DEVICE inline std::uint8_t moment8_encode_v(float x, float s) {
  if (!(s > 0.0f)) return 0;
  const float r = detail::rn::div(fp32::from_bits(moment8_abs_bits(x)), s);
  return static_cast<std::uint8_t>(moment8_code_of(r, kMoment8BiasV));
}

/// The decoded first moment: value(|q|) * s, negated for q < 0 (one correctly rounded multiply; NaN for a NaN scale).
COMPACT_HOST_DEVICE inline float moment8_decode_m(std::int8_t q, float s) {
  const float a = detail::rn::mul(moment8_code_value(q < 0 ? -q : q, kMoment8BiasM), s);
  return q < 0 ? -a : a;
}

/// The decoded second moment: value(k) * s.
COMPACT_HOST_DEVICE inline float moment8_decode_v(std::uint8_t k, float s) {
  return detail::rn::mul(moment8_code_value(k, kMoment8BiasV), s);
}

/// The fp32 constants of one step, each the fp32 rounding of the double the caller computes (moment8_step_consts):
/// b1, c1 = 1 - b1, b2, c2 = 1 - b2, bc1 = 1 - b1^t, bc2 = 1 - b2^t, eps; for a dense parameter decay = 1 - lr wd,
/// neg_step = -lr / bc1 and sqrt_bc2 = sqrt(bc2) (doubles first, as torch's AdamW computes them).
struct Adamw8Consts {
  float b1, c1, b2, c2, bc1, bc2, eps, decay, neg_step, sqrt_bc2;
};

/// The values of one step's fp32 constants from the optimizer's doubles (the rounding of each double to fp32).
inline Adamw8Consts adamw8_consts(double lr, double b1, double b2, double eps, double weight_decay, std::int64_t step) {
  // b^t with pow, as Python's ** (CompressedAdamW's fp32 path computes 1 - beta**t in Python).
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step)), bc2 = 1.0 - std::pow(b2, static_cast<double>(step));
  return Adamw8Consts{static_cast<float>(b1),          static_cast<float>(1.0 - b1),
                      static_cast<float>(b2),          static_cast<float>(1.0 - b2),
                      static_cast<float>(bc1),         static_cast<float>(bc2),
                      static_cast<float>(eps),         static_cast<float>(1.0 - lr * weight_decay),
                      static_cast<float>(-(lr / bc1)), static_cast<float>(std::sqrt(bc2))};
}

/// One value's moments after the step: m = b1 m + c1 g, v = b2 v + (c2 g) g (each product and sum rounded; no
/// product is fused into an fma, whatever the build: rn::mul_unfused).
struct Moments {
  float m, v;
};
COMPACT_HOST_DEVICE inline Moments adamw8_moments(const Adamw8Consts& c, float m, float v, float g) {
  using namespace detail;
  return Moments{rn::add(rn::mul_unfused(c.b1, m), rn::mul_unfused(c.c1, g)),
                 rn::add(rn::mul_unfused(c.b2, v), rn::mul_unfused(rn::mul(c.c2, g), g))};
}

/// A compressed layer's update: N = (m / bc1) / (sqrt(v / bc2) + eps).
COMPACT_HOST_DEVICE inline float adamw8_update(const Adamw8Consts& c, float m, float v) {
  using namespace detail;
  return rn::div(rn::div(m, c.bc1), rn::add(rn::sqrt(rn::div(v, c.bc2)), c.eps));
}

/// A dense parameter's AdamW update, after its decay p_d = p (1 - lr wd) was rounded to the parameter's type:
/// p_d + ((-lr / bc1) m) / (sqrt(v) / sqrt(bc2) + eps), in fp32 (the caller rounds it to the parameter's type).
COMPACT_HOST_DEVICE inline float adamw8_dense(const Adamw8Consts& c, float p_decayed, float m, float v) {
  using namespace detail;
  const float denom = rn::add(rn::div(rn::sqrt(v), c.sqrt_bc2), c.eps);
  return rn::add(p_decayed, rn::div(rn::mul(c.neg_step, m), denom));
}

/// The new scale of a block from its fp32 values x[0, n).
COMPACT_HOST_DEVICE inline float moment8_block_scale(const float* x, index_t n) {
  std::uint32_t amax = 0;
  for (index_t k = 0; k < n; ++k) {
    const std::uint32_t a = moment8_abs_bits(x[k]);
    amax = a > amax ? a : amax;
  }
  return moment8_scale(amax);
}

namespace detail {

/// The identity conversion (fp32 parameters and gradients).
struct Moment8SameFloat {
  COMPACT_HOST_DEVICE float operator()(float x) const { return x; }
};

/// The reference step of one block of n <= 256 values (1 <= n): gradient g[0, n) (to_float converts it exactly to
/// fp32), codes mq[0, n), vq[0, n) and scales *ms, *vs updated in place; with `param` non-null the dense update is
/// applied to it (round(x) rounds an fp32 value to the parameter's type, to_float converts back), else N is written to
/// `out`. The CPU's scalar path and the tests' reference.
COMPACT_NO_EXEC_CHECK
template <class G, class P, class ToFloatG, class ToFloatP, class Round>
COMPACT_HOST_DEVICE inline void adamw8_block(const Adamw8Consts& c, const G* g, index_t n, std::int8_t* mq, float* ms,
                                             std::uint8_t* vq, float* vs, P* param, float* out, ToFloatG g_float,
                                             ToFloatP p_float, Round round) {
  float m[kMoment8Block], v[kMoment8Block];
  const float m_scale = *ms, v_scale = *vs;
  for (index_t k = 0; k < n; ++k) {
    const Moments mv =
        adamw8_moments(c, moment8_decode_m(mq[k], m_scale), moment8_decode_v(vq[k], v_scale), g_float(g[k]));
    m[k] = mv.m;
    v[k] = mv.v;
    if (param != nullptr) {
      const float p_decayed = p_float(round(rn::mul_unfused(p_float(param[k]), c.decay)));
      param[k] = round(adamw8_dense(c, p_decayed, mv.m, mv.v));
    } else {
      out[k] = adamw8_update(c, mv.m, mv.v);
    }
  }
  const float new_ms = moment8_block_scale(m, n), new_vs = moment8_block_scale(v, n);
  for (index_t k = 0; k < n; ++k) {
    mq[k] = moment8_encode_m(m[k], new_ms);
    vq[k] = moment8_encode_v(v[k], new_vs);
  }
  *ms = new_ms;
  *vs = new_vs;
}

/// The reference step of n values (the first of a block at index 0), block by block.
COMPACT_NO_EXEC_CHECK
template <class G, class P, class ToFloatG, class ToFloatP, class Round>
COMPACT_HOST_DEVICE inline void adamw8_scalar(const Adamw8Consts& c, const G* g, index_t n, std::int8_t* mq, float* ms,
                                              std::uint8_t* vq, float* vs, P* param, float* out, ToFloatG g_float,
                                              ToFloatP p_float, Round round) {
  for (index_t b = 0; b * kMoment8Block < n; ++b) {
    const index_t e0 = b * kMoment8Block, len = n - e0 < kMoment8Block ? n - e0 : kMoment8Block;
    adamw8_block(c, g + e0, len, mq + e0, ms + b, vq + e0, vs + b, param == nullptr ? nullptr : param + e0,
                 out == nullptr ? nullptr : out + e0, g_float, p_float, round);
  }
}

/// The reference encode of n fp32 moments (fresh state from values, and the tests): codes and scales block by block.
inline void moment8_encode_scalar(const float* m, const float* v, index_t n, std::int8_t* mq, float* ms,
                                  std::uint8_t* vq, float* vs) {
  for (index_t b = 0; b * kMoment8Block < n; ++b) {
    const index_t e0 = b * kMoment8Block, len = n - e0 < kMoment8Block ? n - e0 : kMoment8Block;
    ms[b] = moment8_block_scale(m + e0, len);
    vs[b] = moment8_block_scale(v + e0, len);
    for (index_t k = 0; k < len; ++k) {
      mq[e0 + k] = moment8_encode_m(m[e0 + k], ms[b]);
      vq[e0 + k] = moment8_encode_v(v[e0 + k], vs[b]);
    }
  }
}

}  // namespace detail
}  // namespace compact
