// SPDX-License-Identifier: MIT
#pragma once
/// The CPU implementation of the toy distribution (tests/toy_distribution.hpp), written the way docs/design.md says
/// ("Adding a distribution or a backend"): an implementation on ProjectorCore (the Workspace operations, materialize,
/// workspace_bytes and scratch_bytes) and the Projector specialization on CpuProjector. Nothing else is written for
/// it: the optimizers, the record, the name dispatch and the API checks take it as they are.

#include <compact/compact.hpp>

#include <cstddef>

#include "toy_distribution.hpp"

namespace compact {
namespace detail {
template <class Scalar>
class ToyCountSketchImpl : public ProjectorCore {
 public:
  using scalar_type = Scalar;
  ToyCountSketchImpl(index_t n, index_t r, SketchState state)
      : ProjectorCore(compact_test::ToyCountSketch{}, "Projector", n, r, state) {}
  static std::size_t workspace_bytes(index_t n, index_t r) {
    check_projector_shape<compact_test::ToyCountSketch>("Projector::workspace_bytes", n, r);
    return 0;
  }
  std::size_t scratch_bytes(index_t) const { return 0; }
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z, Workspace w) const {
    check_sketch_args(x, z, n_, r_);
    check_scratch<Scalar>("Projector::sketch", w, scratch_bytes(x.rows));
    for (index_t b = 0; b < x.rows; ++b) {
      for (index_t j = 0; j < r_; ++j) z(b, j) = 0;
      for (index_t i = 0; i < n_; ++i) z(b, i % r_) += x(b, i);
    }
  }
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, compute_t<Scalar> alpha,
                     compute_t<Scalar> beta, Workspace w) const {
    check_unsketch_args(g, out, n_, r_);
    check_scratch<Scalar>("Projector::unsketch_grad", w, scratch_bytes(g.rows));
    for (index_t m = 0; m < g.rows; ++m) {
      for (index_t i = 0; i < n_; ++i) out(m, i) = alpha * g(m, i % r_) + (beta == 0 ? Scalar(0) : beta * out(m, i));
    }
  }
  void materialize(MatrixView<Scalar> p) const {
    check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    for (index_t i = 0; i < n_; ++i) {
      for (index_t j = 0; j < r_; ++j) p(i, j) = j == i % r_ ? Scalar(1) : Scalar(0);
    }
  }
};
}  // namespace detail

template <class Scalar>
class Projector<Cpu, compact_test::ToyCountSketch, Scalar>
    : public detail::CpuProjector<detail::ToyCountSketchImpl<Scalar>> {
 public:
  using detail::CpuProjector<detail::ToyCountSketchImpl<Scalar>>::CpuProjector;
};
}  // namespace compact
