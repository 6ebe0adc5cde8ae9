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
  int e = static_cast<int>(u >> 23) - 127;
  std::uint32_t mant = (u & 0x007FFFFFu) | 0x3F800000u;  // m in [1, 2)
  if (mant > 0x3FB504F3u) {                              // m > sqrt(2): use m/2 in [sqrt(1/2), 1)
    mant -= 0x00800000u;
    e += 1;
  }
  const float f = from_bits(mant) - 1.0f;
  float q = -7.634225488e-02f;
  q = fma(q, f, 1.276146770e-01f);
  q = fma(q, f, -1.316023320e-01f);
  q = fma(q, f, 1.420177668e-01f);
  q = fma(q, f, -1.662335396e-01f);
  q = fma(q, f, 2.000122666e-01f);
  q = fma(q, f, -2.500082254e-01f);
  q = fma(q, f, 3.333333135e-01f);
  const float t = fma(q, f, -0.5f);  // -1/2 + f q(f)
  const float f2 = f * f;
  const float p = fma(f2, t, f);  // ln(1+f)
  // ln2 = kLn2Hi + kLn2Lo, kLn2Hi has 16 trailing zero bits so e*kLn2Hi is exact for |e| < 2^8.
  const float fe = static_cast<float>(e);
  const float lo = fma(fe, 1.428606765330187045e-06f, p);
  return fma(fe, 6.9314575195e-01f, lo);
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
  float ps = 1.581950783e-04f;
  ps = fma(ps, s, -4.681260791e-03f);
  ps = fma(ps, s, 7.969257981e-02f);
  ps = fma(ps, s, -6.459640861e-01f);
  ps = fma(ps, s, 1.570796371e+00f);
  const float sin_r = r * ps;
  float pc = -2.485220466e-05f;
  pc = fma(pc, s, 9.191629360e-04f);
  pc = fma(pc, s, -2.086346783e-02f);
  pc = fma(pc, s, 2.536695004e-01f);
  pc = fma(pc, s, -1.233700514e+00f);
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
