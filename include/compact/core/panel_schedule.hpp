// SPDX-License-Identifier: MIT
#pragma once
/// How the GPU's dense projectors cut P into panels inside a caller's workspace, and in which order they generate
/// and multiply them: serially on one stream, or with the generation of panel k + 1 (on a side stream) overlapping
/// the GEMM of panel k (on the caller's stream), ordered by two events. Pure host functions of the sizes, so the
/// host tests check every split and simulate every schedule.
///
/// A sketch multiplies by column panels P[:, j0 : j0 + w] (n x w, row-major, leading dimension ld); an
/// unsketch_grad by row panels P[i0 : i0 + h, :] (h x r, leading dimension ld). Every leading dimension is a
/// multiple of V = 16 / sizeof(Scalar) and every buffer starts at a multiple of kPanelAlign elements of the
/// 256-byte aligned workspace, so each panel row starts 16-byte aligned and the panel kernel stores whole vectors.

#include "compact/config.hpp"

namespace compact {

/// How a dense CUDA projector orders panel generation and GEMMs. kSerial: one stream, panel k generated then
/// multiplied, one buffer. kOverlap: two buffers; panel k + 1 is generated on a side stream while panel k is
/// multiplied on the caller's stream (needs a Cuda backend with `overlap` set and workspace_bytes(n, r, kOverlap)).
enum class PanelSchedule { kSerial, kOverlap };

namespace detail {

/// Panel widths (sketch) and heights (unsketch_grad) are multiples of this unless one panel covers all of P; buffer
/// offsets are multiples of it too (256 bytes or more for every Scalar).
inline constexpr index_t kPanelAlign = 128;
/// The recommended workspace holds at most this many entries of P beyond the minimum (32 MiB of bf16).
inline constexpr index_t kDefaultPanelEntries = index_t{1} << 24;

/// `x` rounded up to a multiple of `m`.
inline constexpr index_t round_up(index_t x, index_t m) { return (x + m - 1) / m * m; }

/// Leading dimension of a panel row of `cols` entries: cols rounded up to a multiple of V (16-byte rows).
inline constexpr index_t panel_ld(index_t cols, index_t vec) { return round_up(cols, vec); }

/// How one operation cuts P: `count` panels of `extent` columns (sketch) or rows (unsketch_grad), the last one
/// possibly narrower, each stored with leading dimension `ld` in buffer k % buffers; buffer 1 starts
/// `buffer_stride` entries after buffer 0 (a multiple of kPanelAlign).
struct PanelSplit {
  index_t extent, ld, count, buffers, buffer_stride;
};

/// Panel k of a split along a dimension of size `extent`: [start, start + size).
struct PanelSpan {
  index_t start, size;
};

inline PanelSpan panel_span(const PanelSplit& split, index_t k, index_t extent) {
  const index_t start = k * split.extent, rest = extent - start;
  return PanelSpan{start, split.extent < rest ? split.extent : rest};
}

/// Entries one buffer may use when the workspace holds `capacity` entries: all of them (serial), or the largest
/// multiple of kPanelAlign that fits twice (overlap).
inline index_t panel_buffer_capacity(index_t capacity, PanelSchedule s) {
  return s == PanelSchedule::kOverlap ? capacity / 2 / kPanelAlign * kPanelAlign : capacity;
}

/// Extent of the panels along a dimension of size `extent` when a buffer holds `per_buffer` entries, `fits_whole`
/// says whether the panel of the whole extent fits, and a panel takes `unit` entries per unit of extent (for
/// multiples of kPanelAlign): the whole extent when it fits (serial) or is at most kPanelAlign (nothing to overlap);
/// else the most kPanelAlign-multiples that fit (at least kPanelAlign: the minimum workspace holds that), and with
/// overlap at most half of the extent (rounded up to kPanelAlign), so that there are at least two panels.
inline index_t panel_extent(index_t per_buffer, index_t extent, bool fits_whole, index_t unit, PanelSchedule s) {
  const bool overlap = s == PanelSchedule::kOverlap && extent > kPanelAlign;
  if (!overlap && (fits_whole || extent <= kPanelAlign)) return extent;
  index_t e = per_buffer / unit / kPanelAlign * kPanelAlign;
  if (e < kPanelAlign) e = kPanelAlign;
  if (overlap) {
    const index_t half = round_up((extent + 1) / 2, kPanelAlign);
    if (e > half) e = half;
  }
  return e < extent ? e : extent;
}

/// The column panels of z = x P for an n x r P in a workspace of `capacity` entries (at least
/// min_panel_entries(n, r, vec, s)), rows of ld = panel_ld(w, vec) entries.
inline PanelSplit sketch_split(index_t capacity, index_t n, index_t r, index_t vec, PanelSchedule s) {
  const index_t per = panel_buffer_capacity(capacity, s);
  const index_t w = panel_extent(per, r, panel_ld(r, vec) <= per / n, n, s);
  const index_t ld = panel_ld(w, vec);
  const bool two = s == PanelSchedule::kOverlap;
  return PanelSplit{w, ld, (r + w - 1) / w, two ? 2 : 1, two ? round_up(n * ld, kPanelAlign) : 0};
}

/// The row panels of out = alpha g P^T + beta out for an n x r P in a workspace of `capacity` entries, rows of
/// ld = panel_ld(r, vec) entries.
inline PanelSplit unsketch_split(index_t capacity, index_t n, index_t r, index_t vec, PanelSchedule s) {
  const index_t per = panel_buffer_capacity(capacity, s), ld = panel_ld(r, vec);
  const index_t h = panel_extent(per, n, n <= per / ld, ld, s);
  const bool two = s == PanelSchedule::kOverlap;
  return PanelSplit{h, ld, (n + h - 1) / h, two ? 2 : 1, two ? round_up(h * ld, kPanelAlign) : 0};
}

/// Smallest workspace, in entries, for schedule s: one buffer (two with overlap) of the larger of a kPanelAlign-wide
/// sketch panel and a kPanelAlign-high unsketch panel.
inline index_t min_panel_entries(index_t n, index_t r, index_t vec, PanelSchedule s) {
  const index_t sketch = n * panel_ld(r < kPanelAlign ? r : kPanelAlign, vec);
  const index_t unsketch = (n < kPanelAlign ? n : kPanelAlign) * panel_ld(r, vec);
  const index_t one = sketch > unsketch ? sketch : unsketch;
  return s == PanelSchedule::kOverlap ? 2 * round_up(one, kPanelAlign) : one;
}

/// Recommended workspace, in entries. Serial: all of P (n x panel_ld(r, vec)) when it has at most
/// kDefaultPanelEntries entries, else that many, so a typical layer is one panel kernel and one GEMM. Overlap: two
/// buffers, each holding the half-P panel of sketch and of unsketch_grad (at most kDefaultPanelEntries / 2 each).
/// Never below the minimum.
inline index_t recommended_panel_entries(index_t n, index_t r, index_t vec, PanelSchedule s) {
  const index_t minimum = min_panel_entries(n, r, vec, s);
  index_t want;
  if (s == PanelSchedule::kSerial) {
    const index_t all = r > kDefaultPanelEntries / n ? kDefaultPanelEntries + 1 : n * panel_ld(r, vec);  // no overflow
    want = all <= kDefaultPanelEntries ? all : kDefaultPanelEntries;
  } else {
    const index_t w = r <= kPanelAlign ? r : round_up((r + 1) / 2, kPanelAlign);
    const index_t h = n <= kPanelAlign ? n : round_up((n + 1) / 2, kPanelAlign);
    const index_t cap = kDefaultPanelEntries / 2;
    const index_t sketch = w > cap / n ? cap : n * panel_ld(w, vec);
    const index_t unsketch = h > cap / panel_ld(r, vec) ? cap : h * panel_ld(r, vec);
    want = 2 * round_up(sketch > unsketch ? sketch : unsketch, kPanelAlign);
  }
  return want > minimum ? want : minimum;
}

// ---------------------------------------------------------------------------------------------------------------
// The order of an operation's work.

/// The stream a step is issued on: the operation's (the caller's) stream, or the side stream of the overlap.
enum class PanelLane { kMain, kSide };
/// The two events of the overlap: panel generated (recorded on the side stream), buffer consumed (on the main one).
enum class PanelEvent { kGenerated, kConsumed };
/// What a step does: cudaEventRecord(event, lane), cudaStreamWaitEvent(lane, event), the panel kernel of `panel`
/// into `buffer`, or the GEMM of `panel` from `buffer`.
enum class PanelOp { kRecord, kWait, kGenerate, kGemm };

struct PanelStep {
  PanelOp op;
  PanelLane lane;
  PanelEvent event;  ///< for kRecord and kWait
  index_t panel;     ///< for kGenerate and kGemm (-1 otherwise)
  index_t buffer;    ///< for kGenerate and kGemm (-1 otherwise)
};

/// Whether step s reads or writes a buffer (kGenerate, kGemm); record and wait steps have none (buffer = -1).
inline bool panel_step_has_buffer(const PanelStep& s) { return s.op == PanelOp::kGenerate || s.op == PanelOp::kGemm; }

/// Entry offset of step s's buffer in the workspace (buffer b starts b · split.buffer_stride entries in), for a step
/// with a buffer only: a pointer is formed from it only then, since workspace + (-1) · stride would point before
/// the workspace, which is undefined behaviour even when never dereferenced.
inline index_t panel_buffer_offset(const PanelSplit& split, const PanelStep& s) {
  return s.buffer * split.buffer_stride;
}

/// Calls f(step) for the steps of an operation of `panels` panels, in the order the host issues them.
///
/// kSerial: generate panel k, multiply panel k, all on the main stream, one buffer.
/// kOverlap:
///   record(consumed, main); wait(side, consumed)          the side stream starts after the caller's earlier work
///   generate(0, side, buffer 0); record(generated, side)
///   for k = 0 .. panels - 1:
///     wait(main, generated)                              panel k is ready (the event's latest record is panel k's)
///     if k + 1 < panels:
///       if k >= 1: wait(side, consumed)                  GEMM k - 1 has finished reading buffer (k + 1) % 2
///       generate(k + 1, side, buffer (k + 1) % 2); record(generated, side)
///     gemm(k, main, buffer k % 2); if k + 2 < panels: record(consumed, main)
/// cudaStreamWaitEvent waits for the event's latest record at the time of the call, so each wait is issued after
/// the record it needs and before that event is recorded again. The last work on the side stream is the last
/// generation, which the main stream waits for before its last GEMM: when the operation's last GEMM is done, so is
/// all of its work, and later work on the caller's stream is ordered after it. Nothing waits on the host.
template <class F>
void for_each_panel_step(index_t panels, PanelSchedule schedule, F&& f) {
  const auto step = [&](PanelOp op, PanelLane lane, PanelEvent event, index_t panel, index_t buffer) {
    f(PanelStep{op, lane, event, panel, buffer});
  };
  constexpr PanelLane kMain = PanelLane::kMain, kSide = PanelLane::kSide;
  constexpr PanelEvent kGenerated = PanelEvent::kGenerated, kConsumed = PanelEvent::kConsumed;
  if (schedule == PanelSchedule::kSerial) {
    for (index_t k = 0; k < panels; ++k) {
      step(PanelOp::kGenerate, kMain, kGenerated, k, 0);
      step(PanelOp::kGemm, kMain, kConsumed, k, 0);
    }
    return;
  }
  if (panels <= 0) return;
  step(PanelOp::kRecord, kMain, kConsumed, -1, -1);
  step(PanelOp::kWait, kSide, kConsumed, -1, -1);
  step(PanelOp::kGenerate, kSide, kGenerated, 0, 0);
  step(PanelOp::kRecord, kSide, kGenerated, -1, -1);
  for (index_t k = 0; k < panels; ++k) {
    step(PanelOp::kWait, kMain, kGenerated, -1, -1);
    if (k + 1 < panels) {
      if (k >= 1) step(PanelOp::kWait, kSide, kConsumed, -1, -1);
      step(PanelOp::kGenerate, kSide, kGenerated, k + 1, (k + 1) % 2);
      step(PanelOp::kRecord, kSide, kGenerated, -1, -1);
    }
    step(PanelOp::kGemm, kMain, kConsumed, k, k % 2);
    if (k + 2 < panels) step(PanelOp::kRecord, kMain, kConsumed, -1, -1);
  }
}

}  // namespace detail
}  // namespace compact
