// SPDX-License-Identifier: MIT
#pragma once
/// CpuProjector<Impl>: the CPU projectors' public face, written once for every distribution. It adds to an
/// implementation (the MatrixView operations of one distribution, with a lent Workspace) the allocating operations
/// and the Eigen conveniences.

#include <cstddef>

#include "compact/config.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/scratch.hpp"

namespace compact {
namespace detail {

/// A CPU projector: the distribution's implementation plus what every CPU projector adds to it, written once here:
/// the allocating sketch/unsketch_grad (each leases its call's workspace from the calling thread's kept scratch,
/// detail::ScratchLease, then runs the implementation's Workspace overload) and the Eigen conveniences. Projector<Cpu,
/// Dist, Scalar> derives from CpuProjector<its implementation>, so a new distribution writes only its implementation
/// (cpu/<dist>_projector.hpp). ("Engine" is the GEMM's word, cpu/gemm_engine.hpp.)
///
/// The implementation derives from ProjectorCore (n, r, state, the shape check, in_dim/rank/state) and provides, with
/// Scalar = its `scalar_type` and C = compute_t<Scalar> for alpha and beta:
///   Impl(index_t n, index_t r, SketchState state, ...);
///   static std::size_t workspace_bytes(index_t n, index_t r);     // a Workspace every call can take; no device
///   std::size_t scratch_bytes(index_t rows) const;                // what one call of `rows` rows takes
///   void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z, Workspace w) const;
///   void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, C alpha, C beta, Workspace w) const;
///   void materialize(MatrixView<Scalar> p) const;
/// where the Workspace overloads check every argument (the workspace against scratch_bytes(rows)) before writing
/// anything and allocate nothing. That is all the optimizers call (tests/projector_api.hpp checks it).
template <class Impl>
class CpuProjector : public Impl {
 public:
  using Scalar = typename Impl::scalar_type;
  using Compute = compute_t<Scalar>;

  using Impl::Impl;
  using Impl::materialize;
  using Impl::sketch;
  using Impl::unsketch_grad;

  /// z = x P. x: B x n, z: B x r (row-major, any row strides, z must not overlap x). Takes scratch_bytes(B) from the
  /// calling thread's kept scratch, allocating only when it is smaller (compact::error when memory runs out, before
  /// anything is written; compact::release_thread_scratch frees it).
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const {
    check_sketch_args(x, z, this->n_, this->r_);
    if (x.rows == 0) return;
    const ScratchLease scratch("Projector::sketch", "the call's workspace", this->scratch_bytes(x.rows));
    this->sketch(x, z, scratch.view());
  }
  /// out = alpha g P^T + beta out. g: m x r, out: m x n; with beta = 0, out is written without being read.
  /// Takes scratch_bytes(m) from the calling thread's kept scratch, as sketch does.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, Compute alpha = Compute(1),
                     Compute beta = Compute(0)) const {
    check_unsketch_args(g, out, this->n_, this->r_);
    if (g.rows == 0) return;
    const ScratchLease scratch("Projector::unsketch_grad", "the call's workspace", this->scratch_bytes(g.rows));
    this->unsketch_grad(g, out, alpha, beta, scratch.view());
  }

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
