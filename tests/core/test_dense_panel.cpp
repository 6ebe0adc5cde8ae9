// SPDX-License-Identifier: MIT
/// Host tests of core/dense_panel.hpp: the dense panel kernel's body (dense_panel_thread) run for every
/// (block, thread) of a launch, checking that every entry is written exactly once with the specification's value.

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "compact/core/convert.hpp"
#include "compact/core/dense_panel.hpp"
#include "compact/core/entries.hpp"

namespace {

using compact::index_t;
namespace detail = compact::detail;

/// An output cell that counts how often it is assigned, so a host loop can prove "written exactly once".
struct CountingCell {
  std::uint32_t bits = 0;
  int writes = 0;
  CountingCell& operator=(std::uint32_t b) {
    bits = b;
    ++writes;
    return *this;
  }
};

struct Fp32Bits {
  std::uint32_t operator()(float v) const { return compact::fp32::bits_of(v); }
};
struct Bf16Bits {
  std::uint32_t operator()(float v) const { return compact::bf16_bits_from_fp32(v); }
};
struct Fp16Bits {
  std::uint32_t operator()(float v) const { return compact::fp16_bits_from_fp32(v); }
};

/// Grids: 0 = panel_launch as the launcher gives it; otherwise that many blocks in x and y (several grid-stride
/// rounds) with the launcher's block shape, or a 32 x 8 block.
struct GridChoice {
  index_t blocks;
  bool narrow;
};

/// Runs dense_panel_thread for every (block, thread) of the grid on P[rect], into a buffer with leading dimension
/// ld > width and a guard row, so stray writes are visible; checks every entry against dense_entry.
template <class Dist, class Convert>
void check_panel(const compact::EntryParams& params, detail::PanelRect rect, GridChoice choice, Convert convert) {
  const index_t chunk = detail::kPanelChunkCols<Dist>;
  const index_t h = rect.i1 - rect.i0, w = rect.j1 - rect.j0, ld = w + 3;
  std::vector<CountingCell> out(static_cast<std::size_t>((h + 1) * ld));
  detail::PanelLaunch grid = detail::panel_launch(rect, chunk);
  REQUIRE(grid.threads_x * grid.threads_y == 256);
  if (choice.blocks > 0) grid.blocks_x = grid.blocks_y = choice.blocks;
  if (choice.narrow) grid.threads_x = 32, grid.threads_y = 8;
  for (index_t by = 0; by < grid.blocks_y; ++by) {
    for (index_t bx = 0; bx < grid.blocks_x; ++bx) {
      for (index_t ty = 0; ty < grid.threads_y; ++ty) {
        for (index_t tx = 0; tx < grid.threads_x; ++tx) {
          detail::dense_panel_thread<Dist>(grid, bx, by, tx, ty, params, rect, out.data(), ld, convert);
        }
      }
    }
  }
  index_t wrong_count = 0, wrong_value = 0;
  for (index_t i = 0; i <= h; ++i) {
    for (index_t j = 0; j < ld; ++j) {
      const CountingCell& c = out[static_cast<std::size_t>(i * ld + j)];
      const bool inside = i < h && j < w;
      if (c.writes != (inside ? 1 : 0)) ++wrong_count;
      if (inside && c.bits != convert(compact::dense_entry<Dist>(params, rect.i0 + i, rect.j0 + j))) ++wrong_value;
    }
  }
  CHECK_MESSAGE(wrong_count == 0, "rect [" << rect.i0 << ", " << rect.i1 << ") x [" << rect.j0 << ", " << rect.j1
                                           << "), blocks " << choice.blocks << ", narrow " << choice.narrow);
  CHECK(wrong_value == 0);
}

const detail::PanelRect kRects[] = {
    {0, 1, 0, 1},      {0, 7, 0, 5},   {3, 9, 1, 130}, {0, 33, 128, 256}, {5, 6, 127, 129},
    {10, 17, 29, 301}, {0, 64, 0, 64}, {2, 4, 4, 8},   {0, 3, 250, 517},  {1, 40, 33, 34},
};
const GridChoice kGrids[] = {{0, false}, {1, false}, {2, false}, {0, true}, {3, true}};

}  // namespace

TEST_CASE("every Gaussian panel entry is written exactly once, with the spec value, for every grid") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{7, 3, 11}, 64);
  for (const auto& rect : kRects) {
    for (const auto& grid : kGrids) {
      check_panel<compact::Gaussian>(params, rect, grid, Fp32Bits{});
      check_panel<compact::Gaussian>(params, rect, grid, Bf16Bits{});
      check_panel<compact::Gaussian>(params, rect, grid, Fp16Bits{});
    }
  }
}

TEST_CASE("every Rademacher panel entry is written exactly once, with the spec value, for every grid") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{7, 3, 11}, 100);
  for (const auto& rect : kRects) {
    for (const auto& grid : kGrids) {
      check_panel<compact::Rademacher>(params, rect, grid, Fp32Bits{});
      check_panel<compact::Rademacher>(params, rect, grid, Bf16Bits{});
      check_panel<compact::Rademacher>(params, rect, grid, Fp16Bits{});
    }
  }
}

TEST_CASE("panel tasks address rows and windows above 2^32 without truncation") {
  // Window above 2^32 exercises the counter's high word; the row index stays below kMaxDim as the spec requires.
  const compact::EntryParams params =
      compact::entry_params(compact::SketchState{1, 2, (std::uint64_t{1} << 33) + 5}, 8);
  for (const auto& grid : kGrids) {
    check_panel<compact::Gaussian>(params, {4000000000, 4000000003, 0, 9}, grid, Fp32Bits{});
    check_panel<compact::Rademacher>(params, {4000000000, 4000000003, 60, 200}, grid, Fp32Bits{});
  }
  const detail::PanelRect big{0, index_t{1} << 20, 0, index_t{1} << 14};  // 2^34 entries: 64-bit task numbers
  const index_t tasks = detail::panel_task_count(big, 4);
  CHECK(tasks == (index_t{1} << 32));
  const detail::PanelTask last = detail::panel_task(big, 4, tasks - 1);
  CHECK(last.i == (index_t{1} << 20) - 1);
  CHECK(last.j0 == (index_t{1} << 14) - 4);
  CHECK(last.j1 == (index_t{1} << 14));
  const detail::PanelLaunch l = detail::panel_launch(big, 4);  // 4096 chunks per row, 2^20 rows
  CHECK(l.threads_x == 256);
  CHECK(l.threads_y == 1);
  CHECK(l.blocks_x == 16);
  CHECK(l.blocks_y == 65535);  // CUDA's grid y limit; the row loop strides over the rest
}
