// SPDX-License-Identifier: MIT
#pragma once
/// Projector<Cpu, Gaussian|Rademacher, float|double>: dense P generated panel by panel and fed to the GEMM.

#include <algorithm>
#include <type_traits>
#include <vector>

#include "compact/config.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/projector_fwd.hpp"
#include "compact/core/state.hpp"
#include "compact/core/view.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/generate.hpp"

namespace compact {
namespace detail {

/// Checks the constructor arguments shared by every projector.
inline void check_dims(const char* fn, index_t n, index_t r) {
  COMPACT_REQUIRE(n >= 1 && n <= kMaxDim, fn << ": input dimension n = " << n << " must be in [1, " << kMaxDim << "]");
  COMPACT_REQUIRE(r >= 1 && r <= n, fn << ": rank r = " << r << " must satisfy 1 <= r <= n = " << n);
}

/// Dense CPU projector shared by Gaussian and Rademacher.
///
/// Class invariant: 1 <= r <= n <= kMaxDim. P is never held whole: `sketch` generates column panels of P of
/// n x kPanel entries and `unsketch_grad` row panels of kPanel x r entries, one panel per thread at a time, so the
/// scratch is at most kPanel * max(n, r) Scalars per thread (e.g. 2 MiB per thread for n = 4096, float).
template <class Dist, class Scalar>
class DenseCpuProjector {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::Projector<Cpu, Dist, Scalar>: Scalar must be float or double on the CPU");

 public:
  /// Columns (sketch) or rows (unsketch_grad) of P per generated panel; a multiple of both block widths.
  static constexpr index_t kPanel = 128;

  DenseCpuProjector(index_t n, index_t r, SketchState state) : n_(n), r_(r), state_(state) {
    check_dims("Projector", n, r);
    params_ = entry_params(state_, r_);
  }

  index_t in_dim() const { return n_; }
  index_t rank() const { return r_; }
  SketchState state() const { return state_; }

  /// z = x P. x: B x n, z: B x r (row-major, any row strides, z must not overlap x).
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const {
    check_view("Projector::sketch", "x", x, -1, "", n_, "n");
    check_view("Projector::sketch", "z", z, x.rows, "x.rows", r_, "r");
    check_no_overlap("Projector::sketch", "x", x, "z", z);
    if (x.rows == 0) return;
    const auto X = as_eigen(x);
    auto Z = as_eigen(z);
    const index_t panels = (r_ + kPanel - 1) / kPanel;
    std::vector<std::vector<Scalar>> scratch(static_cast<std::size_t>(max_threads()));
    parallel_tasks(panels, 2.0 * double(x.rows) * double(n_) * double(r_), [&](index_t p, int thread) {
      const index_t j0 = p * kPanel, w = std::min(kPanel, r_ - j0);
      std::vector<Scalar>& buf = scratch[static_cast<std::size_t>(thread)];
      buf.resize(static_cast<std::size_t>(n_ * w));
      generate(0, n_, j0, j0 + w, buf.data(), w);
      const ConstRowMap<Scalar> panel(buf.data(), n_, w, Eigen::OuterStride<>(w));
      Z.middleCols(j0, w).noalias() = X * panel;
    });
  }

  /// out = alpha g P^T + beta out. g: m x r, out: m x n. With beta = 0, out is written without being read.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, Scalar alpha = Scalar(1),
                     Scalar beta = Scalar(0)) const {
    check_view("Projector::unsketch_grad", "g", g, -1, "", r_, "r");
    check_view("Projector::unsketch_grad", "out", out, g.rows, "g.rows", n_, "n");
    check_no_overlap("Projector::unsketch_grad", "g", g, "out", out);
    if (g.rows == 0) return;
    const auto G = as_eigen(g);
    auto O = as_eigen(out);
    const index_t panels = (n_ + kPanel - 1) / kPanel;
    std::vector<std::vector<Scalar>> scratch(static_cast<std::size_t>(max_threads()));
    parallel_tasks(panels, 2.0 * double(g.rows) * double(n_) * double(r_), [&](index_t p, int thread) {
      const index_t i0 = p * kPanel, h = std::min(kPanel, n_ - i0);
      std::vector<Scalar>& buf = scratch[static_cast<std::size_t>(thread)];
      buf.resize(static_cast<std::size_t>(h * r_));
      generate(i0, i0 + h, 0, r_, buf.data(), r_);
      const ConstRowMap<Scalar> panel(buf.data(), h, r_, Eigen::OuterStride<>(r_));
      auto block = O.middleCols(i0, h);
      if (beta == Scalar(0)) {
        block.noalias() = alpha * (G * panel.transpose());
      } else {
        if (beta != Scalar(1)) block *= beta;
        block.noalias() += alpha * (G * panel.transpose());
      }
    });
  }

  /// p = P (n x r).
  void materialize(MatrixView<Scalar> p) const {
    check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    const index_t tasks = (n_ + kPanel - 1) / kPanel;
    parallel_tasks(tasks, 50.0 * double(n_) * double(r_), [&](index_t t, int) {
      const index_t i0 = t * kPanel, h = std::min(kPanel, n_ - i0);
      generate(i0, i0 + h, 0, r_, p.data + i0 * p.row_stride, p.row_stride);
    });
  }

  // Eigen conveniences.
  RowMatrix<Scalar> sketch(const Eigen::Ref<const RowMatrix<Scalar>>& x) const {
    RowMatrix<Scalar> z(x.rows(), r_);
    check_view("Projector::sketch", "x", as_view<Scalar>(x), -1, "", n_, "n");
    sketch(as_view<Scalar>(x), as_mutable_view<Scalar>(z));
    return z;
  }
  RowMatrix<Scalar> unsketch_grad(const Eigen::Ref<const RowMatrix<Scalar>>& g) const {
    check_view("Projector::unsketch_grad", "g", as_view<Scalar>(g), -1, "", r_, "r");
    RowMatrix<Scalar> out(g.rows(), n_);
    unsketch_grad(as_view<Scalar>(g), as_mutable_view<Scalar>(out), Scalar(1), Scalar(0));
    return out;
  }
  void unsketch_grad(const Eigen::Ref<const RowMatrix<Scalar>>& g, Eigen::Ref<RowMatrix<Scalar>> out,
                     Scalar alpha = Scalar(1), Scalar beta = Scalar(0)) const {
    unsketch_grad(as_view<Scalar>(g), as_mutable_view<Scalar>(out), alpha, beta);
  }
  RowMatrix<Scalar> materialize() const {
    RowMatrix<Scalar> p(n_, r_);
    materialize(as_mutable_view<Scalar>(p));
    return p;
  }

 private:
  /// P[i0:i1, j0:j1] into out (leading dimension ld), generated in fp32 and converted to Scalar.
  void generate(index_t i0, index_t i1, index_t j0, index_t j1, Scalar* out, index_t ld) const {
    fill_dense_panel<Dist>(params_, i0, i1, j0, j1, out, ld);
  }

  index_t n_;
  index_t r_;
  SketchState state_;
  EntryParams params_;
};

}  // namespace detail

/// Gaussian projector on the CPU: P has i.i.d. N(0, 1/r) entries (entry spec v1). See DenseCpuProjector.
template <class Scalar>
class Projector<Cpu, Gaussian, Scalar> : public detail::DenseCpuProjector<Gaussian, Scalar> {
 public:
  using detail::DenseCpuProjector<Gaussian, Scalar>::DenseCpuProjector;
};

/// Rademacher projector on the CPU: P has i.i.d. +-1/sqrt(r) entries (entry spec v1). See DenseCpuProjector.
template <class Scalar>
class Projector<Cpu, Rademacher, Scalar> : public detail::DenseCpuProjector<Rademacher, Scalar> {
 public:
  using detail::DenseCpuProjector<Rademacher, Scalar>::DenseCpuProjector;
};

}  // namespace compact
