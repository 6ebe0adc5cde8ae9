// SPDX-License-Identifier: MIT
/// The sr8 codec on the CPU (cpu/sr8.hpp) against memcpy of the same fp32 bytes, timed side by side in every
/// iteration, so the ratio is what gets reported.
///
/// Rows:
///   BM_Sr8Encode_Cpu_F32/n:N/threads:T   sr8_encode of N fp32 values (q and scales written)
///   BM_Sr8Decode_Cpu_F32/n:N/threads:T   sr8_decode of N values into fp32
/// with N in {2^20, 2^24} and T = 1 or every OpenMP thread ("all"). Each iteration times the codec, then a memcpy of
/// the N fp32 values (4 N bytes) on the same threads: one memcpy for T = 1, the codec's tasks of 16384 values each on
/// the task pool otherwise. Reported time: the codec's.
///
/// Counters: GB/s, the fp32 bytes the codec consumes (encode) or produces (decode) per second; memcpy_GB/s, the bytes
/// memcpy copies per second; vs_memcpy = memcpy time / codec time (1 = as fast as copying the fp32 values); threads.
#include <benchmark/benchmark.h>

#include <compact/compact.hpp>

#include "bench_support.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

using compact::index_t;

double seconds_of(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// memcpy of n floats on the codec's task partition (all threads), or one memcpy (one thread).
void copy_floats(const float* from, float* to, index_t n, bool all_threads) {
  if (!all_threads) {
    std::memcpy(to, from, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  compact::detail::sr8_parallel_blocks(n, [&](index_t, index_t e0, index_t values) {
    std::memcpy(to + e0, from + e0, static_cast<std::size_t>(values) * sizeof(float));
  });
}

void BM_Sr8(benchmark::State& state, bool encode, index_t n, bool all_threads) {
#if defined(_OPENMP)
  const int saved = omp_get_max_threads();
  if (!all_threads) omp_set_num_threads(1);
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  const compact_bench::Matrix x = compact_bench::random_matrix(1, n, 1);
  std::vector<float> out(static_cast<std::size_t>(n)), copy(static_cast<std::size_t>(n));
  std::vector<std::int8_t> q(static_cast<std::size_t>(n));
  std::vector<float> scales(static_cast<std::size_t>(compact::sr8_scale_count(n)));
  const compact::SketchState s{2024, 7, 1};
  const auto run = [&] {
    if (encode) {
      compact::sr8_encode(compact::Cpu{}, x.data(), n, s, q.data(), scales.data());
    } else {
      compact::sr8_decode(compact::Cpu{}, q.data(), scales.data(), n, out.data());
    }
  };
  compact::sr8_encode(compact::Cpu{}, x.data(), n, s, q.data(), scales.data());  // every page touched once
  run();
  copy_floats(x.data(), copy.data(), n, all_threads);
  double codec_s = 0, memcpy_s = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    run();
    const double t = seconds_of(t0);
    benchmark::ClobberMemory();
    t0 = std::chrono::steady_clock::now();
    copy_floats(x.data(), copy.data(), n, all_threads);
    memcpy_s += seconds_of(t0);
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
    codec_s += t;
    state.SetIterationTime(t);
  }
  const double bytes = double(n) * sizeof(float) * double(state.iterations());
  state.counters["GB/s"] = bytes / codec_s * 1e-9;
  state.counters["memcpy_GB/s"] = bytes / memcpy_s * 1e-9;
  state.counters["vs_memcpy"] = memcpy_s / codec_s;
  state.counters["threads"] = threads;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
#if defined(_OPENMP)
  omp_set_num_threads(saved);
#endif
}

void register_all() {
  for (const bool encode : {true, false}) {
    for (const int log_n : {20, 24}) {
      for (const bool all : {false, true}) {
        const std::string name = std::string(encode ? "BM_Sr8Encode_Cpu_F32" : "BM_Sr8Decode_Cpu_F32") + "/n:2^" +
                                 std::to_string(log_n) + "/threads:" + (all ? "all" : "1");
        benchmark::RegisterBenchmark(name.c_str(), BM_Sr8, encode, index_t{1} << log_n, all)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return compact_bench::run_benchmarks(argc, argv, register_all); }
