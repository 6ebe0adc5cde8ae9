// SPDX-License-Identifier: MIT
#pragma once
/// compressed_grad on the GPU: the weight gradient formed in the compressed space, g = dy^T z + beta g (cuBLAS).

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/launch_index.hpp"
#include "compact/core/view.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/gemm.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {

/// g = dy^T z + beta g on the GPU: dy is B x m (output gradient), z is B x r (stored sketch), g is m x r, all
/// device memory, row-major, any row strides, g overlapping neither input. beta = 1 accumulates the micro-batches
/// of one window; with beta = 0 g is written without being read. One cublasGemmEx (fp32 compute) on
/// backend.stream, asynchronous.
template <class Scalar>
void compressed_grad(const Cuda& backend, MatrixView<const Scalar> dy, MatrixView<const Scalar> z, MatrixView<Scalar> g,
                     Scalar beta = Scalar(0.0f)) {
  static_assert(detail::is_cuda_scalar<Scalar>,
                "compact::compressed_grad(Cuda, ...): Scalar must be float, __half or __nv_bfloat16");
  detail::check_compressed_grad_args(dy, z, g);
  if (g.empty()) return;
  const float b = detail::CudaScalar<Scalar>::to_float(beta);
  if (dy.rows == 0 && b == 0.0f) {
    // Empty reduction: g = 0. All-zero bits are +0 for every Scalar; no GEMM with k = 0 needed.
    detail::check_cuda(cudaMemset2DAsync(g.data, static_cast<std::size_t>(g.row_stride) * sizeof(Scalar), 0,
                                         static_cast<std::size_t>(g.cols) * sizeof(Scalar),
                                         static_cast<std::size_t>(g.rows), backend.stream),
                       "compressed_grad: cudaMemset2DAsync");
    return;
  }
  detail::gemm_plan<Scalar>(
      "compressed_grad", backend,
      detail::compressed_grad_gemm(dy.rows, g.rows, g.cols, dy.row_stride, z.row_stride, g.row_stride), 1.0f, z.data,
      dy.data, b, g.data);
}

}  // namespace compact
