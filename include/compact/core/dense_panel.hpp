// SPDX-License-Identifier: MIT
#pragma once
/// The GPU's dense panel kernel as a host/device function of (block, thread): a rectangle of a Gaussian or
/// Rademacher P, entry for entry the values of core/entries.hpp.
///
/// P[i0:i1, j0:j1] is cut into tasks of one row by one "chunk" of columns, chunks aligned to multiples of the chunk
/// width in global column index, so a task is exactly the lanes of one Philox block (Gaussian, 4 columns) or one
/// 32-bit word of one (Rademacher, 32 columns). Consecutive tasks walk along a row, so consecutive threads write
/// consecutive addresses.

#include <type_traits>

#include "compact/config.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/grid.hpp"
#include "compact/core/tags.hpp"

namespace compact {
namespace detail {

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

/// Thread (thread_x, thread_y) of block (block_x, block_y) of the dense panel kernel launched as `grid`: writes
/// P[rect] into out (row-major, leading dimension ld; element (i, j) of P at out[(i - i0) ld + (j - j0)]) for its
/// tasks of the 2-D grid-stride loops (x over the chunks of a row, y over the rows), each through
/// fill_dense_panel_scalar, the CPU's reference loop. `convert` turns the fp32 entry into the stored value.
template <class Dist, class Out, class Convert>
COMPACT_HOST_DEVICE inline void dense_panel_thread(const PanelLaunch& grid, index_t block_x, index_t block_y,
                                                   index_t thread_x, index_t thread_y, const EntryParams& params,
                                                   const PanelRect& rect, Out* out, index_t ld, Convert convert) {
  constexpr index_t kChunk = kPanelChunkCols<Dist>;
  const index_t rows = rect.i1 - rect.i0, per_row = panel_chunks_per_row(rect, kChunk);
  const index_t step_x = grid_stride_step(grid.blocks_x, grid.threads_x);
  const index_t step_y = grid_stride_step(grid.blocks_y, grid.threads_y);
  for (index_t row = grid_stride_first(block_y, thread_y, grid.threads_y); row < rows; row += step_y) {
    for (index_t c = grid_stride_first(block_x, thread_x, grid.threads_x); c < per_row; c += step_x) {
      const PanelTask task = panel_task_at(rect, kChunk, row, c);
      fill_dense_panel_scalar<Dist>(params, task.i, task.i + 1, task.j0, task.j1, out + row * ld + (task.j0 - rect.j0),
                                    ld, convert);
    }
  }
}

}  // namespace detail
}  // namespace compact
