// SPDX-License-Identifier: MIT
#pragma once
/// The CPU backend's thread partition: parallel_tasks runs a call's tasks on compact's task pool (cpu/task_pool.hpp)
/// with results independent of the thread count; team_size and cpu_max_threads (cpu/backend.hpp) size per-thread
/// buffers.

#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/task_pool.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace compact {
namespace detail {

/// Whether parallel_tasks(tasks, flops, ...) runs on compact's task pool (else on the calling thread alone): not
/// without OpenMP (the thread count is OpenMP's), inside an OpenMP region or another call's task, or when `flops`
/// is too small to pay for waking a team.
inline bool uses_team(index_t tasks, double flops) {
#if defined(_OPENMP)
  constexpr double kMinParallelFlops = 2.0e6;
  return tasks > 1 && flops >= kMinParallelFlops && omp_get_max_threads() > 1 && !omp_in_parallel() && !in_pool_task;
#else
  (void)tasks;
  (void)flops;
  return false;
#endif
}

/// The largest thread index + 1 that parallel_tasks(tasks, flops, ..., max_team) passes to its body.
inline int team_size(index_t tasks, double flops, int max_team = std::numeric_limits<int>::max()) {
  if (!uses_team(tasks, flops)) return 1;
  return static_cast<int>(std::min<index_t>(std::min(cpu_max_threads(), max_team), tasks));
}

/// Runs body(task, thread_index) for task in [0, tasks) on compact's task pool (cpu/task_pool.hpp) with up to
/// omp_get_max_threads() threads, thread_index in [0, team_size(tasks, flops)); serially without OpenMP, inside an
/// OpenMP region or another call's task, or when `flops` is too small to pay for waking a team. The partition into
/// tasks never depends on the thread count, and every GEMM issued inside runs single-threaded (the thread's OpenMP
/// thread count is 1 while body runs, so Eigen's GEMM keeps its one-thread blocking), so results are bitwise identical
/// for any number of threads. Body must not throw. `max_team` caps the team (a caller with per-thread buffers for at
/// most that many threads).
template <class Body>
void parallel_tasks(index_t tasks, double flops, Body&& body, int max_team = std::numeric_limits<int>::max()) {
  const int team = team_size(tasks, flops, max_team);
  const OneOpenMpThread one_thread;
  if (team > 1) {
    using B = std::remove_reference_t<Body>;
    const TaskPool::TaskFn call = [](void* ctx, index_t t, int slot) { (*static_cast<B*>(ctx))(t, slot); };
    in_pool_task = true;
    TaskPool* pool = TaskPool::instance();
    const bool ran =
        pool != nullptr &&
        pool->try_run(tasks, team - 1, call, const_cast<void*>(static_cast<const void*>(std::addressof(body))));
    in_pool_task = false;
    if (ran) return;
  }
  for (index_t t = 0; t < tasks; ++t) body(t, 0);
}

}  // namespace detail
}  // namespace compact
