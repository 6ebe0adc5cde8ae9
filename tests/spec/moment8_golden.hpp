// SPDX-License-Identifier: MIT
#pragma once
/// The inputs and golden hashes of the 8-bit AdamW step (docs/spec.md, "moment8 golden values"), computed by the
/// independent pure-torch reference examples/pytorch/tests/moment8_reference.py (`python moment8_reference.py`
/// prints them): FNV-1a 64 of the bytes of m_q, v_q, m_scales, v_scales and the result (N or the parameter) after
/// the case's steps from zero moments, with betas (0.9, 0.999), eps 1e-8 and the same gradient every step.

#include <compact/spec/philox.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace compact_test {

/// u_i = (int32(splitmix64(i) >> 40) - 2^23) 2^-23, as sr8_golden_uniform.
inline float moment8_golden_uniform(std::uint64_t i) {
  return static_cast<float>(static_cast<std::int32_t>(compact::splitmix64(i) >> 40) - (1 << 23)) * 0x1p-23f;
}

struct Moment8GoldenCase {
  const char* name;
  std::vector<float> grad, param;
  bool dense;
  int steps;
  double lr, wd;
  std::uint64_t m_q_hash, v_q_hash, m_scales_hash, v_scales_hash, result_hash;
};

/// Case N: 700 values (two blocks and a ragged one of 188), N out, 3 steps, lr 1e-3: block 0 u_i, block 1 u_i 2^-20
/// with every i % 3 == 0 zero, block 2 u_i 10^3. Case D: 300 values, a dense fp32 parameter p_i = u_(1000 + i),
/// grad u_i / 100, 3 steps, lr 1e-2, weight decay 0.1.
inline std::vector<Moment8GoldenCase> moment8_golden_cases() {
  std::vector<float> gn(700), gd(300), pd(300);
  for (std::size_t i = 0; i < gn.size(); ++i) {
    const float u = moment8_golden_uniform(i);
    const std::size_t b = i / 256;
    gn[i] = b == 0 ? u : b == 1 ? (i % 3 == 0 ? 0.0f : std::ldexp(u, -20)) : u * 1000.0f;
  }
  for (std::size_t i = 0; i < gd.size(); ++i) {
    gd[i] = moment8_golden_uniform(i) / 100.0f;
    pd[i] = moment8_golden_uniform(1000 + i);
  }
  return {{"N",
           gn,
           {},
           false,
           3,
           1e-3,
           0.0,
           0xa7f03a1c6dd1846bull,
           0xb735d877519e3bd4ull,
           0x8e08bc8177a18781ull,
           0xa4d0f79f78443a79ull,
           0xf3e38e9fba83a820ull},
          {"D", gd, pd, true, 3, 1e-2, 0.1, 0x702ed9a1fd8ded54ull, 0x5cf3a9cfa3966905ull, 0x86e8cfaba625628full,
           0x9a435a03dc7921f8ull, 0x77e867ffdd99f2f0ull}};
}

/// FNV-1a 64 of a vector's bytes.
template <class T>
std::uint64_t fnv1a(const std::vector<T>& v) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(T); ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

}  // namespace compact_test
