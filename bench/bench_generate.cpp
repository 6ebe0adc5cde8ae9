// SPDX-License-Identifier: MIT
/// Entry generation rate on one core: compact's panels (every instruction set, reference loop) against std::mt19937
/// and libtorch.
///
/// Each iteration fills one panel of `rows` x `cols` fp32 entries (the shape the dense projectors generate at a
/// time); items/s is entries per second. Targets (docs/benchmarks.md): Gaussian >= 0.5 G/s, Rademacher >= 3 G/s.
/// BM_Generate_Cpu_<Dist> runs the active instruction set (compact::active_cpu_isa(), recorded in the context as
/// compact_cpu_isa), BM_Generate_Isa_<Dist>/isa:<avx2|avx512> each vector instruction set this CPU supports.
#include <benchmark/benchmark.h>

#include <compact/compact.hpp>
#include <compact/cpu/generate.hpp>

#include "bench_support.hpp"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#if defined(COMPACT_BENCH_HAS_TORCH)
#include <torch/torch.h>
#endif

namespace {

using compact::index_t;

const compact::EntryParams kParams = compact::entry_params(compact::SketchState{1, 2, 3}, 1024);

void set_rate(benchmark::State& state, index_t entries) {
  state.SetItemsProcessed(state.iterations() * entries);
  state.SetBytesProcessed(state.iterations() * entries * static_cast<index_t>(sizeof(float)));
}

template <class Dist>
void BM_Generate_Cpu(benchmark::State& state, compact::CpuIsa isa) {
  const index_t rows = state.range(0), cols = state.range(1);
  std::vector<float> panel(static_cast<std::size_t>(rows * cols));
  index_t row0 = 0;
  for (auto _ : state) {
    compact::detail::fill_dense_panel_with<Dist>(isa, kParams, row0, row0 + rows, 0, cols, panel.data(), cols);
    benchmark::DoNotOptimize(panel.data());
    benchmark::ClobberMemory();
    row0 = (row0 + rows) % 65536;  // fresh rows each time, as a projector walking down P
  }
  set_rate(state, rows * cols);
}

void BM_Generate_Cpu_Gaussian(benchmark::State& state) {
  BM_Generate_Cpu<compact::Gaussian>(state, compact::active_cpu_isa());
}
void BM_Generate_Cpu_Rademacher(benchmark::State& state) {
  BM_Generate_Cpu<compact::Rademacher>(state, compact::active_cpu_isa());
}
void BM_Generate_Reference_Gaussian(benchmark::State& state) {
  BM_Generate_Cpu<compact::Gaussian>(state, compact::CpuIsa::kScalar);
}
void BM_Generate_Reference_Rademacher(benchmark::State& state) {
  BM_Generate_Cpu<compact::Rademacher>(state, compact::CpuIsa::kScalar);
}

/// The naive method: std::mt19937 + std::normal_distribution (libm Box-Muller / Marsaglia polar in libstdc++).
void BM_Generate_Mt19937_Gaussian(benchmark::State& state) {
  const index_t rows = state.range(0), cols = state.range(1);
  std::vector<float> panel(static_cast<std::size_t>(rows * cols));
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(1024.0f));
  for (auto _ : state) {
    for (float& v : panel) v = normal(rng);
    benchmark::DoNotOptimize(panel.data());
    benchmark::ClobberMemory();
  }
  set_rate(state, rows * cols);
}

/// The naive Rademacher: one std::mt19937 word per 32 signs.
void BM_Generate_Mt19937_Rademacher(benchmark::State& state) {
  const index_t rows = state.range(0), cols = state.range(1);
  std::vector<float> panel(static_cast<std::size_t>(rows * cols));
  std::mt19937 rng(42);
  const float scale = 1.0f / std::sqrt(1024.0f);
  for (auto _ : state) {
    std::uint32_t word = 0;
    for (std::size_t k = 0; k < panel.size(); ++k) {
      if (k % 32 == 0) word = rng();
      panel[k] = ((word >> (k % 32)) & 1u) ? -scale : scale;
    }
    benchmark::DoNotOptimize(panel.data());
    benchmark::ClobberMemory();
  }
  set_rate(state, rows * cols);
}

#if defined(COMPACT_BENCH_HAS_TORCH)
/// libtorch's CPU randn (the reference implementation's generator), one thread.
void BM_Generate_Torch_Gaussian(benchmark::State& state) {
  const index_t rows = state.range(0), cols = state.range(1);
  torch::set_num_threads(1);
  torch::NoGradGuard no_grad;
  torch::Tensor panel = torch::empty({rows, cols});
  for (auto _ : state) {
    panel.normal_(0.0, 1.0 / std::sqrt(1024.0));
    benchmark::DoNotOptimize(panel.data_ptr());
    benchmark::ClobberMemory();
  }
  set_rate(state, rows * cols);
}
BENCHMARK(BM_Generate_Torch_Gaussian)->Args({128, 1024})->Args({1024, 4096});
#endif

void panel_shapes(benchmark::internal::Benchmark* b) {
  // One projector panel (128 x r = 1024, L2-resident) and a 16 MiB panel (1024 x 4096) that spills to L3.
  b->Args({128, 1024})->Args({1024, 4096});
}

/// BM_Generate_Isa_<Dist>/isa:<name>/rows/cols for every vector instruction set this CPU supports.
void register_isa_rows() {
  for (compact::CpuIsa isa : {compact::CpuIsa::kAvx2, compact::CpuIsa::kAvx512}) {
    if (!compact::cpu_isa_supported(isa)) continue;
    const std::string suffix = std::string("/isa:") + compact::cpu_isa_name(isa);
    benchmark::RegisterBenchmark(("BM_Generate_Isa_Gaussian" + suffix).c_str(), BM_Generate_Cpu<compact::Gaussian>, isa)
        ->Apply(panel_shapes);
    benchmark::RegisterBenchmark(("BM_Generate_Isa_Rademacher" + suffix).c_str(), BM_Generate_Cpu<compact::Rademacher>,
                                 isa)
        ->Apply(panel_shapes);
  }
}

BENCHMARK(BM_Generate_Cpu_Gaussian)->Apply(panel_shapes);
BENCHMARK(BM_Generate_Reference_Gaussian)->Apply(panel_shapes);
BENCHMARK(BM_Generate_Mt19937_Gaussian)->Apply(panel_shapes);
BENCHMARK(BM_Generate_Cpu_Rademacher)->Apply(panel_shapes);
BENCHMARK(BM_Generate_Reference_Rademacher)->Apply(panel_shapes);
BENCHMARK(BM_Generate_Mt19937_Rademacher)->Apply(panel_shapes);

}  // namespace

int main(int argc, char** argv) { return compact_bench::run_benchmarks(argc, argv, register_isa_rows); }
