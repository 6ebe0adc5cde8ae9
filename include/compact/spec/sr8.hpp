// SPDX-License-Identifier: MIT
#pragma once
/// The sr8 codec, specification v1: blockwise 8-bit quantization with stochastic rounding, every bit a pure function
/// of (state, element index, the values of the element's block), host and device alike (docs/spec.md, "The sr8
/// codec").
///
/// Values x_0 .. x_{count-1} are cut into blocks of kSr8Block = 64 (the last one may be shorter). A block keeps one
/// fp32 scale s = amax / 127 and one int8 q per value, q = x / s rounded down or up at random: up with probability
/// (about) the fractional part, so that E[q s] = x up to 2^-16 s. The uniform of element i comes from Philox4x32-10
/// keyed by philox_key(state) at counter {lo32(i/8), hi32(i/8), lo32(window), hi32(window)}, 16 bits per element, so
/// one Philox call serves 8 consecutive elements and no result depends on threads, tiling or backend.
///
/// The functions here are the reference: sr8_encode_block and sr8_decode_value, with the element rule sr8_quantize,
/// the block rule sr8_scale and the uniform sr8_uniform. The CPU's vector paths (cpu/sr8_blocks.inl) and the GPU's
/// kernel bodies (kernels/sr8.hpp) give their bits.

#include <cstdint>

#include "compact/config.hpp"
#include "compact/portability.hpp"
#include "compact/spec/fp32_math.hpp"
#include "compact/spec/philox.hpp"
#include "compact/spec/state.hpp"

namespace compact {

/// Values per block: one fp32 scale per 64 values.
inline constexpr index_t kSr8Block = 64;
/// Values per Philox call: its four 32-bit output words give eight 16-bit uniforms.
inline constexpr index_t kSr8PhiloxValues = 8;
/// The largest |q|: a block's amax maps to +-127 (-128 is never written).
inline constexpr int kSr8MaxQ = 127;
/// 127.0f, the divisor of amax.
inline constexpr float kSr8Levels = 127.0f;
/// 2^16: frac * 2^16 is compared with the 16-bit uniform.
inline constexpr float kSr8UniformScale = 65536.0f;
/// |x| bits at or above this (infinity) are non-finite (inf or NaN).
inline constexpr std::uint32_t kSr8InfBits = 0x7F800000u;
/// Bits of 2^-120: a block whose amax is below it gets scale 0 (every q = 0, decoded as exact zeros).
inline constexpr std::uint32_t kSr8TinyBits = 0x03800000u;
/// Bits of the scale of a block holding a non-finite value: the quiet NaN 0x7FC00000 (every q = 0).
inline constexpr std::uint32_t kSr8NanScaleBits = 0x7FC00000u;

/// Number of scales of `count` values: ceil(count / 64). Throws compact::error for count < 0.
inline index_t sr8_scale_count(index_t count) {
  COMPACT_REQUIRE(count >= 0, "sr8_scale_count: argument count = " << count << " must be >= 0");
  return count / kSr8Block + (count % kSr8Block != 0 ? 1 : 0);
}

/// What an sr8 encode needs of its SketchState: the Philox key (philox_key, as for projections) and the window.
struct Sr8Params {
  Key2x32 key;
  std::uint64_t window;
};

COMPACT_HOST_DEVICE inline Sr8Params sr8_params(const SketchState& s) { return Sr8Params{philox_key(s), s.window}; }

/// The Philox output of the group of values 8 g .. 8 g + 7: counter {lo32(g), hi32(g), lo32(window), hi32(window)}.
COMPACT_HOST_DEVICE inline Words4x32 sr8_group_words(const Sr8Params& p, std::uint64_t group) {
  return philox4x32_10(Words4x32{{static_cast<std::uint32_t>(group), static_cast<std::uint32_t>(group >> 32),
                                  static_cast<std::uint32_t>(p.window), static_cast<std::uint32_t>(p.window >> 32)}},
                       p.key);
}

/// The 16-bit uniform of the value at position k = i % 8 of its group: half k % 2 (0: low, 1: high) of word k / 2.
/// In memory (little-endian) the four words are the group's eight uniforms in element order.
COMPACT_HOST_DEVICE inline std::uint32_t sr8_uniform_of(const Words4x32& w, int k) {
  return (w.w[k / 2] >> (16 * (k % 2))) & 0xFFFFu;
}

/// The 16-bit uniform of element i (its flat index, i >= 0): one Philox call (sr8_group_words of group i / 8).
COMPACT_HOST_DEVICE inline std::uint32_t sr8_uniform(const Sr8Params& p, index_t i) {
  return sr8_uniform_of(sr8_group_words(p, static_cast<std::uint64_t>(i) / kSr8PhiloxValues),
                        static_cast<int>(i % kSr8PhiloxValues));
}

/// |x| as bits (the sign bit cleared). For |x| finite or infinite, the order of these integers is the order of the
/// values, and every NaN is above infinity: the block's amax is the largest of them, non-finite when >= kSr8InfBits.
COMPACT_HOST_DEVICE inline std::uint32_t sr8_abs_bits(float x) { return fp32::bits_of(x) & ~fp32::kSignBit; }

/// The scale of a block from the bits of its amax (the largest sr8_abs_bits of its values): the quiet NaN
/// kSr8NanScaleBits when a value is non-finite, 0 when amax < 2^-120, else amax / 127 (one correctly rounded fp32
/// division).
COMPACT_HOST_DEVICE inline float sr8_scale(std::uint32_t amax_bits) {
  if (amax_bits >= kSr8InfBits) return fp32::from_bits(kSr8NanScaleBits);
  if (amax_bits < kSr8TinyBits) return 0.0f;
  return detail::rn::div(fp32::from_bits(amax_bits), kSr8Levels);
}

/// floor(y) for |y| < 2^31, exactly: the truncation toward zero, minus one where it lies above y. (No libm: the same
/// source on host and device.)
COMPACT_HOST_DEVICE inline float sr8_floor(float y) {
  const float t = static_cast<float>(static_cast<std::int32_t>(y));
  return t > y ? t - 1.0f : t;
}

/// q of value x in a block of scale s > 0 (finite), with the element's 16-bit uniform u16:
///   y = x / s (correctly rounded), f = floor(y), frac = y - f (fp32), q = f + (frac * 2^16 > u16 ? 1 : 0),
///   clamped to [-127, 127].
/// |y| <= 127 (1 + 2^-22) because s = RN(amax / 127) with amax >= |x| (2^-24 relative error, 2^-22 for a subnormal
/// s), so f is in [-128, 127] and the clamp only changes the rare y just beyond +-127. frac * 2^16 is exact (a power
/// of two) and so is u16 as a float. E[q] - y is in [0, 2^-16) wherever y - f is exact and |y| <= 127 (docs/spec.md).
COMPACT_HOST_DEVICE inline std::int8_t sr8_quantize(float x, float s, std::uint32_t u16) {
  const float y = detail::rn::div(x, s);
  const float f = sr8_floor(y);
  const float frac = detail::rn::add(y, -f);
  float q = detail::rn::mul(frac, kSr8UniformScale) > static_cast<float>(u16) ? f + 1.0f : f;
  q = q < -static_cast<float>(kSr8MaxQ) ? -static_cast<float>(kSr8MaxQ) : q;
  q = q > static_cast<float>(kSr8MaxQ) ? static_cast<float>(kSr8MaxQ) : q;
  return static_cast<std::int8_t>(static_cast<std::int32_t>(q));
}

/// Encodes one block: the values x[0, n) with flat indices first .. first + n - 1 (1 <= n <= 64; a block of a tensor
/// has first = 64 b), writing q[0, n) and returning the block's scale. A block with a non-finite value or with
/// amax < 2^-120 gets q = 0 throughout (and scale NaN or 0).
COMPACT_HOST_DEVICE inline float sr8_encode_block(const Sr8Params& p, const float* x, index_t n, index_t first,
                                                  std::int8_t* q) {
  std::uint32_t amax = 0;
  for (index_t k = 0; k < n; ++k) {
    const std::uint32_t a = sr8_abs_bits(x[k]);
    amax = a > amax ? a : amax;
  }
  const float s = sr8_scale(amax);
  if (!(s > 0.0f)) {
    for (index_t k = 0; k < n; ++k) q[k] = 0;
    return s;
  }
  Words4x32 words{};
  std::uint64_t group = ~std::uint64_t{0};
  for (index_t k = 0; k < n; ++k) {
    const std::uint64_t i = static_cast<std::uint64_t>(first + k);
    if (i / kSr8PhiloxValues != group) {
      group = i / kSr8PhiloxValues;
      words = sr8_group_words(p, group);
    }
    q[k] = sr8_quantize(x[k], s, sr8_uniform_of(words, static_cast<int>(i % kSr8PhiloxValues)));
  }
  return s;
}

/// The decoded value: float(q) * scale, one correctly rounded fp32 multiply (a NaN scale gives NaN, a zero scale 0).
COMPACT_HOST_DEVICE inline float sr8_decode_value(std::int8_t q, float scale) {
  return detail::rn::mul(static_cast<float>(q), scale);
}

namespace detail {

/// The reference encode of values x[0, n) whose flat indices start at 64 first_block: block by block with
/// sr8_encode_block, scales[k] for block first_block + k. The CPU's scalar path and the tests' reference.
COMPACT_HOST_DEVICE inline void sr8_encode_scalar(const Sr8Params& p, index_t first_block, const float* x, index_t n,
                                                  std::int8_t* q, float* scales) {
  for (index_t k = 0; k * kSr8Block < n; ++k) {
    const index_t e0 = k * kSr8Block, len = n - e0 < kSr8Block ? n - e0 : kSr8Block;
    scales[k] = sr8_encode_block(p, x + e0, len, (first_block + k) * kSr8Block, q + e0);
  }
}

/// The reference decode of n values (the first of a block at q[0], scales[0]).
COMPACT_HOST_DEVICE inline void sr8_decode_scalar(const std::int8_t* q, const float* scales, index_t n, float* out) {
  for (index_t i = 0; i < n; ++i) out[i] = sr8_decode_value(q[i], scales[i / kSr8Block]);
}

}  // namespace detail
}  // namespace compact
