// SPDX-License-Identifier: MIT
#pragma once
/// What every Projector<Backend, Dist, Scalar> is built on: the one shape check, n, r, the state, its entry
/// parameters and the accessors, and the type of alpha and beta.

#include <type_traits>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/state.hpp"
#include "compact/spec/tags.hpp"

namespace compact {

/// The type of unsketch_grad's alpha and beta (and compressed_grad's beta) for activations of type Scalar, on every
/// backend: the compute type, as cuBLAS takes it. float for float, __half and __nv_bfloat16 (in bf16 the weight
/// decay factor 1 - lr wd = 0.9999 would round to 1), double for double (a float would round lr away).
template <class Scalar>
using compute_t = std::conditional_t<std::is_same_v<Scalar, double>, double, float>;

namespace detail {

/// THE shape check of a projector of distribution Dist, for function `fn`: the entry specification's rule
/// 1 <= r <= n <= kMaxDim (check_spec_shape), then the distribution's own (DistributionTraits<Dist>::check_shape,
/// e.g. SRHT: next_pow2(n) <= kSrhtMaxPaddedDim). Constructors and the workspace queries of every backend call it,
/// so a shape is accepted or refused, with the same message, everywhere. Needs no device.
template <class Dist>
void check_projector_shape(const char* fn, index_t n, index_t r) {
  static_assert(is_distribution<Dist>,
                "compact: Dist is not a distribution (it has no DistributionTraits specialization, see spec/tags.hpp)");
  check_spec_shape(fn, n, r);
  DistributionTraits<Dist>::check_shape(fn, n, r);
}

/// The state shared by every projector: n, r, the SketchState and the entry parameters derived from it (Philox key,
/// window, scale 1/sqrt(r)), with the accessors of the public API. Backends derive from it and add what they must.
///
/// Class invariant: check_projector_shape<Dist>(n, r) passed for the projector's Dist; params_ == entry_params(state_,
/// r_). Copyable; no member refers to memory.
class ProjectorCore {
 public:
  /// n: rows of P, columns of x and of unsketch_grad's output.
  index_t in_dim() const { return n_; }
  /// r: columns of P, of the sketch and of the compressed gradient.
  index_t rank() const { return r_; }
  /// The state P is regenerated from.
  SketchState state() const { return state_; }

 protected:
  /// Checks (n, r) for Dist (check_projector_shape, as `fn`) before anything else, then derives the entry parameters.
  template <class Dist>
  ProjectorCore(Dist, const char* fn, index_t n, index_t r, SketchState state)
      : n_(checked_n<Dist>(fn, n, r)), r_(r), state_(state), params_(entry_params(state, r)) {}

  index_t n_;
  index_t r_;
  SketchState state_;
  EntryParams params_;

 private:
  template <class Dist>
  static index_t checked_n(const char* fn, index_t n, index_t r) {
    check_projector_shape<Dist>(fn, n, r);
    return n;
  }
};

}  // namespace detail
}  // namespace compact
