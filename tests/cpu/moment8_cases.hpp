// SPDX-License-Identifier: MIT
#pragma once
/// Inputs and a runner for the 8-bit AdamW step's tests (tests/spec/test_moment8.cpp, tests/cpu/test_moment8_cpu.cpp,
/// the CUDA test): gradients that exercise every rule of the code, block by block, and a few steps of any
/// implementation from zero moments.

#include <compact/spec/moment8.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace compact_test {

using compact::index_t;

/// Gradients of step `step`, block by block (kind = block % 6): normal samples times 2^e, e in [-60, 20] per value
/// (codes across the whole range, subnormal codes included) (0, 1); zeros (2); subnormal floats (3); one inf or NaN
/// in normal samples (4, from step 2 on only for blocks b % 12 == 4, so most blocks stay finite); values equal to
/// +-1, +-0.5 (exact codes, ties) (5).
inline std::vector<float> moment8_case_grads(index_t n, int step, std::uint32_t seed) {
  std::mt19937 gen(seed * 7919u + static_cast<std::uint32_t>(step));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-60, 20), sub(-149, -127), pick(0, 255);
  std::vector<float> g(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    const index_t b = i / compact::kMoment8Block;
    const int kind = static_cast<int>(b % 6);
    float& x = g[static_cast<std::size_t>(i)];
    if (kind <= 1 || kind == 4) {
      x = std::ldexp(normal(gen), exponent(gen));
    } else if (kind == 2) {
      x = i % 2 ? -0.0f : 0.0f;
    } else if (kind == 3) {
      x = (i % 2 ? -1.0f : 1.0f) * std::ldexp(1.0f, sub(gen));
    } else {
      x = (i % 2 ? -1.0f : 1.0f) * (i % 3 ? 1.0f : 0.5f);
    }
    if (kind == 4 && b % 12 == 4 && pick(gen) == 0) {
      x = step % 2 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    }
  }
  return g;
}

/// The state and result of a few steps.
struct Moment8Run {
  std::vector<std::int8_t> mq;
  std::vector<float> ms;
  std::vector<std::uint8_t> vq;
  std::vector<float> vs;
  std::vector<float> result;  // N of the last step, or the parameter
};

/// `steps` steps of step(c, g, n, mq, ms, vq, vs, param, out) from zero moments (param = p0 when dense); sentinels
/// past the end of every buffer must survive.
template <class Step>
Moment8Run moment8_run(index_t n, bool dense, int steps, std::uint32_t seed, Step step) {
  const std::size_t un = static_cast<std::size_t>(n), nb = static_cast<std::size_t>(compact::moment8_scale_count(n));
  Moment8Run r{std::vector<std::int8_t>(un + 16, 0), std::vector<float>(nb + 1, 0.0f),
               std::vector<std::uint8_t>(un + 16, 0), std::vector<float>(nb + 1, 0.0f),
               std::vector<float>(un + 16, 0.0f)};
  r.mq[un] = 0x55;
  r.vq[un] = 0x55;
  r.ms[nb] = -3.0f;
  r.vs[nb] = -3.0f;
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (dense) {
    for (std::size_t i = 0; i < un; ++i) r.result[i] = normal(gen);
  }
  r.result[un] = -3.0f;
  for (int t = 1; t <= steps; ++t) {
    const compact::Adamw8Consts c = compact::adamw8_consts(1e-2, 0.9, 0.999, 1e-8, 0.1, t);
    const std::vector<float> g = moment8_case_grads(n, t, seed);
    step(c, g.data(), n, r.mq.data(), r.ms.data(), r.vq.data(), r.vs.data(), dense ? r.result.data() : nullptr,
         dense ? nullptr : r.result.data());
  }
  return r;
}

/// Equal codes, and equal bits of every scale and result except that any two NaNs agree (a NaN's sign and payload
/// are the hardware's and the compiler's: which operand of a commutative operation comes first).
inline bool same_run(const Moment8Run& a, const Moment8Run& b) {
  const auto eq = [](const auto& x, const auto& y) {
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
  };
  const auto eq_float = [](const std::vector<float>& x, const std::vector<float>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i]) && std::isnan(y[i])) continue;
      if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) return false;
    }
    return true;
  };
  return eq(a.mq, b.mq) && eq_float(a.ms, b.ms) && eq(a.vq, b.vq) && eq_float(a.vs, b.vs) &&
         eq_float(a.result, b.result);
}

/// The reference: detail::adamw8_scalar on fp32.
inline void moment8_reference_step(const compact::Adamw8Consts& c, const float* g, index_t n, std::int8_t* mq,
                                   float* ms, std::uint8_t* vq, float* vs, float* param, float* out) {
  compact::detail::adamw8_scalar(c, g, n, mq, ms, vq, vs, param, out, compact::detail::Moment8SameFloat{},
                                 compact::detail::Moment8SameFloat{}, compact::detail::Moment8SameFloat{});
}

inline const index_t kMoment8Counts[] = {1, 255, 256, 257, 1000, 12 * 256, 64 * 256 + 3, 200 * 256 + 77};

/// Runs `step` and the reference for 4 steps (seed 11) at every count of kMoment8Counts, for N and for a dense
/// parameter; returns the first case whose run differs from the reference's ("n = ..., dense = ..."), or "" when
/// every run has the reference's bits (same_run).
template <class Step>
std::string first_moment8_mismatch(Step step) {
  for (const index_t n : kMoment8Counts) {
    for (const bool dense : {false, true}) {
      if (!same_run(moment8_run(n, dense, 4, 11, step), moment8_run(n, dense, 4, 11, moment8_reference_step))) {
        return "n = " + std::to_string(n) + ", dense = " + (dense ? "true" : "false");
      }
    }
  }
  return "";
}

}  // namespace compact_test
