// SPDX-License-Identifier: MIT
#pragma once
/// Philox4x32-10 counter-based generator (Salmon et al., SC11) and the splitmix64 mixer.

#include <cstdint>

#include "compact/config.hpp"

namespace compact {

/// Four 32-bit words: a Philox counter or a Philox output block.
struct Words4x32 {
  std::uint32_t w[4];
};

/// Two 32-bit words: a Philox key.
struct Key2x32 {
  std::uint32_t w[2];
};

/// Philox4x32's round multipliers (M0 for counter word 0, M1 for word 2) and Weyl key increments (W0, W1).
inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;
inline constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;
/// Rounds of Philox4x32-10.
inline constexpr int kPhiloxRounds = 10;

/// The key schedule: round r + 1's key from round r's (k0 += W0, k1 += W1, mod 2^32); round 0 uses the key itself.
/// The vector generators (cpu/generate*.hpp) precompute their round keys with this function.
COMPACT_HOST_DEVICE inline constexpr Key2x32 philox_next_key(Key2x32 k) {
  return Key2x32{{k.w[0] + kPhiloxW0, k.w[1] + kPhiloxW1}};
}

/// Philox4x32 with 10 rounds: a pure function of (counter, key), matching Random123's philox4x32_R(10, ...).
COMPACT_HOST_DEVICE inline Words4x32 philox4x32_10(Words4x32 ctr, Key2x32 key) {
  std::uint32_t c0 = ctr.w[0], c1 = ctr.w[1], c2 = ctr.w[2], c3 = ctr.w[3];
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) key = philox_next_key(key);
    const std::uint32_t k0 = key.w[0], k1 = key.w[1];
    const std::uint64_t p0 = static_cast<std::uint64_t>(kPhiloxM0) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(kPhiloxM1) * c2;
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return Words4x32{{c0, c1, c2, c3}};
}

/// splitmix64 finalizer (Steele, Lea, Flood 2014), all arithmetic mod 2^64.
COMPACT_HOST_DEVICE inline constexpr std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace compact
