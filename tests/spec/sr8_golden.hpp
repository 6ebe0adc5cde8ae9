// SPDX-License-Identifier: MIT
#pragma once
/// The inputs of the sr8 codec's golden values (docs/spec.md, "sr8 golden values"): shared by tests/spec/golden.cpp,
/// which checks the bits, and tools/print_golden.cpp, which prints them.

#include <compact/spec/philox.hpp>
#include <compact/spec/sr8.hpp>
#include <compact/spec/state.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace compact_test {

/// u_i = (int32(splitmix64(i) >> 40) - 2^23) 2^-23, uniform in [-1, 1) and exact in fp32.
inline float sr8_golden_uniform(std::uint64_t i) {
  return static_cast<float>(static_cast<std::int32_t>(compact::splitmix64(i) >> 40) - (1 << 23)) * 0x1p-23f;
}

/// Case A: 200 values x_i = u_i (three whole blocks and a ragged one of 8), state {0, 0, 0}.
/// Case B: 300 values, state {0x0123456789ABCDEF, 0x100000007, 0x200000003}: block 0 is u_i 2^-15; block 1 u_i with
/// x_70 = NaN and x_100 = -inf (scale NaN); block 2 u_i 2^-125 (amax below 2^-120: scale 0); block 3 the integers
/// x_i = 4 (i - 224) in [-128, 124] (amax 128, -amax included); block 4 (44 values, ragged) u_i 3 10^5.
struct Sr8GoldenCase {
  const char* name;
  compact::SketchState state;
  std::vector<float> x;
};

inline std::vector<Sr8GoldenCase> sr8_golden_cases() {
  std::vector<float> a(200), b(300);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = sr8_golden_uniform(i);
  for (std::size_t i = 0; i < b.size(); ++i) {
    const float u = sr8_golden_uniform(i);
    const std::size_t block = i / 64;
    b[i] = block == 0   ? std::ldexp(u, -15)
           : block == 1 ? u
           : block == 2 ? std::ldexp(u, -125)
           : block == 3 ? 4.0f * (static_cast<float>(i) - 224.0f)
                        : u * 3.0e5f;
  }
  b[70] = std::numeric_limits<float>::quiet_NaN();
  b[100] = -std::numeric_limits<float>::infinity();
  return {{"A", {0, 0, 0}, a}, {"B", {0x0123456789ABCDEFull, 0x100000007ull, 0x200000003ull}, b}};
}

/// Flat indices whose 16-bit uniforms (sr8_uniform) the golden table lists for case B's state: both halves of the
/// first words, a group boundary, and groups whose counter has a high word (i / 8 >= 2^32).
inline const std::int64_t kSr8GoldenUniformAt[] = {
    0, 1, 2, 7, 8, 64, (std::int64_t{1} << 35) - 1, std::int64_t{1} << 35, (std::int64_t{1} << 40) + 5};

}  // namespace compact_test
