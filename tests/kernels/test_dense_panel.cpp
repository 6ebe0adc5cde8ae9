// SPDX-License-Identifier: MIT
/// Host tests of kernels/dense_panel.hpp: the dense panel kernel's body (dense_panel_thread) run for every
/// (block, thread) of a launch, checking that every entry is written exactly once with the specification's value,
/// that whole 16-byte segments are written with one aligned vector store and only the ragged head and tail of a row
/// with scalar stores, for aligned and unaligned outputs and row strides.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "compact/spec/entries.hpp"
#include "compact/kernels/convert.hpp"
#include "compact/kernels/dense_panel.hpp"
#include "compact/kernels/panel_schedule.hpp"
#include "compact/kernels/vec16.hpp"

namespace {

using compact::index_t;
namespace detail = compact::detail;

struct Fp32Bits {
  std::uint32_t operator()(float v) const { return compact::fp32::bits_of(v); }
};
struct Bf16Bits {
  std::uint16_t operator()(float v) const { return compact::bf16_bits_from_fp32(v); }
};
struct Fp16Bits {
  std::uint16_t operator()(float v) const { return compact::fp16_bits_from_fp32(v); }
};

/// An output cell that records how it was written.
struct Cell {
  std::uint32_t bits = 0;
  int scalar_writes = 0;
  int vector_writes = 0;
};

/// A Store (scalar/vector at offsets from the output's start) that records every write into cells and checks that
/// each vector store is at a 16-byte boundary of an output starting out_phase elements past one.
template <class Bits>
struct CountingStore {
  static constexpr int kVec = detail::kVec16Elems<Bits>;
  std::vector<Cell>* cells;
  index_t out_phase;
  index_t* misaligned_vectors;  ///< vector stores off a 16-byte boundary, and writes outside the cells
  Cell& at(index_t offset) const {
    static Cell outside;
    if (offset < 0 || offset >= static_cast<index_t>(cells->size())) {
      ++*misaligned_vectors;
      return outside;
    }
    return (*cells)[static_cast<std::size_t>(offset)];
  }
  void scalar(index_t offset, Bits b) const {
    Cell& c = at(offset);
    c.bits = b;
    ++c.scalar_writes;
  }
  void vector(index_t offset, const Bits (&b)[kVec]) const {
    if ((out_phase + offset) % kVec != 0) ++*misaligned_vectors;
    for (int q = 0; q < kVec; ++q) {
      Cell& c = at(offset + q);
      c.bits = b[q];
      ++c.vector_writes;
    }
  }
};

/// Grids: 0 = panel_launch as the launcher gives it; otherwise that many blocks in x and y with `threads_x` x
/// `threads_y` threads (several grid-stride rounds, warps spanning rows).
struct GridChoice {
  std::uint32_t blocks, threads_x, threads_y;
};

/// Runs dense_panel_thread over every (block, thread) of `grid` for geometry g into store.
template <class Dist, class Encode, class Store>
void run_panel(const detail::PanelLaunch& grid, const compact::EntryParams& params, const detail::PanelGeometry& g,
               Encode encode, const Store& store) {
  for (std::uint32_t by = 0; by < grid.blocks_y; ++by) {
    for (std::uint32_t bx = 0; bx < grid.blocks_x; ++bx) {
      for (std::uint32_t ty = 0; ty < grid.threads_y; ++ty) {
        for (std::uint32_t tx = 0; tx < grid.threads_x; ++tx) {
          detail::dense_panel_thread<Dist>(grid, bx, by, tx, ty, params, g, encode, store);
        }
      }
    }
  }
}

/// Whole 16-byte segments of a row of `cols` entries starting at phase `ph`: k with k V - ph >= 0 and
/// k V - ph + V <= cols.
index_t whole_segments(index_t cols, index_t ph, index_t vec) {
  const index_t first = (ph + vec - 1) / vec, end = (cols + ph) / vec;
  return end > first ? end - first : 0;
}

/// P[rect] into an output of leading dimension ld starting out_phase elements past a 16-byte boundary, by the
/// launch pieces of for_each_panel_part (at most max_extent rows and columns each), on `choice`'s grid. Checks: each
/// entry once with the spec's bits; nothing outside the rectangle (row-stride gaps, a guard row); every vector store
/// aligned; exactly the whole segments of each row written by vector stores.
template <class Dist, class Encode>
void check_panel(const compact::EntryParams& params, detail::PanelRect rect, index_t ld, index_t out_phase,
                 GridChoice choice, Encode encode, index_t max_extent = detail::kPanelMaxExtent) {
  using Bits = decltype(encode(0.0f));
  constexpr index_t kVec = detail::kVec16Elems<Bits>;
  const index_t h = rect.i1 - rect.i0, w = rect.j1 - rect.j0;
  std::vector<Cell> cells(static_cast<std::size_t>((h + 1) * ld + kVec));
  index_t misaligned = 0;
  detail::for_each_panel_part(
      rect, ld, out_phase, kVec,
      [&](const detail::PanelRect&, index_t offset, const detail::PanelGeometry& g) {
        detail::PanelLaunch grid = detail::panel_launch(g);
        REQUIRE(grid.threads_x * grid.threads_y <= 256);
        if (choice.blocks > 0) grid = {choice.blocks, choice.blocks, choice.threads_x, choice.threads_y};
        std::vector<Cell> part(cells.size());
        run_panel<Dist>(grid, params, g, encode, CountingStore<Bits>{&part, g.out_phase, &misaligned});
        for (std::size_t k = 0; k < part.size(); ++k) {  // shift the piece's cells to its offset in the output
          if (part[k].scalar_writes + part[k].vector_writes == 0) continue;
          REQUIRE(k + static_cast<std::size_t>(offset) < cells.size());
          Cell& c = cells[k + static_cast<std::size_t>(offset)];
          c.bits = part[k].bits;
          c.scalar_writes += part[k].scalar_writes;
          c.vector_writes += part[k].vector_writes;
        }
      },
      max_extent);
  index_t wrong_count = 0, wrong_value = 0, vector_cells = 0, expected_vector_cells = 0;
  for (index_t i = 0; i <= h; ++i) {
    if (i < h) expected_vector_cells += kVec * whole_segments(w, (out_phase + i * ld) % kVec, kVec);
    for (index_t j = 0; j < ld; ++j) {
      const Cell& c = cells[static_cast<std::size_t>(i * ld + j)];
      const bool inside = i < h && j < w;
      if (c.scalar_writes + c.vector_writes != (inside ? 1 : 0)) ++wrong_count;
      vector_cells += c.vector_writes;
      if (inside && c.bits != encode(compact::dense_entry<Dist>(params, rect.i0 + i, rect.j0 + j))) ++wrong_value;
    }
  }
  INFO("rect [" << rect.i0 << ", " << rect.i1 << ") x [" << rect.j0 << ", " << rect.j1 << "), ld " << ld
                << ", out phase " << out_phase << ", V " << kVec << ", grid " << choice.blocks << " x "
                << choice.threads_x << " x " << choice.threads_y << ", pieces of " << max_extent);
  CHECK(wrong_count == 0);
  CHECK(wrong_value == 0);
  CHECK(misaligned == 0);
  if (max_extent == detail::kPanelMaxExtent) CHECK(vector_cells == expected_vector_cells);
}

const detail::PanelRect kRects[] = {
    {0, 1, 0, 1},      {0, 7, 0, 5},     {3, 9, 1, 130}, {0, 33, 128, 256}, {5, 6, 127, 129},
    {10, 17, 29, 301}, {0, 64, 0, 64},   {2, 4, 4, 8},   {0, 3, 250, 517},  {1, 40, 33, 34},
    {0, 4, 120, 140},  {7, 9, 125, 134},  // Rademacher: segments that cross a 128-column Philox block
};
const GridChoice kGrids[] = {{0, 0, 0}, {1, 4, 2}, {2, 32, 8}, {3, 1, 1}};

/// Every rectangle, leading dimensions that keep rows aligned or not, every output phase, every grid.
template <class Dist, class Encode>
void check_all(const compact::EntryParams& params, Encode encode) {
  using Bits = decltype(encode(0.0f));
  constexpr index_t kVec = detail::kVec16Elems<Bits>;
  for (const auto& rect : kRects) {
    const index_t w = rect.j1 - rect.j0;
    for (const index_t ld : {w, w + 1, w + 3, detail::panel_ld(w, kVec), detail::panel_ld(w, kVec) + kVec}) {
      for (index_t phase = 0; phase < kVec; ++phase) {
        for (const auto& grid : kGrids) check_panel<Dist>(params, rect, ld, phase, grid, encode);
      }
    }
  }
}

}  // namespace

TEST_CASE("Gaussian panels: every entry once with the spec value, whole segments as aligned vectors, any layout") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{7, 3, 11}, 64);
  check_all<compact::Gaussian>(params, Fp32Bits{});
  check_all<compact::Gaussian>(params, Bf16Bits{});
  check_all<compact::Gaussian>(params, Fp16Bits{});
}

TEST_CASE("Rademacher panels: every entry once with the spec value, whole segments as aligned vectors, any layout") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{7, 3, 11}, 100);
  check_all<compact::Rademacher>(params, Fp32Bits{});
  check_all<compact::Rademacher>(params, Bf16Bits{});
  check_all<compact::Rademacher>(params, Fp16Bits{});
}

TEST_CASE("rectangles cut into launch pieces are written exactly once, each piece at its own phase") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{1, 9, 5}, 33);
  for (const index_t piece : {index_t{1}, index_t{5}, index_t{8}}) {
    check_panel<compact::Gaussian>(params, {3, 20, 5, 40}, 43, 3, {0, 0, 0}, Bf16Bits{}, piece);
    check_panel<compact::Rademacher>(params, {0, 9, 100, 150}, 51, 1, {0, 0, 0}, Fp32Bits{}, piece);
  }
}

TEST_CASE("the real store policy writes the spec's bits through 16-byte vectors into aligned and unaligned memory") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{4, 4, 4}, 77);
  const detail::PanelRect rect{2, 13, 3, 80};
  const index_t w = rect.j1 - rect.j0;
  for (const index_t shift : {0, 1, 5, 7}) {  // elements past a 16-byte boundary
    for (const index_t ld : {index_t{80}, index_t{83}}) {
      std::vector<detail::Vec16> storage(static_cast<std::size_t>((12 * ld + 16) / 8 + 2));
      std::uint16_t* base = reinterpret_cast<std::uint16_t*>(storage.data());  // 16-byte aligned (alignas)
      REQUIRE(detail::is_aligned16(base));
      std::uint16_t* out = base + shift;
      const std::size_t total = storage.size() * 8;
      for (std::size_t k = 0; k < total; ++k) base[k] = 0xABCD;
      detail::for_each_panel_part(rect, ld, shift, 8,
                                  [&](const detail::PanelRect&, index_t offset, const detail::PanelGeometry& g) {
                                    run_panel<compact::Gaussian>(detail::panel_launch(g), params, g, Bf16Bits{},
                                                                 detail::PanelStore<std::uint16_t>{out + offset});
                                  });
      index_t wrong = 0;
      for (std::size_t k = 0; k < total; ++k) {
        const index_t rel = static_cast<index_t>(k) - shift, i = rel >= 0 ? rel / ld : -1, j = rel >= 0 ? rel % ld : -1;
        const bool inside = i >= 0 && i < rect.i1 - rect.i0 && j < w;
        const std::uint16_t want =
            inside ? compact::bf16_bits_from_fp32(compact::gaussian_entry(params, rect.i0 + i, rect.j0 + j)) : 0xABCD;
        wrong += base[k] != want;
      }
      CHECK_MESSAGE(wrong == 0, "shift " << shift << " ld " << ld);
    }
  }
}

TEST_CASE("Vec16 packing keeps memory order: element q at bytes [q size, (q + 1) size)") {
  const std::uint16_t h[8] = {0x0102, 0x0304, 0x0506, 0x0708, 0x090A, 0x0B0C, 0x0D0E, 0x0F10};
  const detail::Vec16 v = detail::pack_vec16(h);
  unsigned char bytes[16];
  detail::store_vec16(bytes, v);
  for (int q = 0; q < 8; ++q) {
    std::uint16_t got;
    std::memcpy(&got, bytes + 2 * q, 2);
    CHECK(got == h[q]);
    CHECK(detail::vec16_get<std::uint16_t>(detail::load_vec16(bytes), q) == h[q]);
  }
  const std::uint32_t f[4] = {1u, 0x80000000u, 0xDEADBEEFu, 7u};
  const detail::Vec16 packed = detail::pack_vec16(f);
  const detail::Vec16 u = detail::load_vec16(&packed);
  for (int q = 0; q < 4; ++q) CHECK(detail::vec16_get<std::uint32_t>(u, q) == f[q]);
  CHECK(detail::raw_bits(1.0f) == 0x3F800000u);
}

TEST_CASE("panel tasks address rows and windows above 2^32 without truncation, and launches stay in 32 bits") {
  // Window above 2^32 exercises the counter's high word; rows near the top of the spec's 32-bit range.
  const compact::EntryParams params =
      compact::entry_params(compact::SketchState{1, 2, (std::uint64_t{1} << 33) + 5}, 8);
  for (const auto& grid : kGrids) {
    check_panel<compact::Gaussian>(params, {4000000000, 4000000003, 0, 9}, 9, 0, grid, Fp32Bits{});
    check_panel<compact::Rademacher>(params, {4000000000, 4000000003, 60, 200}, 141, 1, grid, Bf16Bits{});
  }
  // A piece of 2^30 x 2^30: segments and rows plus one grid stride stay below 2^32.
  const index_t big = detail::kPanelMaxExtent;
  const detail::PanelGeometry g = detail::panel_geometry({0, big, 0, big}, big + 3, 5, 8);
  const detail::PanelLaunch l = detail::panel_launch(g);
  CHECK(g.max_segments == (7 + big + 7) / 8);
  CHECK(l.threads_x == 256);
  CHECK(l.threads_y == 1);
  CHECK(l.blocks_y == 65535);  // CUDA's grid y limit; the row loop strides over the rest
  CHECK(std::uint64_t{g.rows} + std::uint64_t{l.blocks_y} * l.threads_y < (std::uint64_t{1} << 32));
  CHECK(std::uint64_t{g.max_segments} + std::uint64_t{l.blocks_x} * l.threads_x < (std::uint64_t{1} << 32));
  // SRHT materialize's one-entry tasks keep 64-bit task numbers.
  const detail::PanelRect huge{0, index_t{1} << 20, 0, index_t{1} << 14};
  CHECK(detail::panel_task_count(huge, 1) == (index_t{1} << 34));
  const detail::PanelTask last = detail::panel_task(huge, 1, (index_t{1} << 34) - 1);
  CHECK(last.i == (index_t{1} << 20) - 1);
  CHECK(last.j0 == (index_t{1} << 14) - 1);
}

TEST_CASE("launch shapes: at most 256 threads, warps over several short rows, whole warps over long ones") {
  for (const index_t cols : {index_t{1}, index_t{5}, index_t{16}, index_t{64}, index_t{250}, index_t{1000},
                             index_t{1024}, index_t{1030}, index_t{5000}}) {
    for (const index_t ld : {cols, cols + 1}) {
      const detail::PanelGeometry g = detail::panel_geometry({0, 100, 0, cols}, ld, 0, 8);
      const detail::PanelLaunch l = detail::panel_launch(g);
      CHECK(l.threads_x * l.threads_y <= 256);
      CHECK(l.threads_x * l.threads_y >= 128);
      if (g.max_segments <= 32) {
        CHECK(l.threads_x >= g.max_segments);
        CHECK((l.threads_x & (l.threads_x - 1)) == 0);
      } else {
        CHECK(l.threads_x % 32 == 0);
      }
      CHECK(std::uint64_t{l.blocks_x} * l.threads_x >= g.max_segments);
      CHECK(std::uint64_t{l.blocks_y} * l.threads_y >= g.rows);
    }
  }
  // Aligned rows of 1024 bf16: exactly 128 segments, so 128 threads per row and no idle lane.
  const detail::PanelGeometry g = detail::panel_geometry({0, 4096, 0, 1024}, 1024, 0, 8);
  CHECK(g.max_segments == 128);
  CHECK(detail::panel_launch(g).threads_x == 128);
}
