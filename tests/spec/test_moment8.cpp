// SPDX-License-Identifier: MIT
/// The moment8 codec and the 8-bit AdamW step's specification (spec/moment8.hpp): the code tables against their
/// closed formula, the encode against a brute-force nearest-code search (every code, every midpoint and its
/// neighbours), the special blocks (zero, subnormal, non-finite), the step's operation order, the golden values
/// (tests/spec/moment8_golden.hpp, computed independently by the pytest reference), and the GPU kernel body
/// (kernels/moment8.hpp) driven by host loops, against the reference.
#include <doctest/doctest.h>

#include <compact/compact.hpp>
#include <compact/kernels/block.hpp>  // the GPU kernel bodies, driven on the host
#include <compact/kernels/moment8.hpp>

#include "spec/moment8_golden.hpp"
#include "cpu/kernel_cases.hpp"
#include "cpu/moment8_cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

using compact::index_t;

std::uint32_t bits(float v) { return compact::fp32::bits_of(v); }

/// The table by its closed formula, in double (exact: every entry has 4 significant bits).
double table(int k, int bias) {
  return k < 8 ? std::ldexp(double(k), -bias - 2) : std::ldexp(double(8 + k % 8), k / 8 - bias - 3);
}

/// The nearest code to r by search over the table, ties to the even code.
int nearest_code(float r, int bias) {
  int best = 0;
  for (int k = 1; k <= 8 * bias; ++k) {
    const double dk = std::fabs(table(k, bias) - double(r)), db = std::fabs(table(best, bias) - double(r));
    if (dk < db || (dk == db && k % 2 == 0)) best = k;
  }
  return best;
}

}  // namespace

TEST_CASE("the code tables are their closed formula: increasing, exact in fp32, the top code 1") {
  for (const int bias : {compact::kMoment8BiasM, compact::kMoment8BiasV}) {
    CAPTURE(bias);
    for (int k = 0; k <= 8 * bias; ++k) {
      CAPTURE(k);
      CHECK(double(compact::moment8_code_value(k, bias)) == table(k, bias));
      if (k > 0) CHECK(compact::moment8_code_value(k, bias) > compact::moment8_code_value(k - 1, bias));
    }
    CHECK(compact::moment8_code_value(8 * bias, bias) == 1.0f);
  }
  CHECK(compact::kMoment8MaxM == 120);
  CHECK(compact::kMoment8MaxV == 248);
  CHECK(compact::moment8_code_value(1, compact::kMoment8BiasM) == std::ldexp(1.0f, -17));
  CHECK(compact::moment8_code_value(1, compact::kMoment8BiasV) == std::ldexp(1.0f, -33));
}

TEST_CASE("the encode is the nearest code, ties to even, at every code, midpoint and neighbour") {
  for (const int bias : {compact::kMoment8BiasM, compact::kMoment8BiasV}) {
    CAPTURE(bias);
    std::vector<float> rs = {0.0f, 1.0f, std::numeric_limits<float>::denorm_min(), 1e-38f, 1e-20f};
    for (int k = 0; k <= 8 * bias; ++k) {
      const float v = compact::moment8_code_value(k, bias);
      rs.push_back(v);
      if (k < 8 * bias) {
        const float mid = static_cast<float>((table(k, bias) + table(k + 1, bias)) / 2);  // exact: 5 significant bits
        REQUIRE(double(mid) == (table(k, bias) + table(k + 1, bias)) / 2);
        rs.push_back(mid);
        rs.push_back(std::nextafter(mid, 0.0f));
        rs.push_back(std::nextafter(mid, 2.0f));
      }
    }
    std::uint64_t s = 12345;
    for (int j = 0; j < 4000; ++j) {  // log-uniform over [2^-40, 1]
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      const double u = double(s >> 11) * 0x1p-53;
      rs.push_back(static_cast<float>(std::ldexp(1.0 + u, -static_cast<int>((s >> 3) % 40) - 1)));
    }
    for (const float r : rs) {
      if (!(r <= 1.0f)) continue;
      CAPTURE(r);
      CHECK(compact::moment8_code_of(r, bias) == nearest_code(r, bias));
    }
  }
}

TEST_CASE("encode and decode: sign, zero and non-finite scales, scale = amax") {
  using compact::moment8_decode_m;
  using compact::moment8_decode_v;
  using compact::moment8_encode_m;
  using compact::moment8_encode_v;
  CHECK(moment8_encode_m(-3.0f, 3.0f) == -120);
  CHECK(moment8_encode_m(3.0f, 3.0f) == 120);
  CHECK(moment8_encode_m(-0.0f, 3.0f) == 0);
  CHECK(moment8_encode_v(3.0f, 3.0f) == 248);
  CHECK(moment8_decode_m(-120, 3.0f) == -3.0f);
  CHECK(moment8_decode_v(248, 3.0f) == 3.0f);
  // 1.5 / 2 = 0.75 = (1 + 4/8) 2^-1: code 8 (15 - 1) + 4 for m, 8 (31 - 1) + 4 for v.
  CHECK(moment8_encode_m(1.5f, 2.0f) == 116);
  CHECK(moment8_encode_v(1.5f, 2.0f) == 244);
  CHECK(moment8_encode_m(1.0f, 0.0f) == 0);  // a zero block
  CHECK(moment8_encode_v(1.0f, std::numeric_limits<float>::quiet_NaN()) == 0);
  CHECK(moment8_decode_m(0, 0.0f) == 0.0f);
  CHECK(std::isnan(moment8_decode_m(0, std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(moment8_decode_v(7, std::numeric_limits<float>::quiet_NaN())));
  const float x[4] = {0.5f, -2.0f, 1.0f, 0.0f};
  CHECK(compact::moment8_block_scale(x, 4) == 2.0f);
  const float y[3] = {0.5f, -std::numeric_limits<float>::infinity(), 1.0f};
  CHECK(bits(compact::moment8_block_scale(y, 3)) == compact::kMoment8NanScaleBits);
  const float z[2] = {0.0f, -0.0f};
  CHECK(bits(compact::moment8_block_scale(z, 2)) == 0u);
  // A subnormal amax is the scale; values keep their codes (the division is exact IEEE).
  const float tiny = std::ldexp(1.0f, -140);
  CHECK(moment8_encode_m(tiny, tiny) == 120);
  CHECK(moment8_encode_m(tiny / 2, tiny) == 112);
  CHECK(moment8_decode_m(112, tiny) == tiny / 2);
}

TEST_CASE("the relative error of a decoded value is at most 2^-4 of it above the subnormal codes") {
  // Half a step of 3 mantissa bits: |value(k) - r| <= 2^-4 value(k) from code 8 on; the division and the decode's
  // multiply add at most 2^-24 each.
  for (const int bias : {compact::kMoment8BiasM, compact::kMoment8BiasV}) {
    const float s = 3.7f;
    for (int j = 0; j < 2000; ++j) {
      const float x = s * std::ldexp(1.0f + float(j) / 2000.0f, -1 - j % (bias - 2));
      const float d = bias == compact::kMoment8BiasM ? compact::moment8_decode_m(compact::moment8_encode_m(x, s), s)
                                                     : compact::moment8_decode_v(compact::moment8_encode_v(x, s), s);
      CHECK(std::fabs(double(d) - double(x)) <= double(x) * (0.0625 + 0x1p-22));
    }
  }
}

TEST_CASE("the step's operation order: moments, N and the dense update are the stated fp32 operations") {
  const compact::Adamw8Consts c = compact::adamw8_consts(1e-3, 0.9, 0.999, 1e-8, 0.01, 3);
  CHECK(c.bc1 == static_cast<float>(1.0 - std::pow(0.9, 3.0)));
  CHECK(c.neg_step == static_cast<float>(-(1e-3 / (1.0 - std::pow(0.9, 3.0)))));
  CHECK(c.decay == static_cast<float>(1.0 - 1e-3 * 0.01));
  const float m = 0.25f, v = 0.01f, g = -0.3f;
  const compact::Moments mv = compact::adamw8_moments(c, m, v, g);
  volatile float t1 = c.b1 * m, t2 = c.c1 * g, t3 = c.c2 * g;
  volatile float t4 = t3 * g, t5 = c.b2 * v;
  CHECK(bits(mv.m) == bits(t1 + t2));
  CHECK(bits(mv.v) == bits(t5 + t4));
  volatile float a = mv.m / c.bc1, b = mv.v / c.bc2;
  volatile float sq = std::sqrt(static_cast<float>(b));
  volatile float den = sq + c.eps;
  CHECK(bits(compact::adamw8_update(c, mv.m, mv.v)) == bits(a / den));
  volatile float sv = std::sqrt(mv.v);
  volatile float d2 = sv / c.sqrt_bc2;
  volatile float den2 = d2 + c.eps;
  volatile float num = c.neg_step * mv.m;
  volatile float q = num / den2;
  CHECK(bits(compact::adamw8_dense(c, 0.5f, mv.m, mv.v)) == bits(0.5f + q));
}

TEST_CASE("golden values: the reference step has the bits the pytest reference computed (moment8_golden.hpp)") {
  for (const auto& gc : compact_test::moment8_golden_cases()) {
    CAPTURE(gc.name);
    const index_t n = static_cast<index_t>(gc.grad.size());
    std::vector<std::int8_t> mq(gc.grad.size(), 0);
    std::vector<std::uint8_t> vq(gc.grad.size(), 0);
    std::vector<float> ms(std::size_t(compact::moment8_scale_count(n)), 0.0f), vs(ms.size(), 0.0f);
    std::vector<float> param = gc.param, out(gc.grad.size());
    for (int step = 1; step <= gc.steps; ++step) {
      const compact::Adamw8Consts c = compact::adamw8_consts(gc.lr, 0.9, 0.999, 1e-8, gc.wd, step);
      compact::detail::adamw8_scalar(c, gc.grad.data(), n, mq.data(), ms.data(), vq.data(), vs.data(),
                                     gc.dense ? param.data() : nullptr, gc.dense ? nullptr : out.data(),
                                     compact::detail::Moment8SameFloat{}, compact::detail::Moment8SameFloat{},
                                     compact::detail::Moment8SameFloat{});
    }
    CHECK(compact_test::fnv1a(mq) == gc.m_q_hash);
    CHECK(compact_test::fnv1a(vq) == gc.v_q_hash);
    CHECK(compact_test::fnv1a(ms) == gc.m_scales_hash);
    CHECK(compact_test::fnv1a(vs) == gc.v_scales_hash);
    CHECK(compact_test::fnv1a(gc.dense ? param : out) == gc.result_hash);
  }
}

namespace {

/// The GPU kernel body (kernels/moment8.hpp) on the host: HostBlock loops over a grid of at most max_blocks blocks
/// (grid-stride), threads forward or backward (a missing barrier would show).
template <class P, class PFloat, class FromFloat>
void kernel_body_step(index_t max_blocks, bool reverse, const compact::Adamw8Consts& c, const float* g, index_t n,
                      std::int8_t* mq, float* ms, std::uint8_t* vq, float* vs, P* param, float* out, PFloat p_float,
                      FromFloat from_float) {
  compact::detail::Launch1d l = compact::detail::adamw8_launch(n);
  l.blocks = std::min(l.blocks, max_blocks);
  compact::detail::host_launch_blocks(
      l, compact::detail::moment8_shared_bytes(l.threads),
      [&](compact::detail::HostBlock& b) {
        compact::detail::adamw8_blocks(b, c, g, n, mq, ms, vq, vs, param, out, compact::detail::Moment8SameFloat{},
                                       p_float, from_float);
      },
      reverse);
}

struct Bf16Round {
  std::uint16_t operator()(float x) const { return compact::bf16_bits_from_fp32(x); }
};
struct Bf16Float {
  float operator()(std::uint16_t b) const { return compact::fp32_from_bf16_bits(b); }
};

}  // namespace

TEST_CASE("the GPU kernel body, run by host loops, has the reference's bits (grid-stride, reversed threads)") {
  for (const index_t n : {index_t{1}, index_t{257}, index_t{12 * 256 + 5}}) {
    for (const bool dense : {false, true}) {
      const auto want = compact_test::moment8_run(n, dense, 3, 9, compact_test::moment8_reference_step);
      for (const index_t max_blocks : {index_t{2}, index_t{1000}}) {
        for (const bool reverse : {false, true}) {
          CAPTURE(n);
          CAPTURE(dense);
          CAPTURE(max_blocks);
          CAPTURE(reverse);
          const auto got = compact_test::moment8_run(
              n, dense, 3, 9,
              [&](const compact::Adamw8Consts& c, const float* g, index_t m, std::int8_t* mq, float* ms,
                  std::uint8_t* vq, float* vs, float* param, float* out) {
                kernel_body_step(max_blocks, reverse, c, g, m, mq, ms, vq, vs, param, out,
                                 compact::detail::Moment8SameFloat{}, compact::detail::Moment8SameFloat{});
              });
          CHECK(compact_test::same_run(got, want));
        }
      }
    }
  }
  // A bf16 parameter: the decayed and the updated value each rounded to bf16, as the CPU's 16-bit overload does.
  const index_t n = 700;
  const std::vector<float> g = compact_test::moment8_case_grads(n, 1, 3);
  std::vector<std::uint16_t> p_cpu(n), g16(n);
  for (index_t i = 0; i < n; ++i) {
    g16[i] = compact::bf16_bits_from_fp32(g[i]);
    p_cpu[i] = compact::bf16_bits_from_fp32(std::sin(float(i)));
  }
  std::vector<float> gf(n);
  for (index_t i = 0; i < n; ++i) gf[i] = compact::fp32_from_bf16_bits(g16[i]);
  std::vector<std::uint16_t> p_gpu = p_cpu;
  std::vector<std::int8_t> mq1(n, 0), mq2(n, 0);
  std::vector<std::uint8_t> vq1(n, 0), vq2(n, 0);
  std::vector<float> ms1(3, 0.0f), ms2(3, 0.0f), vs1(3, 0.0f), vs2(3, 0.0f);
  for (int t = 1; t <= 3; ++t) {
    const compact::Adamw8Consts c = compact::adamw8_consts(1e-2, 0.9, 0.999, 1e-8, 0.1, t);
    compact::adamw8_step(compact::Cpu{}, c, compact::Half16::kBf16, g16.data(), n, mq1.data(), ms1.data(), vq1.data(),
                         vs1.data(), p_cpu.data());
    kernel_body_step(1000, false, c, gf.data(), n, mq2.data(), ms2.data(), vq2.data(), vs2.data(), p_gpu.data(),
                     static_cast<float*>(nullptr), Bf16Float{}, Bf16Round{});
  }
  CHECK(compact_test::same_bits(p_cpu, p_gpu));
  CHECK(compact_test::same_bits(mq1, mq2));
  CHECK(compact_test::same_bits(vq1, vq2));
  CHECK(compact_test::same_bits(ms1, ms2));
}
