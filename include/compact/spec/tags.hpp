// SPDX-License-Identifier: MIT
#pragma once
/// Distribution tags (Gaussian, Rademacher, Srht) and DistributionTraits, through which a distribution declares itself.

namespace compact {

/// Dense P with i.i.d. N(0, 1/r) entries (Box-Muller on Philox4x32-10).
struct Gaussian {};
/// Dense P with i.i.d. entries +-1/sqrt(r) (one Philox bit each).
struct Rademacher {};
/// Subsampled randomized Hadamard transform: P = D H S / sqrt(r), applied in O(n log n) per row.
struct Srht {};

/// What a distribution says about itself, written once next to its entry specification: spec/entries.hpp for
/// Gaussian and Rademacher, spec/srht.hpp for Srht. A specialization holds
///   static constexpr bool kIsDistribution = true;
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
}  // namespace detail

}  // namespace compact
