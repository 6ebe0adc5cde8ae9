// SPDX-License-Identifier: MIT
#pragma once
/// The GPU SRHT's row kernels as host/device functions of (block, thread): z = x P and out = alpha g P^T + beta out
/// for P = D H S / sqrt(r) of core/srht.hpp, by one FWHT per padded row, in one pass for n' <= 2^15 and two passes
/// (a global-memory pass over the high bits, a shared-memory pass over chunks) up to n' = 2^20. Also the device
/// workspace layout of the SRHT projector, a pure function of (n, r) (no device needed).
///
/// A padded row of n' = 2^L elements is cut into 2^h chunks of 2^c contiguous elements (c + h = L, the SrhtPlan):
/// element k = (hi << c) | lo. Bits [0, c) are transformed by one block per chunk (core/fwht_block.hpp, the chunk
/// in shared memory), bits [c, L) by one thread per position lo holding the 2^h elements (hi, lo) in registers.
/// The butterflies of different bits commute, so sketch does the high bits first (x (.) d into an fp32 scratch,
/// then the chunks, each gathering the sampled columns that fall in it) and unsketch_grad the chunks first (the
/// scattered g, into the scratch, then the high bits, d, alpha and beta into out). With h = 0 the chunk is the
/// row and the chunk kernels read x (sketch) or write out (unsketch_grad) directly: one pass, no scratch.

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/core/block.hpp"
#include "compact/core/dense_panel.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/fwht_block.hpp"
#include "compact/core/grid.hpp"
#include "compact/core/philox.hpp"
#include "compact/core/srht.hpp"

namespace compact {
namespace detail {

/// Longest padded row of the GPU SRHT: n' <= 2^20.
inline constexpr int kSrhtMaxLog2 = 20;
/// Bits the register pass does: a thread holds 2^h <= kFwhtMaxElems elements of a row.
inline constexpr int kSrhtMaxHighBits = 5;
/// Chunk bits every supported GPU can do in one block: 2^14 floats = 64 KiB of shared memory, which every GPU
/// from sm_70 on gives a block (sm_80 and sm_90 give 2^15: 163 KiB and 227 KiB).
inline constexpr int kSrhtPortableChunkBits = 14;

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

/// The largest chunk (as bits) a block with `shared_bytes` of shared memory holds, at most kFwhtMaxLog2.
inline int srht_max_chunk_bits(std::size_t shared_bytes) {
  int c = 0;
  while (c < kFwhtMaxLog2 && (sizeof(float) << (c + 1)) <= shared_bytes) ++c;
  return c;
}

/// Whether (n', plan) needs the fp32 scratch (two passes).
COMPACT_HOST_DEVICE inline bool srht_two_pass(const SrhtPlan& p) { return p.high_bits > 0; }

// ---------------------------------------------------------------------------------------------------------------
// Signs as the kernels read them: packed 32 per word, then one word of bits per thread.

/// Word w of the packed signs of d: bit c set iff d_{32 w + c} = -1, for 32 w + c < np (higher bits 0). One sign
/// block of core/srht.hpp per word (32 w .. 32 w + 31 lie in one 128-sign block).
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

/// The signs thread t needs: bit q set iff d_k = -1 for k = fwht_element(s, t, q), q < 2^s.log2_elems (at most
/// kFwhtMaxElems = 32, so one word), read from the packed words.
COMPACT_HOST_DEVICE inline std::uint32_t srht_thread_sign_mask(const FwhtShape& s, const std::uint32_t* sign_words,
                                                               index_t t) {
  std::uint32_t mask = 0;
  for (int q = 0; q < (1 << s.log2_elems); ++q) mask |= srht_packed_sign(sign_words, fwht_element(s, t, q)) << q;
  return mask;
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

/// Block tasks of a chunk kernel over `rows` rows: one per (row, chunk), row-major.
COMPACT_HOST_DEVICE inline index_t srht_chunk_tasks(const SrhtPlan& p, index_t rows) { return rows << p.high_bits; }

/// Thread tasks of a register pass over `rows` rows: one per (row, position lo in a chunk).
COMPACT_HOST_DEVICE inline index_t srht_register_tasks(const SrhtPlan& p, index_t rows) { return rows << p.chunk_bits; }

/// The sign masks of the block's threads (srht_thread_sign_mask), read once per block when the chunk kernel
/// applies d itself (kDirect); with kScratch the register pass has applied it and nothing is read.
template <SrhtChunkIo kIo, class Block>
COMPACT_HOST_DEVICE inline auto srht_chunk_sign_masks(Block& b, const SrhtRows& d) {
  auto negative = b.template local<std::uint32_t>();
  if constexpr (kIo == SrhtChunkIo::kDirect) {
    b.each([&](index_t t) { negative[t] = srht_thread_sign_mask(d.plan.chunk, d.sign_words, t); });
  }
  return negative;
}

/// Sketch, chunk kernel: for every (row, chunk c) task of block b, the chunk's FWHT and the gather
/// z[row, j] = scale * y[S_j] for the sampled columns j of the chunk.
///
/// kIo = kDirect (one pass): the chunk is the row, loaded as x[row, k] d_k (0 for k >= n). kIo = kScratch: the
/// chunk is scratch[row * n' + c 2^chunk_bits + k], already signed and transformed over the high bits.
/// b.size() == 2^plan.chunk.log2_threads; shared memory fwht_shared_bytes(plan.chunk).
template <int kElems, SrhtChunkIo kIo, class Block, class In, class Out, class ToFloat, class FromFloat>
COMPACT_HOST_DEVICE inline void srht_sketch_chunks(Block& b, const SrhtRows& d, const In* x, index_t ldx,
                                                   const float* scratch, Out* z, index_t ldz, index_t rows,
                                                   ToFloat to_float, FromFloat from_float) {
  const FwhtShape s = d.plan.chunk;
  const int elems = 1 << s.log2_elems, cb = d.plan.chunk_bits;
  const index_t np = index_t{1} << d.plan.log2_len, chunk_mask = (index_t{1} << d.plan.high_bits) - 1;
  float* sm = b.template shared<float>();
  auto regs = b.template local<Registers<kElems>>();
  auto negative = srht_chunk_sign_masks<kIo>(b, d);
  for (index_t task = b.index(); task < srht_chunk_tasks(d.plan, rows); task += b.count()) {
    const index_t row = task >> d.plan.high_bits, c = task & chunk_mask;
    b.each([&](index_t t) {
      if constexpr (kIo == SrhtChunkIo::kDirect) {
        for (int q = 0; q < kElems; ++q) {
          const index_t k = fwht_element(s, t, q);
          float v = 0.0f;
          if (q < elems && k < d.n) {
            const float xk = to_float(x[row * ldx + k]);
            v = ((negative[t] >> q) & 1u) ? -xk : xk;
          }
          regs[t].v[q] = v;
        }
      } else {
        const float* src = scratch + row * np + (c << cb);
        for (int q = 0; q < kElems; ++q) regs[t].v[q] = q < elems ? src[fwht_element(s, t, q)] : 0.0f;
      }
    });
    fwht_block_transform<kElems>(b, regs, sm, s);
    const index_t first = d.chunk_first[c], last = d.chunk_first[c + 1], base = c << cb;
    b.each([&](index_t t) {
      for (index_t j = first + t; j < last; j += b.size()) {
        z[row * ldz + j] = from_float(d.scale * sm[static_cast<index_t>(d.sample[j]) - base]);
      }
    });
    b.sync();  // the next task overwrites sm
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
    float v[kFwhtMaxElems];
    for (int hi = 0; hi < kFwhtMaxElems; ++hi) {
      const index_t k = (static_cast<index_t>(hi) << cb) | lo;
      v[hi] = 0.0f;
      if (hi < (1 << hb) && k < d.n) {
        const float xk = to_float(x[row * ldx + k]);
        v[hi] = srht_packed_sign(d.sign_words, k) ? -xk : xk;
      }
    }
    fwht_register_levels(v, hb);
    for (int hi = 0; hi < kFwhtMaxElems; ++hi) {
      if (hi < (1 << hb)) scratch[row * np + ((static_cast<index_t>(hi) << cb) | lo)] = v[hi];
    }
  }
}

/// The final value of out[row, k] in unsketch_grad: alpha (d_k scale y) + beta out (out not read when beta = 0).
template <class Out, class ToFloat, class FromFloat>
COMPACT_HOST_DEVICE inline void srht_unsketch_store(Out* out, std::uint32_t negative, float scaled, float alpha,
                                                    float beta, ToFloat to_float, FromFloat from_float) {
  float val = alpha * (negative ? -scaled : scaled);
  if (beta != 0.0f) val += beta * to_float(*out);
  *out = from_float(val);
}

/// unsketch_grad, chunk kernel: for every (row, chunk c) task of block b, the sampled g[row, j] of the chunk are
/// scattered to S_j (zeros elsewhere) and transformed. kIo = kDirect (one pass): out[row, k] = alpha d_k scale y_k
/// + beta out[row, k] for k < n. kIo = kScratch: scratch[row * n' + c 2^chunk_bits + k] = y_k, for the register
/// pass to finish. b.size() == 2^plan.chunk.log2_threads; shared memory fwht_shared_bytes(plan.chunk).
template <int kElems, SrhtChunkIo kIo, class Block, class In, class Out, class ToFloat, class FromFloat>
COMPACT_HOST_DEVICE inline void srht_unsketch_chunks(Block& b, const SrhtRows& d, const In* g, index_t ldg,
                                                     float* scratch, Out* out, index_t ldo, float alpha, float beta,
                                                     index_t rows, ToFloat to_float, FromFloat from_float) {
  const FwhtShape s = d.plan.chunk;
  const int elems = 1 << s.log2_elems, cb = d.plan.chunk_bits;
  const index_t np = index_t{1} << d.plan.log2_len, chunk_mask = (index_t{1} << d.plan.high_bits) - 1;
  float* sm = b.template shared<float>();
  auto regs = b.template local<Registers<kElems>>();
  auto negative = srht_chunk_sign_masks<kIo>(b, d);
  for (index_t task = b.index(); task < srht_chunk_tasks(d.plan, rows); task += b.count()) {
    const index_t row = task >> d.plan.high_bits, c = task & chunk_mask, base = c << cb;
    b.each([&](index_t t) {
      for (int q = 0; q < elems; ++q) sm[fwht_element(s, t, q)] = 0.0f;
    });
    b.sync();
    const index_t first = d.chunk_first[c], last = d.chunk_first[c + 1];
    b.each([&](index_t t) {
      for (index_t j = first + t; j < last; j += b.size()) {
        sm[static_cast<index_t>(d.sample[j]) - base] = to_float(g[row * ldg + j]);
      }
    });
    b.sync();
    b.each([&](index_t t) {
      for (int q = 0; q < kElems; ++q) regs[t].v[q] = q < elems ? sm[fwht_element(s, t, q)] : 0.0f;
    });
    b.sync();  // every thread has read its elements before the transform writes sm
    fwht_block_transform<kElems>(b, regs, sm, s);
    b.each([&](index_t t) {
      for (int q = 0; q < elems; ++q) {
        const index_t k = fwht_element(s, t, q);
        if constexpr (kIo == SrhtChunkIo::kDirect) {
          if (k < d.n) {
            srht_unsketch_store(out + row * ldo + k, (negative[t] >> q) & 1u, d.scale * sm[k], alpha, beta, to_float,
                                from_float);
          }
        } else {
          scratch[row * np + base + k] = sm[k];
        }
      }
    });
    b.sync();  // the next task overwrites sm
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
    float v[kFwhtMaxElems];
    for (int hi = 0; hi < kFwhtMaxElems; ++hi) {
      v[hi] = hi < (1 << hb) ? scratch[row * np + ((static_cast<index_t>(hi) << cb) | lo)] : 0.0f;
    }
    fwht_register_levels(v, hb);
    for (int hi = 0; hi < kFwhtMaxElems; ++hi) {
      const index_t k = (static_cast<index_t>(hi) << cb) | lo;
      if (hi < (1 << hb) && k < d.n) {
        srht_unsketch_store(out + row * ldo + k, srht_packed_sign(d.sign_words, k), d.scale * v[hi], alpha, beta,
                            to_float, from_float);
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
