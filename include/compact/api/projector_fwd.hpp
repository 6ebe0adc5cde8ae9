// SPDX-License-Identifier: MIT
#pragma once
/// The Projector class template: one (Backend, Dist, Scalar) combination per partial specialization.

#include "compact/spec/tags.hpp"

namespace compact {

namespace detail {
/// The base of the primary templates Projector, CompressedAdamW and CompressedSgd, i.e. of a combination no backend
/// implements: it does not compile, with a message saying whether Dist is no distribution or the combination has no
/// implementation (the template named in the compiler's trace is the one that was used).
template <class Backend, class Dist, class Scalar>
struct NoImplementation {
  static_assert(is_distribution<Dist>,
                "compact::Projector / CompressedAdamW / CompressedSgd<Backend, Dist, Scalar>: Dist is not a "
                "distribution (no DistributionTraits specialization, see compact/spec/tags.hpp)");
  static_assert(!is_distribution<Dist>,  // only one of the two messages fires
                "compact::Projector / CompressedAdamW / CompressedSgd<Backend, Dist, Scalar>: this combination has no "
                "implementation. Supported: Backend = compact::Cpu with Scalar = float|double (include "
                "<compact/compact.hpp>); Backend = compact::Cuda with Scalar = float|__half|__nv_bfloat16 (compile "
                "with nvcc); or the header of Dist's backend file was not included.");
};
}  // namespace detail

/// Seeded random projection P (n x r), regenerated from its SketchState, never stored.
///
/// Specializations: Projector<Cpu, Gaussian|Rademacher|Srht, float|double> (compact/cpu/) and
/// Projector<Cuda, Gaussian|Rademacher|Srht, float|__half|__nv_bfloat16> (compact/cuda/, under nvcc; one TU may use
/// both backends). Every one derives from detail::ProjectorCore (api/projector_core.hpp), which checks the shape.
/// The API, the same on both backends (C = compute_t<Scalar>: float, or double for double):
///   Projector(index_t n, index_t r, SketchState state);                  // Cpu; 1 <= r <= n, plus the
///   Projector(index_t n, index_t r, SketchState state, Cuda, Workspace); // Cuda  distribution's rule
///   index_t in_dim() const;  index_t rank() const;  SketchState state() const;
///   static std::size_t workspace_bytes(index_t n, index_t r);  // the Workspace to lend; no projector, no device
///   void sketch(MatrixView<const Scalar> x /*B x n*/, MatrixView<Scalar> z /*B x r*/) const;   // z = x P
///   void unsketch_grad(MatrixView<const Scalar> g /*m x r*/, MatrixView<Scalar> out /*m x n*/,
///                      C alpha = 1, C beta = 0) const;             // out = alpha g P^T + beta out
///   void materialize(MatrixView<Scalar> p /*n x r*/) const;        // P itself
/// What each backend adds, because it must:
///   Cpu:  the Workspace is lent per call (sketch/unsketch_grad overloads taking one, scratch_bytes(rows) for one
///         call's exact need); Eigen conveniences (sketch(x), unsketch_grad(g), materialize() by value).
///   Cuda: the Workspace is lent to the constructor; min_workspace_bytes(n, r); both workspace queries take a
///         PanelSchedule as third argument on every distribution (ignored without panels); a per-call stream
///         overload of every operation; backend() and device(); kSetupOnDevice (true when the constructor enqueues
///         device work, as the SRHT's sample and signs: a caller that builds projectors per call may keep them).
/// A family's extras (spec/tags.hpp) stay on its projectors: the dense panel_width() and panel_height(), the SRHT's
/// scratch_bytes_per_thread(), and on the CPU projectors of both, materialize(p, row0, col0). Which combinations
/// exist: supports_v<Backend, Dist> (api/distributions.hpp).
template <class Backend, class Dist, class Scalar = float>
class Projector : detail::NoImplementation<Backend, Dist, Scalar> {};

}  // namespace compact
