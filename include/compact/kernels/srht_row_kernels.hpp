// SPDX-License-Identifier: MIT
#pragma once
/// The GPU SRHT's row kernels as host/device functions of (block, thread): z = x P and out = alpha g P^T + beta out
/// for P = D H S / sqrt(r) of spec/srht.hpp, by one FWHT per padded row, in one pass for n' <= 2^15 and two passes
/// (a global-memory pass over the high bits, a shared-memory pass over chunks) up to n' = 2^20.
///
/// A padded row of n' = 2^L elements is cut into 2^h chunks of 2^c contiguous elements (c + h = L, the SrhtPlan):
/// element k = (hi << c) | lo. Bits [0, c) are transformed by a block (kernels/fwht_block.hpp: registers in stages,
/// several rows or chunks per block when they are short), bits [c, L) by one thread per position lo holding the
/// 2^h elements (hi, lo) in registers. The butterflies of different bits commute, so sketch does the high bits first
/// (x (.) d into an fp32 scratch, then the chunks, each gathering the sampled columns that fall in it) and
/// unsketch_grad the chunks first (the scattered g, into the scratch, then the high bits, d, alpha and beta into
/// out). With h = 0 the chunk is the row and the chunk kernels read x (sketch) or write out (unsketch_grad) directly:
/// one pass, no scratch. The chunk kernels load and store rows as 16-byte vectors wherever the row is 16-byte
/// aligned, each thread holding 32 or 64 consecutive elements.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/philox.hpp"
#include "compact/spec/srht.hpp"
#include "compact/kernels/block.hpp"
#include "compact/kernels/convert.hpp"
#include "compact/kernels/dense_panel.hpp"
#include "compact/kernels/fwht_block.hpp"
#include "compact/kernels/grid.hpp"
#include "compact/kernels/vec16.hpp"

namespace compact {
namespace detail {

/// Bits the register pass does: a thread holds 2^h <= kSrhtMaxHighElems elements of a row.
inline constexpr int kSrhtMaxHighBits = 5;
/// Register array of the register pass: 2^kSrhtMaxHighBits.
inline constexpr int kSrhtMaxHighElems = 1 << kSrhtMaxHighBits;
/// Chunk bits every supported GPU can do in one block: a chunk of 2^13 takes 33 KiB of shared memory (2^14 takes
/// 65 KiB, one more than sm_75 gives; sm_86 and sm_89 give 99 KiB: 2^14; sm_80 and sm_90 163 and 227 KiB: 2^15).
inline constexpr int kSrhtPortableChunkBits = 13;

// ---------------------------------------------------------------------------------------------------------------
// Plan: how a row is cut.

/// n' = 2^log2_len cut into 2^high_bits chunks of 2^chunk_bits elements; `chunk` is the block shape of a chunk.
struct SrhtPlan {
  int log2_len, chunk_bits, high_bits;
  FwhtShape chunk;
};

/// The plan for n' = 2^log2_len when a block may transform at most 2^max_chunk_bits elements: the largest chunk.
COMPACT_HOST_DEVICE inline SrhtPlan srht_plan(int log2_len, int max_chunk_bits) {
  const int c = log2_len < max_chunk_bits ? log2_len : max_chunk_bits;
  return SrhtPlan{log2_len, c, log2_len - c, fwht_shape(c)};
}

/// The largest chunk (as bits) whose block (fwht_shape) fits `shared_bytes` of shared memory, at most
/// kFwhtSharedMaxLog2.
inline int srht_max_chunk_bits(std::size_t shared_bytes) {
  int c = 0;
  while (c < kFwhtSharedMaxLog2 && fwht_shared_bytes(fwht_shape(c + 1)) <= shared_bytes) ++c;
  return c;
}

/// Whether (n', plan) needs the fp32 scratch (two passes).
COMPACT_HOST_DEVICE inline bool srht_two_pass(const SrhtPlan& p) { return p.high_bits > 0; }

// ---------------------------------------------------------------------------------------------------------------
// Signs as the kernels read them: packed 32 per word, then one word of bits per thread.

/// Word w of the packed signs of d: bit c set iff d_{32 w + c} = -1, for 32 w + c < np (higher bits 0). One sign
/// block of spec/srht.hpp per word (32 w .. 32 w + 31 lie in one 128-sign block).
COMPACT_HOST_DEVICE inline std::uint32_t srht_sign_word(const Key2x32& key, std::uint64_t window, index_t w,
                                                        index_t np) {
  const Words4x32 x = srht_sign_block(key, window, (32 * w) / kSrhtSignBlockCols);
  std::uint32_t word = 0;
  for (index_t c = 32 * w; c < 32 * w + 32 && c < np; ++c) word |= srht_sign_bit_in(x, c) << (c % 32);
  return word;
}

/// Sign bit of d_k from the packed words.
COMPACT_HOST_DEVICE inline std::uint32_t srht_packed_sign(const std::uint32_t* sign_words, index_t k) {
  return (sign_words[k / 32] >> (k % 32)) & 1u;
}

/// The sign bits of d_{k0}, ..., d_{k0 + count - 1} (bit q set iff d_{k0 + q} = -1), count <= 64, from the packed
/// words; k0 is a multiple of count (a chunk thread's elements in layout L_0), so at most two whole words are read.
COMPACT_HOST_DEVICE inline std::uint64_t srht_sign_bits(const std::uint32_t* sign_words, index_t k0, int count) {
  if (count > 32) {
    return static_cast<std::uint64_t>(sign_words[k0 / 32]) |
           (static_cast<std::uint64_t>(sign_words[k0 / 32 + 1]) << 32);
  }
  const std::uint32_t word = sign_words[k0 / 32] >> (k0 % 32);
  return count == 32 ? word : word & ((1u << count) - 1u);
}

/// The setup kernel's sign part: word w of the packed signs for every w < ceil(np / 32) of thread th's tasks.
COMPACT_HOST_DEVICE inline void srht_sign_words_thread(const Thread1d& th, const Key2x32& key, std::uint64_t window,
                                                       index_t np, std::uint32_t* sign_words) {
  const index_t words = (np + 31) / 32;
  for (index_t w = th.first(); w < words; w += th.step()) sign_words[w] = srht_sign_word(key, window, w, np);
}

// ---------------------------------------------------------------------------------------------------------------
// Row kernels.

/// What the row kernels read, all in the projector's workspace: the sample S (r indices, ascending), the packed
/// signs of d, and chunk_first[c] = the first j with S_j >= c 2^chunk_bits for c <= 2^high_bits (so the sampled
/// columns of chunk c are j in [chunk_first[c], chunk_first[c + 1]) and chunk_first[2^high_bits] = r).
struct SrhtRows {
  const std::uint32_t* sample;
  const std::uint32_t* sign_words;
  const std::uint32_t* chunk_first;
  index_t n;
  index_t r;
  float scale;
  SrhtPlan plan;
};

/// Where a chunk kernel reads (sketch) or writes (unsketch_grad) its rows: kDirect, one pass, x or out itself
/// (and the kernel applies d); kScratch, two passes, the fp32 scratch of `rows` rows of n' that the register pass
/// writes or reads.
enum class SrhtChunkIo { kDirect, kScratch };

/// Block tasks of a chunk kernel over `rows` rows: one per (row, chunk), row-major; a block takes
/// 2^chunk.log2_rows consecutive tasks.
COMPACT_HOST_DEVICE inline index_t srht_chunk_tasks(const SrhtPlan& p, index_t rows) { return rows << p.high_bits; }

/// Blocks of a chunk kernel that cover `rows` rows (before any cap on the grid).
COMPACT_HOST_DEVICE inline index_t srht_chunk_blocks_needed(const SrhtPlan& p, index_t rows) {
  const index_t per_block = index_t{1} << p.chunk.log2_rows;
  return (srht_chunk_tasks(p, rows) + per_block - 1) / per_block;
}

/// Thread tasks of a register pass over `rows` rows: one per (row, position lo in a chunk).
COMPACT_HOST_DEVICE inline index_t srht_register_tasks(const SrhtPlan& p, index_t rows) { return rows << p.chunk_bits; }

// ---------------------------------------------------------------------------------------------------------------
// Launch geometry (the launchers in cuda/srht_kernels.cuh use these; tests/kernels/test_launch_limits.cpp checks them
// against the device limits of sm_80 and sm_90).

/// Grid cap of the row kernels: beyond 2^16 blocks they stride.
inline constexpr index_t kSrhtMaxBlocks = index_t{1} << 16;
/// Threads per block of the register passes and of the materialize kernel, and their __launch_bounds__.
inline constexpr int kSrhtRegisterThreads = 256;

/// Registers per thread (E) of plan p's chunk kernels: 64 for chunks longer than 2^10, else 32.
COMPACT_HOST_DEVICE inline int srht_chunk_elems(const SrhtPlan& p) { return p.chunk.log2_elems > 5 ? 64 : 32; }

/// Most threads a block of a chunk kernel with `elems` registers per thread has (fwht_shape): 128 with 32 registers
/// (rows up to 2^10), 512 with 64 (2^15 in 64 registers per thread). The kernels' launch bounds, which let ptxas
/// keep the register arrays in registers (about 115 per thread with 64, at most 128 for 512 threads).
constexpr int srht_chunk_max_threads(int elems) {
  return elems > 32 ? 1 << (kFwhtSharedMaxLog2 - 6) : 1 << kFwhtMinBlockThreadsLog2;
}

/// Grid of a chunk kernel over `rows` rows: one block per 2^chunk.log2_rows (row, chunk) tasks, at most
/// kSrhtMaxBlocks (grid-stride beyond). Block: fwht_block_threads(p.chunk) threads, fwht_shared_bytes(p.chunk) bytes.
inline index_t srht_chunk_blocks(const SrhtPlan& p, index_t rows) {
  const index_t needed = srht_chunk_blocks_needed(p, rows);
  return needed < kSrhtMaxBlocks ? needed : kSrhtMaxBlocks;
}

/// Grid of a register pass over `rows` rows: kSrhtRegisterThreads threads per block, grid-stride beyond 2^16 blocks.
inline Launch1d srht_register_launch(const SrhtPlan& p, index_t rows) {
  return grid_stride_launch(srht_register_tasks(p, rows), kSrhtRegisterThreads);
}

/// Rows per launch group: all of them with one pass; with two, at most scratch_rows (what the scratch holds).
inline index_t srht_group_rows(const SrhtPlan& p, index_t rows, index_t scratch_rows) {
  return srht_two_pass(p) && scratch_rows < rows ? scratch_rows : rows;
}

/// Loads the kElems consecutive values src[k0 + q] of a row, converted to fp32, zero at and past `valid`. Whole
/// 16-byte vectors when src + k0 is 16-byte aligned (k0 is a multiple of kElems, so all of the thread's vectors are)
/// and the vector lies below `valid`; single elements else.
template <int kElems, class In, class ToFloat>
COMPACT_HOST_DEVICE inline void srht_load_values(const In* src, index_t k0, index_t valid, ToFloat to_float,
                                                 float (&v)[kElems]) {
  constexpr int kVec = kVec16Elems<In>;
  static_assert(kElems % kVec == 0, "compact::detail::srht_load_values: whole vectors per thread");
  const bool vectors = is_aligned16(src + k0);
  COMPACT_UNROLL
  for (int m = 0; m < kElems / kVec; ++m) {
    const int q0 = m * kVec;
    if (vectors && k0 + q0 + kVec <= valid) {
      const Vec16 x = load_vec16(src + k0 + q0);
      COMPACT_UNROLL
      for (int l = 0; l < kVec; ++l) v[q0 + l] = to_float(vec16_get<In>(x, l));
    } else {
      COMPACT_UNROLL
      for (int l = 0; l < kVec; ++l) v[q0 + l] = k0 + q0 + l < valid ? to_float(src[k0 + q0 + l]) : 0.0f;
    }
  }
}

/// Stores value(q, old) at dst[k0 + q] for the kElems values with k0 + q < valid: whole 16-byte vectors where
/// dst + k0 is 16-byte aligned and the vector lies below `valid`, single elements else. old is the fp32 value there
/// before (read as a vector too) when `read_old`, else 0.
template <int kElems, class Out, class Value, class ToFloat>
COMPACT_HOST_DEVICE inline void srht_store_values(Out* dst, index_t k0, index_t valid, bool read_old, ToFloat to_float,
                                                  Value value) {
  constexpr int kVec = kVec16Elems<Out>;
  static_assert(kElems % kVec == 0, "compact::detail::srht_store_values: whole vectors per thread");
  using Bits = decltype(raw_bits(std::declval<Out>()));
  const bool vectors = is_aligned16(dst + k0);
  COMPACT_UNROLL
  for (int m = 0; m < kElems / kVec; ++m) {
    const int q0 = m * kVec;
    if (vectors && k0 + q0 + kVec <= valid) {
      Vec16 old{};
      if (read_old) old = load_vec16(dst + k0 + q0);
      Bits bits[kVec];
      COMPACT_UNROLL
      for (int l = 0; l < kVec; ++l) {
        bits[l] = raw_bits(value(q0 + l, read_old ? to_float(vec16_get<Out>(old, l)) : 0.0f));
      }
      store_vec16(dst + k0 + q0, pack_vec16(bits));
    } else {
      COMPACT_UNROLL
      for (int l = 0; l < kVec; ++l) {
        if (k0 + q0 + l < valid) {
          Out* at = dst + k0 + q0 + l;
          *at = value(q0 + l, read_old ? to_float(*at) : 0.0f);
        }
      }
    }
  }
}

/// The chunk task of thread t of a block whose first task is task0: row-in-block rho = t >> tau, thread in row tt.
struct SrhtChunkThread {
  index_t rho, tt, task, row, chunk;
  bool active;
};

COMPACT_HOST_DEVICE inline SrhtChunkThread srht_chunk_thread(const SrhtPlan& p, index_t task0, index_t tasks,
                                                             index_t t) {
  const FwhtShape& s = p.chunk;
  const index_t rho = t >> s.log2_threads, tt = t & ((index_t{1} << s.log2_threads) - 1), task = task0 + rho;
  return SrhtChunkThread{rho, tt, task, task >> p.high_bits, task & ((index_t{1} << p.high_bits) - 1), task < tasks};
}

/// Sketch, chunk kernel: for every (row, chunk c) task of block b (2^chunk.log2_rows consecutive tasks per block,
/// grid-stride beyond), the chunk's FWHT and the gather z[row, j] = scale * y[S_j] for the sampled columns j of
/// the chunk.
///
/// kIo = kDirect (one pass): the chunk is the row, loaded as x[row, k] d_k (0 for k >= n). kIo = kScratch: the
/// chunk is scratch[row * n' + c 2^chunk_bits + k], already signed and transformed over the high bits.
/// b.size() == fwht_block_threads(plan.chunk); shared memory fwht_shared_bytes(plan.chunk); kElems >=
/// == 2^plan.chunk.log2_elems (32 or 64).
template <int kElems, SrhtChunkIo kIo, class Block, class In, class Out, class ToFloat, class FromFloat>
COMPACT_HOST_DEVICE inline void srht_sketch_chunks(Block& b, const SrhtRows& d, const In* x, index_t ldx,
                                                   const float* scratch, Out* z, index_t ldz, index_t rows,
                                                   ToFloat to_float, FromFloat from_float) {
  const FwhtShape s = d.plan.chunk;
  const int cb = d.plan.chunk_bits;
  const index_t np = index_t{1} << d.plan.log2_len, tasks = srht_chunk_tasks(d.plan, rows);
  const index_t per_block = index_t{1} << s.log2_rows, threads_per_row = index_t{1} << s.log2_threads;
  float* sm = b.template shared<float>();
  auto regs = b.template local<Registers<kElems>>();
  auto negative = b.template local<std::uint64_t>();  // d's sign bits of the thread's elements (one pass)
  if constexpr (kIo == SrhtChunkIo::kDirect) {
    b.each(
        [&](index_t t) { negative[t] = srht_sign_bits(d.sign_words, (t & (threads_per_row - 1)) * kElems, kElems); });
  }
  for (index_t task0 = b.index() * per_block; task0 < tasks; task0 += b.count() * per_block) {
    b.each([&](index_t t) {
      const SrhtChunkThread th = srht_chunk_thread(d.plan, task0, tasks, t);
      const index_t k0 = th.tt * kElems;
      if (!th.active) {
        COMPACT_UNROLL
        for (int q = 0; q < kElems; ++q) regs[t].v[q] = 0.0f;
      } else if constexpr (kIo == SrhtChunkIo::kDirect) {
        srht_load_values(x + th.row * ldx, k0, d.n, to_float, regs[t].v);
        COMPACT_UNROLL
        for (int q = 0; q < kElems; ++q) {
          if ((negative[t] >> q) & 1u) regs[t].v[q] = -regs[t].v[q];
        }
      } else {
        srht_load_values(scratch + th.row * np + (th.chunk << cb), k0, index_t{1} << cb, Identity{}, regs[t].v);
      }
    });
    fwht_rows_forward<kElems>(b, regs, sm, s);
    b.each([&](index_t t) {
      const SrhtChunkThread th = srht_chunk_thread(d.plan, task0, tasks, t);
      if (!th.active) return;
      const index_t first = d.chunk_first[th.chunk], last = d.chunk_first[th.chunk + 1];
      const std::uint32_t base = static_cast<std::uint32_t>(th.chunk << cb), rho = static_cast<std::uint32_t>(th.rho);
      for (index_t j = first + th.tt; j < last; j += threads_per_row) {
        z[th.row * ldz + j] = from_float(d.scale * sm[fwht_shared_index(s, rho, d.sample[j] - base)]);
      }
    });
    b.sync();  // the next tasks overwrite sm
  }
}

/// Sketch, register pass (two passes only): thread th's (row, lo) tasks load x[row, k] d_k (0 for k >= n) for
/// k = (hi << chunk_bits) | lo, hi < 2^high_bits, transform them over the high bits and store them to
/// scratch[row * n' + k].
template <class In, class ToFloat>
COMPACT_HOST_DEVICE inline void srht_sketch_registers_thread(const Thread1d& th, const SrhtRows& d, const In* x,
                                                             index_t ldx, float* scratch, index_t rows,
                                                             ToFloat to_float) {
  const int cb = d.plan.chunk_bits, hb = d.plan.high_bits;
  const index_t np = index_t{1} << d.plan.log2_len, lo_mask = (index_t{1} << cb) - 1;
  for (index_t task = th.first(); task < srht_register_tasks(d.plan, rows); task += th.step()) {
    const index_t row = task >> cb, lo = task & lo_mask;
    float v[kSrhtMaxHighElems];
    for (int hi = 0; hi < kSrhtMaxHighElems; ++hi) {
      const index_t k = (static_cast<index_t>(hi) << cb) | lo;
      v[hi] = 0.0f;
      if (hi < (1 << hb) && k < d.n) {
        const float xk = to_float(x[row * ldx + k]);
        v[hi] = srht_packed_sign(d.sign_words, k) ? -xk : xk;
      }
    }
    fwht_register_levels(v, hb);
    for (int hi = 0; hi < kSrhtMaxHighElems; ++hi) {
      if (hi < (1 << hb)) scratch[row * np + ((static_cast<index_t>(hi) << cb) | lo)] = v[hi];
    }
  }
}

/// The final value of out[row, k] in unsketch_grad from the transform's scaled value and out's old value:
/// alpha (d_k scale y) + beta old, with old not used when beta = 0 (out not read).
COMPACT_HOST_DEVICE inline float srht_unsketch_value(std::uint32_t negative, float scaled, float alpha, float beta,
                                                     float old) {
  float val = alpha * (negative ? -scaled : scaled);
  if (beta != 0.0f) val += beta * old;
  return val;
}

/// unsketch_grad, chunk kernel: for every (row, chunk c) task of block b (2^chunk.log2_rows consecutive tasks per
/// block), the sampled g[row, j] of the chunk are scattered to S_j (zeros elsewhere) and transformed. kIo = kDirect
/// (one pass): out[row, k] = alpha d_k scale y_k + beta out[row, k] for k < n. kIo = kScratch:
/// scratch[row * n' + c 2^chunk_bits + k] = y_k, for the register pass to finish. b.size() ==
/// fwht_block_threads(plan.chunk); shared memory fwht_shared_bytes(plan.chunk); kElems == 2^plan.chunk.log2_elems.
template <int kElems, SrhtChunkIo kIo, class Block, class In, class Out, class ToFloat, class FromFloat>
COMPACT_HOST_DEVICE inline void srht_unsketch_chunks(Block& b, const SrhtRows& d, const In* g, index_t ldg,
                                                     float* scratch, Out* out, index_t ldo, float alpha, float beta,
                                                     index_t rows, ToFloat to_float, FromFloat from_float) {
  const FwhtShape s = d.plan.chunk;
  const int cb = d.plan.chunk_bits;
  const index_t np = index_t{1} << d.plan.log2_len, tasks = srht_chunk_tasks(d.plan, rows);
  const index_t per_block = index_t{1} << s.log2_rows, threads_per_row = index_t{1} << s.log2_threads;
  const index_t shared_floats = fwht_row_stride(s) << s.log2_rows;
  float* sm = b.template shared<float>();
  auto regs = b.template local<Registers<kElems>>();
  auto negative = b.template local<std::uint64_t>();
  if constexpr (kIo == SrhtChunkIo::kDirect) {
    b.each(
        [&](index_t t) { negative[t] = srht_sign_bits(d.sign_words, (t & (threads_per_row - 1)) * kElems, kElems); });
  }
  for (index_t task0 = b.index() * per_block; task0 < tasks; task0 += b.count() * per_block) {
    b.each([&](index_t t) {
      for (index_t i = t; i < shared_floats; i += b.size()) sm[i] = 0.0f;
    });
    b.sync();
    b.each([&](index_t t) {
      const SrhtChunkThread th = srht_chunk_thread(d.plan, task0, tasks, t);
      if (!th.active) return;
      const index_t first = d.chunk_first[th.chunk], last = d.chunk_first[th.chunk + 1];
      const std::uint32_t base = static_cast<std::uint32_t>(th.chunk << cb), rho = static_cast<std::uint32_t>(th.rho);
      for (index_t j = first + th.tt; j < last; j += threads_per_row) {
        sm[fwht_shared_index(s, rho, d.sample[j] - base)] = to_float(g[th.row * ldg + j]);
      }
    });
    b.sync();
    fwht_rows_backward<kElems>(b, regs, sm, s);
    b.each([&](index_t t) {
      const SrhtChunkThread th = srht_chunk_thread(d.plan, task0, tasks, t);
      if (!th.active) return;
      const index_t k0 = th.tt * kElems;
      const float* y = regs[t].v;
      if constexpr (kIo == SrhtChunkIo::kDirect) {
        const std::uint64_t neg = negative[t];
        srht_store_values<kElems>(out + th.row * ldo, k0, d.n, beta != 0.0f, to_float, [&](int q, float old) {
          return from_float(srht_unsketch_value((neg >> q) & 1u, d.scale * y[q], alpha, beta, old));
        });
      } else {
        srht_store_values<kElems>(scratch + th.row * np + (th.chunk << cb), k0, index_t{1} << cb, false, Identity{},
                                  [&](int q, float) { return y[q]; });
      }
    });
    b.sync();  // the next tasks overwrite sm
  }
}

/// unsketch_grad, register pass (two passes only): thread th's (row, lo) tasks load the chunk results
/// scratch[row * n' + k] for k = (hi << chunk_bits) | lo, transform them over the high bits and store
/// out[row, k] = alpha d_k scale y_k + beta out[row, k] for k < n.
template <class Out, class ToFloat, class FromFloat>
COMPACT_HOST_DEVICE inline void srht_unsketch_registers_thread(const Thread1d& th, const SrhtRows& d,
                                                               const float* scratch, Out* out, index_t ldo, float alpha,
                                                               float beta, index_t rows, ToFloat to_float,
                                                               FromFloat from_float) {
  const int cb = d.plan.chunk_bits, hb = d.plan.high_bits;
  const index_t np = index_t{1} << d.plan.log2_len, lo_mask = (index_t{1} << cb) - 1;
  for (index_t task = th.first(); task < srht_register_tasks(d.plan, rows); task += th.step()) {
    const index_t row = task >> cb, lo = task & lo_mask;
    float v[kSrhtMaxHighElems];
    for (int hi = 0; hi < kSrhtMaxHighElems; ++hi) {
      v[hi] = hi < (1 << hb) ? scratch[row * np + ((static_cast<index_t>(hi) << cb) | lo)] : 0.0f;
    }
    fwht_register_levels(v, hb);
    for (int hi = 0; hi < kSrhtMaxHighElems; ++hi) {
      const index_t k = (static_cast<index_t>(hi) << cb) | lo;
      if (hi < (1 << hb) && k < d.n) {
        Out* at = out + row * ldo + k;
        *at = from_float(srht_unsketch_value(srht_packed_sign(d.sign_words, k), d.scale * v[hi], alpha, beta,
                                             beta != 0.0f ? to_float(*at) : 0.0f));
      }
    }
  }
}

/// materialize: p[i][j] = srht_entry(params, i, S_j) for thread th's tasks of the n x r rectangle (one entry each).
template <class Out, class Convert>
COMPACT_HOST_DEVICE inline void srht_materialize_thread(const Thread1d& th, const EntryParams& params,
                                                        const std::uint32_t* sample, const PanelRect& rect, Out* p,
                                                        index_t ld, Convert convert) {
  const index_t tasks = panel_task_count(rect, 1);
  for (index_t t = th.first(); t < tasks; t += th.step()) {
    const PanelTask e = panel_task(rect, 1, t);
    p[e.i * ld + e.j0] = convert(srht_entry(params, e.i, sample[e.j0]));
  }
}

}  // namespace detail
}  // namespace compact
