// SPDX-License-Identifier: MIT
#pragma once
/// Entry specification v1 for the dense distributions: every entry of P as a pure function of (state, n, r, i, j).

#include <cstdint>

#include "compact/config.hpp"
#include "compact/portability.hpp"
#include "compact/spec/fp32_math.hpp"
#include "compact/spec/philox.hpp"
#include "compact/spec/state.hpp"
#include "compact/spec/tags.hpp"

namespace compact {

/// Largest n (and r) the entry specification supports: rows 0xFFFFFFFE and 0xFFFFFFFF are reserved (SRHT).
inline constexpr index_t kMaxDim = index_t{0xFFFFFFFD};

namespace detail {
/// The shape rule of the entry specification, 1 <= r <= n <= kMaxDim, checked for function `fn`. Projectors check it
/// through check_projector_shape (api/projector_core.hpp), which adds the distribution's own rule.
inline void check_spec_shape(const char* fn, index_t n, index_t r) {
  COMPACT_REQUIRE(n >= 1 && n <= kMaxDim, fn << ": input dimension n = " << n << " must be in [1, " << kMaxDim << "]");
  COMPACT_REQUIRE(r >= 1 && r <= n, fn << ": rank r = " << r << " must satisfy 1 <= r <= n = " << n);
}
}  // namespace detail

/// The fp32 scale 1/sqrt(r), computed as 1.0f / sqrt(float(r)) with both operations correctly rounded.
COMPACT_HOST_DEVICE inline float rank_scale(index_t r) {
  return detail::rn::div(1.0f, fp32::sqrt(static_cast<float>(r)));
}

/// Four unscaled standard normals from one Philox block: Box-Muller on (x0, x1) -> lanes 0, 1 and (x2, x3) -> 2, 3.
///
/// For a pair (a, b): u = ((a >> 8) + 1) 2^-24 in (0, 1], t = (b >> 8) 2^-24 in [0, 1), rho = sqrt(-2 ln u),
/// lanes rho cos(2 pi t), rho sin(2 pi t); ln, sin, cos are compact::fp32's routines (box_muller, spec/fp32_math.hpp).
struct Normal4 {
  float v[4];
};

COMPACT_HOST_DEVICE inline Normal4 normal4(Words4x32 x) {
  Normal4 out;
  box_muller(x.w[0], x.w[1], &out.v[0], &out.v[1]);
  box_muller(x.w[2], x.w[3], &out.v[2], &out.v[3]);
  return out;
}

/// Everything an entry needs besides (i, j): the Philox key, the window and the scale 1/sqrt(r).
struct EntryParams {
  Key2x32 key;
  std::uint64_t window;
  float scale;
};

COMPACT_HOST_DEVICE inline EntryParams entry_params(const SketchState& s, index_t r) {
  return EntryParams{philox_key(s), s.window, rank_scale(r)};
}

/// Gaussian columns per Philox block.
inline constexpr index_t kGaussianBlockCols = 4;
/// Rademacher columns per Philox block (128 bits).
inline constexpr index_t kRademacherBlockCols = 128;
/// Rademacher columns per Philox output word: column k of a block is bit k % 32 of word k / 32.
inline constexpr index_t kRademacherWordCols = 32;

/// The Rademacher bit rule: a set bit gives -scale, a clear bit +scale. The vector paths apply it by moving the bit
/// into the sign of scale (fp32::kSignBit) or by using the word as a blend mask of (+scale, -scale).
COMPACT_HOST_DEVICE inline float rademacher_value(std::uint32_t bit, float scale) { return bit ? -scale : scale; }

/// Gaussian P[i][j]: block j/4, row i, lane j%4, times the scale.
COMPACT_HOST_DEVICE inline float gaussian_entry(const EntryParams& p, index_t i, index_t j) {
  const Words4x32 x = philox4x32_10(
      philox_counter(static_cast<std::uint32_t>(j / kGaussianBlockCols), static_cast<std::uint32_t>(i), p.window),
      p.key);
  return normal4(x).v[j % kGaussianBlockCols] * p.scale;
}

/// Rademacher P[i][j]: block j/128, row i, bit j%32 of word (j%128)/32; set -> -scale, clear -> +scale.
COMPACT_HOST_DEVICE inline float rademacher_entry(const EntryParams& p, index_t i, index_t j) {
  const Words4x32 x = philox4x32_10(
      philox_counter(static_cast<std::uint32_t>(j / kRademacherBlockCols), static_cast<std::uint32_t>(i), p.window),
      p.key);
  const std::uint32_t word = x.w[(j % kRademacherBlockCols) / kRademacherWordCols];
  return rademacher_value((word >> (j % kRademacherWordCols)) & 1u, p.scale);
}

/// The lane generator of Gaussian: the kBlockCols = 4 entries of one Philox block, lane k = normal4(x).v[k] * scale.
struct GaussianLanes {
  static constexpr index_t kBlockCols = kGaussianBlockCols;
  Normal4 g;
  float scale;
  COMPACT_HOST_DEVICE GaussianLanes(const Words4x32& x, float s) : g(normal4(x)), scale(s) {}
  COMPACT_HOST_DEVICE float operator[](index_t k) const { return g.v[k] * scale; }
};

/// The lane generator of Rademacher: the kBlockCols = 128 entries of one Philox block, lane k from bit k % 32 of word
/// k / 32 (rademacher_value).
struct RademacherLanes {
  static constexpr index_t kBlockCols = kRademacherBlockCols;
  Words4x32 x;
  float scale;
  COMPACT_HOST_DEVICE RademacherLanes(const Words4x32& words, float s) : x(words), scale(s) {}
  COMPACT_HOST_DEVICE float operator[](index_t k) const {
    return rademacher_value((x.w[k / kRademacherWordCols] >> (k % kRademacherWordCols)) & 1u, scale);
  }
};

/// Gaussian and Rademacher (entry spec v1): the dense family, each with its lane generator and entry function; no
/// shape rule beyond 1 <= r <= n <= kMaxDim. The dense paths (the reference loop below, kernels/dense_panel.hpp,
/// cpu/generate_panels.inl) dispatch on Lanes at compile time.
template <>
struct DistributionTraits<Gaussian> {
  static constexpr bool kIsDistribution = true;
  using Family = DenseFamily;
  using Lanes = GaussianLanes;
  static constexpr const char* kName = "Gaussian";
  static constexpr std::uint32_t kRecordCode = 1;
  static void check_shape(const char*, index_t, index_t) {}
  COMPACT_HOST_DEVICE static float entry(const EntryParams& p, index_t i, index_t j) { return gaussian_entry(p, i, j); }
};
template <>
struct DistributionTraits<Rademacher> {
  static constexpr bool kIsDistribution = true;
  using Family = DenseFamily;
  using Lanes = RademacherLanes;
  static constexpr const char* kName = "Rademacher";
  static constexpr std::uint32_t kRecordCode = 2;
  static void check_shape(const char*, index_t, index_t) {}
  COMPACT_HOST_DEVICE static float entry(const EntryParams& p, index_t i, index_t j) {
    return rademacher_entry(p, i, j);
  }
};

/// The lane generator of a dense distribution (DistributionTraits<Dist>::Lanes).
template <class Dist>
using dense_lanes_t = typename DistributionTraits<Dist>::Lanes;

/// P[i][j] for a dense distribution tag.
template <class Dist>
COMPACT_HOST_DEVICE inline float dense_entry(const EntryParams& p, index_t i, index_t j) {
  static_assert(is_dense_v<Dist>,
                "compact::dense_entry: Dist must be a dense distribution (Srht entries come from srht.hpp)");
  return DistributionTraits<Dist>::entry(p, i, j);
}

namespace detail {

/// Writes P[i0:i1, j0:j1] of a dense distribution, row-major with leading dimension ld, converting with Convert.
/// Reference-order host/device loop: one Philox block per (row, block) and only the needed lanes stored.
/// Convert may be a host-only callable (the CPU backend passes lambdas): nvcc's host/device call check is disabled for
/// this template, whose device instantiations are only ever made with device callables.
COMPACT_NO_EXEC_CHECK
template <class Dist, class Out, class Convert>
COMPACT_HOST_DEVICE inline void fill_dense_panel_scalar(const EntryParams& p, index_t i0, index_t i1, index_t j0,
                                                        index_t j1, Out* out, index_t ld, Convert convert) {
  static_assert(is_dense_v<Dist>, "compact::detail::fill_dense_panel_scalar: Dist must be a dense distribution");
  using Lanes = dense_lanes_t<Dist>;
  constexpr index_t kCols = Lanes::kBlockCols;
  for (index_t i = i0; i < i1; ++i) {
    Out* row = out + (i - i0) * ld;
    for (index_t b = j0 / kCols; b * kCols < j1; ++b) {
      const Words4x32 x =
          philox4x32_10(philox_counter(static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(i), p.window), p.key);
      const index_t jb0 = b * kCols > j0 ? b * kCols : j0;
      const index_t jb1 = (b + 1) * kCols < j1 ? (b + 1) * kCols : j1;
      const Lanes lanes(x, p.scale);
      for (index_t j = jb0; j < jb1; ++j) row[j - j0] = convert(lanes[j - b * kCols]);
    }
  }
}

}  // namespace detail
}  // namespace compact
