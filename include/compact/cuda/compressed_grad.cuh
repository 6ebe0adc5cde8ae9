// SPDX-License-Identifier: MIT
#pragma once
/// compressed_grad on the GPU: the weight gradient formed in the compressed space, g = dy^T z + beta g (cuBLAS),
/// with g in the activations' type or in fp32 (mixed precision: bf16/fp16 activations, fp32 accumulation buffer).

#include <cstddef>
#include <type_traits>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/api/view.hpp"
#include "compact/kernels/gemm_plan.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/gemm.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
/// g = dy^T z + beta g on the GPU: dy is B x m (output gradient), z is B x r (stored sketch), g is m x r, all
/// device memory, row-major, any row strides, g overlapping neither input.
///
/// Accum, the type of g, is Scalar or float: with bf16/fp16 activations and an fp32 g, micro-batches accumulate in
/// fp32 (beta = 1), as trainers keep gradient buffers. beta is fp32 whatever the types. With beta = 0 g is written
/// without being read. One cublasGemmEx (fp32 compute) on backend.stream, asynchronous, on the current device (the
/// device of backend.cublas). The accumulation inside the GEMM is fp32 unless the handle's math mode allows
/// reduced-precision reductions for 16-bit outputs (cuBLAS's default does; CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_
/// REDUCTION forbids it; an fp32 g is never affected).
template <class Scalar, class Accum>
void compressed_grad(const Cuda& backend, MatrixView<const Scalar> dy, MatrixView<const Scalar> z, MatrixView<Accum> g,
                     float beta = 0.0f) {
  static_assert(detail::is_cuda_scalar<Scalar>,
                "compact::compressed_grad(Cuda, ...): Scalar must be float, __half or __nv_bfloat16");
  static_assert(std::is_same_v<Accum, Scalar> || std::is_same_v<Accum, float>,
                "compact::compressed_grad(Cuda, ...): g must have the type of dy and z, or float");
  check_compressed_grad_args(dy, z, g);
  if (g.empty()) return;
  if (dy.rows == 0 && beta == 0.0f) {
    // Empty reduction: g = 0. All-zero bits are +0 for every type; no GEMM with k = 0 needed.
    check_cuda(cudaMemset2DAsync(g.data, static_cast<std::size_t>(g.row_stride) * sizeof(Accum), 0,
                                 static_cast<std::size_t>(g.cols) * sizeof(Accum), static_cast<std::size_t>(g.rows),
                                 backend.stream),
               "compressed_grad: cudaMemset2DAsync");
    return;
  }
  const detail::GemmPlan plan =
      detail::compressed_grad_gemm(dy.rows, g.rows, g.cols, dy.row_stride, z.row_stride, g.row_stride);
  detail::check_gemm_plan("compressed_grad", backend, plan);
  detail::gemm_plan<Scalar, Accum>("compressed_grad", backend, plan, 1.0f, z.data, dy.data, beta, g.data);
}

}  // namespace compact
