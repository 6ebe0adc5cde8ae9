// SPDX-License-Identifier: MIT
/// Tests of kernels/convert.hpp: fp32 -> bf16/fp16 round to nearest even against an independent reference.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "compact/spec/philox.hpp"
#include "compact/kernels/convert.hpp"

namespace {

using compact::fp32::bits_of;
using compact::fp32::from_bits;

/// A binary floating-point format with 1 sign bit, `exp_bits` exponent bits and `man_bits` stored mantissa bits.
struct Format {
  int exp_bits;
  int man_bits;
};
constexpr Format kBf16{8, 7};
constexpr Format kFp16{5, 10};

/// Value of a finite non-negative pattern, computed in double with ldexp (independent of the library's decoder).
double decode_reference(Format f, std::uint32_t bits) {
  const std::uint32_t e = bits >> f.man_bits;
  const std::uint32_t m = bits & ((1u << f.man_bits) - 1u);
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  if (e == 0) return std::ldexp(double(m), 1 - bias - f.man_bits);
  return std::ldexp(double(m + (1u << f.man_bits)), int(e) - bias - f.man_bits);
}

/// Every finite non-negative value of the format, in increasing order (index = bit pattern).
std::vector<double> finite_values(Format f) {
  const std::uint32_t count = ((1u << f.exp_bits) - 1u) << f.man_bits;  // patterns below the inf/NaN exponent
  std::vector<double> v(count);
  for (std::uint32_t b = 0; b < count; ++b) v[b] = decode_reference(f, b);
  return v;
}

/// Round-to-nearest-even reference: binary search in the table of representable values, compare distances in
/// double (exact: both neighbours and x are dyadic rationals well inside double's range), ties to the even pattern,
/// overflow to infinity at max + ulp/2 (the virtual next value max + ulp has an even pattern).
std::uint32_t round_reference(Format f, const std::vector<double>& table, float x) {
  const std::uint32_t sign_bit = 1u << (f.exp_bits + f.man_bits);
  const std::uint32_t inf = ((1u << f.exp_bits) - 1u) << f.man_bits;
  const std::uint32_t sign = std::signbit(x) ? sign_bit : 0u;
  const double a = std::fabs(double(x));
  if (std::isinf(x)) return sign | inf;
  const double max = table.back();
  const double next = max + (max - table[table.size() - 2]);
  std::uint32_t lo, hi;
  double vlo, vhi;
  if (a >= max) {
    lo = std::uint32_t(table.size() - 1);
    hi = inf;
    vlo = max;
    vhi = next;
  } else {
    const auto it = std::upper_bound(table.begin(), table.end(), a);
    hi = std::uint32_t(it - table.begin());
    lo = hi - 1;
    vlo = table[lo];
    vhi = table[hi];
  }
  const double dlo = a - vlo, dhi = vhi - a;
  if (dlo < dhi) return sign | lo;
  if (dhi < dlo) return sign | hi;
  return sign | ((lo & 1u) ? hi : lo);
}

/// Test inputs: every representable value of the format (both signs), the midpoints to the next value and their
/// fp32 neighbours, fp32 specials and subnormals, and a fixed-seed sample of random fp32 bit patterns.
std::vector<float> test_inputs(const std::vector<double>& table) {
  std::vector<float> xs;
  for (std::size_t b = 0; b + 1 < table.size(); ++b) {
    const float v = float(table[b]);
    const float mid = float((table[b] + table[b + 1]) / 2);  // exact in fp32: one more significand bit
    for (float y : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      xs.push_back(y);
      xs.push_back(-y);
    }
  }
  const float big = float(table.back() + (table.back() - table[table.size() - 2]) / 2);
  for (float y : {big, std::nextafter(big, 0.0f), std::nextafter(big, 1e30f), std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), 0.0f, 1.0f, 0x1p-25f, 0x1p-24f, 0x1.8p-25f}) {
    xs.push_back(y);
    xs.push_back(-y);
  }
  std::uint64_t s = 12345;
  for (int k = 0; k < 1 << 20; ++k) {
    s = compact::splitmix64(s);
    const float y = from_bits(static_cast<std::uint32_t>(s));
    if (!std::isnan(y)) xs.push_back(y);
  }
  return xs;
}

}  // namespace

TEST_CASE("fp32 to bf16 rounds to nearest even like the table reference, including ties, overflow and subnormals") {
  const std::vector<double> table = finite_values(kBf16);
  REQUIRE(table.size() == 0x7F80u);
  std::size_t mismatches = 0;
  for (float x : test_inputs(table)) {
    const std::uint32_t want = round_reference(kBf16, table, x);
    const std::uint32_t got = compact::bf16_bits_from_fp32(x);
    if (got != want && ++mismatches <= 5)
      FAIL_CHECK("x bits 0x" << std::hex << bits_of(x) << ": got 0x" << got << " want 0x" << want);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("fp32 to fp16 rounds to nearest even like the table reference, including ties, overflow and subnormals") {
  const std::vector<double> table = finite_values(kFp16);
  REQUIRE(table.size() == 0x7C00u);
  std::size_t mismatches = 0;
  for (float x : test_inputs(table)) {
    const std::uint32_t want = round_reference(kFp16, table, x);
    const std::uint32_t got = compact::fp16_bits_from_fp32(x);
    if (got != want && ++mismatches <= 5)
      FAIL_CHECK("x bits 0x" << std::hex << bits_of(x) << ": got 0x" << got << " want 0x" << want);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("known fp32 to bf16 and fp16 patterns come out as IEEE 754 prescribes") {
  CHECK(compact::bf16_bits_from_fp32(1.0f) == 0x3F80u);
  CHECK(compact::bf16_bits_from_fp32(-2.0f) == 0xC000u);
  CHECK(compact::bf16_bits_from_fp32(from_bits(0x3F808000u)) == 0x3F80u);  // tie, even kept part stays
  CHECK(compact::bf16_bits_from_fp32(from_bits(0x3F818000u)) == 0x3F82u);  // tie, odd kept part rounds up
  CHECK(compact::bf16_bits_from_fp32(from_bits(0x3F808001u)) == 0x3F81u);  // just above the tie
  CHECK(compact::bf16_bits_from_fp32(std::numeric_limits<float>::max()) == 0x7F80u);
  CHECK(compact::bf16_bits_from_fp32(std::numeric_limits<float>::denorm_min()) == 0x0000u);
  CHECK(compact::fp16_bits_from_fp32(1.0f) == 0x3C00u);
  CHECK(compact::fp16_bits_from_fp32(65504.0f) == 0x7BFFu);
  CHECK(compact::fp16_bits_from_fp32(65519.996f) == 0x7BFFu);
  CHECK(compact::fp16_bits_from_fp32(65520.0f) == 0x7C00u);
  CHECK(compact::fp16_bits_from_fp32(0x1p-24f) == 0x0001u);
  CHECK(compact::fp16_bits_from_fp32(0x1p-25f) == 0x0000u);    // tie between 0 and 2^-24: even is 0
  CHECK(compact::fp16_bits_from_fp32(0x1.8p-24f) == 0x0002u);  // tie between 1 and 2 units: even is 2
  CHECK(compact::fp16_bits_from_fp32(-0x1p-14f) == 0x8400u);
  CHECK(compact::fp16_bits_from_fp32(0x1.ff8p-15f) == 0x03FFu);  // the largest subnormal
  CHECK(compact::fp16_bits_from_fp32(0x1.ffcp-15f) == 0x0400u);  // tie above it rounds up into the normals
}

TEST_CASE("NaN converts to a quiet NaN of the same sign and infinities stay infinities") {
  for (std::uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFFC00000u, 0xFF812345u, 0x7FFFFFFFu}) {
    const float x = from_bits(nan);
    const std::uint16_t b = compact::bf16_bits_from_fp32(x);
    const std::uint16_t h = compact::fp16_bits_from_fp32(x);
    CHECK((b & 0x7F80u) == 0x7F80u);
    CHECK((b & 0x0040u) != 0u);
    CHECK((b >> 15) == (nan >> 31));
    CHECK((h & 0x7C00u) == 0x7C00u);
    CHECK((h & 0x0200u) != 0u);
    CHECK((h >> 15) == (nan >> 31));
    CHECK(std::isnan(compact::fp32_from_bf16_bits(b)));
    CHECK(std::isnan(compact::fp32_from_fp16_bits(h)));
  }
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(compact::bf16_bits_from_fp32(inf) == 0x7F80u);
  CHECK(compact::bf16_bits_from_fp32(-inf) == 0xFF80u);
  CHECK(compact::fp16_bits_from_fp32(inf) == 0x7C00u);
  CHECK(compact::fp16_bits_from_fp32(-inf) == 0xFC00u);
}

TEST_CASE("bf16 and fp16 decode exactly and every non-NaN pattern survives a round trip through fp32") {
  const std::vector<double> bf16 = finite_values(kBf16);
  const std::vector<double> fp16 = finite_values(kFp16);
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const auto p = static_cast<std::uint16_t>(b);
    const std::uint32_t mag = b & 0x7FFFu;
    const double sign = (b & 0x8000u) ? -1.0 : 1.0;
    const float xb = compact::fp32_from_bf16_bits(p);
    const float xh = compact::fp32_from_fp16_bits(p);
    if (mag < 0x7F80u) {
      REQUIRE(double(xb) == sign * bf16[mag]);
      REQUIRE(std::signbit(xb) == (sign < 0));
      REQUIRE(compact::bf16_bits_from_fp32(xb) == p);
    } else {
      REQUIRE((mag == 0x7F80u ? std::isinf(xb) : std::isnan(xb)));
    }
    if (mag < 0x7C00u) {
      REQUIRE(double(xh) == sign * fp16[mag]);
      REQUIRE(std::signbit(xh) == (sign < 0));
      REQUIRE(compact::fp16_bits_from_fp32(xh) == p);
    } else {
      REQUIRE((mag == 0x7C00u ? std::isinf(xh) : std::isnan(xh)));
      if (mag > 0x7C00u) REQUIRE(compact::fp16_bits_from_fp32(xh) == (p | 0x0200u));  // payload kept, quieted
    }
  }
}
