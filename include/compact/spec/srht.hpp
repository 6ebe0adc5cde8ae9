// SPDX-License-Identifier: MIT
#pragma once
/// Entry specification v1 for Srht: n', the signs d_k, the scores s_k, the column sample S and P[i][j].
///
/// P = D H S / sqrt(r): D = diag(d_0 .. d_{n'-1}) with d_k = +-1, H the Sylvester Hadamard matrix of order
/// n' = next_pow2(n) (H[i][k] = (-1)^popcount(i & k)), S the n' x r selection of the columns S_0 < ... < S_{r-1}.
/// Only the first n rows of P exist (x is zero-padded to n'), so P[i][j] = d_i (-1)^popcount(i & S_j) / sqrt(r).
/// Everything here except srht_sample (host-only: it sorts) is a pure integer function usable in device code;
/// the only floating-point value is the scale 1/sqrt(r) of rank_scale, so the entries are bitwise identical under
/// every compiler, flag and backend.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/philox.hpp"
#include "compact/spec/state.hpp"
#include "compact/spec/tags.hpp"

namespace compact {

/// Philox row of the sign blocks (reserved: no row of P reaches it, see kMaxDim).
inline constexpr std::uint32_t kSrhtSignRow = 0xFFFFFFFFu;
/// Philox row of the score blocks (reserved: no row of P reaches it, see kMaxDim).
inline constexpr std::uint32_t kSrhtScoreRow = 0xFFFFFFFEu;
/// Signs per Philox block (128 bits, one per sign, as for Rademacher).
inline constexpr index_t kSrhtSignBlockCols = 128;
/// Scores per Philox block (two 64-bit scores).
inline constexpr index_t kSrhtScoreBlockCols = 2;

/// The smallest power of two >= n, for 1 <= n <= 2^62 (n' of the padded Hadamard transform).
COMPACT_HOST_DEVICE inline constexpr index_t next_pow2(index_t n) {
  index_t p = 1;
  while (p < n) p *= 2;
  return p;
}

/// log2 of the longest padded row n' = next_pow2(n) of an SRHT, on every backend: 2^20, the one source of that limit
/// (the CPU's longest FWHT, kFwhtMaxLength, and the GPU's two-pass transform are defined from it).
inline constexpr int kSrhtMaxPaddedLog2 = 20;
/// Longest padded row n' = next_pow2(n) of an SRHT: 2^kSrhtMaxPaddedLog2.
inline constexpr index_t kSrhtMaxPaddedDim = index_t{1} << kSrhtMaxPaddedLog2;

/// Srht (entry spec v1): the transform family; n' = next_pow2(n) must not exceed kSrhtMaxPaddedDim.
template <>
struct DistributionTraits<Srht> {
  static constexpr bool kIsDistribution = true;
  using Family = TransformFamily;
  static constexpr const char* kName = "Srht";
  static constexpr std::uint32_t kRecordCode = 3;
  static void check_shape(const char* fn, index_t n, index_t) {
    COMPACT_REQUIRE(next_pow2(n) <= kSrhtMaxPaddedDim,
                    fn << ": input dimension n = " << n << " pads to n' = " << next_pow2(n) << " > "
                       << kSrhtMaxPaddedDim << ", the longest supported Walsh-Hadamard transform");
  }
};

/// log2 of a power of two p >= 1 (the number of FWHT stages of a length-p transform).
COMPACT_HOST_DEVICE inline int log2_pow2(index_t p) {
  int l = 0;
  while ((index_t{1} << l) < p) ++l;
  return l;
}

/// popcount(v) mod 2, by xor-folding (pure integer arithmetic, identical on host and device).
COMPACT_HOST_DEVICE inline constexpr std::uint32_t parity64(std::uint64_t v) {
  v ^= v >> 32;
  v ^= v >> 16;
  v ^= v >> 8;
  v ^= v >> 4;
  v ^= v >> 2;
  v ^= v >> 1;
  return static_cast<std::uint32_t>(v & 1u);
}

/// The Philox block holding the signs d_{128 b} .. d_{128 b + 127}: block b, row 0xFFFFFFFF.
COMPACT_HOST_DEVICE inline Words4x32 srht_sign_block(const Key2x32& key, std::uint64_t window, index_t b) {
  return philox4x32_10(philox_counter(static_cast<std::uint32_t>(b), kSrhtSignRow, window), key);
}

/// Bit of d_k within its sign block x = srht_sign_block(key, window, k / 128): bit k % 32 of word (k % 128) / 32.
COMPACT_HOST_DEVICE inline std::uint32_t srht_sign_bit_in(const Words4x32& x, index_t k) {
  return (x.w[(k % 128) / 32] >> (k % 32)) & 1u;
}

/// Sign bit of d_k, k < n': 1 means d_k = -1, 0 means d_k = +1.
COMPACT_HOST_DEVICE inline std::uint32_t srht_sign_bit(const Key2x32& key, std::uint64_t window, index_t k) {
  return srht_sign_bit_in(srht_sign_block(key, window, k / kSrhtSignBlockCols), k);
}

/// The Philox block holding the scores s_{2 b} and s_{2 b + 1}: block b, row 0xFFFFFFFE.
COMPACT_HOST_DEVICE inline Words4x32 srht_score_block(const Key2x32& key, std::uint64_t window, index_t b) {
  return philox4x32_10(philox_counter(static_cast<std::uint32_t>(b), kSrhtScoreRow, window), key);
}

/// s_k within its score block x = srht_score_block(key, window, k / 2): (x_{2(k%2)+1} << 32) | x_{2(k%2)}.
COMPACT_HOST_DEVICE inline std::uint64_t srht_score_in(const Words4x32& x, index_t k) {
  const int lo = 2 * static_cast<int>(k % 2);
  return (static_cast<std::uint64_t>(x.w[lo + 1]) << 32) | x.w[lo];
}

/// The 64-bit score s_k of padded index k < n'; S is the r indices with the smallest (s_k, k).
COMPACT_HOST_DEVICE inline std::uint64_t srht_score(const Key2x32& key, std::uint64_t window, index_t k) {
  return srht_score_in(srht_score_block(key, window, k / kSrhtScoreBlockCols), k);
}

/// P[i][j] from the sign bit of d_i and the sampled column s_j = S_j: (d_i (-1)^popcount(i & s_j)) * scale.
COMPACT_HOST_DEVICE inline float srht_entry_from_sign(std::uint32_t sign_bit_i, index_t i, index_t s_j, float scale) {
  const std::uint32_t negative = sign_bit_i ^ parity64(static_cast<std::uint64_t>(i) & static_cast<std::uint64_t>(s_j));
  return negative ? -scale : scale;
}

/// P[i][j] = d_i (-1)^popcount(i & S_j) / sqrt(r), given s_j = S_j (p from entry_params(state, r)).
COMPACT_HOST_DEVICE inline float srht_entry(const EntryParams& p, index_t i, index_t s_j) {
  return srht_entry_from_sign(srht_sign_bit(p.key, p.window, i), i, s_j, p.scale);
}

/// The column sample S of (state, n, r): the r indices k < n' = next_pow2(n) with the smallest (s_k, k), in
/// ascending index order. Host only. O(n') time (one Philox block per two scores, then a linear-time selection
/// on the total order (s_k, k)) plus O(r log r) for the final sort; 16 n' bytes of scratch. The result does not
/// depend on the selection algorithm: (s_k, k) is a total order, so the r smallest form a unique set.
/// Requires 1 <= r <= n <= kMaxDim.
inline std::vector<index_t> srht_sample(const SketchState& state, index_t n, index_t r) {
  detail::check_spec_shape("srht_sample", n, r);
  const index_t np = next_pow2(n);
  const Key2x32 key = philox_key(state);
  struct Scored {
    std::uint64_t score;
    std::uint32_t k;
  };
  std::vector<Scored> all(static_cast<std::size_t>(np));
  if (np == 1) {
    all[0] = Scored{srht_score(key, state.window, 0), 0};
  } else {
    for (index_t b = 0; b < np / 2; ++b) {
      const Words4x32 x = srht_score_block(key, state.window, b);
      all[static_cast<std::size_t>(2 * b)] = Scored{srht_score_in(x, 0), static_cast<std::uint32_t>(2 * b)};
      all[static_cast<std::size_t>(2 * b + 1)] = Scored{srht_score_in(x, 1), static_cast<std::uint32_t>(2 * b + 1)};
    }
  }
  const auto less = [](const Scored& a, const Scored& b) {
    return a.score < b.score || (a.score == b.score && a.k < b.k);
  };
  if (r < np) std::nth_element(all.begin(), all.begin() + r, all.end(), less);
  std::vector<index_t> sample(static_cast<std::size_t>(r));
  for (index_t j = 0; j < r; ++j) sample[static_cast<std::size_t>(j)] = all[static_cast<std::size_t>(j)].k;
  std::sort(sample.begin(), sample.end());
  return sample;
}

}  // namespace compact
