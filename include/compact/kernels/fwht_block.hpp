// SPDX-License-Identifier: MIT
#pragma once
/// The GPU's FWHT of rows (or chunks of rows) by one thread block, written against the Block concept of
/// kernels/block.hpp so that the host tests run the kernels' own code.
///
/// A row of L = 2^c elements is held by T = 2^tau threads in E = 2^e registers each (E = 32 up to 2^10, 64 beyond:
/// several elements per thread; c = tau + e, and rows shorter than 32 are one thread's, padded with zeros in
/// registers); a block holds R = 2^rows rows (several rows per block when a row needs fewer than 128 threads). The
/// transform is the product of one butterfly (a + b, a - b) per bit of the element index, and these commute, so it is
/// done in stages of e bits each, every stage entirely in registers: stage s holds the row in layout L_b
/// (b = min(s e, tau)), where register q of row-thread t holds element
///     k = (t_hi << (b + e)) | (q << b) | t_lo,   t_lo = t mod 2^b, t_hi = t >> b,
/// so that bits [b, b + e) of k are the register index and stage s transforms bits [s e, min((s + 1) e, c)).
/// Between stages the row goes once through shared memory (each thread writes its registers in one layout and reads
/// them in the next): ceil(c / e) stages and as many shared-memory writes, instead of one pass per bit. Stage 0 is
/// layout L_0, thread-contiguous (thread t holds elements [t E, t E + E)), so row loads and stores are 16-byte
/// vectors. In shared memory element k sits at k + (k >> e) (one pad word per E), which makes every stage's accesses
/// free of bank conflicts (the host tests check it for every shape) and keeps them one multiply-add each for the
/// long rows. E is always the kernel's register count, so the unrolled loops carry no per-register test.

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/kernels/block.hpp"

namespace compact {
namespace detail {

/// Longest transform one thread block does in its shared memory, where the row lives as fp32 (2^15 floats =
/// 128 KiB); longer rows (up to kSrhtMaxPaddedLog2) take the SRHT's two-pass plan (kernels/srht_row_kernels.hpp).
inline constexpr int kFwhtSharedMaxLog2 = 15;
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

/// The shape for rows of 2^log2_len (<= 2^kFwhtSharedMaxLog2): 32 registers per thread up to 2^10 (one thread per row,
/// one stage, up to 2^5; two stages beyond), 64 beyond (two stages up to 2^12, three up to 2^15: 512 threads); rows per
/// block so that a block has at least 128 threads.
COMPACT_HOST_DEVICE inline FwhtShape fwht_shape(int log2_len) {
  const int e = log2_len <= 10 ? 5 : 6;
  const int tau = log2_len > e ? log2_len - e : 0;
  const int rows = tau >= kFwhtMinBlockThreadsLog2 ? 0 : kFwhtMinBlockThreadsLog2 - tau;
  const int stages = log2_len == 0 ? 1 : (log2_len + e - 1) / e;
  return FwhtShape{log2_len, e, tau, rows, stages};
}

/// Threads of a block of shape s: rows times threads per row.
COMPACT_HOST_DEVICE inline index_t fwht_block_threads(const FwhtShape& s) {
  return index_t{1} << (s.log2_rows + s.log2_threads);
}

/// Elements a row occupies in registers and shared memory: 2^log2_len, or E for rows shorter than one thread's E
/// registers (the rest zero padding that no butterfly reaches).
COMPACT_HOST_DEVICE inline index_t fwht_row_span(const FwhtShape& s) {
  return index_t{1} << (s.log2_len > s.log2_elems ? s.log2_len : s.log2_elems);
}

/// Floats between the rows of a block in shared memory: the row's span plus one pad word per E words (see
/// fwht_shared_index): 2^c + 2^tau, or E + 1 for rows shorter than E.
COMPACT_HOST_DEVICE inline index_t fwht_row_stride(const FwhtShape& s) {
  return fwht_row_span(s) + (fwht_row_span(s) >> s.log2_elems);
}

/// Dynamic shared memory of one block: its rows in fp32.
COMPACT_HOST_DEVICE inline std::size_t fwht_shared_bytes(const FwhtShape& s) {
  return sizeof(float) * static_cast<std::size_t>(fwht_row_stride(s) << s.log2_rows);
}

/// Where element k of row rho (of the block) lives in shared memory: the row's base plus k plus one pad word per E
/// words before it, k + (k >> e). The pad makes every layout's accesses free of bank conflicts (each warp's 32
/// addresses of one register fall in 32 banks; the tests check every shape), and it keeps the address linear in
/// the register index q for the layouts with b = 0 or b >= e (fwht_layout_stride). In-block indices are 32-bit
/// (a block holds at most 2^17 floats).
COMPACT_HOST_DEVICE inline std::uint32_t fwht_shared_index(const FwhtShape& s, std::uint32_t rho, std::uint32_t k) {
  return rho * static_cast<std::uint32_t>(fwht_row_stride(s)) + k + (k >> s.log2_elems);
}

/// Position b of the register field in stage `stage`'s layout: min(stage e, tau).
COMPACT_HOST_DEVICE inline int fwht_stage_layout(const FwhtShape& s, int stage) {
  const int b = stage * s.log2_elems;
  return b < s.log2_threads ? b : s.log2_threads;
}

/// Element held in register q of row-thread t in layout L_b: the thread's bits, plus q << b.
COMPACT_HOST_DEVICE inline std::uint32_t fwht_layout_thread_bits(const FwhtShape& s, int b, std::uint32_t t) {
  return ((t >> b) << (b + s.log2_elems)) | (t & ((1u << b) - 1u));
}

COMPACT_HOST_DEVICE inline std::uint32_t fwht_layout_element(const FwhtShape& s, int b, std::uint32_t t, int q) {
  return fwht_layout_thread_bits(s, b, t) + (static_cast<std::uint32_t>(q) << b);
}

/// The shared-memory offset of register q in layout L_b beyond that of register 0: with k = kt + (q << b) (kt the
/// thread's bits) the index is kt + (kt >> e) + offset. The offset is q stride with stride = 1 for b = 0 (q < 2^e
/// never carries into bit e) and stride = 2^b + 2^(b - e) for b >= e (q << b has no bits below e): linear in q, so
/// each unrolled access is one multiply-add. For 0 < b < e (rows of 2^6 .. 2^11 only; fwht_layout_stride returns 0)
/// it is (q << b) + (q >> (e - b)): kt's bits below b cannot carry into bit e.
COMPACT_HOST_DEVICE inline std::uint32_t fwht_layout_stride(const FwhtShape& s, int b) {
  return b == 0 ? 1u : (b >= s.log2_elems ? (1u << b) + (1u << (b - s.log2_elems)) : 0u);
}

COMPACT_HOST_DEVICE inline std::uint32_t fwht_narrow_offset(const FwhtShape& s, int b, int q) {
  const std::uint32_t u = static_cast<std::uint32_t>(q);
  return (u << b) + (u >> (s.log2_elems - b));
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

/// Shared-memory index of register 0 of thread t of the block in layout L_b (fwht_shared_index of its element).
COMPACT_HOST_DEVICE inline std::uint32_t fwht_layout_base(const FwhtShape& s, int b, index_t t) {
  const std::uint32_t tt = static_cast<std::uint32_t>(t), rho = tt >> s.log2_threads;
  return fwht_shared_index(s, rho, fwht_layout_thread_bits(s, b, tt & ((1u << s.log2_threads) - 1u)));
}

/// Thread t of the block writes its registers (layout L_b of its row) to shared memory; kElems == 2^s.log2_elems.
template <int kElems>
COMPACT_HOST_DEVICE inline void fwht_write_shared(const FwhtShape& s, int b, index_t t, const float (&v)[kElems],
                                                  float* sm) {
  float* at = sm + fwht_layout_base(s, b, t);
  const std::uint32_t stride = fwht_layout_stride(s, b);
  if (stride != 0) {
    COMPACT_UNROLL
    for (int q = 0; q < kElems; ++q) at[static_cast<std::uint32_t>(q) * stride] = v[q];
  } else {
    COMPACT_UNROLL
    for (int q = 0; q < kElems; ++q) at[fwht_narrow_offset(s, b, q)] = v[q];
  }
}

/// Thread t of the block reads its registers (layout L_b of its row) from shared memory; kElems == 2^s.log2_elems.
template <int kElems>
COMPACT_HOST_DEVICE inline void fwht_read_shared(const FwhtShape& s, int b, index_t t, float (&v)[kElems],
                                                 const float* sm) {
  const float* at = sm + fwht_layout_base(s, b, t);
  const std::uint32_t stride = fwht_layout_stride(s, b);
  if (stride != 0) {
    COMPACT_UNROLL
    for (int q = 0; q < kElems; ++q) v[q] = at[static_cast<std::uint32_t>(q) * stride];
  } else {
    COMPACT_UNROLL
    for (int q = 0; q < kElems; ++q) v[q] = at[fwht_narrow_offset(s, b, q)];
  }
}

/// Walsh-Hadamard transform (Sylvester order, unnormalized) of the block's rows, registers first: on entry regs[t]
/// holds thread t's elements in layout L_0 (element (t mod T) E + q of row t / T in register q, zero past a row
/// shorter than E), kElems == 2^s.log2_elems; on return
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
    if (stage < s.stages - 1) {
      // The previous stage's result goes back in its own layout; written here rather than at the end of its
      // iteration (as fwht_rows_forward does) because then ptxas keeps the unsketch kernels' register arrays
      // within 128 registers (nvcc 13: 170 wanted, spilled at 512 threads), the sketch kernels' either way.
      b.each([&](index_t t) { fwht_write_shared(s, fwht_stage_layout(s, stage + 1), t, regs[t].v, sm); });
      b.sync();
    }
    b.each([&](index_t t) {
      fwht_read_shared(s, fwht_stage_layout(s, stage), t, regs[t].v, sm);
      fwht_stage_butterflies(s, stage, regs[t].v);
    });
  }
}

}  // namespace detail
}  // namespace compact
