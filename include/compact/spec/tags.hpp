// SPDX-License-Identifier: MIT
#pragma once
/// Distribution tags (Gaussian, Rademacher, Srht), the families, and DistributionTraits, through which a distribution
/// declares itself.

#include <type_traits>

namespace compact {

/// Dense P with i.i.d. N(0, 1/r) entries (Box-Muller on Philox4x32-10).
struct Gaussian {};
/// Dense P with i.i.d. entries +-1/sqrt(r) (one Philox bit each).
struct Rademacher {};
/// Subsampled randomized Hadamard transform: P = D H S / sqrt(r), applied in O(n log n) per row.
struct Srht {};

/// The family of a distribution: the algorithm its projectors run, which code shared by several distributions asks
/// for (is_dense_v, is_transform_v) instead of naming a tag.
/// Dense: P is generated panel by panel from an entry function and multiplied by a GEMM (Gaussian, Rademacher). A
/// dense distribution's traits also name its lane generator, `using Lanes = ...` (spec/entries.hpp): the Philox block
/// of kBlockCols entries that the entry function, the reference loop and the vector paths expand.
struct DenseFamily {};
/// Transform: P is applied as a fast transform of each row and never generated in panels (Srht).
struct TransformFamily {};
/// A distribution with an algorithm of its own names a family type of its own (e.g. the toy of the tests); code that
/// handles a family it does not know falls back to the projector's uniform API.

/// What a distribution says about itself, written once next to its entry specification: spec/entries.hpp for
/// Gaussian and Rademacher, spec/srht.hpp for Srht. A specialization holds
///   static constexpr bool kIsDistribution = true;
///   using Family = DenseFamily;                        // or TransformFamily, or a family of its own
///   static constexpr const char* kName;               // "Gaussian", as error messages and records name it
///   static constexpr std::uint32_t kRecordCode;       // the code an optimizer checkpoint record carries (1, 2, 3)
///   static void check_shape(const char* fn, index_t n, index_t r);  // its own rule beyond 1 <= r <= n <= kMaxDim,
///                                                                    // e.g. SRHT: next_pow2(n) <= 2^20
/// Every projector of every backend checks its shape through detail::check_projector_shape (api/projector_core.hpp),
/// which applies the common rule and then check_shape. The primary template is no distribution.
template <class Dist>
struct DistributionTraits {
  static constexpr bool kIsDistribution = false;
};

namespace detail {
/// Whether Dist is a distribution tag (has a DistributionTraits specialization).
template <class Dist>
inline constexpr bool is_distribution = DistributionTraits<Dist>::kIsDistribution;

/// The family of Dist, or void for a type that is no distribution.
template <class Dist, bool = is_distribution<Dist>>
struct FamilyOf {
  using type = void;
};
template <class Dist>
struct FamilyOf<Dist, true> {
  using type = typename DistributionTraits<Dist>::Family;
};
}  // namespace detail

/// The family of a distribution (DistributionTraits<Dist>::Family); void for a type that is no distribution.
template <class Dist>
using family_t = typename detail::FamilyOf<Dist>::type;
/// Whether Dist is a distribution of the dense family (entries generated in panels, multiplied by a GEMM).
template <class Dist>
inline constexpr bool is_dense_v = std::is_same_v<family_t<Dist>, DenseFamily>;
/// Whether Dist is a distribution of the transform family (a fast transform per row, as Srht).
template <class Dist>
inline constexpr bool is_transform_v = std::is_same_v<family_t<Dist>, TransformFamily>;

}  // namespace compact
