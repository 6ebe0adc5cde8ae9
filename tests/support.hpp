// SPDX-License-Identifier: MIT
#pragma once
/// Helpers shared by the CPU tests: seeded random matrices, the instruction-set cap, the message of a thrown
/// compact::error.

#include <compact/compact.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>

#include "error_of.hpp"
#include "projector_api.hpp"  // AsTuple

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace compact_test {

/// Every distribution of the CPU backend (compact::CpuDistributions): a test over all of them is
/// TEST_CASE_TEMPLATE_DEFINE("...", Dist, id) { ... } then TEST_CASE_TEMPLATE_APPLY(id,
/// compact_test::AllDistributions), and covers a distribution added to the list without an edit.
using AllDistributions = AsTuple<compact::CpuDistributions>::type;

/// rows x cols matrix of N(0, 1) samples from std::mt19937(seed), drawn in row-major order.
template <class Scalar>
compact::RowMatrix<Scalar> random_matrix(compact::index_t rows, compact::index_t cols, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  compact::RowMatrix<Scalar> m(rows, cols);
  for (compact::index_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<Scalar>(normal(gen));
  return m;
}

/// Every instruction set of the CPU kernels, lowest first (cpu_isa_supported says which this CPU runs).
inline const compact::CpuIsa kAllIsas[] = {compact::CpuIsa::kScalar, compact::CpuIsa::kAvx2, compact::CpuIsa::kAvx512};

/// Caps the CPU kernels' instruction set (compact::set_cpu_isa_cap) for its scope and restores the previous cap.
class CapGuard {
 public:
  explicit CapGuard(compact::CpuIsa cap) : previous_(compact::set_cpu_isa_cap(cap)) {}
  CapGuard(const CapGuard&) = delete;
  CapGuard& operator=(const CapGuard&) = delete;
  ~CapGuard() { compact::set_cpu_isa_cap(previous_); }

 private:
  compact::CpuIsa previous_;
};

/// Runs f with `threads` OpenMP threads (the team compact's pool uses), restoring the count after; without OpenMP, f
/// once as it is.
template <class F>
void with_threads(int threads, F&& f) {
#if defined(_OPENMP)
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(saved);
#else
  (void)threads;
  f();
#endif
}

/// The number of set bits of v.
inline int popcount(std::uint64_t v) {
  int c = 0;
  for (; v != 0; v &= v - 1) ++c;
  return c;
}

/// gamma_k = k u / (1 - k u) (Higham, Lemma 3.1) for the unit roundoff u of Scalar, computed in Real: the bound on the
/// relative forward error of a length-k dot product in Scalar arithmetic (Higham, Thm 3.5: gamma_k |a|.|b|).
template <class Scalar, class Real = double>
Real gamma(compact::index_t k) {
  const Real u = Real(std::numeric_limits<Scalar>::epsilon()) / 2;
  return Real(k) * u / (1 - Real(k) * u);
}

}  // namespace compact_test
