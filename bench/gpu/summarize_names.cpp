// SPDX-License-Identifier: MIT
/// Rows for summarize.py's test (bench/gpu/test_summarize.py): the benchmark families and arguments of the targets in
/// bench_cuda.cu, registered with the same builder calls (Name, Args, UseManualTime, MinTime), so that Google
/// Benchmark writes their names exactly as it writes bench_cuda's. No GPU: each iteration reports a fixed time, and
/// each row carries the counters of its bench_cuda namesake with fixed values the test looks for.

#include <benchmark/benchmark.h>

#include <cstdint>

namespace {

/// A manual-time row of `us` microseconds per iteration with the given counter values.
void fixed_row(benchmark::State& state, double us) {
  for (auto _ : state) state.SetIterationTime(us * 1e-6);
}

void BM_Dense(benchmark::State& state) {
  fixed_row(state, 100.0);
  state.counters["gemm_us"] = 95.0;
  state.counters["ratio_vs_gemm"] = 1.0 + 0.001 * double(state.range(2) / 1024);  // 1.001 at r = 1024
}

void BM_Srht(benchmark::State& state) {
  fixed_row(state, 50.0);
  state.counters["GB/s"] = 2000.0;
  state.counters["copy_GB/s"] = 3200.0;
  state.counters["fraction_of_copy_bw"] = 0.625;
}

void BM_Copy(benchmark::State& state) {
  fixed_row(state, 20.0);
  state.counters["GB/s"] = 3300.0;
}

}  // namespace

BENCHMARK(BM_Dense)->Name("BM_Sketch_Cuda_Gaussian")->Args({4096, 4096, 1024})->UseManualTime()->MinTime(0.01);
BENCHMARK(BM_Dense)->Name("BM_Sketch_Cuda_Gaussian_Overlap")->Args({4096, 4096, 1024})->UseManualTime()->MinTime(0.01);
BENCHMARK(BM_Dense)
    ->Name("BM_Window_Cuda_Gaussian")
    ->Args({4096, 4096, 1024, 0})
    ->Args({4096, 4096, 1024, 1})
    ->UseManualTime()
    ->MinTime(0.01);
BENCHMARK(BM_Srht)->Name("BM_Sketch_Cuda_Srht")->Args({4096, 4096, 1024})->UseManualTime()->MinTime(0.01);
BENCHMARK(BM_Copy)->Name("BM_CopyBandwidth_Cuda")->Arg(std::int64_t{32} << 20)->UseManualTime()->MinTime(0.01);

BENCHMARK_MAIN();
