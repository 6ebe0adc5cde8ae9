// SPDX-License-Identifier: MIT
/// Small calls on a loaded machine: compact's task pool against an OpenMP team (how parallel_tasks ran before).
///
/// Rows (wall time, fp32 SRHT sketch, all threads):
///   BM_Sketch_Cpu_Srht/team:pool/load:L/B:../n:../r:..  compact's projector: parallel_tasks on compact's task pool,
///                                                       whose workers sleep between calls (cpu/task_pool.hpp)
///   BM_Sketch_Omp_Srht/team:omp/load:L/B:../n:../r:..   the same tasks of 8 rows, the same row kernel and scratch,
///                                                       on an OpenMP team with schedule(static): the previous
///                                                       parallel_tasks
/// load:L runs L background threads that spin while the row is measured, L = the number of CPUs: a machine shared
/// with other processes. Run with OMP_WAIT_POLICY unset (libgomp's default, the case the pool exists for); with it
/// set to passive the OpenMP rows should match the pool's.
#include <benchmark/benchmark.h>

#include <compact/compact.hpp>

#include "bench_support.hpp"

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

using compact::index_t;
using compact_bench::Matrix;
using compact_bench::random_matrix;

const compact::SketchState kState{2024, 1, 0};

/// `count` threads spinning until destroyed.
class Spinners {
 public:
  explicit Spinners(int count) {
    for (int k = 0; k < count; ++k) {
      threads_.emplace_back([this] {
        unsigned long spins = 0;
        while (!stop_.load(std::memory_order_relaxed)) benchmark::DoNotOptimize(++spins);
      });
    }
  }
  Spinners(const Spinners&) = delete;
  Spinners& operator=(const Spinners&) = delete;
  ~Spinners() {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

void set_counters(benchmark::State& state, index_t b, index_t n, index_t r) {
  state.counters["rows/s"] = benchmark::Counter(double(b), benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(state.iterations() * b * (n + r) * index_t(sizeof(float)));
}

void BM_Sketch_Pool(benchmark::State& state, int load, index_t b, index_t n, index_t r) {
  const Matrix x = random_matrix(b, n, 1);
  Matrix z(b, r);
  const compact::Projector<compact::Cpu, compact::Srht, float> proj(n, r, kState);
  const Spinners spinners(load);
  for (auto _ : state) {
    proj.sketch(compact::detail::as_view<float>(x), compact::detail::as_mutable_view<float>(z));
    benchmark::DoNotOptimize(z.data());
  }
  set_counters(state, b, n, r);
}

#if defined(_OPENMP)
void BM_Sketch_Omp(benchmark::State& state, int load, index_t b, index_t n, index_t r) {
  const Matrix x = random_matrix(b, n, 1);
  Matrix z(b, r);
  const compact::Projector<compact::Cpu, compact::Srht, float> proj(n, r, kState);
  const index_t np = proj.padded_dim();
  const int log_np = compact::log2_pow2(np);
  const std::vector<std::int32_t> sample(proj.sample().begin(), proj.sample().end());
  // One transform buffer per thread, each starting on a cache line (np >= 16 floats is a multiple of 64 bytes).
  const std::size_t stride = static_cast<std::size_t>(std::max<index_t>(np, 16));
  const compact::detail::ScratchBuffer scratch(
      "BM_Sketch_Omp_Srht", "the per-thread buffers",
      static_cast<std::size_t>(omp_get_max_threads()) * stride * sizeof(float));
  const compact::CpuIsa isa = compact::active_cpu_isa();
  constexpr index_t kRows = compact::Projector<compact::Cpu, compact::Srht, float>::kRowsPerTask;
  const index_t tasks = (b + kRows - 1) / kRows;
  const Spinners spinners(load);
  for (auto _ : state) {
#pragma omp parallel
    {
      float* buf = static_cast<float*>(scratch.data()) + static_cast<std::size_t>(omp_get_thread_num()) * stride;
#pragma omp for schedule(static)
      for (index_t t = 0; t < tasks; ++t) {
        for (index_t row = t * kRows; row < std::min(b, (t + 1) * kRows); ++row) {
          compact::detail::srht_transform_row(x.data() + row * n, proj.signs().data(), n, buf, log_np, isa);
          compact::detail::srht_gather_row(buf, sample.data(), r, proj.scale(), z.data() + row * r, false, isa);
        }
      }
    }
    benchmark::DoNotOptimize(z.data());
  }
  set_counters(state, b, n, r);
}
#endif

void register_all() {
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  using Body = void (*)(benchmark::State&, int, index_t, index_t, index_t);
  const auto add = [](const std::string& name, Body body, int load, index_t b, index_t n, index_t r) {
    const std::string full = name + "/load:" + std::to_string(load) + "/B:" + std::to_string(b) +
                             "/n:" + std::to_string(n) + "/r:" + std::to_string(r);
    benchmark::RegisterBenchmark(full.c_str(), body, load, b, n, r)->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  for (const int load : {0, cpus}) {
    for (const index_t n : {1024, 4096}) {
      add("BM_Sketch_Cpu_Srht/team:pool", BM_Sketch_Pool, load, 256, n, n / 4);
#if defined(_OPENMP)
      add("BM_Sketch_Omp_Srht/team:omp", BM_Sketch_Omp, load, 256, n, n / 4);
#endif
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return compact_bench::run_benchmarks(argc, argv, register_all); }
