// SPDX-License-Identifier: MIT
#pragma once
/// The Projector class template: one (Backend, Dist, Scalar) combination per partial specialization.

#include "compact/core/tags.hpp"

namespace compact {

/// Seeded random projection P (n x r), regenerated from its SketchState, never stored.
///
/// Specializations: Projector<Cpu, Gaussian|Rademacher|Srht, float|double> (compact/cpu/) and
/// Projector<Cuda, Gaussian|Rademacher|Srht, float|__half|__nv_bfloat16> (compact/cuda/, under nvcc).
/// API of every specialization:
///   Projector(index_t n, index_t r, SketchState state);             // 1 <= r <= n
///   void sketch(MatrixView<const Scalar> x /*B x n*/, MatrixView<Scalar> z /*B x r*/) const;   // z = x P
///   void unsketch_grad(MatrixView<const Scalar> g /*m x r*/, MatrixView<Scalar> out /*m x n*/,
///                      Scalar alpha = 1, Scalar beta = 0) const;     // out = alpha g P^T + beta out
///   void materialize(MatrixView<Scalar> p /*n x r*/) const;          // P itself
template <class Backend, class Dist, class Scalar = float>
class Projector {
  static_assert(detail::always_false<Backend>,
                "compact::Projector<Backend, Dist, Scalar>: this combination has no implementation. Supported: "
                "Backend = compact::Cpu with Dist = Gaussian|Rademacher|Srht and Scalar = float|double (include "
                "<compact/compact.hpp>); Backend = compact::Cuda with Scalar = float|__half|__nv_bfloat16 (compile "
                "with nvcc).");
};

}  // namespace compact
