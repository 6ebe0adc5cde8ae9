// SPDX-License-Identifier: MIT
#pragma once
/// The BLAS GEMM engine (GemmEngine::kBlas, cpu/gemm_engine.hpp): including this header in any one translation unit
/// registers the CBLAS it is compiled against (OpenBLAS, or any CBLAS in its sequential variant) as the process's
/// BLAS engine, which also makes kBlas the default engine of dense projectors constructed afterwards.
///
/// Needs cblas.h and the BLAS library at link time (CMake: link compact::blas, or configure compact with
/// -DCOMPACT_USE_BLAS=ON; without CMake: -I<dir of cblas.h> -lopenblas). The registration runs during static
/// initialization; a program that constructs projectors before main, or that includes this header only in an
/// object of a static library that the linker may drop, calls compact::register_cblas() first.
///
/// This header only adds definitions (the CBLAS wrappers and the registration); it changes no function of the rest
/// of compact, so translation units with and without it link into one program without an ODR violation.

#include <cblas.h>

#include "compact/config.hpp"
#include "compact/cpu/gemm_engine.hpp"

namespace compact {
namespace detail {

/// CBLAS's row-major GEMM behind BlasTable::sgemm / dgemm (sizes already checked by blas_gemm).
template <class Scalar>
void cblas_gemm_row_major(index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda, const Scalar* b,
                          index_t ldb, bool trans_b, Scalar beta, Scalar* c, index_t ldc) {
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<Scalar, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  }
}

/// CBLAS's row-major C = alpha A^T B + beta C behind BlasTable::sgemm_tn / dgemm_tn (A stored k x m).
template <class Scalar>
void cblas_gemm_tn_row_major(index_t m, index_t n, index_t k, Scalar alpha, const Scalar* a, index_t lda,
                             const Scalar* b, index_t ldb, Scalar beta, Scalar* c, index_t ldc) {
  if constexpr (std::is_same_v<Scalar, float>) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  }
}

#if defined(OPENBLAS_VERSION)
inline int cblas_get_threads() { return openblas_get_num_threads(); }
inline void cblas_set_threads(int threads) { openblas_set_num_threads(threads); }
/// This CBLAS with OpenBLAS's thread-count functions (SerialBlasScope runs it on one thread).
inline constexpr BlasTable kCblasTable{
    &cblas_gemm_row_major<float>, &cblas_gemm_row_major<double>,   &cblas_get_threads,
    &cblas_set_threads,           &cblas_gemm_tn_row_major<float>, &cblas_gemm_tn_row_major<double>};
#else
/// This CBLAS (no thread-count functions: link its sequential variant).
inline constexpr BlasTable kCblasTable{
    &cblas_gemm_row_major<float>,    &cblas_gemm_row_major<double>,   nullptr, nullptr,
    &cblas_gemm_tn_row_major<float>, &cblas_gemm_tn_row_major<double>};
#endif

/// The registration at static initialization (one per program: an inline variable).
inline const bool cblas_registered = register_blas_table(&kCblasTable);

}  // namespace detail

/// Registers this CBLAS as the BLAS engine now (the static initialization above does it too; see the file comment).
inline void register_cblas() { detail::register_blas_table(&detail::kCblasTable); }

}  // namespace compact
