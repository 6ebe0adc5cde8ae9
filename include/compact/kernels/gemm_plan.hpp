// SPDX-License-Identifier: MIT
#pragma once
/// Row-major GEMMs as column-major BLAS calls (cuBLAS): the operand mapping of the dense projectors' panel GEMMs and
/// of compressed_grad.
///
/// A row-major R x C matrix with row stride ld is, read column-major with leading dimension ld, its C x R
/// transpose; so every row-major product is issued as the transposed product. The plans below are the only place
/// that mapping is written; the host tests execute them with a naive column-major GEMM.

#include "compact/config.hpp"

namespace compact {
namespace detail {

/// C = alpha op(A) op(B) + beta C, column-major, op(A) m x k, op(B) k x n; offsets in elements from the base
/// pointers the caller names for A, B and C.
struct GemmPlan {
  bool trans_a, trans_b;
  index_t m, n, k, lda, ldb, ldc;
  index_t a_offset, b_offset, c_offset;
};

/// Columns [j0, j0 + w) of z = x P with the panel P[:, j0:j0+w] stored row-major (n x w, leading dimension
/// ldp >= w) as A, x (batch x n, ld ldx) as B, z (batch x r, ld ldz) as C: Z^T[j0:j0+w, :] = Ppanel^T X^T. With
/// j0 = 0 and w = r the panel is all of P (a stored P of row stride ldp).
COMPACT_HOST_DEVICE inline GemmPlan sketch_panel_gemm(index_t batch, index_t n, index_t j0, index_t w, index_t ldp,
                                                      index_t ldx, index_t ldz) {
  return GemmPlan{false, false, w, batch, n, ldp, ldx, ldz, 0, 0, j0};
}

/// Columns [i0, i0 + h) of out = alpha g P^T + beta out with the panel P[i0:i0+h, :] stored row-major (h x r,
/// leading dimension ldp >= r) as A, g (m x r, ld ldg) as B, out (m x n, ld ldo) as C:
/// out^T[i0:i0+h, :] = alpha Ppanel G^T + beta out^T[i0:i0+h, :]. With i0 = 0 and h = n the panel is all of P.
COMPACT_HOST_DEVICE inline GemmPlan unsketch_panel_gemm(index_t m, index_t r, index_t i0, index_t h, index_t ldp,
                                                        index_t ldg, index_t ldo) {
  return GemmPlan{true, false, h, m, r, ldp, ldg, ldo, 0, 0, i0};
}

/// g = dy^T z + beta g with z (batch x r, ld ldz) as A, dy (batch x m, ld lddy) as B, g (m x r, ld ldg) as C:
/// g^T = Z^T DY + beta g^T.
COMPACT_HOST_DEVICE inline GemmPlan compressed_grad_gemm(index_t batch, index_t m, index_t r, index_t lddy, index_t ldz,
                                                         index_t ldg) {
  return GemmPlan{false, true, r, m, batch, ldz, lddy, ldg, 0, 0, 0};
}

}  // namespace detail
}  // namespace compact
