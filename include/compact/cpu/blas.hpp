// SPDX-License-Identifier: MIT
#pragma once
/// The GEMM engine of the CPU backend: Eigen's own GEMM, or an optimized CBLAS (OpenBLAS) with COMPACT_USE_BLAS.
///
/// Opt-in BLAS: define COMPACT_USE_BLAS and link a CBLAS (CMake: -DCOMPACT_USE_BLAS=ON finds OpenBLAS, see
/// cmake/CompactBlas.cmake). The dense projectors split every product into a fixed grid of tiles and run one
/// single-threaded GEMM per tile on compact's task pool (`serial_gemm`), so the bits never depend on a thread
/// count. OpenBLAS's own threaded GEMM does not have that property (its k blocking differs between one and several
/// threads), and calling a threaded OpenBLAS from several OpenMP threads would oversubscribe the cores; so while a
/// projector runs, `SerialBlasScope` sets OpenBLAS to one thread and restores the previous count afterwards. A
/// program that calls OpenBLAS from another thread at the same moment sees that call run single-threaded (same
/// results, only slower). Other CBLAS libraries must be linked in their sequential variant.

#include <climits>
#include <mutex>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/cpu/eigen.hpp"

#if defined(COMPACT_USE_BLAS)
#include <cblas.h>
#endif

namespace compact {
namespace detail {

#if defined(COMPACT_USE_BLAS)

/// True: this build routes the dense CPU GEMMs to CBLAS.
inline constexpr bool kUseBlas = true;

/// C (m x n) = alpha A (m x k) op(B) + beta C through CBLAS, all row-major; op(B) = B (k x n, ldb >= n) or, with
/// trans_b, B^T with B stored n x k (ldb >= k). Sizes must fit the 32-bit BLAS integer; beta = 0 never reads C.
/// Runs on the BLAS's threads (use SerialBlasScope for one thread).
template <class Scalar>
void blas_gemm(index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda, const Scalar* b,
               index_t ldb, bool trans_b, Scalar beta, Scalar* c, index_t ldc) {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::detail::blas_gemm: Scalar must be float or double");
  constexpr index_t kMax = INT_MAX;
  COMPACT_REQUIRE(m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
                  "blas_gemm: m = " << m << ", n = " << n << ", k = " << k << " or a leading dimension (" << lda << ", "
                                    << ldb << ", " << ldc << ") exceeds the 32-bit BLAS integer");
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<Scalar, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  }
}

/// While alive, OpenBLAS runs every call on the calling thread; the previous thread count is restored when the
/// last live scope ends (scopes may overlap across threads: a process-wide count decides who saves and restores).
/// A no-op for other CBLAS libraries (link their sequential variant) and without COMPACT_USE_BLAS.
class SerialBlasScope {
 public:
#if defined(OPENBLAS_VERSION)
  SerialBlasScope() {
    Shared& s = shared();
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (s.depth++ == 0) {
      s.saved = openblas_get_num_threads();
      if (s.saved != 1) openblas_set_num_threads(1);
    }
  }
  ~SerialBlasScope() {
    Shared& s = shared();
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (--s.depth == 0 && s.saved != 1) openblas_set_num_threads(s.saved);
  }
#else
  SerialBlasScope() {}
  ~SerialBlasScope() {}  // NOLINT(modernize-use-equals-default)
#endif
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;

 private:
#if defined(OPENBLAS_VERSION)
  struct Shared {
    std::mutex mutex;
    int depth = 0;
    int saved = 1;
  };
  static Shared& shared() {
    static Shared s;
    return s;
  }
#endif
};

#else

/// False: this build runs Eigen's own GEMM (define COMPACT_USE_BLAS to use CBLAS).
inline constexpr bool kUseBlas = false;

/// Without COMPACT_USE_BLAS there is no BLAS thread pool to serialize.
class SerialBlasScope {
 public:
  SerialBlasScope() {}   // user-provided: a scope object, never "unused"
  ~SerialBlasScope() {}  // NOLINT(modernize-use-equals-default)
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;
};

#endif

/// C (m x n) = alpha A op(B) + beta C on the calling thread only, row-major raw pointers as blas_gemm (beta = 0
/// never reads C). Eigen's GEMM, always with its one-thread blocking, or CBLAS with COMPACT_USE_BLAS (inside a
/// SerialBlasScope). A pure function of its arguments: the same call gives the same bits on any thread.
template <class Scalar>
void serial_gemm(index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda, const Scalar* b,
                 index_t ldb, bool trans_b, Scalar beta, Scalar* c, index_t ldc) {
#if defined(COMPACT_USE_BLAS)
  blas_gemm<Scalar>(m, n, k, alpha, a, lda, b, ldb, trans_b, beta, c, ldc);
#else
  const ConstRowMap<Scalar> A(a, m, k, Eigen::OuterStride<>(lda));
  RowMap<Scalar> C(c, m, n, Eigen::OuterStride<>(ldc));
  const auto product = [&](auto&& op_b) {
    if (beta == Scalar(0)) {
      C.noalias() = alpha * (A * op_b);
    } else {
      if (beta != Scalar(1)) C *= beta;
      C.noalias() += alpha * (A * op_b);
    }
  };
  const auto run = [&] {
    if (trans_b) {
      product(ConstRowMap<Scalar>(b, n, k, Eigen::OuterStride<>(ldb)).transpose());
    } else {
      product(ConstRowMap<Scalar>(b, k, n, Eigen::OuterStride<>(ldb)));
    }
  };
  // Eigen would split the product over omp_get_max_threads() threads, with a k blocking that depends on their
  // number; with this thread's OpenMP thread count at 1 it runs here with the one-thread blocking, as on compact's
  // tasks, and forms no team (whose closing barrier could wait for a descheduled thread on a loaded machine).
  const OneOpenMpThread one_thread;
  run();
#endif
}

}  // namespace detail
}  // namespace compact
