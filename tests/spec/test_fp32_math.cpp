// SPDX-License-Identifier: MIT
/// Accuracy of the library's own fp32 log and sin/cos(2 pi t), exhaustively over the inputs Box-Muller feeds them.
#include <doctest/doctest.h>

#include <compact/spec/fp32_math.hpp>

#include <cmath>
#include <cstdint>

namespace {
/// Size of one ulp of the binary32 number nearest |want| (subnormal spacing below 2^-126).
double ulp_at(double want) {
  const double a = std::fabs(want);
  if (a < 0x1p-126) return 0x1p-149;
  int e = 0;
  std::frexp(static_cast<float>(a), &e);
  return std::ldexp(1.0, e - 24);
}
}  // namespace

// Box-Muller feeds log with u = k 2^-24, k = 1 .. 2^24, and sincos_2pi with t = k 2^-24, k = 0 .. 2^24 - 1:
// both domains are small enough to test every input. The bounds are the measured maxima (docs/spec.md) rounded
// up: 0.87 ulp for log, 1.69 ulp for sin and cos.
TEST_CASE("fp32 log is within 1 ulp of the exact logarithm on every Box-Muller input") {
  double worst = 0;
  for (std::uint32_t k = 1; k < (1u << 24); ++k) {
    const float u = static_cast<float>(k) * 0x1p-24f;
    const double want = std::log(static_cast<double>(u));
    worst = std::fmax(worst, std::fabs(compact::fp32::log(u) - want) / ulp_at(want));
  }
  CHECK(worst < 1.0);
  CHECK(compact::fp32::log(1.0f) == 0.0f);
}

TEST_CASE("fp32 log is within 1 ulp on positive normal floats sampled across every binade") {
  double worst = 0;
  for (std::uint32_t bits = 0x00800000u; bits < 0x7F800000u; bits += 4099u) {  // 4099: odd stride hits all mantissas
    const float x = compact::fp32::from_bits(bits);
    const double want = std::log(static_cast<double>(x));
    if (want == 0.0) continue;
    worst = std::fmax(worst, std::fabs(compact::fp32::log(x) - want) / ulp_at(want));
  }
  CHECK(worst < 1.0);
}

TEST_CASE("sincos_2pi is within 2 ulp of sin and cos of 2 pi t on every Box-Muller angle") {
  double worst_sin = 0, worst_cos = 0;
  for (std::uint32_t k = 0; k < (1u << 24); ++k) {
    if (k % (1u << 22) == 0) continue;  // exact quarter turns are checked below
    const float t = static_cast<float>(k) * 0x1p-24f;
    const long double a = 2.0L * 3.141592653589793238462643383279502884L * static_cast<long double>(t);
    const double s = static_cast<double>(std::sin(a)), c = static_cast<double>(std::cos(a));
    const compact::fp32::SinCos sc = compact::fp32::sincos_2pi(t);
    worst_sin = std::fmax(worst_sin, std::fabs(sc.sin - s) / ulp_at(s));
    worst_cos = std::fmax(worst_cos, std::fabs(sc.cos - c) / ulp_at(c));
  }
  CHECK(worst_sin < 2.0);
  CHECK(worst_cos < 2.0);
}

TEST_CASE("sincos_2pi is exact at quarter turns") {
  const float quarter[4] = {0.0f, 0.25f, 0.5f, 0.75f};
  const float want_sin[4] = {0.0f, 1.0f, 0.0f, -1.0f};
  const float want_cos[4] = {1.0f, 0.0f, -1.0f, 0.0f};
  for (int q = 0; q < 4; ++q) {
    const compact::fp32::SinCos sc = compact::fp32::sincos_2pi(quarter[q]);
    CHECK(sc.sin == want_sin[q]);
    CHECK(sc.cos == want_cos[q]);
  }
}

TEST_CASE("fp32 fma rounds once and bit casts round-trip") {
  // (1 + 2^-12)^2 - 1 - 2^-11 = 2^-24 exactly; a separately rounded product would lose it.
  const float a = 1.0f + 0x1p-12f;
  CHECK(compact::fp32::fma(a, a, -(1.0f + 0x1p-11f)) == 0x1p-24f);
  CHECK(compact::fp32::bits_of(1.0f) == 0x3F800000u);
  CHECK(compact::fp32::from_bits(0xC0490FDBu) == -3.14159274f);
}
