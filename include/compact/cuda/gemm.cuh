// SPDX-License-Identifier: MIT
#pragma once
/// Row-major GEMM on the device through cublasGemmEx with fp32 accumulation (CUBLAS_COMPUTE_32F).

#include <climits>

#include <cublas_v2.h>

#include "compact/config.hpp"
#include "compact/core/launch_index.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

/// cuBLAS takes int sizes: refuses any size or leading dimension above INT_MAX, naming it.
inline void check_int(const char* fn, const char* what, index_t v) {
  COMPACT_REQUIRE(v <= INT_MAX, fn << ": " << what << " = " << v << " exceeds cuBLAS's int range " << INT_MAX);
}

/// C = alpha op(A) op(B) + beta C in cuBLAS's column-major terms (m x n result, inner dimension k), all three
/// matrices of type Scalar, fp32 compute, alpha and beta in fp32. Row-major callers pass their matrices as the
/// transposes cuBLAS sees. Issued on backend.stream through backend.cublas; asynchronous.
template <class Scalar>
void gemm_ex(const char* fn, const Cuda& backend, cublasOperation_t op_a, cublasOperation_t op_b, index_t m, index_t n,
             index_t k, float alpha, const Scalar* a, index_t lda, const Scalar* b, index_t ldb, float beta, Scalar* c,
             index_t ldc) {
  COMPACT_REQUIRE(backend.cublas != nullptr, fn << ": the Cuda backend has no cuBLAS handle (Cuda::cublas is null)");
  check_int(fn, "m", m);
  check_int(fn, "n", n);
  check_int(fn, "k", k);
  check_int(fn, "lda", lda);
  check_int(fn, "ldb", ldb);
  check_int(fn, "ldc", ldc);
  check_cublas(cublasSetStream(backend.cublas, backend.stream), "cublasSetStream");
  check_cublas(cublasSetPointerMode(backend.cublas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  constexpr cudaDataType_t type = CudaScalar<Scalar>::kType;
  check_cublas(cublasGemmEx(backend.cublas, op_a, op_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                            &alpha, a, type, static_cast<int>(lda), b, type, static_cast<int>(ldb), &beta, c, type,
                            static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

/// Checks, before any work of an operation is enqueued, what gemm_ex would refuse for `p` (a missing cuBLAS handle,
/// sizes or leading dimensions beyond int), so an operation fails whole rather than after its first panel.
inline void check_gemm_plan(const char* fn, const Cuda& backend, const GemmPlan& p) {
  COMPACT_REQUIRE(backend.cublas != nullptr, fn << ": the Cuda backend has no cuBLAS handle (Cuda::cublas is null)");
  check_int(fn, "m", p.m);
  check_int(fn, "n", p.n);
  check_int(fn, "k", p.k);
  check_int(fn, "lda", p.lda);
  check_int(fn, "ldb", p.ldb);
  check_int(fn, "ldc", p.ldc);
}

/// Issues a GemmPlan (core/launch_index.hpp) on A = a, B = b, C = c with fp32 alpha, beta.
template <class Scalar>
void gemm_plan(const char* fn, const Cuda& backend, const GemmPlan& p, float alpha, const Scalar* a, const Scalar* b,
               float beta, Scalar* c) {
  gemm_ex<Scalar>(fn, backend, p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, p.m, p.n,
                  p.k, alpha, a + p.a_offset, p.lda, b + p.b_offset, p.ldb, beta, c + p.c_offset, p.ldc);
}

}  // namespace detail
}  // namespace compact
