// SPDX-License-Identifier: MIT
#pragma once
/// Eigen glue for the CPU backend: RowMatrix, mapping a MatrixView, and the thread partition helper.

// GCC 12 reports a false positive inside Eigen's AVX-512 kernels (`__Y may be used uninitialized` at -O3, `__Y is used
// uninitialized` at -O2, in avx512fintrin.h inlined from Eigen's GEMM packing; GCC bug 105593) whenever AVX-512 is
// enabled, e.g. by -march=native on an AVX-512 machine. The warning is silenced for the lines of Eigen's headers only:
// GCC applies a diagnostic pragma to every location of an inlining chain, so code outside this region (the library's
// and the user's) keeps the warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "compact/config.hpp"
#include "compact/core/view.hpp"

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

/// Runs body(task, thread_index) for task in [0, tasks) on the OpenMP team (serially without OpenMP, or when
/// `flops` is too small to pay for a team). The partition into tasks never depends on the thread count, and every
/// GEMM issued inside runs single-threaded (Eigen detects the enclosing parallel region), so results are bitwise
/// identical for any number of threads.
template <class Body>
void parallel_tasks(index_t tasks, double flops, Body&& body) {
#if defined(_OPENMP)
  constexpr double kMinParallelFlops = 2.0e6;
  if (tasks > 1 && flops >= kMinParallelFlops && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel
    {
      const int thread = omp_get_thread_num();
#pragma omp for schedule(static)
      for (index_t t = 0; t < tasks; ++t) body(t, thread);
    }
    return;
  }
#endif
  (void)flops;
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
