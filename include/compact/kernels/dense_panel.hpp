// SPDX-License-Identifier: MIT
#pragma once
/// The GPU's dense panel kernel as a host/device function of (block, thread): a rectangle of a Gaussian or
/// Rademacher P, entry for entry the values of spec/entries.hpp, written with 16-byte vector stores.
///
/// Each output row is cut at the 16-byte boundaries of the destination into segments of V = 16 / sizeof(element)
/// columns (8 for bf16/fp16, 4 for fp32). A task is one (row, segment): its thread generates the segment's V entries
/// in registers and writes a whole segment with one 16-byte store, a partial one (the head of a row before its first
/// boundary, the tail after its last) with scalar stores. Consecutive threads take consecutive segments of a row, so
/// a warp writes 512 contiguous bytes per store instruction. Indices inside a launch are 32-bit (the launcher cuts
/// rectangles into pieces of fewer than 2^30 rows and columns); only the row's offset in the output is 64-bit.

#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/philox.hpp"
#include "compact/spec/tags.hpp"
#include "compact/kernels/vec16.hpp"

namespace compact {
namespace detail {

/// A rectangle of P: rows [i0, i1), columns [j0, j1).
struct PanelRect {
  index_t i0, i1, j0, j1;
};

/// One task of a one-entry-per-task loop over a rectangle (the SRHT materialize kernel): row i, columns [j0, j1).
struct PanelTask {
  index_t i, j0, j1;
};

/// Chunks of `chunk` columns (aligned to multiples of `chunk` in P's column index) that intersect [j0, j1).
COMPACT_HOST_DEVICE inline index_t panel_chunks_per_row(const PanelRect& p, index_t chunk) {
  return p.j1 > p.j0 ? (p.j1 - 1) / chunk - p.j0 / chunk + 1 : 0;
}

/// Tasks of a rectangle: rows times chunks per row.
COMPACT_HOST_DEVICE inline index_t panel_task_count(const PanelRect& p, index_t chunk) {
  return p.i1 > p.i0 ? (p.i1 - p.i0) * panel_chunks_per_row(p, chunk) : 0;
}

/// Task number `task` (0 <= task < panel_task_count) of a rectangle: row-major over (row, chunk).
COMPACT_HOST_DEVICE inline PanelTask panel_task(const PanelRect& p, index_t chunk, index_t task) {
  const index_t per_row = panel_chunks_per_row(p, chunk);
  const index_t c = p.j0 / chunk + task % per_row;
  const index_t lo = c * chunk, hi = lo + chunk;
  return PanelTask{p.i0 + task / per_row, lo > p.j0 ? lo : p.j0, hi < p.j1 ? hi : p.j1};
}

// ---------------------------------------------------------------------------------------------------------------
// One launch of the vectorized panel kernel.

/// Largest row or column count of one launch: in-launch indices stay far from 2^32 with a grid stride added.
inline constexpr index_t kPanelMaxExtent = index_t{1} << 30;

/// P[i0 : i0 + rows, j0 : j0 + cols] into out with leading dimension ld (element (i, j) of P at
/// out[(i - i0) ld + (j - j0)]), where out lies out_phase elements past a 16-byte boundary. V = elements per 16 bytes.
struct PanelGeometry {
  std::uint32_t i0, j0;        ///< P's first row and column (P's indices are 32-bit, see kMaxDim)
  std::uint32_t rows, cols;    ///< at most kPanelMaxExtent
  std::uint32_t max_segments;  ///< segments of the longest row
  std::uint32_t out_phase;     ///< (address of out / element size) mod V
  std::uint32_t ld_phase;      ///< ld mod V
  index_t ld;
};

/// The geometry of writing `rect` (at most kPanelMaxExtent rows and columns) to an output with leading dimension
/// ld that starts out_phase elements past a 16-byte boundary, with V-element vectors.
inline PanelGeometry panel_geometry(const PanelRect& rect, index_t ld, index_t out_phase, index_t vec) {
  PanelGeometry g{};
  g.i0 = static_cast<std::uint32_t>(rect.i0);
  g.j0 = static_cast<std::uint32_t>(rect.j0);
  g.rows = static_cast<std::uint32_t>(rect.i1 - rect.i0);
  g.cols = static_cast<std::uint32_t>(rect.j1 - rect.j0);
  g.out_phase = static_cast<std::uint32_t>(out_phase % vec);
  g.ld_phase = static_cast<std::uint32_t>(ld % vec);
  // Every row starts at out's phase when ld is a multiple of V; otherwise a row may start at any phase.
  const index_t worst_phase = g.ld_phase == 0 ? g.out_phase : vec - 1;
  g.max_segments = g.cols == 0 ? 0 : static_cast<std::uint32_t>((worst_phase + g.cols + vec - 1) / vec);
  g.ld = ld;
  return g;
}

/// Phase (elements past a 16-byte boundary) of the first element of in-launch row `row`.
template <int kVec>
COMPACT_HOST_DEVICE inline std::uint32_t panel_row_phase(const PanelGeometry& g, std::uint32_t row) {
  return (g.out_phase + row * g.ld_phase) % kVec;  // row * ld_phase may wrap: V divides 2^32
}

/// Segments of a row whose first element has phase `phase`.
template <int kVec>
COMPACT_HOST_DEVICE inline std::uint32_t panel_row_segments(const PanelGeometry& g, std::uint32_t phase) {
  return (phase + g.cols + kVec - 1) / kVec;
}

/// Threads per block of the panel kernel, and its __launch_bounds__.
inline constexpr std::uint32_t kPanelThreads = 256;

/// A 2-D launch of the panel kernel: x walks the segments of a row, y the rows; grid-stride in both.
struct PanelLaunch {
  std::uint32_t blocks_x, blocks_y, threads_x, threads_y;
};

/// At most 256 threads per block: threads_x = the row's segments rounded up to a power of two when there are at most
/// 32 (so a warp spans several short rows), else to a multiple of 32 (at most 256); threads_y = 256 / threads_x.
/// Blocks cover the panel, at most 65535 in y (CUDA's limit), the row loop striding over the rest.
inline PanelLaunch panel_launch(const PanelGeometry& g) {
  const std::uint32_t segs = g.max_segments > 0 ? g.max_segments : 1;
  std::uint32_t tx = 1;
  if (segs <= 32) {
    while (tx < segs) tx *= 2;
  } else {
    tx = ((segs < kPanelThreads ? segs : kPanelThreads) + 31) / 32 * 32;
  }
  const std::uint32_t ty = kPanelThreads / tx;
  const std::uint32_t bx = (segs + tx - 1) / tx;
  const std::uint32_t rows = g.rows > 0 ? g.rows : 1;
  std::uint32_t by = (rows + ty - 1) / ty;
  if (by > 65535) by = 65535;
  return PanelLaunch{bx, by, tx, ty};
}

/// Calls f(part, offset, geometry) for the launches that write `rect` to an output with leading dimension ld that
/// starts out_phase elements past a 16-byte boundary: pieces of at most max_extent rows and columns, `offset` the
/// element offset of the piece's first entry from the output's start.
template <class F>
void for_each_panel_part(const PanelRect& rect, index_t ld, index_t out_phase, index_t vec, F&& f,
                         index_t max_extent = kPanelMaxExtent) {
  for (index_t i = rect.i0; i < rect.i1; i += max_extent) {
    for (index_t j = rect.j0; j < rect.j1; j += max_extent) {
      const PanelRect part{i, i + max_extent < rect.i1 ? i + max_extent : rect.i1, j,
                           j + max_extent < rect.j1 ? j + max_extent : rect.j1};
      const index_t offset = (i - rect.i0) * ld + (j - rect.j0);
      f(part, offset, panel_geometry(part, ld, (out_phase + offset) % vec, vec));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The entries of one segment, in registers.

/// Selects word `k` (0..3) of x without indexing memory (k is a run-time value).
COMPACT_HOST_DEVICE inline std::uint32_t select_word(const Words4x32& x, std::uint32_t k) {
  return k == 0 ? x.w[0] : (k == 1 ? x.w[1] : (k == 2 ? x.w[2] : x.w[3]));
}

/// Gaussian entries of P in row i, columns w, w + 1, ..., w + V - 1, encoded: out[q] = encode(P[i][w + q]).
/// w >= -(V - 1); slots with w + q < 0 (the head of a row) hold values that are never stored. When w is a
/// multiple of 4 the segment is V/4 whole Philox blocks; otherwise V/4 + 1 blocks and a shift by w mod 4, done
/// with selects so that every index stays a compile-time constant (registers, no local memory).
template <int kVec, class Encode, class Bits>
COMPACT_HOST_DEVICE inline void gaussian_segment(const EntryParams& p, std::uint32_t i, index_t w, Encode encode,
                                                 Bits (&out)[kVec]) {
  static_assert(kVec % 4 == 0, "compact::detail::gaussian_segment: V is a multiple of the 4 lanes of a block");
  constexpr index_t kBias = 8;  // w + kBias > 0, and a multiple of 4: floor(w / 4) = (w + kBias) / 4 - kBias / 4
  const std::uint64_t biased = static_cast<std::uint64_t>(w + kBias);
  const std::uint32_t b0 = static_cast<std::uint32_t>(biased / 4) - static_cast<std::uint32_t>(kBias / 4);
  const std::uint32_t off = static_cast<std::uint32_t>(biased % 4);
  if (off == 0) {
    for (int k = 0; k < kVec / 4; ++k) {
      const Normal4 g = normal4(philox4x32_10(philox_counter(b0 + static_cast<std::uint32_t>(k), i, p.window), p.key));
      for (int l = 0; l < 4; ++l) out[4 * k + l] = encode(g.v[l] * p.scale);
    }
    return;
  }
  float u[kVec + 4];
  for (int k = 0; k <= kVec / 4; ++k) {
    const Normal4 g = normal4(philox4x32_10(philox_counter(b0 + static_cast<std::uint32_t>(k), i, p.window), p.key));
    for (int l = 0; l < 4; ++l) u[4 * k + l] = g.v[l] * p.scale;
  }
  for (int q = 0; q < kVec; ++q) out[q] = encode(off == 1 ? u[q + 1] : (off == 2 ? u[q + 2] : u[q + 3]));
}

/// Rademacher entries of P in row i, columns w, ..., w + V - 1, encoded (w >= -(V - 1), as for gaussian_segment):
/// bits (w + q) mod 128 of Philox block (w + q) / 128, one block, or two when the segment crosses a block boundary.
template <int kVec, class Encode, class Bits>
COMPACT_HOST_DEVICE inline void rademacher_segment(const EntryParams& p, std::uint32_t i, index_t w, Encode encode,
                                                   Bits (&out)[kVec]) {
  static_assert(kVec <= 32, "compact::detail::rademacher_segment: a segment's bits fit one 32-bit word");
  constexpr index_t kBias = kRademacherBlockCols;  // w + kBias > 0, a multiple of 128
  const std::uint64_t biased = static_cast<std::uint64_t>(w + kBias);
  const std::uint32_t b0 = static_cast<std::uint32_t>(biased / 128) - 1u;
  const std::uint32_t off = static_cast<std::uint32_t>(biased % 128), word = off / 32, shift = off % 32;
  const Words4x32 x = philox4x32_10(philox_counter(b0, i, p.window), p.key);
  std::uint32_t bits = select_word(x, word) >> shift;
  if (shift + kVec > 32) {  // the segment's bits continue in the next word, of this block or of the next one
    const std::uint32_t next =
        word < 3 ? select_word(x, word + 1) : philox4x32_10(philox_counter(b0 + 1u, i, p.window), p.key).w[0];
    bits |= next << (32 - shift);
  }
  const Bits positive = encode(p.scale), negative = encode(-p.scale);
  for (int q = 0; q < kVec; ++q) out[q] = ((bits >> q) & 1u) ? negative : positive;
}

/// The segment of each lane generator (spec/entries.hpp), chosen by overload at compile time: a dense distribution with
/// a lane generator of its own adds its overload here.
template <int kVec, class Encode, class Bits>
COMPACT_HOST_DEVICE inline void lanes_segment(const GaussianLanes*, const EntryParams& p, std::uint32_t i, index_t w,
                                              Encode encode, Bits (&out)[kVec]) {
  gaussian_segment<kVec>(p, i, w, encode, out);
}
template <int kVec, class Encode, class Bits>
COMPACT_HOST_DEVICE inline void lanes_segment(const RademacherLanes*, const EntryParams& p, std::uint32_t i, index_t w,
                                              Encode encode, Bits (&out)[kVec]) {
  rademacher_segment<kVec>(p, i, w, encode, out);
}

/// The entries of one segment for a dense distribution Dist, through its lane generator.
template <class Dist, int kVec, class Encode, class Bits>
COMPACT_HOST_DEVICE inline void dense_segment(const EntryParams& p, std::uint32_t i, index_t w, Encode encode,
                                              Bits (&out)[kVec]) {
  static_assert(is_dense_v<Dist>, "compact::detail::dense_segment: Dist must be a dense distribution");
  lanes_segment<kVec>(static_cast<const dense_lanes_t<Dist>*>(nullptr), p, i, w, encode, out);
}

// ---------------------------------------------------------------------------------------------------------------
// The kernel body.

/// Where the panel kernel writes: raw bits (std::uint16_t for bf16/fp16, std::uint32_t for fp32) at out + offset.
/// vector() is given a 16-byte aligned offset.
template <class Bits>
struct PanelStore {
  Bits* out;
  COMPACT_HOST_DEVICE void scalar(index_t offset, Bits b) const { out[offset] = b; }
  COMPACT_HOST_DEVICE void vector(index_t offset, const Bits (&b)[kVec16Elems<Bits>]) const {
    store_vec16(out + offset, pack_vec16(b));
  }
};

/// Thread (thread_x, thread_y) of block (block_x, block_y) of the panel kernel launched as `grid` over geometry g:
/// for each of its (row, segment) tasks, the segment's entries encoded by `encode` (float -> raw bits, round to
/// nearest even), stored through `store` (scalar(offset, bits), vector(offset, bits[V])) at offsets from the
/// output's start. A whole segment is one vector() at a 16-byte aligned offset; the head and tail of a row are
/// scalar() calls, one per entry. Every entry of the rectangle is written exactly once, whatever the grid.
template <class Dist, class Encode, class Store>
COMPACT_HOST_DEVICE inline void dense_panel_thread(const PanelLaunch& grid, std::uint32_t block_x,
                                                   std::uint32_t block_y, std::uint32_t thread_x,
                                                   std::uint32_t thread_y, const EntryParams& params,
                                                   const PanelGeometry& g, Encode encode, const Store& store) {
  using Bits = decltype(encode(0.0f));
  constexpr int kVec = kVec16Elems<Bits>;
  const std::uint32_t step_x = grid.blocks_x * grid.threads_x, step_y = grid.blocks_y * grid.threads_y;
  for (std::uint32_t row = block_y * grid.threads_y + thread_y; row < g.rows; row += step_y) {
    const std::uint32_t phase = panel_row_phase<kVec>(g, row);
    const std::uint32_t segments = panel_row_segments<kVec>(g, phase);
    const index_t row_start = static_cast<index_t>(row) * g.ld - phase;  // offset of segment 0's first slot
    const std::int32_t cols = static_cast<std::int32_t>(g.cols);
    for (std::uint32_t s = block_x * grid.threads_x + thread_x; s < segments; s += step_x) {
      const std::int32_t c0 = static_cast<std::int32_t>(s * kVec) - static_cast<std::int32_t>(phase);
      Bits bits[kVec];
      dense_segment<Dist, kVec>(params, g.i0 + row, static_cast<index_t>(g.j0) + c0, encode, bits);
      const index_t offset = row_start + static_cast<index_t>(s) * kVec;
      if (c0 >= 0 && c0 + kVec <= cols) {
        store.vector(offset, bits);
      } else {
        for (int q = 0; q < kVec; ++q) {
          if (c0 + q >= 0 && c0 + q < cols) store.scalar(offset + q, bits[q]);
        }
      }
    }
  }
}

}  // namespace detail
}  // namespace compact
