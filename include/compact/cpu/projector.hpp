// SPDX-License-Identifier: MIT
#pragma once
/// CpuProjector<Impl>: the CPU projectors' public face, written once for every distribution. It adds to an
/// implementation (the MatrixView operations of one distribution) the Eigen conveniences and the static workspace query.

#include <cstddef>

#include "compact/config.hpp"
#include "compact/core/projector_core.hpp"
#include "compact/core/view.hpp"
#include "compact/core/workspace.hpp"
#include "compact/cpu/eigen.hpp"

namespace compact {
namespace detail {

/// A CPU projector: the distribution's implementation plus the Eigen conveniences. Projector<Cpu, Dist, Scalar>
/// derives from CpuProjector<its implementation>, so a new distribution writes only its implementation
/// (cpu/<dist>_projector.hpp). ("Engine" is the GEMM's word, cpu/gemm_engine.hpp.)
///
/// The implementation derives from ProjectorCore (n, r, state, the shape check, in_dim/rank/state) and provides, with
/// Scalar = its `scalar_type` and compute_t<Scalar> for alpha and beta:
///   Impl(index_t n, index_t r, SketchState state, ...);
///   static std::size_t workspace_bytes(index_t n, index_t r);     // a Workspace every call can take; no device
///   std::size_t scratch_bytes(index_t rows) const;                // what one call of `rows` rows takes
///   void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const;                 (and with a Workspace)
///   void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, compute_t<Scalar> alpha = 1,
///                      compute_t<Scalar> beta = 0) const;                               (and with a Workspace)
///   void materialize(MatrixView<Scalar> p) const;
template <class Impl>
class CpuProjector : public Impl {
 public:
  using Scalar = typename Impl::scalar_type;
  using Compute = compute_t<Scalar>;

  using Impl::Impl;
  using Impl::materialize;
  using Impl::sketch;
  using Impl::unsketch_grad;

  /// z = x P by value. x: B x n (any Eigen row-major expression that binds to a Ref).
  RowMatrix<Scalar> sketch(const Eigen::Ref<const RowMatrix<Scalar>>& x) const {
    check_view("Projector::sketch", "x", as_view<Scalar>(x), -1, "", this->n_, "n");
    RowMatrix<Scalar> z = make_matrix<Scalar>("Projector::sketch", "the result z", x.rows(), this->r_);
    this->sketch(as_view<Scalar>(x), as_mutable_view<Scalar>(z));
    return z;
  }
  /// g P^T by value. g: m x r.
  RowMatrix<Scalar> unsketch_grad(const Eigen::Ref<const RowMatrix<Scalar>>& g) const {
    check_view("Projector::unsketch_grad", "g", as_view<Scalar>(g), -1, "", this->r_, "r");
    RowMatrix<Scalar> out = make_matrix<Scalar>("Projector::unsketch_grad", "the result", g.rows(), this->n_);
    this->unsketch_grad(as_view<Scalar>(g), as_mutable_view<Scalar>(out), Compute(1), Compute(0));
    return out;
  }
  /// out = alpha g P^T + beta out, in place. g: m x r, out: m x n.
  void unsketch_grad(const Eigen::Ref<const RowMatrix<Scalar>>& g, Eigen::Ref<RowMatrix<Scalar>> out,
                     Compute alpha = Compute(1), Compute beta = Compute(0)) const {
    this->unsketch_grad(as_view<Scalar>(g), as_mutable_view<Scalar>(out), alpha, beta);
  }
  /// P (n x r) by value.
  RowMatrix<Scalar> materialize() const {
    RowMatrix<Scalar> p = make_matrix<Scalar>("Projector::materialize", "P", this->n_, this->r_);
    this->materialize(as_mutable_view<Scalar>(p));
    return p;
  }
};

}  // namespace detail
}  // namespace compact
