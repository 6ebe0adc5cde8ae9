// SPDX-License-Identifier: MIT
/// The 8-bit AdamW step on the CPU backend (cpu/moment8.hpp): every instruction set and the public adamw8_step give
/// the reference's bits (spec/moment8.hpp) for every count, thread count, instruction-set cap and input kind (zeros,
/// subnormals, inf / NaN, exact codes and ties, a partial last block); bad arguments are refused before anything is
/// written.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "cpu/moment8_cases.hpp"
#include "support.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using compact::CpuIsa;
using compact::index_t;
using compact_test::CapGuard;
using compact_test::kAllIsas;
using compact_test::with_threads;

TEST_CASE("every instruction set this CPU runs steps with the reference's bits (N and dense, every input kind)") {
  for (const CpuIsa isa : kAllIsas) {
    CAPTURE(compact::cpu_isa_name(isa));
    if (!compact::cpu_isa_supported(isa)) {
      MESSAGE("skipped: this CPU (or build) has no " << compact::cpu_isa_name(isa) << " (see test_avx512_emulated)");
      continue;
    }
    CHECK(compact_test::first_moment8_mismatch([isa](const compact::Adamw8Consts& c, const float* g, index_t m,
                                                     std::int8_t* mq, float* ms, std::uint8_t* vq, float* vs,
                                                     float* param, float* out) {
            compact::detail::adamw8_range_with(isa, c, g, m, mq, ms, vq, vs, param, out);
          }) == "");
  }
}

TEST_CASE("adamw8_step has the reference's bits for every thread count and ISA cap") {
  for (const index_t n : {index_t{0}, index_t{300}, index_t{64 * 256 + 3}, index_t{200 * 256 + 77}}) {
    for (const bool dense : {false, true}) {
      const auto want = compact_test::moment8_run(n, dense, 3, 5, compact_test::moment8_reference_step);
      for (const CpuIsa cap : kAllIsas) {
        if (!compact::cpu_isa_supported(cap)) continue;
        const CapGuard guard(cap);
        for (const int threads : {1, 2, 3}) {
          CAPTURE(n);
          CAPTURE(dense);
          CAPTURE(compact::cpu_isa_name(cap));
          CAPTURE(threads);
          with_threads(threads, [&] {
            const auto got =
                compact_test::moment8_run(n, dense, 3, 5,
                                          [](const compact::Adamw8Consts& c, const float* g, index_t m, std::int8_t* mq,
                                             float* ms, std::uint8_t* vq, float* vs, float* param, float* out) {
                                            compact::adamw8_step(compact::Cpu{}, c, g, m, mq, ms, vq, vs, param, out);
                                          });
            CHECK(compact_test::same_run(got, want));
          });
        }
      }
    }
  }
}

TEST_CASE("a non-finite gradient makes its block NaN (scale NaN, codes 0) and leaves the other blocks finite") {
  std::vector<float> g(600, 0.5f), out(600);
  g[300] = std::numeric_limits<float>::infinity();
  std::vector<std::int8_t> mq(600, 0);
  std::vector<std::uint8_t> vq(600, 0);
  std::vector<float> ms(3, 0.0f), vs(3, 0.0f);
  const compact::Adamw8Consts c = compact::adamw8_consts(1e-3, 0.9, 0.999, 1e-8, 0.0, 1);
  compact::adamw8_step(compact::Cpu{}, c, g.data(), 600, mq.data(), ms.data(), vq.data(), vs.data(), nullptr,
                       out.data());
  CHECK(std::isnan(ms[1]));
  CHECK(std::isnan(vs[1]));
  CHECK(ms[0] == ms[2]);
  CHECK(mq[300] == 0);
  CHECK(vq[299] == 0);
  CHECK(mq[0] == compact::kMoment8MaxM);
  CHECK(vq[0] == compact::kMoment8MaxV);
}

TEST_CASE("bad arguments are refused with the argument's name and value, before anything is written") {
  std::vector<float> g(300, 1.0f), out(300, -7.0f), param(300, -7.0f);
  std::vector<std::int8_t> mq(300, 5);
  std::vector<std::uint8_t> vq(300, 5);
  std::vector<float> ms(2, -7.0f), vs(2, -7.0f);
  const compact::Adamw8Consts c = compact::adamw8_consts(1e-3, 0.9, 0.999, 1e-8, 0.0, 1);
  const compact::Cpu cpu;
  using compact_test::error_of;
  const auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, c, g.data(), -1, mq.data(), ms.data(), vq.data(), vs.data(), nullptr,
                                   out.data());
            }),
            "adamw8_step: argument count = -1 must be >= 0"));
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, c, g.data(), 300, mq.data(), ms.data(), vq.data(), vs.data(), param.data(),
                                   out.data());
            }),
            "adamw8_step: exactly one of the arguments param and out must be given (param given, out given)"));
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, c, nullptr, 300, mq.data(), ms.data(), vq.data(), vs.data(), nullptr,
                                   out.data());
            }),
            "adamw8_step: argument grad is null with count = 300"));
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, c, g.data(), 300, mq.data(), nullptr, vq.data(), vs.data(), nullptr,
                                   out.data());
            }),
            "adamw8_step: argument m_scales is null with count = 300"));
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, c, g.data(), 300, mq.data(), ms.data(), vq.data(), vs.data(), nullptr,
                                   g.data());
            }),
            "adamw8_step: output out overlaps input grad"));
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, c, g.data(), 300, mq.data(), ms.data(), vq.data(), ms.data() + 1, nullptr,
                                   out.data());
            }),
            "adamw8_step: output v_scales overlaps input m_scales"));
  compact::Adamw8Consts bad = c;
  bad.eps = std::numeric_limits<float>::infinity();
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, bad, g.data(), 300, mq.data(), ms.data(), vq.data(), vs.data(), nullptr,
                                   out.data());
            }),
            "adamw8_step: constant eps = inf must be finite"));
  bad = c;
  bad.bc1 = 0.0f;
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, bad, g.data(), 300, mq.data(), ms.data(), vq.data(), vs.data(), nullptr,
                                   out.data());
            }),
            "adamw8_step: bias corrections bc1 = 0"));
  std::vector<std::uint16_t> g16(300, 0x3F80), p16(300, 0x3F80);
  CHECK(has(error_of([&] {
              compact::adamw8_step(cpu, c, compact::Half16::kBf16, g16.data(), 300, mq.data(), ms.data(), vq.data(),
                                   vs.data(), nullptr);
            }),
            "adamw8_step: exactly one of the arguments param and out must be given (param null, out null)"));
  CHECK(
      has(error_of([] { compact::moment8_scale_count(-2); }), "moment8_scale_count: argument count = -2 must be >= 0"));
  for (const auto v : mq) CHECK(v == 5);
  for (const auto v : vq) CHECK(v == 5);
  for (const float v : ms) CHECK(v == -7.0f);
  for (const float v : vs) CHECK(v == -7.0f);
  for (const float v : out) CHECK(v == -7.0f);
  for (const float v : param) CHECK(v == -7.0f);
  CHECK_NOTHROW(compact::adamw8_step(cpu, c, nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
  CHECK(compact::moment8_scale_count(256) == 1);
  CHECK(compact::moment8_scale_count(257) == 2);
}
