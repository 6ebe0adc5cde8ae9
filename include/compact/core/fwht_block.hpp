// SPDX-License-Identifier: MIT
#pragma once
/// The GPU's FWHT of rows (or chunks of rows) by one thread block, written against the Block concept of
/// core/block.hpp so that the host tests run the kernels' own code.
///
/// A row of L = 2^c elements is held by T = 2^tau threads in E = 2^e registers each (c = tau + e, E = 32 or 64:
/// several elements per thread); a block holds R = 2^rows_log2 rows (several rows per block when a row needs fewer
/// than 128 threads). The transform is the product of one butterfly (a + b, a - b) per bit of the element index, and
/// these commute, so it is done in stages of e bits each, every stage entirely in registers: stage s holds the row
/// in layout L_b (b = min(s e, tau)), where register q of row-thread t holds element
///     k = (t_hi << (b + e)) | (q << b) | t_lo,   t_lo = t mod 2^b, t_hi = t >> b,
/// so that bits [b, b + e) of k are the register index and stage s transforms bits [s e, min((s + 1) e, c)).
/// Between stages the row goes once through shared memory (each thread writes its registers in one layout and reads
/// them in the next): ceil(c / e) stages and as many shared-memory writes, instead of one pass per bit. Stage 0 is
/// layout L_0, thread-contiguous (thread t holds elements [t E, t E + E)), so row loads and stores are 16-byte
/// vectors. Shared memory is addressed through a swizzle (element k at k xor ((k >> e) & 31)) and rows are padded
/// when several share a warp, which makes every stage's accesses free of bank conflicts (the host tests check it
/// for every shape).

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/core/block.hpp"

namespace compact {
namespace detail {

/// Longest transform one block does: the row lives in shared memory as fp32 (2^15 floats = 128 KiB).
inline constexpr int kFwhtMaxLog2 = 15;
/// Register count of the widest instantiation (rows longer than 2^10 use 64 registers per thread).
inline constexpr int kFwhtMaxElems = 64;
/// Threads per block the shapes reach with several rows per block (rows of 2^13 and more use 128 to 512).
inline constexpr int kFwhtMinBlockThreadsLog2 = 7;

/// Shape of one block's transforms: rows of 2^log2_len elements, 2^log2_threads threads per row with
/// 2^log2_elems registers each, 2^log2_rows rows per block, `stages` register stages.
struct FwhtShape {
  int log2_len;
  int log2_elems;
  int log2_threads;
  int log2_rows;
  int stages;
};

/// The shape for rows of 2^log2_len (<= 2^kFwhtMaxLog2): one thread per row up to 2^5 (one stage), 32 registers up
/// to 2^10 (two stages), 64 beyond (two stages up to 2^12, three up to 2^15: 512 threads); rows per block so that a
/// block has at least 128 threads.
COMPACT_HOST_DEVICE inline FwhtShape fwht_shape(int log2_len) {
  const int e = log2_len <= 5 ? log2_len : (log2_len <= 10 ? 5 : 6);
  const int tau = log2_len - e;
  const int rows = tau >= kFwhtMinBlockThreadsLog2 ? 0 : kFwhtMinBlockThreadsLog2 - tau;
  const int stages = log2_len == 0 ? 1 : (log2_len + e - 1) / e;
  return FwhtShape{log2_len, e, tau, rows, stages};
}

/// Threads of a block of shape s: rows times threads per row.
COMPACT_HOST_DEVICE inline index_t fwht_block_threads(const FwhtShape& s) {
  return index_t{1} << (s.log2_rows + s.log2_threads);
}

/// Floats between the rows of a block in shared memory: the row, padded by 2^tau when rows share a warp (tau < 5),
/// so that the rows of one warp start in different banks (rows of one element need no pad: a stride of 1 is odd).
COMPACT_HOST_DEVICE inline index_t fwht_row_stride(const FwhtShape& s) {
  const bool pad = s.log2_threads < 5 && s.log2_len > 0;
  return (index_t{1} << s.log2_len) + (pad ? (index_t{1} << s.log2_threads) : 0);
}

/// Dynamic shared memory of one block: its rows in fp32.
COMPACT_HOST_DEVICE inline std::size_t fwht_shared_bytes(const FwhtShape& s) {
  return sizeof(float) * static_cast<std::size_t>(fwht_row_stride(s) << s.log2_rows);
}

/// Where element k of row rho (of the block) lives in shared memory: the row's base plus the swizzled k.
COMPACT_HOST_DEVICE inline index_t fwht_shared_index(const FwhtShape& s, index_t rho, index_t k) {
  return rho * fwht_row_stride(s) + (k ^ ((k >> s.log2_elems) & 31));
}

/// Position b of the register field in stage `stage`'s layout: min(stage e, tau).
COMPACT_HOST_DEVICE inline int fwht_stage_layout(const FwhtShape& s, int stage) {
  const int b = stage * s.log2_elems;
  return b < s.log2_threads ? b : s.log2_threads;
}

/// Element held in register q of row-thread t in layout L_b.
COMPACT_HOST_DEVICE inline index_t fwht_layout_element(const FwhtShape& s, int b, index_t t, int q) {
  const index_t t_lo = t & ((index_t{1} << b) - 1), t_hi = t >> b;
  return (t_hi << (b + s.log2_elems)) | (static_cast<index_t>(q) << b) | t_lo;
}

/// Butterflies over register-index bits [first, first + count) of v, in place (kElems, the array size, is a
/// compile-time constant so the unrolled indices are constants and v stays in registers). With first = 0 and
/// count = log2(size) it is the whole transform of v, used by the multi-pass SRHT for the high bits of long rows.
template <int kElems>
COMPACT_HOST_DEVICE inline void fwht_register_bits(float (&v)[kElems], int first, int count) {
  COMPACT_UNROLL
  for (int level = 0; (1 << level) < kElems; ++level) {
    if (level < first || level >= first + count) continue;
    const int h = 1 << level;
    COMPACT_UNROLL
    for (int q = 0; q < kElems; ++q) {
      if ((q & h) == 0) {
        const float a = v[q], b = v[q + h];
        v[q] = a + b;
        v[q + h] = a - b;
      }
    }
  }
}

/// The whole transform of v's first 2^log2_elems values (the register pass of the two-pass SRHT).
template <int kElems>
COMPACT_HOST_DEVICE inline void fwht_register_levels(float (&v)[kElems], int log2_elems) {
  fwht_register_bits(v, 0, log2_elems);
}

/// Stage `stage`'s butterflies on thread t's registers, which hold the row in the stage's layout.
template <int kElems>
COMPACT_HOST_DEVICE inline void fwht_stage_butterflies(const FwhtShape& s, int stage, float (&v)[kElems]) {
  const int first = stage * s.log2_elems;
  const int last = first + s.log2_elems < s.log2_len ? first + s.log2_elems : s.log2_len;
  fwht_register_bits(v, first - fwht_stage_layout(s, stage), last - first);
}

/// Thread t of the block writes its registers (layout L_b of its row) to shared memory.
template <int kElems>
COMPACT_HOST_DEVICE inline void fwht_write_shared(const FwhtShape& s, int b, index_t t, const float (&v)[kElems],
                                                  float* sm) {
  const index_t rho = t >> s.log2_threads, tt = t & ((index_t{1} << s.log2_threads) - 1);
  COMPACT_UNROLL
  for (int q = 0; q < kElems; ++q) {
    if (q < (1 << s.log2_elems)) sm[fwht_shared_index(s, rho, fwht_layout_element(s, b, tt, q))] = v[q];
  }
}

/// Thread t of the block reads its registers (layout L_b of its row) from shared memory.
template <int kElems>
COMPACT_HOST_DEVICE inline void fwht_read_shared(const FwhtShape& s, int b, index_t t, float (&v)[kElems],
                                                 const float* sm) {
  const index_t rho = t >> s.log2_threads, tt = t & ((index_t{1} << s.log2_threads) - 1);
  COMPACT_UNROLL
  for (int q = 0; q < kElems; ++q) {
    v[q] = q < (1 << s.log2_elems) ? sm[fwht_shared_index(s, rho, fwht_layout_element(s, b, tt, q))] : 0.0f;
  }
}

/// Walsh-Hadamard transform (Sylvester order, unnormalized) of the block's rows, registers first: on entry regs[t]
/// holds thread t's elements in layout L_0 (element (t mod T) E + q of row t / T in register q); on return
/// sm[fwht_shared_index(s, rho, k)] holds element k of row rho's transform, and the block is past a barrier.
/// b.size() == fwht_block_threads(s); shared memory fwht_shared_bytes(s). Every butterfly is one fp32 add or
/// subtract (no fast-math, no product, so no contraction): the result depends only on the fixed level order.
template <int kElems, class Block, class Regs>
COMPACT_HOST_DEVICE inline void fwht_rows_forward(Block& b, Regs& regs, float* sm, const FwhtShape& s) {
  for (int stage = 0; stage < s.stages; ++stage) {
    const int layout = fwht_stage_layout(s, stage);
    // Within a stage a thread reads and writes only its own positions: the barrier is between stages.
    b.each([&](index_t t) {
      if (stage > 0) fwht_read_shared(s, layout, t, regs[t].v, sm);
      fwht_stage_butterflies(s, stage, regs[t].v);
      fwht_write_shared(s, layout, t, regs[t].v, sm);
    });
    b.sync();
  }
}

/// The same transform, shared memory first: on entry sm[fwht_shared_index(s, rho, k)] holds element k of row rho
/// (and the block is past a barrier since it was written); on return regs[t] holds thread t's elements of the
/// transform in layout L_0, and every thread has finished reading shared memory only for itself (call b.sync()
/// before sm is written again).
template <int kElems, class Block, class Regs>
COMPACT_HOST_DEVICE inline void fwht_rows_backward(Block& b, Regs& regs, float* sm, const FwhtShape& s) {
  for (int stage = s.stages - 1; stage >= 0; --stage) {
    const int layout = fwht_stage_layout(s, stage);
    b.each([&](index_t t) {
      fwht_read_shared(s, layout, t, regs[t].v, sm);
      fwht_stage_butterflies(s, stage, regs[t].v);
      if (stage > 0) fwht_write_shared(s, layout, t, regs[t].v, sm);
    });
    if (stage > 0) b.sync();
  }
}

}  // namespace detail
}  // namespace compact
