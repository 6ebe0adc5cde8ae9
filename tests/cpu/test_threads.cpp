// SPDX-License-Identifier: MIT
/// Several std::threads share projectors (their const methods run at the same time) while each drives its own
/// optimizer; every thread gets bit for bit what the same work gives on one thread. CI also builds this test with
/// -fsanitize=thread and OpenMP off (libgomp is not instrumented), where any data race fails it.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "support.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using compact::index_t;
using compact::RowMatrix;
using compact_test::random_matrix;

constexpr index_t kN = 96, kR = 32, kM = 24, kBatch = 16;
constexpr int kThreads = 4, kSteps = 5;

/// Everything one thread computes.
struct Results {
  RowMatrix<float> z, out, p, g, w;
  std::vector<std::uint8_t> record;
  std::array<std::uint8_t, compact::SketchState::kRecordBytes> state;
};

template <class Dist>
Results work(const compact::Projector<compact::Cpu, Dist, float>& shared, int t) {
  Results res;
  const auto seed = static_cast<std::uint32_t>(100 * t);
  const RowMatrix<float> x = random_matrix<float>(kBatch, kN, seed + 1), g = random_matrix<float>(kM, kR, seed + 2);
  const RowMatrix<float> dy = random_matrix<float>(kBatch, kM, seed + 3);
  // The shared projector, from every thread at once.
  res.z = shared.sketch(x);
  res.out = random_matrix<float>(kM, kN, seed + 4);
  shared.unsketch_grad(g, res.out, 0.5f, -1.0f);
  res.p = shared.materialize();
  res.g = compact::compressed_grad<float>(dy, res.z);
  // This thread's own optimizer, stream t, resampling every 2 steps (new projectors built concurrently).
  compact::AdamWOptions o;
  o.window_policy = compact::WindowPolicy::kTransferFirst;
  compact::CompressedAdamW<compact::Cpu, Dist, float> opt(kM, kN, kR, compact::Schedule(9, 2), std::uint64_t(t), o);
  res.w = random_matrix<float>(kM, kN, seed + 5);
  for (int s = 0; s < kSteps; ++s) {
    const RowMatrix<float> xs = random_matrix<float>(kBatch, kN, seed + 10 + std::uint32_t(s));
    const RowMatrix<float> zs = opt.projector().sketch(xs);
    opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(zs));
    opt.step(res.w);
  }
  res.record = opt.save_state();
  res.state = opt.state().serialize();
  return res;
}

bool same(const RowMatrix<float>& a, const RowMatrix<float>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * std::size_t(a.size())) == 0;
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE(
    "threads sharing projectors, each with its own optimizer, get the single-thread results bit for bit", Dist,
    threads_share_projectors) {
  const compact::Projector<compact::Cpu, Dist, float> shared(kN, kR, compact::SketchState{1, 2, 3});
  std::vector<Results> serial, concurrent(kThreads);
  for (int t = 0; t < kThreads; ++t) serial.push_back(work(shared, t));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { concurrent[std::size_t(t)] = work(shared, t); });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CAPTURE(t);
    const Results& a = serial[std::size_t(t)];
    const Results& b = concurrent[std::size_t(t)];
    CHECK(same(a.z, b.z));
    CHECK(same(a.out, b.out));
    CHECK(same(a.p, b.p));
    CHECK(same(a.g, b.g));
    CHECK(same(a.w, b.w));
    CHECK(a.record == b.record);
    CHECK(a.state == b.state);
  }
  // The threads did different work: a test that compared equal results of identical inputs would prove nothing.
  CHECK_FALSE(same(serial[0].z, serial[1].z));
  CHECK(serial[0].record != serial[1].record);
}
TEST_CASE_TEMPLATE_APPLY(threads_share_projectors, compact_test::AllDistributions);
