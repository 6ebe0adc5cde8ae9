// SPDX-License-Identifier: MIT
/// Measures the maximum error (in ulp, against double/long double references) of compact::fp32::log over every
/// positive normal float and of compact::fp32::sincos_2pi over every t = k 2^-24 in [0, 1). Numbers go to docs/spec.md.
/// Build: g++ -O2 -std=c++17 -Iinclude tools/measure_fp32_error.cpp -o measure_fp32_error
#include <compact/spec/fp32_math.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace {
double ulp_at(double want) {
  const double a = std::fabs(want);
  if (a < 0x1p-126) return 0x1p-149;
  int e = 0;
  std::frexp(static_cast<float>(a), &e);
  return std::ldexp(1.0, e - 24);
}
}  // namespace

int main() {
  double worst = 0, worst_bm = 0;
  float at = 0, at_bm = 0;
  for (std::uint32_t bits = 0x00800000u; bits < 0x7F800000u; ++bits) {
    const float x = compact::fp32::from_bits(bits);
    const double want = std::log(static_cast<double>(x));
    if (want == 0.0) {
      if (compact::fp32::log(x) != 0.0f) std::printf("log(1) != 0\n");
      continue;
    }
    const double e = std::fabs(compact::fp32::log(x) - want) / ulp_at(want);
    if (e > worst) worst = e, at = x;
    if (x <= 1.0f && x >= 0x1p-24f && std::fmod(static_cast<double>(x), 0x1p-24) == 0.0 && e > worst_bm)
      worst_bm = e, at_bm = x;
  }
  std::printf("log: max %.4f ulp over all positive normal floats (at %a); %.4f ulp on u = k 2^-24 (at %a)\n", worst,
              static_cast<double>(at), worst_bm, static_cast<double>(at_bm));
  double ws = 0, wc = 0;
  float ts = 0, tc = 0;
  for (std::uint32_t k = 0; k < (1u << 24); ++k) {
    if (k % (1u << 22) == 0) continue;
    const float t = static_cast<float>(k) * 0x1p-24f;
    const long double a = 2.0L * 3.141592653589793238462643383279502884L * static_cast<long double>(t);
    const double s = static_cast<double>(std::sin(a)), c = static_cast<double>(std::cos(a));
    const compact::fp32::SinCos sc = compact::fp32::sincos_2pi(t);
    const double es = std::fabs(sc.sin - s) / ulp_at(s), ec = std::fabs(sc.cos - c) / ulp_at(c);
    if (es > ws) ws = es, ts = t;
    if (ec > wc) wc = ec, tc = t;
  }
  std::printf("sin(2 pi t): max %.4f ulp (at t = %a); cos(2 pi t): max %.4f ulp (at t = %a); exact at quarter turns\n",
              ws, static_cast<double>(ts), wc, static_cast<double>(tc));
}
