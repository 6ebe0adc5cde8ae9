// SPDX-License-Identifier: MIT
#pragma once
/// The optional optimized-BLAS GEMM of the CPU backend: row-major C = alpha A op(B) + beta C through CBLAS.
///
/// Opt-in: define COMPACT_USE_BLAS and link a CBLAS (CMake: -DCOMPACT_USE_BLAS=ON finds OpenBLAS, see
/// cmake/CompactBlas.cmake). Without it the CPU backend runs Eigen's own GEMM and this header declares nothing.
/// The BLAS GEMM is always called from outside compact's OpenMP regions, so the BLAS's own threads run it (no
/// nesting, no oversubscription); OpenBLAS splits only the rows and columns of C between its threads, never the
/// k sum, so each element's bits do not depend on its thread count (tests/cpu/test_blas.cpp checks this).

#include <climits>
#include <type_traits>

#include "compact/config.hpp"

#if defined(COMPACT_USE_BLAS)
#include <cblas.h>
#endif

namespace compact {
namespace detail {

#if defined(COMPACT_USE_BLAS)

/// True: this build routes the dense CPU GEMMs to CBLAS.
inline constexpr bool kUseBlas = true;

/// C (m x n) = alpha A (m x k) op(B) + beta C, all row-major; op(B) = B (k x n, ldb >= n) or, with trans_b,
/// B^T with B stored n x k (ldb >= k). Sizes must fit the BLAS integer; beta = 0 never reads C.
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

#else

/// False: this build runs Eigen's own GEMM (define COMPACT_USE_BLAS to use CBLAS).
inline constexpr bool kUseBlas = false;

#endif

}  // namespace detail
}  // namespace compact
