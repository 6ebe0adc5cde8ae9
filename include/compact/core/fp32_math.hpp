// SPDX-License-Identifier: MIT
#pragma once
/// The library's own fp32 `log` and `sin/cos(2*pi*t)`: written with + - * fma sqrt only, identical on host and device.
///
/// Every product that feeds a sum is either an explicit fma or exact, so `-ffp-contract=fast` (and nvcc's default
/// --fmad=true) cannot change a single bit. No libm, no intrinsics: the results are the same on every compiler.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "compact/config.hpp"

namespace compact {
namespace fp32 {

/// The constants of log and sincos_2pi below, named once: the vector generators (cpu/generate.hpp,
/// cpu/generate_avx512.hpp) use these same names, so the entry specification has one source. Changing any value
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
COMPACT_HOST_DEVICE inline float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// Correctly rounded square root.
COMPACT_HOST_DEVICE inline float sqrt(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

/// The IEEE-754 binary32 bits of `x`.
COMPACT_HOST_DEVICE inline std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

/// The float whose IEEE-754 binary32 bits are `u`.
COMPACT_HOST_DEVICE inline float from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/// Natural logarithm of a positive normal float (2^-126 <= x < inf); other inputs give unspecified values.
///
/// x = 2^e * m with m in [sqrt(1/2), sqrt(2)); ln x = e*ln2 + ln(1+f), f = m - 1 (exact by Sterbenz), and
/// ln(1+f) = f - f^2/2 + f^3 q(f) with q a degree-7 near-minimax polynomial (relative error 5.9e-9 on the range).
/// Maximum error, measured over every positive normal float: see docs/spec.md.
COMPACT_HOST_DEVICE inline float log(float x) {
  const std::uint32_t u = bits_of(x);
  int e = static_cast<int>(u >> kMantissaBits) - kExponentBias;
  std::uint32_t mant = (u & kMantissaMask) | kOneBits;  // m in [1, 2)
  if (mant > kSqrt2Bits) {                              // m > sqrt(2): use m/2 in [sqrt(1/2), 1)
    mant -= kExponentUnit;
    e += 1;
  }
  const float f = from_bits(mant) - 1.0f;
  float q = kLogQ7;
  q = fma(q, f, kLogQ6);
  q = fma(q, f, kLogQ5);
  q = fma(q, f, kLogQ4);
  q = fma(q, f, kLogQ3);
  q = fma(q, f, kLogQ2);
  q = fma(q, f, kLogQ1);
  q = fma(q, f, kLogQ0);
  const float t = fma(q, f, -0.5f);  // -1/2 + f q(f)
  const float f2 = f * f;
  const float p = fma(f2, t, f);  // ln(1+f)
  // e*kLn2Hi is exact for |e| < 2^8 (kLn2Hi has 16 trailing zero bits).
  const float fe = static_cast<float>(e);
  const float lo = fma(fe, kLn2Lo, p);
  return fma(fe, kLn2Hi, lo);
}

/// sin(2*pi*t) and cos(2*pi*t).
struct SinCos {
  float sin;
  float cos;
};

/// sin(2*pi*t) and cos(2*pi*t) for t in [0, 1) (the Box-Muller angle); other inputs give unspecified values.
///
/// The argument is reduced exactly in units of quarter turns, y = 4t = k + r with integer k and |r| <= 1/2, so no
/// fp32 rounding of 2*pi*t ever enters; then sin(pi/2 r) = r S(r^2), cos(pi/2 r) = 1 + r^2 C(r^2) (degree-4
/// near-minimax polynomials, relative error below 5e-12) and a quadrant rotation by k.
COMPACT_HOST_DEVICE inline SinCos sincos_2pi(float t) {
  const float y = t * 4.0f;                   // exact
  const int k = static_cast<int>(y + 0.5f);   // nearest quarter turn, y >= 0
  const float r = y - static_cast<float>(k);  // exact
  const float s = r * r;
  float ps = kSinS4;
  ps = fma(ps, s, kSinS3);
  ps = fma(ps, s, kSinS2);
  ps = fma(ps, s, kSinS1);
  ps = fma(ps, s, kSinS0);
  const float sin_r = r * ps;
  float pc = kCosC4;
  pc = fma(pc, s, kCosC3);
  pc = fma(pc, s, kCosC2);
  pc = fma(pc, s, kCosC1);
  pc = fma(pc, s, kCosC0);
  const float cos_r = fma(pc, s, 1.0f);
  switch (k & 3) {
    case 0:
      return SinCos{sin_r, cos_r};
    case 1:
      return SinCos{cos_r, -sin_r};
    case 2:
      return SinCos{-sin_r, -cos_r};
    default:
      return SinCos{-cos_r, sin_r};
  }
}

}  // namespace fp32
}  // namespace compact
