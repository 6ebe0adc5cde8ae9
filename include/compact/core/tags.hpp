// SPDX-License-Identifier: MIT
#pragma once
/// Tag types: distributions (Gaussian, Rademacher, Srht) and the CPU backend (Cpu).

#include <type_traits>

namespace compact {

/// Dense P with i.i.d. N(0, 1/r) entries (Box-Muller on Philox4x32-10).
struct Gaussian {};
/// Dense P with i.i.d. entries +-1/sqrt(r) (one Philox bit each).
struct Rademacher {};
/// Subsampled randomized Hadamard transform: P = D H S / sqrt(r), applied in O(n log n) per row.
struct Srht {};

/// The Eigen backend (host memory, OpenMP threads where enabled).
struct Cpu {};

namespace detail {
template <class T>
inline constexpr bool always_false = false;

template <class Dist>
inline constexpr bool is_distribution =
    std::is_same_v<Dist, Gaussian> || std::is_same_v<Dist, Rademacher> || std::is_same_v<Dist, Srht>;
}  // namespace detail

}  // namespace compact
