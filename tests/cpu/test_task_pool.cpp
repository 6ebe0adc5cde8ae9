// SPDX-License-Identifier: MIT
/// compact's task pool (cpu/task_pool.hpp) behind detail::parallel_tasks: every task once, nesting, concurrent
/// callers, one OpenMP thread inside tasks, and the caller's settings left as they were.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include <atomic>
#include <thread>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

using compact::index_t;

/// Sets the OpenMP thread count for the scope (no-op without OpenMP).
class Threads {
 public:
  explicit Threads(int n) {
#if defined(_OPENMP)
    saved_ = omp_get_max_threads();
    omp_set_num_threads(n);
#else
    (void)n;
#endif
  }
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;
  ~Threads() {
#if defined(_OPENMP)
    omp_set_num_threads(saved_);
#endif
  }

 private:
  int saved_ = 1;
};

int openmp_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

constexpr double kBigCall = 1e12;  // flops estimate far above the serial threshold

}  // namespace

TEST_CASE("parallel_tasks runs every task exactly once, on slots below max_threads, for any team size") {
  for (int threads : {1, 2, 3, 4}) {
    const Threads t(threads);
    for (index_t tasks : {index_t{0}, index_t{1}, index_t{2}, index_t{7}, index_t{1000}}) {
      std::vector<std::atomic<int>> runs(static_cast<std::size_t>(tasks));
      std::atomic<int> bad_slot{0};
      const int max_threads = compact::cpu_max_threads();  // the size of per-thread scratch arrays
      compact::detail::parallel_tasks(tasks, kBigCall, [&](index_t task, int slot) {
        runs[static_cast<std::size_t>(task)].fetch_add(1);
        if (slot < 0 || slot >= max_threads) bad_slot.fetch_add(1);
      });
      CAPTURE(threads);
      CAPTURE(tasks);
      int wrong = 0;
      for (const auto& r : runs) wrong += r.load() != 1;
      CHECK(wrong == 0);
      CHECK(bad_slot.load() == 0);
    }
  }
}

TEST_CASE("inside a task OpenMP code runs on one thread, and the caller's thread count is restored") {
  const Threads t(3);
  std::atomic<int> above_one{0};
  compact::detail::parallel_tasks(64, kBigCall, [&](index_t, int) {
    if (openmp_threads() != 1) above_one.fetch_add(1);
  });
  CHECK(above_one.load() == 0);
  CHECK(openmp_threads() == 3);
}

TEST_CASE("a parallel_tasks call inside a task runs serially and completes") {
  const Threads t(2);
  std::atomic<int> inner{0};
  compact::detail::parallel_tasks(8, kBigCall, [&](index_t, int) {
    compact::detail::parallel_tasks(5, kBigCall, [&](index_t, int slot) {
      inner.fetch_add(1);
      CHECK(slot == 0);
    });
  });
  CHECK(inner.load() == 40);
}

TEST_CASE("calls from several threads at once all complete (a caller that finds the pool busy runs serially)") {
  const Threads t(2);
  std::atomic<long> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&sum] {
      for (int rep = 0; rep < 50; ++rep) {
        compact::detail::parallel_tasks(100, kBigCall, [&](index_t task, int) { sum.fetch_add(task); });
      }
    });
  }
  for (std::thread& c : callers) c.join();
  CHECK(sum.load() == 4L * 50L * (99L * 100L / 2L));
}

TEST_CASE("the SRHT and dense sketches give the same bits on 1, 2 and 3 threads") {
  const auto x = compact::RowMatrix<float>::Random(70, 300).eval();
  const compact::Projector<compact::Cpu, compact::Srht, float> srht(300, 64, compact::SketchState{1, 2, 3});
  const compact::Projector<compact::Cpu, compact::Gaussian, float> gauss(300, 64, compact::SketchState{1, 2, 3});
  compact::RowMatrix<float> s1, g1;
  {
    const Threads t(1);
    s1 = srht.sketch(x);
    g1 = gauss.sketch(x);
  }
  for (int threads : {2, 3}) {
    const Threads t(threads);
    CHECK(srht.sketch(x) == s1);
    CHECK(gauss.sketch(x) == g1);
  }
}
