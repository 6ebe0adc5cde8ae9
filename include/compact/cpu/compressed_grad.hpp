// SPDX-License-Identifier: MIT
#pragma once
/// compressed_grad on the CPU: the weight gradient formed in the compressed space, g = dy^T z + beta g.

#include <algorithm>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/api/view.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/parallel.hpp"
#include "compact/cpu/gemm_engine.hpp"

namespace compact {

/// g = dy^T z + beta g: dy is B x m (output gradient), z is B x r (stored sketch), g is m x r. beta = 1
/// accumulates the micro-batches of one window; with beta = 0 g is written without being read. Runs on `engine`
/// (default: default_gemm_engine(), the BLAS when one is registered): one single-threaded GEMM per fixed block of
/// kRows rows of g on compact's task pool, so the result is bitwise independent of the thread count.
template <class Scalar>
void compressed_grad(Cpu, MatrixView<const Scalar> dy, MatrixView<const Scalar> z, MatrixView<Scalar> g,
                     Scalar beta = Scalar(0), GemmEngine engine = default_gemm_engine()) {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::compressed_grad(Cpu, ...): Scalar must be float or double");
  check_compressed_grad_args(dy, z, g);
  detail::check_gemm_engine("compressed_grad", engine, dy.rows);
  // The GEMMs run inside tasks, which must not throw: every size the BLAS takes is checked here.
  COMPACT_REQUIRE(engine != GemmEngine::kBlas ||
                      std::max({g.cols, dy.row_stride, z.row_stride, g.row_stride}) <= detail::kBlasMaxExtent,
                  "compressed_grad: r = " << g.cols << " or a row stride of dy (" << dy.row_stride << "), z ("
                                          << z.row_stride << ") or g (" << g.row_stride << ") exceeds "
                                          << detail::kBlasMaxExtent << ", the largest size of the 32-bit BLAS");
  if (g.empty()) return;
  constexpr index_t kRows = 128;
  const index_t tasks = (g.rows + kRows - 1) / kRows;
  const detail::SerialBlasScope serial_blas(engine);
  detail::parallel_tasks(tasks, 2.0 * double(dy.rows) * double(g.rows) * double(g.cols), [&](index_t t, int) {
    const index_t i0 = t * kRows, h = std::min(kRows, g.rows - i0);
    Scalar* block = g.data + i0 * g.row_stride;
    if (dy.rows == 0) {  // g = beta g (an empty product); beta = 0 writes zeros without reading g
      for (index_t i = 0; i < h; ++i) {
        Scalar* row = block + i * g.row_stride;
        for (index_t j = 0; j < g.cols; ++j) row[j] = beta == Scalar(0) ? Scalar(0) : beta * row[j];
      }
      return;
    }
    detail::serial_gemm_tn<Scalar>(engine, h, g.cols, dy.rows, Scalar(1), dy.data + i0, dy.row_stride, z.data,
                                   z.row_stride, beta, block, g.row_stride);
  });
}

/// Eigen convenience: g = dy^T z + beta g.
template <class Scalar>
void compressed_grad(const Eigen::Ref<const RowMatrix<Scalar>>& dy, const Eigen::Ref<const RowMatrix<Scalar>>& z,
                     Eigen::Ref<RowMatrix<Scalar>> g, Scalar beta = Scalar(0)) {
  compressed_grad<Scalar>(Cpu{}, detail::as_view<Scalar>(dy), detail::as_view<Scalar>(z),
                          detail::as_mutable_view<Scalar>(g), beta);
}

/// Eigen convenience returning dy^T z by value.
template <class Scalar>
RowMatrix<Scalar> compressed_grad(const Eigen::Ref<const RowMatrix<Scalar>>& dy,
                                  const Eigen::Ref<const RowMatrix<Scalar>>& z) {
  RowMatrix<Scalar> g = detail::make_matrix<Scalar>("compressed_grad", "the result g", dy.cols(), z.cols());
  compressed_grad<Scalar>(dy, z, g, Scalar(0));
  return g;
}

}  // namespace compact
