// SPDX-License-Identifier: MIT
#pragma once
/// Eigen glue for the CPU backend: RowMatrix, mapping a MatrixView, and the thread partition helper.

#include <algorithm>
#include <memory>
#include <type_traits>

#include <Eigen/Core>

#include "compact/config.hpp"
#include "compact/core/view.hpp"
#include "compact/cpu/task_pool.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace compact {

/// Row-major dynamic Eigen matrix: the layout every CPU convenience takes and returns.
template <class Scalar>
using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace detail {

template <class Scalar>
using RowMap = Eigen::Map<RowMatrix<Scalar>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class Scalar>
using ConstRowMap = Eigen::Map<const RowMatrix<Scalar>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class Scalar>
ConstRowMap<Scalar> as_eigen(const MatrixView<const Scalar>& v) {
  return ConstRowMap<Scalar>(v.data, v.rows, v.cols, Eigen::OuterStride<>(v.row_stride));
}
template <class Scalar>
RowMap<Scalar> as_eigen(const MatrixView<Scalar>& v) {
  return RowMap<Scalar>(v.data, v.rows, v.cols, Eigen::OuterStride<>(v.row_stride));
}

template <class Scalar>
MatrixView<const Scalar> as_view(const Eigen::Ref<const RowMatrix<Scalar>>& m) {
  return MatrixView<const Scalar>(m.data(), m.rows(), m.cols(), m.outerStride());
}
template <class Scalar>
MatrixView<Scalar> as_mutable_view(Eigen::Ref<RowMatrix<Scalar>> m) {
  return MatrixView<Scalar>(m.data(), m.rows(), m.cols(), m.outerStride());
}

/// Runs body(task, thread_index) for task in [0, tasks) on compact's task pool (cpu/task_pool.hpp) with up to
/// omp_get_max_threads() threads, thread_index in [0, max_threads()); serially without OpenMP, inside an OpenMP
/// region or another call's task, or when `flops` is too small to pay for waking a team. The partition into tasks
/// never depends on the thread count, and every GEMM issued inside runs single-threaded (the thread's OpenMP thread
/// count is 1 while body runs, so Eigen's GEMM keeps its one-thread blocking), so results are bitwise identical
/// for any number of threads. Body must not throw.
template <class Body>
void parallel_tasks(index_t tasks, double flops, Body&& body) {
  int team = 1;
#if defined(_OPENMP)
  constexpr double kMinParallelFlops = 2.0e6;
  if (tasks > 1 && flops >= kMinParallelFlops && !omp_in_parallel() && !in_pool_task) {
    team = static_cast<int>(std::min<index_t>(omp_get_max_threads(), tasks));
  }
#endif
  (void)flops;
  const OneOpenMpThread one_thread;
  if (team > 1) {
    using B = std::remove_reference_t<Body>;
    const TaskPool::TaskFn call = [](void* ctx, index_t t, int slot) { (*static_cast<B*>(ctx))(t, slot); };
    in_pool_task = true;
    const bool ran = TaskPool::instance().try_run(tasks, team - 1, call,
                                                  const_cast<void*>(static_cast<const void*>(std::addressof(body))));
    in_pool_task = false;
    if (ran) return;
  }
  for (index_t t = 0; t < tasks; ++t) body(t, 0);
}

/// Number of threads parallel_tasks may use (size of per-thread scratch arrays).
inline int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace detail
}  // namespace compact
