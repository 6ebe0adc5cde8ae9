// SPDX-License-Identifier: MIT
// No #pragma once: this file is included once per lane width, each time inside a namespace of its own.
/// The fp32 math of the Gaussian entries, written once for any number of lanes: log, sincos_2pi and Box-Muller.
///
/// The including namespace provides the lane types and operations, as Highway's per-target "-inl" headers expect:
///   F32, U32 (float and std::uint32_t lanes, each implicitly broadcast from one scalar) and M32 (a lane mask);
///   + - * on F32; + - & | ^ on U32; shift_left<n>, shift_right<n> (logical); fma (rounded once), sqrt (correctly
///   rounded), trunc (toward zero, |x| < 2^31), to_float (u32 -> f32 of lanes below 2^31), bits_of, from_bits,
///   gt_signed (a > b read as int32), has_bit (a & bit != 0, bit a single bit), if_then_else, add_if, sub_if
///   (a + b, a - b where the mask is set, a elsewhere);
/// and the macro COMPACT_DETAIL_LANES_FN, the specifiers of the functions below.
///
/// One lane (namespace detail::scalar, spec/fp32_math.hpp, host and device) is the entry specification itself:
/// fp32::log, fp32::sincos_2pi and box_muller are that instance. The CPU's AVX2 and AVX-512 generators
/// (cpu/isa_avx2.hpp, cpu/isa_avx512.hpp) are the others. Every operation above is one IEEE operation or an
/// exact integer/bit operation in every instance, so each lane of every instance performs the same roundings in the
/// same order and gives the same bits. Every product that feeds a sum is an explicit fma or exact, so -ffp-contract
/// (and nvcc's --fmad) cannot change a bit either. Changing anything here changes every Gaussian P (a new entry-spec
/// version, docs/spec.md).

/// Natural logarithm of a positive normal float (2^-126 <= x < inf); other inputs give unspecified values.
///
/// x = 2^e * m with m in [sqrt(1/2), sqrt(2)); ln x = e*ln2 + ln(1+f), f = m - 1 (exact by Sterbenz), and
/// ln(1+f) = f - f^2/2 + f^3 q(f) with q a degree-7 near-minimax polynomial (relative error 5.9e-9 on the range).
/// Maximum error, measured over every positive normal float: see docs/spec.md.
COMPACT_DETAIL_LANES_FN F32 log(F32 x) {
  const U32 u = bits_of(x);
  U32 biased = shift_right<fp32::kMantissaBits>(u);       // e + kExponentBias (x > 0: the sign bit is clear)
  U32 mant = (u & fp32::kMantissaMask) | fp32::kOneBits;  // m in [1, 2)
  // m > sqrt(2): use m/2 in [sqrt(1/2), 1). Both operands are below 2^31, so the signed compare is the unsigned one.
  const M32 big = gt_signed(mant, fp32::kSqrt2Bits);
  mant = sub_if(big, mant, fp32::kExponentUnit);
  biased = add_if(big, biased, 1u);
  const F32 f = from_bits(mant) - 1.0f;
  F32 q = fp32::kLogQ7;
  q = fma(q, f, fp32::kLogQ6);
  q = fma(q, f, fp32::kLogQ5);
  q = fma(q, f, fp32::kLogQ4);
  q = fma(q, f, fp32::kLogQ3);
  q = fma(q, f, fp32::kLogQ2);
  q = fma(q, f, fp32::kLogQ1);
  q = fma(q, f, fp32::kLogQ0);
  const F32 t = fma(q, f, -0.5f);  // -1/2 + f q(f)
  const F32 f2 = f * f;
  const F32 p = fma(f2, t, f);  // ln(1+f)
  // float(e) = float(e + 127) - 127, both steps exact (|e| < 2^8); e*kLn2Hi is exact for |e| < 2^8 (kLn2Hi has 16
  // trailing zero bits).
  const F32 fe = to_float(biased) - static_cast<float>(fp32::kExponentBias);
  const F32 lo = fma(fe, fp32::kLn2Lo, p);
  return fma(fe, fp32::kLn2Hi, lo);
}

/// sin(2*pi*t) and cos(2*pi*t).
struct SinCos {
  F32 sin;
  F32 cos;
};

/// sin(2*pi*t) and cos(2*pi*t) for t in [0, 1) (the Box-Muller angle); other inputs give unspecified values.
///
/// The argument is reduced exactly in units of quarter turns, y = 4t = k + r with integer k and |r| <= 1/2, so no
/// fp32 rounding of 2*pi*t ever enters; then sin(pi/2 r) = r S(r^2), cos(pi/2 r) = 1 + r^2 C(r^2) (degree-4
/// near-minimax polynomials, relative error below 5e-12) and a quadrant rotation by k.
COMPACT_DETAIL_LANES_FN SinCos sincos_2pi(F32 t) {
  const F32 y = t * 4.0f;                          // exact
  const F32 k = trunc(y + 0.5f);                   // nearest quarter turn (y >= 0), an integer in [0, 4]
  const F32 r = y - k;                             // exact
  const U32 quadrant = bits_of(k + 0x1p23f) & 3u;  // k & 3: k + 2^23 is exact and holds k in its low mantissa bits
  const F32 s = r * r;
  F32 ps = fp32::kSinS4;
  ps = fma(ps, s, fp32::kSinS3);
  ps = fma(ps, s, fp32::kSinS2);
  ps = fma(ps, s, fp32::kSinS1);
  ps = fma(ps, s, fp32::kSinS0);
  const F32 sin_r = r * ps;
  F32 pc = fp32::kCosC4;
  pc = fma(pc, s, fp32::kCosC3);
  pc = fma(pc, s, fp32::kCosC2);
  pc = fma(pc, s, fp32::kCosC1);
  pc = fma(pc, s, fp32::kCosC0);
  const F32 cos_r = fma(pc, s, 1.0f);
  // Quadrant k & 3: (sin, cos) = (sin_r, cos_r), (cos_r, -sin_r), (-sin_r, -cos_r), (-cos_r, sin_r). Odd quadrants
  // swap sin and cos; the sign bit (a negation, exact) is set on sin in quadrants 2, 3 and on cos in 1, 2.
  const M32 odd = has_bit(quadrant, 1u);
  const U32 sin_sign = shift_left<31>(shift_right<1>(quadrant));
  const U32 cos_sign = shift_left<31>(shift_right<1>(quadrant + 1u));
  const F32 sin_v = from_bits(bits_of(if_then_else(odd, cos_r, sin_r)) ^ sin_sign);
  const F32 cos_v = from_bits(bits_of(if_then_else(odd, sin_r, cos_r)) ^ cos_sign);
  return SinCos{sin_v, cos_v};
}

/// Box-Muller on a pair of Philox words (a, b): u = ((a >> 8) + 1) 2^-24 in (0, 1], t = (b >> 8) 2^-24 in [0, 1),
/// rho = sqrt(-2 ln u); *lane0 = rho cos(2 pi t), *lane1 = rho sin(2 pi t).
COMPACT_DETAIL_LANES_FN void box_muller(U32 a, U32 b, F32* lane0, F32* lane1) {
  const F32 u = to_float(shift_right<kBoxMullerShift>(a) + 1u) * kBoxMullerScale;  // exact
  const F32 t = to_float(shift_right<kBoxMullerShift>(b)) * kBoxMullerScale;       // exact
  const F32 rho = sqrt(-2.0f * log(u));                                            // -2 ln u is exact scaling
  const SinCos sc = sincos_2pi(t);
  *lane0 = rho * sc.cos;
  *lane1 = rho * sc.sin;
}
