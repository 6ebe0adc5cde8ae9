// SPDX-License-Identifier: MIT
#pragma once
/// Index math of the CUDA kernels as host/device functions of (block, thread, sizes), so host tests can drive them.
///
/// The CUDA kernels in compact/cuda/ compute every index through these functions and nothing else; the host tests
/// (tests/core/test_launch_index.cpp) run the same functions over every (block, thread) of a launch and check that
/// each entry is written exactly once with the value the entry specification gives.

#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/core/philox.hpp"
#include "compact/core/srht.hpp"
#include "compact/core/tags.hpp"

namespace compact {
namespace detail {

// ---------------------------------------------------------------------------------------------------------------
// Grid-stride loops: thread (block, thread) of a grid of grid_dim blocks of block_dim threads handles tasks
// first, first + step, first + 2 step, ... below the task count.

/// First task of thread `thread` in block `block` (blockIdx.x, threadIdx.x) of a 1-D launch.
COMPACT_HOST_DEVICE inline index_t grid_stride_first(index_t block, index_t thread, index_t block_dim) {
  return block * block_dim + thread;
}

/// Distance between consecutive tasks of one thread: every thread of the grid.
COMPACT_HOST_DEVICE inline index_t grid_stride_step(index_t grid_dim, index_t block_dim) {
  return grid_dim * block_dim;
}

/// A 1-D launch configuration.
struct Launch1d {
  index_t blocks;
  index_t threads;
};

/// Blocks of `threads` threads covering `tasks` tasks, capped at `max_blocks` (the grid-stride loop does the rest).
inline Launch1d grid_stride_launch(index_t tasks, index_t threads = 256, index_t max_blocks = index_t{1} << 16) {
  index_t blocks = (tasks + threads - 1) / threads;
  if (blocks > max_blocks) blocks = max_blocks;
  if (blocks < 1) blocks = 1;
  return Launch1d{blocks, threads};
}

// ---------------------------------------------------------------------------------------------------------------
// Dense panel kernel: P[i0:i1, j0:j1] is cut into tasks of one row by one "chunk" of columns, chunks aligned to
// multiples of the chunk width in global column index, so a task is exactly the lanes of one Philox block
// (Gaussian, 4 columns) or one 32-bit word of one (Rademacher, 32 columns). Consecutive tasks walk along a row, so
// consecutive threads write consecutive addresses.

/// Columns one task of the dense panel kernel writes (a divisor of the distribution's block width).
template <class Dist>
inline constexpr index_t kPanelChunkCols = std::is_same_v<Dist, Rademacher> ? 32 : 4;

/// A rectangle of P: rows [i0, i1), columns [j0, j1).
struct PanelRect {
  index_t i0, i1, j0, j1;
};

/// One task: row i, columns [j0, j1) (inside one chunk).
struct PanelTask {
  index_t i, j0, j1;
};

/// Chunks that intersect [j0, j1).
COMPACT_HOST_DEVICE inline index_t panel_chunks_per_row(const PanelRect& p, index_t chunk) {
  return p.j1 > p.j0 ? (p.j1 - 1) / chunk - p.j0 / chunk + 1 : 0;
}

/// Tasks of a panel: rows times chunks per row.
COMPACT_HOST_DEVICE inline index_t panel_task_count(const PanelRect& p, index_t chunk) {
  return p.i1 > p.i0 ? (p.i1 - p.i0) * panel_chunks_per_row(p, chunk) : 0;
}

/// A 2-D launch of the dense panel kernel: x walks the chunks of a row, y the rows; grid-stride in both, so no
/// thread ever divides (a 64-bit division is a long software sequence on a GPU).
struct PanelLaunch {
  index_t blocks_x, blocks_y, threads_x, threads_y;
};

/// 256 threads per block: threads_x = the chunks of a row rounded up to a power of two in [32, 256], threads_y the
/// rest; blocks cover the panel, capped at 2^16 in x and 65535 in y (CUDA's limit), the loops doing the remainder.
inline PanelLaunch panel_launch(const PanelRect& p, index_t chunk) {
  const index_t per_row = panel_chunks_per_row(p, chunk), rows = p.i1 > p.i0 ? p.i1 - p.i0 : 0;
  index_t tx = 32;  // a power of two, so that threads_y = 256 / threads_x is exact
  while (tx < per_row && tx < 256) tx *= 2;
  const index_t ty = 256 / tx;
  index_t bx = (per_row + tx - 1) / tx, by = (rows + ty - 1) / ty;
  if (bx > (index_t{1} << 16)) bx = index_t{1} << 16;
  if (by > 65535) by = 65535;
  return PanelLaunch{bx < 1 ? 1 : bx, by < 1 ? 1 : by, tx, ty};
}

/// The task of the 2-D launch at row offset `row` (< i1 - i0) and chunk offset `c` (< panel_chunks_per_row).
COMPACT_HOST_DEVICE inline PanelTask panel_task_at(const PanelRect& p, index_t chunk, index_t row, index_t c) {
  const index_t lo = (p.j0 / chunk + c) * chunk, hi = lo + chunk;
  return PanelTask{p.i0 + row, lo > p.j0 ? lo : p.j0, hi < p.j1 ? hi : p.j1};
}

/// Task number `task` (0 <= task < panel_task_count) of a panel: row-major over (row, chunk).
COMPACT_HOST_DEVICE inline PanelTask panel_task(const PanelRect& p, index_t chunk, index_t task) {
  const index_t per_row = panel_chunks_per_row(p, chunk);
  const index_t c = p.j0 / chunk + task % per_row;
  const index_t lo = c * chunk, hi = lo + chunk;
  return PanelTask{p.i0 + task / per_row, lo > p.j0 ? lo : p.j0, hi < p.j1 ? hi : p.j1};
}

// ---------------------------------------------------------------------------------------------------------------
// Dense GEMMs: row-major operands handed to a column-major BLAS (cuBLAS). A row-major R x C matrix with row stride
// ld is, read column-major with leading dimension ld, its C x R transpose; so every row-major product is issued as
// the transposed product. The plans below are the only place that mapping is written; the host tests execute them
// with a naive column-major GEMM.

/// C = alpha op(A) op(B) + beta C, column-major, op(A) m x k, op(B) k x n; offsets in elements from the base
/// pointers the caller names for A, B and C.
struct GemmPlan {
  bool trans_a, trans_b;
  index_t m, n, k, lda, ldb, ldc;
  index_t a_offset, b_offset, c_offset;
};

/// Columns [j0, j0 + w) of z = x P with the panel P[:, j0:j0+w] stored row-major (n x w, ld w) as A, x (batch x n,
/// ld ldx) as B, z (batch x r, ld ldz) as C: Z^T[j0:j0+w, :] = Ppanel^T X^T.
COMPACT_HOST_DEVICE inline GemmPlan sketch_panel_gemm(index_t batch, index_t n, index_t j0, index_t w, index_t ldx,
                                                      index_t ldz) {
  return GemmPlan{false, false, w, batch, n, w, ldx, ldz, 0, 0, j0};
}

/// Columns [i0, i0 + h) of out = alpha g P^T + beta out with the panel P[i0:i0+h, :] stored row-major (h x r, ld r)
/// as A, g (m x r, ld ldg) as B, out (m x n, ld ldo) as C: out^T[i0:i0+h, :] = alpha Ppanel G^T + beta out^T[...].
COMPACT_HOST_DEVICE inline GemmPlan unsketch_panel_gemm(index_t m, index_t r, index_t i0, index_t h, index_t ldg,
                                                        index_t ldo) {
  return GemmPlan{true, false, h, m, r, r, ldg, ldo, 0, 0, i0};
}

/// g = dy^T z + beta g with z (batch x r, ld ldz) as A, dy (batch x m, ld lddy) as B, g (m x r, ld ldg) as C:
/// g^T = Z^T DY + beta g^T.
COMPACT_HOST_DEVICE inline GemmPlan compressed_grad_gemm(index_t batch, index_t m, index_t r, index_t lddy, index_t ldz,
                                                         index_t ldg) {
  return GemmPlan{false, true, r, m, batch, ldz, lddy, ldg, 0, 0, 0};
}

/// Panel extent along a dimension of size `extent` when a panel row (or column) has `other` entries and the
/// workspace holds `capacity` entries: all of `extent` if it fits, else the most that fit rounded down to a
/// multiple of `align` (and at least `align`: the workspace minimum guarantees align * other entries).
COMPACT_HOST_DEVICE inline index_t panel_extent(index_t capacity, index_t other, index_t extent, index_t align) {
  const index_t fit = capacity / other;
  if (fit >= extent) return extent;
  const index_t rounded = fit / align * align;
  return rounded > align ? rounded : align;
}

// ---------------------------------------------------------------------------------------------------------------
// FWHT kernel: one thread block transforms one row of length L = 2^log2_len held in T = 2^log2_threads threads
// times E = 2^log2_elems registers. Register q of thread t holds element (q << log2_threads) | t, so the threads of
// a warp touch consecutive addresses (coalesced global access, conflict-free shared memory). Levels (bits of the
// element index) are done in three stages, all with fp32 butterflies (a + b, a - b):
//   registers:    bits [log2_threads, log2_len)        (the register index q)
//   warp shuffle: bits [0, min(5, log2_threads))        (the lane)
//   shared:       bits [5, log2_threads)                (the warp), one __syncthreads per level
// The Hadamard transform is the product of the per-bit butterflies, which commute, so the order is free.

/// Longest FWHT the kernel supports: the row lives in shared memory as fp32 (2^15 floats = 128 KiB).
inline constexpr int kFwhtMaxLog2 = 15;
/// Register count of the FWHT kernel's widest instantiation (2^15 = 1024 threads x 32 registers).
inline constexpr int kFwhtMaxElems = 32;

/// Shape of one FWHT row launch.
struct FwhtShape {
  int log2_len;
  int log2_elems;
  int log2_threads;
};

/// Launch shape for length 2^log2_len: 16 registers per thread up to 2^14 (at most 1024 threads), 32 for 2^15;
/// one thread with all elements for lengths up to 16.
COMPACT_HOST_DEVICE inline FwhtShape fwht_shape(int log2_len) {
  const int log2_elems = log2_len <= 4 ? log2_len : (log2_len <= 14 ? 4 : log2_len - 10);
  return FwhtShape{log2_len, log2_elems, log2_len - log2_elems};
}

/// Smallest power of two >= n (n >= 1), as its exponent.
COMPACT_HOST_DEVICE inline int ceil_log2(index_t n) {
  int k = 0;
  while ((index_t{1} << k) < n) ++k;
  return k;
}

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

/// The register stage: butterflies over the bits of the register index, in place on v[0, 2^log2_elems).
/// kMaxElems is the array size (compile time, so the indices are constants after unrolling).
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

// ---------------------------------------------------------------------------------------------------------------
// SRHT signs as the row kernels read them: packed 32 per word, then one word of bits per thread.

/// Word w of the packed signs of d: bit c set iff d_{32 w + c} = -1, for 32 w + c < np (higher bits 0). One sign
/// block of core/srht.hpp per word (32 w .. 32 w + 31 lie in one 128-sign block).
COMPACT_HOST_DEVICE inline std::uint32_t srht_sign_word(const Key2x32& key, std::uint64_t window, index_t w,
                                                        index_t np) {
  const Words4x32 x = srht_sign_block(key, window, (32 * w) / kSrhtSignBlockCols);
  std::uint32_t word = 0;
  for (index_t c = 32 * w; c < 32 * w + 32 && c < np; ++c) word |= srht_sign_bit_in(x, c) << (c % 32);
  return word;
}

/// The signs thread t needs: bit q set iff d_k = -1 for k = fwht_element(s, t, q), q < 2^s.log2_elems (at most
/// kFwhtMaxElems = 32, so one word), read from the packed words.
COMPACT_HOST_DEVICE inline std::uint32_t srht_thread_sign_mask(const FwhtShape& s, const std::uint32_t* sign_words,
                                                               index_t t) {
  std::uint32_t mask = 0;
  for (int q = 0; q < (1 << s.log2_elems); ++q) {
    const index_t k = fwht_element(s, t, q);
    mask |= ((sign_words[k / 32] >> (k % 32)) & 1u) << q;
  }
  return mask;
}

}  // namespace detail
}  // namespace compact
