// SPDX-License-Identifier: MIT
#pragma once
/// fp32 <-> bf16 / fp16 bit conversions, round to nearest even, written with integer operations only.
///
/// Entries of P are generated in fp32 and converted with these functions on every backend, so a state gives the
/// same bf16/fp16 matrix on the host and on the device. They work on raw 16-bit patterns (no __half or
/// __nv_bfloat16 here, so the header compiles without CUDA); compact/cuda/scalar.cuh wraps them for CUDA types.

#include <cstdint>

#include "compact/config.hpp"
#include "compact/spec/fp32_math.hpp"

namespace compact {

/// bf16 bits of fp32 `x`, round to nearest, ties to even.
///
/// Overflow rounds to infinity as IEEE 754 prescribes; subnormals round like normals (bf16 shares fp32's exponent
/// range); a NaN stays a NaN of the same sign with its top 7 payload bits kept and the quiet bit set.
COMPACT_HOST_DEVICE inline std::uint16_t bf16_bits_from_fp32(float x) {
  const std::uint32_t u = fp32::bits_of(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  // Adding 0x7FFF (+1 when the kept lsb is odd) carries into bit 16 exactly when the dropped half exceeds the
  // tie, or equals it with an odd kept part; a carry out of the mantissa bumps the exponent, which is correct.
  const std::uint32_t bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + bias) >> 16);
}

/// fp32 value of bf16 bits `b` (exact).
COMPACT_HOST_DEVICE inline float fp32_from_bf16_bits(std::uint16_t b) {
  return fp32::from_bits(static_cast<std::uint32_t>(b) << 16);
}

/// fp16 (IEEE binary16) bits of fp32 `x`, round to nearest, ties to even.
///
/// |x| >= 65520 (the midpoint between 65504 and 2^16) gives infinity; |x| < 2^-14 rounds to a subnormal half (unit
/// 2^-24), |x| <= 2^-25 to a signed zero; a NaN stays a NaN of the same sign with its top 9 payload bits kept and
/// the quiet bit set.
COMPACT_HOST_DEVICE inline std::uint16_t fp16_bits_from_fp32(float x) {
  const std::uint32_t u = fp32::bits_of(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x03FFu));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (a >= 0x38800000u) {
    // Normal half: rebias the exponent (127 -> 15) and round away the low 13 mantissa bits, as for bf16.
    const std::uint32_t v = a - 0x38000000u;
    const std::uint32_t bias = 0x0FFFu + ((v >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((v + bias) >> 13));
  }
  const std::uint32_t e = a >> 23;
  if (e < 102u) return static_cast<std::uint16_t>(sign);  // |x| < 2^-25 (fp32 subnormals included)
  // Subnormal half: m = round(|x| / 2^-24) with |x| = M 2^(e - 150), M the 24-bit significand, so m = M / 2^(126-e).
  const std::uint32_t significand = (a & 0x007FFFFFu) | 0x00800000u;
  const std::uint32_t shift = 126u - e;  // 14 ... 24
  const std::uint32_t kept = significand >> shift;
  const std::uint32_t dropped = significand & ((1u << shift) - 1u);
  const std::uint32_t tie = 1u << (shift - 1u);
  const std::uint32_t up = (dropped > tie || (dropped == tie && (kept & 1u))) ? 1u : 0u;
  return static_cast<std::uint16_t>(sign | (kept + up));  // kept + up = 0x400 is the smallest normal: correct
}

/// fp32 value of fp16 bits `h` (exact; NaN payloads kept).
COMPACT_HOST_DEVICE inline float fp32_from_fp16_bits(std::uint16_t h) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu;
  std::uint32_t m = h & 0x03FFu;
  if (e == 0x1Fu) return fp32::from_bits(sign | 0x7F800000u | (m << 13));
  if (e != 0u) return fp32::from_bits(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0u) return fp32::from_bits(sign);
  // Subnormal m 2^-24: shift the leading one up to bit 10, lowering the exponent once per shift.
  std::uint32_t biased = 113u;  // exponent of 2^-14, the smallest normal half
  while ((m & 0x0400u) == 0u) {
    m <<= 1;
    --biased;
  }
  return fp32::from_bits(sign | (biased << 23) | ((m & 0x03FFu) << 13));
}

namespace detail {
/// The identity conversion (fp32 -> fp32, or W's type when it is the moments' type): the `convert`/`encode` argument
/// of the kernel bodies when no conversion is needed.
struct Identity {
  template <class T>
  COMPACT_HOST_DEVICE T operator()(T v) const {
    return v;
  }
};
}  // namespace detail

}  // namespace compact
