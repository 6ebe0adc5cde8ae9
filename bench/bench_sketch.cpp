// SPDX-License-Identifier: MIT
/// Dense sketch z = x P and unsketch W += alpha g P^T: compact against its GEMM floor and the baselines.
///
/// Rows, for each GEMM engine this binary has (engine: "eigen", and "blas" when built against compact::blas; one binary
/// runs both side by side, cpu/gemm_engine.hpp):
///   BM_Sketch_Cpu_<Dist>        compact's projector (P generated panel by panel, never stored)
///   BM_Sketch_StoredP_Gemm      the floor: the same GEMM engine with P already in memory
///   BM_Sketch_Naive_Gaussian    std::mt19937 + std::normal_distribution fill of P, then the same GEMM
///   BM_Sketch_Torch_Gaussian    the reference method: torch::randn({n, r}) / sqrt(r), then torch::matmul (libtorch's
///                               own GEMM: registered once, tagged engine:eigen)
/// and the same four for Unsketch (g is m x r, W is m x n, accumulated with alpha = -0.01).
/// Shapes: B (or m) in {256, 4096}, n in {1024, 4096}, r in {n/8, n/4, n/2}; the B = 4096, n = 4096 shapes run
/// only at r = n/4 unless COMPACT_BENCH_FULL=1 (they take seconds each on two cores).
#include <benchmark/benchmark.h>

#include <compact/compact.hpp>

#include "bench_support.hpp"

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#if defined(COMPACT_BENCH_HAS_TORCH)
#include <torch/torch.h>
#endif

namespace {

using compact::index_t;
using compact_bench::Matrix;
using compact_bench::random_matrix;

const compact::SketchState kState{2024, 1, 0};
constexpr float kAlpha = -0.01f;

using compact::GemmEngine;

/// C = a * b (a: m x k, b: k x n) on `engine`, all threads (Eigen's or the BLAS's own threading).
void engine_product(GemmEngine engine, const Matrix& a, const Matrix& b, Matrix& c) {
  if (engine == GemmEngine::kBlas) {
    compact::detail::blas_gemm<float>(a.rows(), b.cols(), a.cols(), 1.0f, a.data(), a.cols(), b.data(), b.cols(), false,
                                      0.0f, c.data(), c.cols());
  } else {
    c.noalias() = a * b;
  }
}

/// W += alpha g p^T (g: m x r, p: n x r) on `engine`, all threads.
void engine_update(GemmEngine engine, const Matrix& g, const Matrix& p, Matrix& w) {
  if (engine == GemmEngine::kBlas) {
    compact::detail::blas_gemm<float>(g.rows(), p.rows(), g.cols(), kAlpha, g.data(), g.cols(), p.data(), p.cols(),
                                      true, 1.0f, w.data(), w.cols());
  } else {
    w.noalias() += kAlpha * (g * p.transpose());
  }
}

void set_counters(benchmark::State& state, index_t rows, index_t n, index_t r) {
  const double flops = 2.0 * double(rows) * double(n) * double(r);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  // Activations in and sketch out (sketch) or gradient in and W read + written (unsketch).
  state.SetBytesProcessed(state.iterations() * rows * (n + r) * index_t(sizeof(float)));
}

void fill_naive_gaussian(Matrix& p, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(float(p.cols())));
  for (index_t k = 0; k < p.size(); ++k) p.data()[k] = normal(rng);
}

template <class Dist>
void BM_Sketch_Cpu(benchmark::State& state, GemmEngine engine, index_t b, index_t n, index_t r) {
  const Matrix x = random_matrix(b, n, 1);
  Matrix z(b, r);
  compact::Projector<compact::Cpu, Dist, float> proj(n, r, kState);
  proj.set_gemm_engine(engine);
  for (auto _ : state) {
    proj.sketch(compact::detail::as_view<float>(x), compact::detail::as_mutable_view<float>(z));
    benchmark::DoNotOptimize(z.data());
  }
  set_counters(state, b, n, r);
}

void BM_Sketch_StoredP_Gemm(benchmark::State& state, GemmEngine engine, index_t b, index_t n, index_t r) {
  const Matrix x = random_matrix(b, n, 1);
  const Matrix p = compact::Projector<compact::Cpu, compact::Gaussian, float>(n, r, kState).materialize();
  Matrix z(b, r);
  for (auto _ : state) {
    engine_product(engine, x, p, z);
    benchmark::DoNotOptimize(z.data());
  }
  set_counters(state, b, n, r);
}

void BM_Sketch_Naive_Gaussian(benchmark::State& state, GemmEngine engine, index_t b, index_t n, index_t r) {
  const Matrix x = random_matrix(b, n, 1);
  Matrix p(n, r), z(b, r);
  std::mt19937 rng(7);
  for (auto _ : state) {
    fill_naive_gaussian(p, rng);
    engine_product(engine, x, p, z);
    benchmark::DoNotOptimize(z.data());
  }
  set_counters(state, b, n, r);
}

template <class Dist>
void BM_Unsketch_Cpu(benchmark::State& state, GemmEngine engine, index_t m, index_t n, index_t r) {
  const Matrix g = random_matrix(m, r, 2);
  Matrix w = random_matrix(m, n, 3);
  compact::Projector<compact::Cpu, Dist, float> proj(n, r, kState);
  proj.set_gemm_engine(engine);
  for (auto _ : state) {
    proj.unsketch_grad(compact::detail::as_view<float>(g), compact::detail::as_mutable_view<float>(w), kAlpha, 1.0f);
    benchmark::DoNotOptimize(w.data());
  }
  set_counters(state, m, n, r);
}

void BM_Unsketch_StoredP_Gemm(benchmark::State& state, GemmEngine engine, index_t m, index_t n, index_t r) {
  const Matrix g = random_matrix(m, r, 2);
  Matrix w = random_matrix(m, n, 3);
  const Matrix p = compact::Projector<compact::Cpu, compact::Gaussian, float>(n, r, kState).materialize();
  for (auto _ : state) {
    engine_update(engine, g, p, w);
    benchmark::DoNotOptimize(w.data());
  }
  set_counters(state, m, n, r);
}

void BM_Unsketch_Naive_Gaussian(benchmark::State& state, GemmEngine engine, index_t m, index_t n, index_t r) {
  const Matrix g = random_matrix(m, r, 2);
  Matrix w = random_matrix(m, n, 3);
  Matrix p(n, r);
  std::mt19937 rng(7);
  for (auto _ : state) {
    fill_naive_gaussian(p, rng);
    engine_update(engine, g, p, w);
    benchmark::DoNotOptimize(w.data());
  }
  set_counters(state, m, n, r);
}

#if defined(COMPACT_BENCH_HAS_TORCH)
void BM_Sketch_Torch_Gaussian(benchmark::State& state, GemmEngine /*engine*/, index_t b, index_t n, index_t r) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::rand({b, n}) * 2 - 1;
  for (auto _ : state) {
    const torch::Tensor p = torch::randn({n, r}) / std::sqrt(double(r));
    torch::Tensor z = torch::matmul(x, p);
    benchmark::DoNotOptimize(z.data_ptr());
  }
  set_counters(state, b, n, r);
}

void BM_Unsketch_Torch_Gaussian(benchmark::State& state, GemmEngine /*engine*/, index_t m, index_t n, index_t r) {
  torch::NoGradGuard no_grad;
  const torch::Tensor g = torch::rand({m, r}) * 2 - 1;
  torch::Tensor w = torch::rand({m, n}) * 2 - 1;
  for (auto _ : state) {
    const torch::Tensor p = torch::randn({n, r}) / std::sqrt(double(r));
    w.addmm_(g, p.t(), 1.0, kAlpha);
    benchmark::DoNotOptimize(w.data_ptr());
  }
  set_counters(state, m, n, r);
}
#endif

using Body = void (*)(benchmark::State&, GemmEngine, index_t, index_t, index_t);

void add(const std::string& name, Body body, GemmEngine engine, index_t b, index_t n, index_t r) {
  const std::string full = name + "/engine:" + compact::gemm_engine_name(engine) + "/B:" + std::to_string(b) +
                           "/n:" + std::to_string(n) + "/r:" + std::to_string(r);
  benchmark::RegisterBenchmark(full.c_str(), body, engine, b, n, r)->UseRealTime()->Unit(benchmark::kMillisecond);
}

void register_all() {
  const char* full_env = std::getenv("COMPACT_BENCH_FULL");
  const bool full = full_env != nullptr && std::string(full_env) == "1";
  for (const index_t b : {256, 4096}) {
    for (const index_t n : {1024, 4096}) {
      for (const index_t div : {8, 4, 2}) {
        const index_t r = n / div;
        if (b == 4096 && n == 4096 && div != 4 && !full) continue;
        for (const GemmEngine e : {GemmEngine::kEigen, GemmEngine::kBlas}) {
          if (!compact::gemm_engine_available(e)) continue;
          add("BM_Sketch_Cpu_Gaussian", BM_Sketch_Cpu<compact::Gaussian>, e, b, n, r);
          add("BM_Sketch_Cpu_Rademacher", BM_Sketch_Cpu<compact::Rademacher>, e, b, n, r);
          add("BM_Sketch_StoredP_Gemm", BM_Sketch_StoredP_Gemm, e, b, n, r);
          add("BM_Sketch_Naive_Gaussian", BM_Sketch_Naive_Gaussian, e, b, n, r);
          add("BM_Unsketch_Cpu_Gaussian", BM_Unsketch_Cpu<compact::Gaussian>, e, b, n, r);
          add("BM_Unsketch_Cpu_Rademacher", BM_Unsketch_Cpu<compact::Rademacher>, e, b, n, r);
          add("BM_Unsketch_StoredP_Gemm", BM_Unsketch_StoredP_Gemm, e, b, n, r);
          add("BM_Unsketch_Naive_Gaussian", BM_Unsketch_Naive_Gaussian, e, b, n, r);
        }
#if defined(COMPACT_BENCH_HAS_TORCH)
        add("BM_Sketch_Torch_Gaussian", BM_Sketch_Torch_Gaussian, GemmEngine::kEigen, b, n, r);
        add("BM_Unsketch_Torch_Gaussian", BM_Unsketch_Torch_Gaussian, GemmEngine::kEigen, b, n, r);
#endif
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
#if defined(COMPACT_BENCH_HAS_TORCH)
  // libtorch's lazy intra-op initialisation (on its first op) resets OpenMP's thread count for the calling thread,
  // which would leave every later OpenMP row (compact, Eigen's GEMM) on fewer threads than the rows before it. Pin
  // libtorch and OpenMP to the same count up front so that every row, ours and the baselines, uses the same cores.
  torch::set_num_threads(compact::cpu_max_threads());
#endif
  return compact_bench::run_benchmarks(argc, argv, register_all);
}
