// SPDX-License-Identifier: MIT
#pragma once
/// Projector<Cpu, Gaussian|Rademacher, float|double>: dense P generated panel by panel and fed to the GEMM.

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/state.hpp"
#include "compact/api/checked_size.hpp"
#include "compact/api/distributions.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/projector_fwd.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/kernels/panel_schedule.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/parallel.hpp"
#include "compact/cpu/scratch.hpp"
#include "compact/cpu/gemm_engine.hpp"
#include "compact/cpu/generate.hpp"
#include "compact/cpu/projector.hpp"

namespace compact {
namespace detail {

/// The implementation of the dense CPU projectors (Gaussian and Rademacher); CpuProjector adds the Eigen conveniences.
///
/// Class invariant: 1 <= r <= n <= kMaxDim, panel_entries >= 1. P is never held whole unless it is small: `sketch`
/// generates column panels of P (n x w, w = panel_width()) and `unsketch_grad` row panels (h x r, h =
/// panel_height()), each with all threads (a pure function of (i, j), so the bits never depend on the partition),
/// then multiplies by it. Scratch: one panel, at most max(panel_entries, kPanelMin * max(n, r)) Scalars per call
/// (by default 16 MiB for float, 32 MiB for double; a P of at most panel_entries entries, e.g. n = 4096,
/// r = 1024, is one panel), independent of the thread count; taken from the calling thread's kept scratch
/// (detail::ScratchLease), or lent by the caller (the overloads that take a Workspace of workspace_bytes(n, r) or
/// scratch_bytes(rows)). GEMM: a fixed grid of output tiles per panel (a function of the shape only, see tile_grid),
/// one single-threaded GEMM per tile on the OpenMP team, on the projector's GemmEngine (cpu/gemm_engine.hpp): Eigen's,
/// or the registered CBLAS (default_gemm_engine() at construction, set_gemm_engine to change). Every output element is
/// therefore computed by the same GEMM call whatever the team size: the result is bitwise independent of the number of
/// threads, for both engines.
template <class Dist, class Scalar>
class DenseCpuProjector : public ProjectorCore {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::Projector<Cpu, Dist, Scalar>: Scalar must be float or double on the CPU");

 public:
  using scalar_type = Scalar;

  /// Default entries of P per generated panel (the scratch bound, unless kPanelMin * max(n, r) is larger).
  static constexpr index_t kPanelEntries = index_t{1} << 22;
  /// Granularity of panel widths and heights, and the narrowest panel; a multiple of both block widths.
  static constexpr index_t kPanelMin = 128;
  /// Rows of P per generation task (tasks are independent and write disjoint rows of the panel).
  static constexpr index_t kGenerateRows = 32;
  /// Largest output tile edge of the Eigen engine: each tile is one single-threaded Eigen GEMM.
  static constexpr index_t kTile = 1024;
  /// The Eigen engine halves tiles (the longer edge, down to kTileMin) until there are kMinTiles of them.
  static constexpr index_t kMinTiles = 4;
  static constexpr index_t kTileMin = 64;

  // The dense family's extras (panel_width, panel_height, panel_entries; materialize(p, row0, col0)): what a caller
  // running its own GEMM on panels of P uses, reached under `if constexpr (is_dense_v<Dist>)`. The query every
  // projector answers is workspace_bytes(n, r) and scratch_bytes(rows).

  /// Columns of P per sketch panel: r when n * r <= panel_entries(), else the most multiples of kPanelMin with
  /// n * w <= panel_entries() (at least kPanelMin), capped at r.
  index_t panel_width() const { return panel_extent(n_, r_, panel_entries_); }
  /// Rows of P per unsketch_grad panel: n when h * r <= panel_entries(), else the most multiples of kPanelMin with
  /// h * r <= panel_entries() (at least kPanelMin), capped at n.
  index_t panel_height() const { return panel_extent(r_, n_, panel_entries_); }
  /// The panel budget in entries of P (kPanelEntries unless the constructor was given another).
  index_t panel_entries() const { return panel_entries_; }

  /// P of (state, n, r); requires 1 <= r <= n <= kMaxDim. `panel_entries` (>= 1) bounds the panels of P that
  /// sketch and unsketch_grad generate (see panel_width()); the default suits every shape, a smaller one trades
  /// speed for scratch memory (and lets tests reach the multi-panel path with small matrices). The result does not
  /// depend on it beyond GEMM rounding; P itself (materialize) does not depend on it at all.
  DenseCpuProjector(index_t n, index_t r, SketchState state, index_t panel_entries = kPanelEntries)
      : ProjectorCore(Dist{}, "Projector", n, r, state), panel_entries_(panel_entries) {
    COMPACT_REQUIRE(panel_entries >= 1, "Projector: argument panel_entries = " << panel_entries << " must be >= 1");
    check_gemm_engine("Projector", engine_, n);
  }

  /// The GEMM engine of sketch and unsketch_grad (default_gemm_engine() at construction).
  GemmEngine gemm_engine() const { return engine_; }
  /// Runs later products on `engine`; compact::error (the projector unchanged) when it is not available or is kBlas
  /// with n beyond the 32-bit BLAS integer. Not thread-safe against calls running on this projector.
  void set_gemm_engine(GemmEngine engine) {
    check_gemm_engine("Projector::set_gemm_engine", engine, n_);
    engine_ = engine;
  }

  /// Bytes of the Workspace every sketch and unsketch_grad of a projector of shape (n, r) with the default panel
  /// budget (kPanelEntries) can take: one panel of P, whatever the number of rows. A pure function of its arguments
  /// (needs no projector, no device), with the CUDA projectors' parameters: the panel schedule is kSerial on the CPU,
  /// which generates each panel with all threads and then multiplies it (kOverlap, two buffers on two CUDA streams,
  /// is refused). A projector built with another budget reports its need with scratch_bytes(rows).
  static std::size_t workspace_bytes(index_t n, index_t r, PanelSchedule schedule = PanelSchedule::kSerial) {
    check_projector_shape<Dist>("Projector::workspace_bytes", n, r);
    COMPACT_REQUIRE(schedule == PanelSchedule::kSerial,
                    "Projector<Cpu>::workspace_bytes: argument schedule = kOverlap is a CUDA schedule (two panel "
                    "buffers on two streams); the CPU projectors run kSerial");
    return panel_bytes(n, r, kPanelEntries);
  }

  /// Bytes of Workspace one sketch or unsketch_grad of `rows` rows takes: one panel of P under this projector's budget
  /// panel_entries(), for every `rows` (workspace_bytes(n, r) with the default budget). The per-call query the
  /// optimizers use.
  std::size_t scratch_bytes(index_t rows = 0) const {
    (void)rows;
    return panel_bytes(n_, r_, panel_entries_);
  }

  /// z = x P. x: B x n, z: B x r (row-major, any row strides, z must not overlap x), with the caller's workspace (at
  /// least scratch_bytes(x.rows) bytes): allocates nothing. (CpuProjector adds the allocating overload.)
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z, Workspace scratch) const {
    check_sketch_args(x, z, n_, r_);
    check_gemm_stride("Projector::sketch", "x", x);
    check_gemm_stride("Projector::sketch", "z", z);
    check_scratch<Scalar>("Projector::sketch", scratch, scratch_bytes(x.rows));
    if (x.rows == 0) return;
    sketch_unchecked(x, z, static_cast<Scalar*>(scratch.data));
  }

  /// out = alpha g P^T + beta out. g: m x r, out: m x n; with beta = 0, out is written without being read. With the
  /// caller's workspace (at least scratch_bytes(g.rows) bytes): allocates nothing.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, compute_t<Scalar> alpha,
                     compute_t<Scalar> beta, Workspace scratch) const {
    check_unsketch_args(g, out, n_, r_);
    check_gemm_stride("Projector::unsketch_grad", "g", g);
    check_gemm_stride("Projector::unsketch_grad", "out", out);
    check_scratch<Scalar>("Projector::unsketch_grad", scratch, scratch_bytes(g.rows));
    if (g.rows == 0) return;
    unsketch_unchecked(g, out, alpha, beta, static_cast<Scalar*>(scratch.data));
  }

  /// p = P (n x r).
  void materialize(MatrixView<Scalar> p) const {
    check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    generate_parallel(0, n_, 0, r_, p.data, p.row_stride);
  }
  /// p = P[row0 : row0 + p.rows, col0 : col0 + p.cols], a block of P (the same entries as materialize's, rows split
  /// over the threads): what a caller that runs its own GEMM generates panel by panel. Requires the block inside P.
  void materialize(MatrixView<Scalar> p, index_t row0, index_t col0) const {
    check_block("Projector::materialize", p, row0, col0, n_, r_);
    generate_parallel(row0, row0 + p.rows, col0, col0 + p.cols, p.data, p.row_stride);
  }

 private:
  /// Bytes of one panel of P, the larger of sketch's (n x width) and unsketch_grad's (height x r), for a budget of
  /// `panel_entries` entries.
  static std::size_t panel_bytes(index_t n, index_t r, index_t panel_entries) {
    const index_t width = panel_extent(n, r, panel_entries), height = panel_extent(r, n, panel_entries);
    return static_cast<std::size_t>(std::max(n * width, height * r)) * sizeof(Scalar);
  }

  /// sketch after the checks: column panels of P into `panel` (n x panel_width()), one GEMM grid per panel.
  void sketch_unchecked(const MatrixView<const Scalar>& x, const MatrixView<Scalar>& z, Scalar* panel) const {
    const index_t b = x.rows, width = panel_width();
    const SerialBlasScope serial_blas(engine_);
    for (index_t j0 = 0; j0 < r_; j0 += width) {
      const index_t w = std::min(width, r_ - j0);
      generate_parallel(0, n_, j0, j0 + w, panel, w);
      const TileGrid grid = tile_grid(b, w);
      parallel_tasks(grid.count(), 2.0 * double(b) * double(n_) * double(w), [&](index_t t, int) {
        const index_t i0 = (t / grid.col_tiles) * grid.tile_rows, c0 = (t % grid.col_tiles) * grid.tile_cols;
        const index_t th = std::min(grid.tile_rows, b - i0), tw = std::min(grid.tile_cols, w - c0);
        serial_gemm<Scalar>(engine_, th, tw, n_, Scalar(1), x.data + i0 * x.row_stride, x.row_stride, panel + c0, w,
                            false, Scalar(0), z.data + i0 * z.row_stride + j0 + c0, z.row_stride);
      });
    }
  }

  /// unsketch_grad after the checks: row panels of P into `panel` (panel_height() x r), one GEMM grid per panel.
  void unsketch_unchecked(const MatrixView<const Scalar>& g, const MatrixView<Scalar>& out, Scalar alpha, Scalar beta,
                          Scalar* panel) const {
    const index_t m = g.rows, height = panel_height();
    const SerialBlasScope serial_blas(engine_);
    for (index_t i0 = 0; i0 < n_; i0 += height) {
      const index_t h = std::min(height, n_ - i0);
      generate_parallel(i0, i0 + h, 0, r_, panel, r_);
      const TileGrid grid = tile_grid(m, h);
      parallel_tasks(grid.count(), 2.0 * double(m) * double(h) * double(r_), [&](index_t t, int) {
        const index_t a0 = (t / grid.col_tiles) * grid.tile_rows, c0 = (t % grid.col_tiles) * grid.tile_cols;
        const index_t th = std::min(grid.tile_rows, m - a0), tw = std::min(grid.tile_cols, h - c0);
        serial_gemm<Scalar>(engine_, th, tw, r_, alpha, g.data + a0 * g.row_stride, g.row_stride, panel + c0 * r_, r_,
                            true, beta, out.data + a0 * out.row_stride + i0 + c0, out.row_stride);
      });
    }
  }

  /// P[i0:i1, j0:j1] into out (leading dimension ld), in fp32 converted to Scalar, rows split over the team.
  void generate_parallel(index_t i0, index_t i1, index_t j0, index_t j1, Scalar* out, index_t ld) const {
    const index_t tasks = (i1 - i0 + kGenerateRows - 1) / kGenerateRows;
    parallel_tasks(tasks, 50.0 * double(i1 - i0) * double(j1 - j0), [&](index_t t, int) {
      const index_t a = i0 + t * kGenerateRows, e = std::min(i1, a + kGenerateRows);
      fill_dense_panel<Dist>(params_, a, e, j0, j1, out + (a - i0) * ld, ld);
    });
  }

  /// A fixed grid of output tiles for a rows x cols GEMM result: a function of the shape only, never of the
  /// thread count, so every output element is computed by the same GEMM call whatever the team size.
  struct TileGrid {
    index_t tile_rows, tile_cols, row_tiles, col_tiles;
    index_t count() const { return row_tiles * col_tiles; }
  };
  static TileGrid tile_grid(index_t rows, index_t cols) {
    TileGrid g{std::min(kTile, rows), std::min(kTile, cols), 0, 0};
    const auto update = [&g, rows, cols] {
      g.row_tiles = (rows + g.tile_rows - 1) / g.tile_rows;
      g.col_tiles = (cols + g.tile_cols - 1) / g.tile_cols;
    };
    update();
    // Halving the longer edge repacks the smaller operand: tiles of x rows re-pack P, tiles of P columns re-pack x.
    while (g.count() < kMinTiles && std::max(g.tile_rows, g.tile_cols) > kTileMin) {
      if (g.tile_rows > g.tile_cols) {
        g.tile_rows = (g.tile_rows + 1) / 2;
      } else {
        g.tile_cols = (g.tile_cols + 1) / 2;
      }
      update();
    }
    return g;
  }

  /// The BLAS engine takes 32-bit leading dimensions: refuse a larger row stride before any write (a check inside
  /// the thread team could not report it).
  template <class T>
  void check_gemm_stride(const char* fn, const char* name, const MatrixView<T>& v) const {
    COMPACT_REQUIRE(engine_ != GemmEngine::kBlas || v.row_stride <= kBlasMaxExtent,
                    fn << ": argument " << name << " has row_stride = " << v.row_stride << " > " << kBlasMaxExtent
                       << ", the largest leading dimension of the 32-bit BLAS (GemmEngine::kBlas)");
  }

  /// The panel extent along `along` (capped there) for panels that span `across` within `budget` entries: see
  /// panel_width(). Every product stays below kPanelMin * kMaxDim, far from overflow.
  static index_t panel_extent(index_t across, index_t along, index_t budget) {
    if (along <= budget / across) return along;  // all of P fits the budget: one panel
    const index_t fit = std::max(kPanelMin, (budget / across) / kPanelMin * kPanelMin);
    return std::min(fit, along);
  }

  index_t panel_entries_;
  GemmEngine engine_ = default_gemm_engine();
};

}  // namespace detail

/// Gaussian projector on the CPU: P has i.i.d. N(0, 1/r) entries (entry spec v1). See DenseCpuProjector.
template <class Scalar>
class Projector<Cpu, Gaussian, Scalar> : public detail::CpuProjector<detail::DenseCpuProjector<Gaussian, Scalar>> {
 public:
  using detail::CpuProjector<detail::DenseCpuProjector<Gaussian, Scalar>>::CpuProjector;
};

/// Rademacher projector on the CPU: P has i.i.d. +-1/sqrt(r) entries (entry spec v1). See DenseCpuProjector.
template <class Scalar>
class Projector<Cpu, Rademacher, Scalar> : public detail::CpuProjector<detail::DenseCpuProjector<Rademacher, Scalar>> {
 public:
  using detail::CpuProjector<detail::DenseCpuProjector<Rademacher, Scalar>>::CpuProjector;
};

/// The CPU backend implements Gaussian and Rademacher (the dense family).
template <>
struct BackendSupports<Cpu, Gaussian> : std::true_type {};
template <>
struct BackendSupports<Cpu, Rademacher> : std::true_type {};

}  // namespace compact
