// SPDX-License-Identifier: MIT
#pragma once
/// The library's own fp32 `log`, `sin/cos(2*pi*t)` and Box-Muller: written with + - * fma sqrt only, identical on host
/// and device, and, through spec/fp32_lanes.inl, the same source as the CPU's vector generators.
///
/// Every product that feeds a sum is either an explicit fma or exact, so `-ffp-contract=fast` (and nvcc's default
/// --fmad=true) cannot change a single bit. No libm, no intrinsics: the results are the same on every compiler.

#include <cstdint>

#include "compact/config.hpp"
#include "compact/portability.hpp"

namespace compact {
namespace fp32 {

/// The constants of log and sincos_2pi (spec/fp32_lanes.inl), named once. Changing any value
/// changes every P (a new entry-spec version, docs/spec.md).
///
/// binary32 layout: sign bit, 23 mantissa bits, exponent bias 127; kOneBits = bits of 1.0f, kSqrt2Bits = bits of the
/// float nearest sqrt(2) (the split point of log's reduction), kExponentUnit = one unit of the exponent field.
inline constexpr int kMantissaBits = 23;
inline constexpr std::uint32_t kSignBit = 0x80000000u;
inline constexpr int kExponentBias = 127;
inline constexpr std::uint32_t kMantissaMask = 0x007FFFFFu;
inline constexpr std::uint32_t kOneBits = 0x3F800000u;
inline constexpr std::uint32_t kSqrt2Bits = 0x3FB504F3u;
inline constexpr std::uint32_t kExponentUnit = 0x00800000u;

/// log: ln(1+f) = f - f^2/2 + f^3 q(f), q(f) = kLogQ0 + kLogQ1 f + ... + kLogQ7 f^7 (Horner from kLogQ7).
inline constexpr float kLogQ0 = 3.333333135e-01f;
inline constexpr float kLogQ1 = -2.500082254e-01f;
inline constexpr float kLogQ2 = 2.000122666e-01f;
inline constexpr float kLogQ3 = -1.662335396e-01f;
inline constexpr float kLogQ4 = 1.420177668e-01f;
inline constexpr float kLogQ5 = -1.316023320e-01f;
inline constexpr float kLogQ6 = 1.276146770e-01f;
inline constexpr float kLogQ7 = -7.634225488e-02f;
/// ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 16 trailing zero bits.
inline constexpr float kLn2Hi = 6.9314575195e-01f;
inline constexpr float kLn2Lo = 1.428606765330187045e-06f;

/// sincos_2pi: sin(pi/2 r) = r S(r^2), S(s) = kSinS0 + kSinS1 s + ... + kSinS4 s^4; cos(pi/2 r) = 1 + s C(s),
/// C(s) = kCosC0 + ... + kCosC4 s^4 (both Horner from the highest degree).
inline constexpr float kSinS0 = 1.570796371e+00f;
inline constexpr float kSinS1 = -6.459640861e-01f;
inline constexpr float kSinS2 = 7.969257981e-02f;
inline constexpr float kSinS3 = -4.681260791e-03f;
inline constexpr float kSinS4 = 1.581950783e-04f;
inline constexpr float kCosC0 = -1.233700514e+00f;
inline constexpr float kCosC1 = 2.536695004e-01f;
inline constexpr float kCosC2 = -2.086346783e-02f;
inline constexpr float kCosC3 = 9.191629360e-04f;
inline constexpr float kCosC4 = -2.485220466e-05f;

/// Fused multiply-add a*b + c, rounded once (IEEE 754 fusedMultiplyAdd).
COMPACT_HOST_DEVICE inline float fma(float a, float b, float c) { return detail::rn::fma(a, b, c); }

/// Correctly rounded square root.
COMPACT_HOST_DEVICE inline float sqrt(float x) { return detail::rn::sqrt(x); }

/// The IEEE-754 binary32 bits of `x`.
COMPACT_HOST_DEVICE inline std::uint32_t bits_of(float x) { return detail::float_bits(x); }

/// The float whose IEEE-754 binary32 bits are `u`.
COMPACT_HOST_DEVICE inline float from_bits(std::uint32_t u) { return detail::float_from_bits(u); }

}  // namespace fp32

/// Box-Muller's inputs are the top 24 bits of a Philox word (word >> kBoxMullerShift), scaled by kBoxMullerScale.
inline constexpr int kBoxMullerShift = 8;
inline constexpr float kBoxMullerScale = 0x1p-24f;

namespace detail {
/// One lane: the lane types and operations spec/fp32_lanes.inl is written in, on float and std::uint32_t, host and
/// device. That file's instance here is the entry specification's fp32 math (fp32::log, fp32::sincos_2pi,
/// box_muller below); the CPU's vector generators are its other instances (cpu/kernels_*.hpp).
namespace scalar {
using F32 = float;
using U32 = std::uint32_t;
using M32 = bool;
using fp32::bits_of;
using fp32::fma;
using fp32::from_bits;
using fp32::sqrt;
template <int kBits>
COMPACT_HOST_DEVICE inline U32 shift_left(U32 a) {
  return a << kBits;
}
template <int kBits>
COMPACT_HOST_DEVICE inline U32 shift_right(U32 a) {
  return a >> kBits;
}
/// x rounded toward zero, for |x| < 2^31.
COMPACT_HOST_DEVICE inline F32 trunc(F32 x) { return static_cast<float>(static_cast<std::int32_t>(x)); }
/// The float nearest a (exact below 2^24); the vector instances require a < 2^31.
COMPACT_HOST_DEVICE inline F32 to_float(U32 a) { return static_cast<float>(a); }
COMPACT_HOST_DEVICE inline M32 gt_signed(U32 a, U32 b) {
  return static_cast<std::int32_t>(a) > static_cast<std::int32_t>(b);
}
COMPACT_HOST_DEVICE inline M32 has_bit(U32 a, U32 bit) { return (a & bit) != 0; }
COMPACT_HOST_DEVICE inline F32 if_then_else(M32 m, F32 yes, F32 no) { return m ? yes : no; }
COMPACT_HOST_DEVICE inline U32 add_if(M32 m, U32 a, U32 b) { return m ? a + b : a; }
COMPACT_HOST_DEVICE inline U32 sub_if(M32 m, U32 a, U32 b) { return m ? a - b : a; }

#define COMPACT_DETAIL_LANES_FN COMPACT_HOST_DEVICE inline
#include "compact/spec/fp32_lanes.inl"
#undef COMPACT_DETAIL_LANES_FN
}  // namespace scalar
}  // namespace detail

namespace fp32 {
/// Natural logarithm of a positive normal float, sin and cos of 2 pi t for t in [0, 1): see spec/fp32_lanes.inl.
using detail::scalar::log;
using detail::scalar::SinCos;
using detail::scalar::sincos_2pi;
}  // namespace fp32

/// Box-Muller on one pair of Philox words (spec/fp32_lanes.inl): lane0 = rho cos(2 pi t), lane1 = rho sin(2 pi t).
using detail::scalar::box_muller;

}  // namespace compact
