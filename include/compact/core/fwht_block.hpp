// SPDX-License-Identifier: MIT
#pragma once
/// The GPU's FWHT of one row (or one chunk of a row) by one thread block, written against the Block concept of
/// core/block.hpp so that the host tests run the kernels' own code.
///
/// One block transforms L = 2^log2_len elements held by T = 2^log2_threads threads in E = 2^log2_elems registers
/// each; register q of thread t holds element (q << log2_threads) | t, so the threads of a warp touch consecutive
/// addresses (coalesced global access, conflict-free shared memory). Levels (bits of the element index) are done
/// in three stages, all with fp32 butterflies (a + b, a - b):
///   registers:    bits [log2_threads, log2_len)        (the register index q)
///   warp shuffle: bits [0, min(5, log2_threads))        (the lane)
///   shared:       bits [5, log2_threads)                (the warp), one barrier per level
/// The Hadamard transform is the product of the per-bit butterflies, which commute, so the order is free.

#include <cstdint>

#include "compact/config.hpp"
#include "compact/core/block.hpp"

namespace compact {
namespace detail {

/// Longest transform one block does: the row lives in shared memory as fp32 (2^15 floats = 128 KiB).
inline constexpr int kFwhtMaxLog2 = 15;
/// Register count of the widest instantiation (2^15 = 1024 threads x 32 registers).
inline constexpr int kFwhtMaxElems = 32;

/// Shape of one block's transform.
struct FwhtShape {
  int log2_len;
  int log2_elems;
  int log2_threads;
};

/// Launch shape for length 2^log2_len (<= 2^kFwhtMaxLog2): 16 registers per thread up to 2^14 (at most 1024
/// threads), 32 for 2^15; one thread with all elements for lengths up to 16.
COMPACT_HOST_DEVICE inline FwhtShape fwht_shape(int log2_len) {
  const int log2_elems = log2_len <= 4 ? log2_len : (log2_len <= 14 ? 4 : log2_len - 10);
  return FwhtShape{log2_len, log2_elems, log2_len - log2_elems};
}

/// Dynamic shared memory of one block's transform: the fp32 row.
COMPACT_HOST_DEVICE inline std::size_t fwht_shared_bytes(const FwhtShape& s) { return sizeof(float) << s.log2_len; }

/// Element held in register q of thread t.
COMPACT_HOST_DEVICE inline index_t fwht_element(const FwhtShape& s, index_t thread, int q) {
  return (static_cast<index_t>(q) << s.log2_threads) | thread;
}

/// Levels done with warp shuffles: lane bits [0, fwht_warp_levels).
COMPACT_HOST_DEVICE inline int fwht_warp_levels(const FwhtShape& s) { return s.log2_threads < 5 ? s.log2_threads : 5; }

/// One butterfly as seen by one side: the lower element becomes own + partner, the upper partner - own.
COMPACT_HOST_DEVICE inline float fwht_butterfly(float own, float partner, bool upper) {
  return upper ? partner - own : own + partner;
}

/// The register stage: butterflies over the low `log2_elems` bits of the register index, in place on v[0,
/// 2^log2_elems). kMaxElems is the array size (compile time, so the indices are constants after unrolling). Also the
/// whole transform of a thread's 2^log2_elems values, used by the multi-pass SRHT for the high bits of long rows.
template <int kMaxElems>
COMPACT_HOST_DEVICE inline void fwht_register_levels(float (&v)[kMaxElems], int log2_elems) {
  for (int level = 0; (1 << level) < kMaxElems; ++level) {
    if (level >= log2_elems) break;
    const int h = 1 << level;
    for (int q = 0; q < kMaxElems; ++q) {
      if ((q & h) == 0) {
        const float a = v[q], b = v[q + h];
        v[q] = a + b;
        v[q + h] = a - b;
      }
    }
  }
}

/// A butterfly pair of element indices (lo, hi = lo + 2^level).
struct IndexPair {
  index_t lo, hi;
};

/// Pair number p (0 <= p < L/2) of level `level`: insert a zero bit at position `level` of p.
COMPACT_HOST_DEVICE inline IndexPair fwht_pair(index_t p, int level) {
  const index_t low = p & ((index_t{1} << level) - 1);
  const index_t lo = ((p >> level) << (level + 1)) | low;
  return IndexPair{lo, lo | (index_t{1} << level)};
}

/// Pairs per thread in a shared-memory level: L/2 pairs over T threads; thread t takes pairs t + k T.
COMPACT_HOST_DEVICE inline index_t fwht_shared_pairs_per_thread(const FwhtShape& s) {
  return s.log2_len == 0 ? 0 : (index_t{1} << (s.log2_len - 1)) >> s.log2_threads;
}

/// Thread t's butterflies of shared-memory level `level` (5 <= level < log2_threads) on the row in sm.
COMPACT_HOST_DEVICE inline void fwht_shared_level(float* sm, const FwhtShape& s, index_t t, int level) {
  const index_t threads = index_t{1} << s.log2_threads, pairs = fwht_shared_pairs_per_thread(s);
  for (index_t k = 0; k < pairs; ++k) {
    const IndexPair p = fwht_pair(t + k * threads, level);
    const float a = sm[p.lo], b = sm[p.hi];
    sm[p.lo] = a + b;
    sm[p.hi] = a - b;
  }
}

/// Walsh-Hadamard transform (Sylvester order, unnormalized) of the row held by block `b`, length 2^s.log2_len.
///
/// On entry regs[t].v[q] holds element fwht_element(s, t, q) for q < 2^s.log2_elems and every thread t of the
/// block (b.size() == 2^s.log2_threads). On return the transformed row is in sm[0, 2^s.log2_len) and the block is
/// past a barrier. Every butterfly is one fp32 add or subtract (no fast-math, and an add of a product is never
/// formed, so no contraction), so the result depends only on the level order, which is fixed.
template <int kElems, class Block, class Regs>
COMPACT_HOST_DEVICE inline void fwht_block_transform(Block& b, Regs& regs, float* sm, const FwhtShape& s) {
  const int elems = 1 << s.log2_elems;
  b.each([&](index_t t) { fwht_register_levels(regs[t].v, s.log2_elems); });
  for (int level = 0; level < fwht_warp_levels(s); ++level) {
    b.exchange_xor(regs, 1 << level, elems, [level](index_t t, int, float own, float partner) {
      return fwht_butterfly(own, partner, (t >> level) & 1);
    });
  }
  b.each([&](index_t t) {
    for (int q = 0; q < kElems; ++q) {
      if (q < elems) sm[fwht_element(s, t, q)] = regs[t].v[q];
    }
  });
  b.sync();
  for (int level = 5; level < s.log2_threads; ++level) {
    b.each([&](index_t t) { fwht_shared_level(sm, s, t, level); });
    b.sync();
  }
}

}  // namespace detail
}  // namespace compact
