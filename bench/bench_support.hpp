// SPDX-License-Identifier: MIT
#pragma once
/// Helpers shared by the CPU benchmarks: seeded random matrices and the main that records the instruction set.

#include <benchmark/benchmark.h>

#include <compact/compact.hpp>

#include <random>

namespace compact_bench {

using Matrix = compact::RowMatrix<float>;

/// rows x cols matrix of uniform [-1, 1) samples from std::mt19937(seed).
inline Matrix random_matrix(compact::index_t rows, compact::index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  Matrix m(rows, cols);
  for (compact::index_t k = 0; k < m.size(); ++k) m.data()[k] = uni(rng);
  return m;
}

/// Registers the benchmarks, records compact's active instruction set in the context (compact_cpu_isa, which
/// tools/run_benchmarks.sh reports), and runs them.
inline int run_benchmarks(int argc, char** argv, void (*register_benchmarks)()) {
  benchmark::AddCustomContext("compact_cpu_isa", compact::cpu_isa_name(compact::active_cpu_isa()));
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace compact_bench
