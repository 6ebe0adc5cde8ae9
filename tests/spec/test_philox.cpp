// SPDX-License-Identifier: MIT
/// Philox4x32-10 known-answer vectors (Random123) and splitmix64 reference values.
#include <doctest/doctest.h>

#include <compact/spec/philox.hpp>

namespace {
void check_kat(compact::Words4x32 ctr, compact::Key2x32 key, compact::Words4x32 want) {
  const compact::Words4x32 got = compact::philox4x32_10(ctr, key);
  for (int w = 0; w < 4; ++w) CHECK(got.w[w] == want.w[w]);
}
}  // namespace

TEST_CASE("philox4x32_10 matches the Random123 known-answer vectors") {
  check_kat({{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  check_kat({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, {{0xffffffffu, 0xffffffffu}},
            {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  check_kat({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, {{0xa4093822u, 0x299f31d0u}},
            {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

TEST_CASE("splitmix64 matches the reference sequence of Vigna's splitmix64.c from state 0") {
  // next() adds the golden gamma to the state and finalizes it; our splitmix64(x) finalizes x + gamma, so the
  // reference outputs from state 0 are splitmix64(k * gamma) for k = 0, 1, 2.
  constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  CHECK(compact::splitmix64(0) == 0xE220A8397B1DCDAFull);
  CHECK(compact::splitmix64(kGamma) == 0x6E789E6AA1B965F4ull);
  CHECK(compact::splitmix64(2 * kGamma) == 0x06C45D188009454Full);
}

TEST_CASE("philox4x32_10 output changes with every counter word and every key word") {
  const compact::Words4x32 base = compact::philox4x32_10({{0, 0, 0, 0}}, {{0, 0}});
  for (int w = 0; w < 4; ++w) {
    compact::Words4x32 ctr{{0, 0, 0, 0}};
    ctr.w[w] = 1;
    CHECK(compact::philox4x32_10(ctr, {{0, 0}}).w[0] != base.w[0]);
  }
  CHECK(compact::philox4x32_10({{0, 0, 0, 0}}, {{1, 0}}).w[0] != base.w[0]);
  CHECK(compact::philox4x32_10({{0, 0, 0, 0}}, {{0, 1}}).w[0] != base.w[0]);
}
