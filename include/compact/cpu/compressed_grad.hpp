// SPDX-License-Identifier: MIT
#pragma once
/// compressed_grad on the CPU: the weight gradient formed in the compressed space, g = dy^T z + beta g.

#include <algorithm>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/api/view.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/eigen.hpp"

namespace compact {

/// g = dy^T z + beta g: dy is B x m (output gradient), z is B x r (stored sketch), g is m x r. beta = 1
/// accumulates the micro-batches of one window; with beta = 0 g is written without being read. Bitwise
/// independent of the thread count (fixed row-block partition of g).
template <class Scalar>
void compressed_grad(Cpu, MatrixView<const Scalar> dy, MatrixView<const Scalar> z, MatrixView<Scalar> g,
                     Scalar beta = Scalar(0)) {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::compressed_grad(Cpu, ...): Scalar must be float or double");
  detail::check_compressed_grad_args(dy, z, g);
  if (g.empty()) return;
  constexpr index_t kRows = 128;
  const auto DY = detail::as_eigen(dy);
  const auto Z = detail::as_eigen(z);
  auto G = detail::as_eigen(g);
  const index_t tasks = (g.rows + kRows - 1) / kRows;
  detail::parallel_tasks(tasks, 2.0 * double(dy.rows) * double(g.rows) * double(g.cols), [&](index_t t, int) {
    const index_t i0 = t * kRows, h = std::min(kRows, g.rows - i0);
    auto block = G.middleRows(i0, h);
    if (beta == Scalar(0)) {
      if (dy.rows == 0) {
        block.setZero();
      } else {
        block.noalias() = DY.middleCols(i0, h).transpose() * Z;
      }
    } else {
      if (beta != Scalar(1)) block *= beta;
      if (dy.rows > 0) block.noalias() += DY.middleCols(i0, h).transpose() * Z;
    }
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
