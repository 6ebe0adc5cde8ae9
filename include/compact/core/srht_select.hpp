// SPDX-License-Identifier: MIT
#pragma once
/// The GPU's computation of the SRHT column sample S (core/srht.hpp's srht_sample) as host/device functions of
/// (block, thread): a radix select of the r smallest keys (s_k, k), k < n', then their indices in ascending order.
///
/// The key of index k is the 88-bit value (s_k, k): 8 digits of 8 bits of the 64-bit score, most significant first,
/// then 3 digits of the index (k < 2^24). Keys are distinct, so "the r smallest" is a unique set. Pass p counts,
/// among the keys whose first p digits equal the digits chosen so far, how many have each value of digit p (a
/// histogram kernel), then one thread picks the digit whose bucket holds the rank still to be placed (the choose
/// kernel). When the bucket holds exactly that many keys the selection is decided: it is every key whose first
/// p + 1 digits are at most the chosen ones (later passes return at once); after the last digit it always is.
/// Then each 32-index word gets its selection mask, one block scans the mask counts, and each word writes its
/// selected indices at its offset: S in ascending order, with no sort and no scratch beyond n'/16 bytes. Scores
/// are recomputed from Philox in every pass rather than stored (one Philox4x32-10 per score and pass).

#include <cstdint>

#include "compact/config.hpp"
#include "compact/core/block.hpp"
#include "compact/core/grid.hpp"
#include "compact/core/philox.hpp"
#include "compact/core/srht.hpp"

namespace compact {
namespace detail {

/// Digits of the key (s_k, k): 8 of the score, then 3 of the index.
inline constexpr int kSelectDigits = 11;
/// Values of one digit (8 bits).
inline constexpr int kSelectBins = 256;
/// Largest n' the key holds: indices below 2^24.
inline constexpr int kSelectMaxLog2 = 24;

/// The selection's state in device memory, written by the setup and choose kernels.
struct SelectState {
  std::uint32_t hist[kSelectBins];     ///< the current pass's histogram (zero between passes)
  std::uint32_t digit[kSelectDigits];  ///< the digits chosen so far
  std::uint32_t remaining;             ///< rank (from 1) still to place among keys matching the chosen digits
  std::uint32_t decided;               ///< 0 while undecided, then the number of digits that define the selection
};

/// The score s_k of padded index k under (key, window): what the select kernels rank.
struct SrhtScores {
  Key2x32 key;
  std::uint64_t window;
  COMPACT_HOST_DEVICE std::uint64_t operator()(index_t k) const { return srht_score(key, window, k); }
};

/// Digit p (0 = most significant) of the key (score, k).
COMPACT_HOST_DEVICE inline std::uint32_t select_digit(std::uint64_t score, index_t k, int p) {
  return p < 8 ? static_cast<std::uint32_t>((score >> (56 - 8 * p)) & 0xFFu)
               : static_cast<std::uint32_t>((static_cast<std::uint64_t>(k) >> (16 - 8 * (p - 8))) & 0xFFu);
}

/// Compares the first `count` digits of the key (score, k) with digits[0, count): -1, 0 or +1.
COMPACT_HOST_DEVICE inline int select_compare(std::uint64_t score, index_t k, const std::uint32_t* digits, int count) {
  for (int p = 0; p < count; ++p) {
    const std::uint32_t dk = select_digit(score, k, p);
    if (dk != digits[p]) return dk < digits[p] ? -1 : 1;
  }
  return 0;
}

/// popcount of a 32-bit word (SWAR; identical on host and device).
COMPACT_HOST_DEVICE inline std::uint32_t popcount32(std::uint32_t x) {
  x = x - ((x >> 1) & 0x55555555u);
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  x = (x + (x >> 4)) & 0x0F0F0F0Fu;
  return (x * 0x01010101u) >> 24;
}

/// The setup kernel's selection part: thread 0 of the grid starts the selection of r keys (histogram zero).
COMPACT_HOST_DEVICE inline void srht_select_init_thread(const Thread1d& th, SelectState* st, index_t r) {
  if (th.first() != 0) return;
  for (int b = 0; b < kSelectBins; ++b) st->hist[b] = 0;
  for (int p = 0; p < kSelectDigits; ++p) st->digit[p] = 0;
  st->remaining = static_cast<std::uint32_t>(r);
  st->decided = 0;
}

/// Shared memory of the histogram kernel: one block histogram.
inline constexpr std::size_t kSelectHistogramSharedBytes = sizeof(std::uint32_t) * kSelectBins;

/// Block size of the setup, select histogram, mask and scatter kernels (and their __launch_bounds__), and the
/// histogram kernel's grid cap (so that a pass adds at most 256 block histograms to the global one).
inline constexpr int kSelectThreads = 256;
inline constexpr index_t kSelectMaxBlocks = 256;
/// Block size of the scan kernel (one block), and its __launch_bounds__.
inline constexpr int kSelectScanThreads = 1024;

/// Launch of the kernels with one thread task per 32-bit word of n' (setup, mask, scatter).
inline Launch1d srht_select_word_launch(index_t np) { return grid_stride_launch((np + 31) / 32, kSelectThreads); }
/// Launch of a histogram pass over the n' keys.
inline Launch1d srht_select_histogram_launch(index_t np) {
  return grid_stride_launch(np, kSelectThreads, kSelectMaxBlocks);
}

/// Histogram kernel of pass p: block b counts digit p of the keys k < np (grid-stride over the blocks' threads)
/// that match the chosen digits, in shared memory, then adds its counts to st->hist. Nothing once decided.
template <class Block, class Scores>
COMPACT_HOST_DEVICE inline void srht_select_histogram(Block& b, SelectState* st, Scores scores, index_t np, int pass) {
  if (st->decided != 0) return;  // the same value for every thread: no kernel of this pass writes it
  std::uint32_t* bins = b.template shared<std::uint32_t>();
  b.each([&](index_t t) {
    for (index_t i = t; i < kSelectBins; i += b.size()) bins[i] = 0;
  });
  b.sync();
  b.each([&](index_t t) {
    for (index_t k = grid_stride_first(b.index(), t, b.size()); k < np; k += grid_stride_step(b.count(), b.size())) {
      const std::uint64_t s = scores(k);
      if (select_compare(s, k, st->digit, pass) == 0) b.atomic_add(&bins[select_digit(s, k, pass)], 1u);
    }
  });
  b.sync();
  b.each([&](index_t t) {
    for (index_t i = t; i < kSelectBins; i += b.size()) {
      if (bins[i] != 0) b.atomic_add(&st->hist[i], bins[i]);
    }
  });
}

/// Choose kernel of pass p (one thread): the digit whose bucket holds the remaining rank; decides the selection
/// when that bucket holds exactly the remaining count; clears the histogram for the next pass.
COMPACT_HOST_DEVICE inline void srht_select_choose(SelectState* st, int pass) {
  if (st->decided != 0) return;
  std::uint32_t below = 0;
  for (int b = 0; b < kSelectBins; ++b) {
    const std::uint32_t count = st->hist[b];
    if (below + count >= st->remaining) {
      st->digit[pass] = static_cast<std::uint32_t>(b);
      st->remaining -= below;
      if (count == st->remaining) st->decided = static_cast<std::uint32_t>(pass + 1);
      break;
    }
    below += count;
  }
  for (int b = 0; b < kSelectBins; ++b) st->hist[b] = 0;
}

/// Whether key (score, k) is selected once st is decided.
COMPACT_HOST_DEVICE inline bool select_taken(const SelectState* st, std::uint64_t score, index_t k) {
  return select_compare(score, k, st->digit, static_cast<int>(st->decided)) <= 0;
}

/// Mask kernel: masks[w] bit c set iff index 32 w + c (< np) is selected, for thread th's words.
template <class Scores>
COMPACT_HOST_DEVICE inline void srht_select_mask_thread(const Thread1d& th, const SelectState* st, Scores scores,
                                                        index_t np, std::uint32_t* masks) {
  const index_t words = (np + 31) / 32;
  for (index_t w = th.first(); w < words; w += th.step()) {
    std::uint32_t m = 0;
    for (index_t k = 32 * w; k < 32 * w + 32 && k < np; ++k) {
      if (select_taken(st, scores(k), k)) m |= 1u << (k % 32);
    }
    masks[w] = m;
  }
}

/// Shared memory of the scan kernel for a block of `threads` threads: one count per thread.
COMPACT_HOST_DEVICE inline std::size_t select_scan_shared_bytes(index_t threads) {
  return sizeof(std::uint32_t) * static_cast<std::size_t>(threads);
}

/// Scan kernel (one block): offsets[w] = the selected indices below 32 w, for w < words. Thread t sums a
/// contiguous range of words, thread 0 scans the per-thread sums, then each thread writes its range's offsets.
template <class Block>
COMPACT_HOST_DEVICE inline void srht_select_scan(Block& b, const std::uint32_t* masks, index_t words,
                                                 std::uint32_t* offsets) {
  std::uint32_t* part = b.template shared<std::uint32_t>();
  const index_t per = (words + b.size() - 1) / b.size();
  b.each([&](index_t t) {
    std::uint32_t sum = 0;
    for (index_t w = t * per; w < (t + 1) * per && w < words; ++w) sum += popcount32(masks[w]);
    part[t] = sum;
  });
  b.sync();
  b.each([&](index_t t) {
    if (t != 0) return;
    std::uint32_t run = 0;
    for (index_t i = 0; i < b.size(); ++i) {
      const std::uint32_t c = part[i];
      part[i] = run;
      run += c;
    }
  });
  b.sync();
  b.each([&](index_t t) {
    std::uint32_t run = part[t];
    for (index_t w = t * per; w < (t + 1) * per && w < words; ++w) {
      offsets[w] = run;
      run += popcount32(masks[w]);
    }
  });
}

/// Scatter kernel: word w writes its selected indices to sample[offsets[w] ...] in ascending order, and the word
/// that starts chunk c (of 2^chunk_bits indices) writes chunk_first[c] = offsets[w]; thread 0 writes
/// chunk_first[np >> chunk_bits] = r.
COMPACT_HOST_DEVICE inline void srht_select_scatter_thread(const Thread1d& th, const std::uint32_t* masks,
                                                           const std::uint32_t* offsets, index_t np, index_t r,
                                                           int chunk_bits, std::uint32_t* sample,
                                                           std::uint32_t* chunk_first) {
  const index_t words = (np + 31) / 32, chunk_mask = (index_t{1} << chunk_bits) - 1;
  for (index_t w = th.first(); w < words; w += th.step()) {
    const std::uint32_t m = masks[w];
    std::uint32_t at = offsets[w];
    if (((32 * w) & chunk_mask) == 0) chunk_first[(32 * w) >> chunk_bits] = at;
    for (int c = 0; c < 32; ++c) {
      if ((m >> c) & 1u) sample[at++] = static_cast<std::uint32_t>(32 * w + c);
    }
  }
  if (th.first() == 0) chunk_first[np >> chunk_bits] = static_cast<std::uint32_t>(r);
}

}  // namespace detail
}  // namespace compact
