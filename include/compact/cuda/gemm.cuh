// SPDX-License-Identifier: MIT
#pragma once
/// Row-major GEMMs on the device through cublasGemmEx with fp32 accumulation (CUBLAS_COMPUTE_32F; fp32 arithmetic
/// throughout for fp32 operands, whatever the handle's TF32 setting), on the caller's cuBLAS handle without
/// disturbing its workspace, pointer mode or math mode.

#include <climits>
#include <cstdint>
#include <type_traits>

#include <cublas_v2.h>

#include "compact/config.hpp"
#include "compact/core/gemm_plan.hpp"
#include "compact/core/workspace.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

/// cuBLAS takes int sizes: refuses any size or leading dimension above INT_MAX, naming it.
inline void check_int(const char* fn, const char* what, index_t v) {
  COMPACT_REQUIRE(v <= INT_MAX, fn << ": " << what << " = " << v << " exceeds cuBLAS's int range " << INT_MAX);
}

/// What a GEMM needs of the backend: a cuBLAS handle, and a cuBLAS workspace (when one is named) aligned as
/// cublasSetWorkspace requires.
inline void check_cublas_backend(const char* fn, const Cuda& backend) {
  COMPACT_REQUIRE(backend.cublas != nullptr, fn << ": the Cuda backend has no cuBLAS handle (Cuda::cublas is null)");
  const std::uintptr_t ws = reinterpret_cast<std::uintptr_t>(backend.cublas_workspace);
  COMPACT_REQUIRE(ws % kWorkspaceAlign == 0, fn << ": argument backend.cublas_workspace at address 0x" << std::hex << ws
                                                << std::dec << " is not " << kWorkspaceAlign
                                                << "-byte aligned, as cublasSetWorkspace requires (address % "
                                                << kWorkspaceAlign << " = " << ws % kWorkspaceAlign << ")");
}

/// The math mode compact runs a GEMM of fp32 operands under, given the handle's. cublasGemmEx with
/// CUBLAS_COMPUTE_32F follows the handle's math mode: CUBLAS_TF32_TENSOR_OP_MATH (which PyTorch sets when
/// torch.backends.cuda.matmul.allow_tf32 is on), the deprecated CUBLAS_TENSOR_OP_MATH (fp16 down-conversion) and
/// CUBLAS_FP32_EMULATED_BF16X9_MATH would run an fp32 sketch with fewer than fp32's bits (TF32: 10 mantissa bits,
/// a relative error of 2^-11 per product). compact promises fp32 arithmetic for fp32 operands, so it keeps
/// CUBLAS_PEDANTIC_MATH and the flag bits (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) and makes any other
/// mode CUBLAS_DEFAULT_MATH. (CUBLAS_COMPUTE_32F_PEDANTIC would pin it too, but may also rule out the default
/// algorithms; the default math mode keeps cuBLAS's ordinary fp32 kernels.)
inline cublasMath_t fp32_math_mode(cublasMath_t caller) {
  const unsigned bits = static_cast<unsigned>(caller);
  const unsigned mode = bits & 0xFu, flags = bits & ~0xFu;
  const unsigned kept = mode == static_cast<unsigned>(CUBLAS_PEDANTIC_MATH) ? mode : 0u;
  return static_cast<cublasMath_t>(flags | kept);
}

/// The caller's cuBLAS handle, bound to backend.stream for compact's calls while the binding lives.
///
/// cublasSetStream is called only when the handle is on another stream, because it resets the handle's workspace
/// to cuBLAS's pool; after it, backend.cublas_workspace (when set: the workspace of backend.stream, see Cuda) is
/// given back with cublasSetWorkspace. The handle stays on backend.stream afterwards. The pointer mode is set to
/// host (alpha and beta live on the host) and, for fp32 operands, the math mode to fp32_math_mode(); both are
/// restored when the binding ends.
class CublasBinding {
 public:
  CublasBinding(const Cuda& backend, bool fp32_operands) : handle_(backend.cublas) {
    cudaStream_t current = nullptr;
    check_cublas(cublasGetStream(handle_, &current), "cublasGetStream");
    if (current != backend.stream) {
      check_cublas(cublasSetStream(handle_, backend.stream), "cublasSetStream");
      if (backend.cublas_workspace != nullptr) {
        check_cublas(cublasSetWorkspace(handle_, backend.cublas_workspace, backend.cublas_workspace_bytes),
                     "cublasSetWorkspace (the caller's, after cublasSetStream reset it)");
      }
    }
    check_cublas(cublasGetPointerMode(handle_, &mode_), "cublasGetPointerMode");
    if (fp32_operands) {
      check_cublas(cublasGetMathMode(handle_, &math_), "cublasGetMathMode");
      pinned_ = fp32_math_mode(math_);
      if (pinned_ != math_) check_cublas(cublasSetMathMode(handle_, pinned_), "cublasSetMathMode (fp32 math)");
    }
    if (mode_ != CUBLAS_POINTER_MODE_HOST) {
      check_cublas(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    }
  }
  ~CublasBinding() {
    if (mode_ != CUBLAS_POINTER_MODE_HOST) cublasSetPointerMode(handle_, mode_);
    if (pinned_ != math_) cublasSetMathMode(handle_, math_);
  }
  CublasBinding(const CublasBinding&) = delete;
  CublasBinding& operator=(const CublasBinding&) = delete;

 private:
  cublasHandle_t handle_;
  cublasPointerMode_t mode_ = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math_ = CUBLAS_DEFAULT_MATH;
  cublasMath_t pinned_ = CUBLAS_DEFAULT_MATH;
};

/// C = alpha op(A) op(B) + beta C in cuBLAS's column-major terms (m x n result, inner dimension k): A and B of type
/// In, C of type Out (In, or float with In = __half or __nv_bfloat16), fp32 compute, alpha and beta in fp32.
/// Row-major callers pass their matrices as the transposes cuBLAS sees. Issued on backend.stream through
/// backend.cublas (see CublasBinding); asynchronous.
template <class In, class Out>
void gemm_ex(const char* fn, const Cuda& backend, cublasOperation_t op_a, cublasOperation_t op_b, index_t m, index_t n,
             index_t k, float alpha, const In* a, index_t lda, const In* b, index_t ldb, float beta, Out* c,
             index_t ldc) {
  static_assert(std::is_same_v<In, Out> || std::is_same_v<Out, float>,
                "compact::detail::gemm_ex: the output type must be the input type or float");
  check_cublas_backend(fn, backend);
  check_int(fn, "m", m);
  check_int(fn, "n", n);
  check_int(fn, "k", k);
  check_int(fn, "lda", lda);
  check_int(fn, "ldb", ldb);
  check_int(fn, "ldc", ldc);
  const CublasBinding binding(backend, std::is_same_v<In, float>);
  check_cublas(
      cublasGemmEx(backend.cublas, op_a, op_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha, a,
                   CudaScalar<In>::kType, static_cast<int>(lda), b, CudaScalar<In>::kType, static_cast<int>(ldb), &beta,
                   c, CudaScalar<Out>::kType, static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

/// Checks, before any work of an operation is enqueued, what gemm_ex would refuse for `p` (a missing cuBLAS handle,
/// a misaligned cuBLAS workspace, sizes or leading dimensions beyond int), so an operation fails whole rather than
/// after its first panel.
inline void check_gemm_plan(const char* fn, const Cuda& backend, const GemmPlan& p) {
  check_cublas_backend(fn, backend);
  check_int(fn, "m", p.m);
  check_int(fn, "n", p.n);
  check_int(fn, "k", p.k);
  check_int(fn, "lda", p.lda);
  check_int(fn, "ldb", p.ldb);
  check_int(fn, "ldc", p.ldc);
}

/// Issues a GemmPlan (core/gemm_plan.hpp) on A = a, B = b, C = c with fp32 alpha, beta.
template <class In, class Out>
void gemm_plan(const char* fn, const Cuda& backend, const GemmPlan& p, float alpha, const In* a, const In* b,
               float beta, Out* c) {
  gemm_ex<In, Out>(fn, backend, p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, p.m, p.n,
                   p.k, alpha, a + p.a_offset, p.lda, b + p.b_offset, p.ldb, beta, c + p.c_offset, p.ldc);
}

}  // namespace detail
}  // namespace compact
