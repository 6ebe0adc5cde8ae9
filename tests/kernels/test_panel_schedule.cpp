// SPDX-License-Identifier: MIT
/// Host tests of kernels/panel_schedule.hpp: the panel splits of the GPU's dense projectors (every panel inside its
/// buffer, buffers inside the workspace, rows 16-byte aligned, at least two panels to pipeline) and the order of
/// the overlapped schedule, run on a model of CUDA streams and events: every GEMM reads the panel it needs, no
/// generation overwrites a buffer a GEMM still reads, the side stream starts after the caller's earlier work and
/// ends before the caller's later work, under every execution order the events allow (exhaustively by
/// reachability, and end to end with the real panel kernel body and GEMM plans in random orders).

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "compact/spec/entries.hpp"
#include "compact/spec/philox.hpp"
#include "compact/kernels/dense_panel.hpp"
#include "compact/kernels/gemm_plan.hpp"
#include "compact/kernels/panel_schedule.hpp"

namespace {

using compact::index_t;
using compact::PanelSchedule;
namespace detail = compact::detail;

const PanelSchedule kSchedules[] = {PanelSchedule::kSerial, PanelSchedule::kOverlap};

/// The invariants of a split of `extent` into panels whose k-th takes entries(k) in its buffer.
template <class Entries>
void check_split(const detail::PanelSplit& s, index_t capacity, index_t extent, index_t vec, PanelSchedule schedule,
                 Entries entries, const std::string& what) {
  INFO(what << " capacity " << capacity << " extent " << extent << " V " << vec << " overlap "
            << (schedule == PanelSchedule::kOverlap));
  REQUIRE(s.extent >= 1);
  CHECK(s.count == (extent + s.extent - 1) / s.extent);
  CHECK(s.ld % vec == 0);
  if (s.count > 1) CHECK(s.extent % detail::kPanelAlign == 0);
  index_t covered = 0;
  for (index_t k = 0; k < s.count; ++k) {
    const detail::PanelSpan c = detail::panel_span(s, k, extent);
    CHECK(c.start == covered);
    CHECK(c.size >= 1);
    covered += c.size;
    const index_t buffer = k % s.buffers, used = entries(c.size);
    CHECK(buffer * s.buffer_stride + used <= capacity);  // inside the workspace
    if (s.buffers == 2) CHECK(used <= s.buffer_stride);  // buffer 0 ends before buffer 1 starts
  }
  CHECK(covered == extent);
  if (schedule == PanelSchedule::kOverlap) {
    CHECK(s.buffers == 2);
    CHECK(s.buffer_stride % detail::kPanelAlign == 0);  // buffer 1 starts 16-byte (indeed 256-byte) aligned
    if (extent > detail::kPanelAlign) CHECK(s.count >= 2);
  } else {
    CHECK(s.buffers == 1);
  }
}

}  // namespace

TEST_CASE("panel splits keep every panel in its buffer and every buffer in the workspace, for every size") {
  const index_t dims[] = {1, 7, 64, 127, 128, 129, 200, 256, 300, 1000, 1024, 4096, 11008};
  for (const PanelSchedule s : kSchedules) {
    for (const index_t vec : {index_t{4}, index_t{8}}) {
      for (const index_t n : dims) {
        for (const index_t r : dims) {
          if (r > n) continue;
          const index_t minimum = detail::min_panel_entries(n, r, vec, s);
          const index_t recommended = detail::recommended_panel_entries(n, r, vec, s);
          CHECK(recommended >= minimum);
          for (const index_t capacity : {minimum, minimum + 3 * n + 5, recommended, recommended + 1, 2 * recommended}) {
            const detail::PanelSplit sk = detail::sketch_split(capacity, n, r, vec, s);
            check_split(
                sk, capacity, r, vec, s, [&](index_t w) { return n * detail::panel_ld(w, vec); }, "sketch");
            const detail::PanelSplit un = detail::unsketch_split(capacity, n, r, vec, s);
            check_split(
                un, capacity, n, vec, s, [&](index_t h) { return h * un.ld; }, "unsketch");
            CHECK(un.ld == detail::panel_ld(r, vec));
          }
          if (s == PanelSchedule::kSerial && n * detail::panel_ld(r, vec) <= detail::kDefaultPanelEntries) {
            // The recommended serial workspace holds all of P: one panel kernel and one GEMM per operation.
            CHECK(detail::sketch_split(recommended, n, r, vec, s).count == 1);
            CHECK(detail::unsketch_split(recommended, n, r, vec, s).count == 1);
          }
        }
      }
    }
  }
}

TEST_CASE("workspace sizes: all of P serially, two half-P buffers with overlap, bounded for large layers") {
  const index_t n = 4096, r = 1024;
  CHECK(detail::recommended_panel_entries(n, r, 8, PanelSchedule::kSerial) == n * r);
  CHECK(detail::recommended_panel_entries(n, r, 8, PanelSchedule::kOverlap) == n * r);  // 2 x (4096 x 512)
  CHECK(detail::min_panel_entries(n, r, 8, PanelSchedule::kSerial) == n * 128);
  CHECK(detail::min_panel_entries(n, r, 8, PanelSchedule::kOverlap) == 2 * n * 128);
  CHECK(detail::recommended_panel_entries(n, 77, 8, PanelSchedule::kSerial) == n * 80);  // rows padded to 16 bytes
  const detail::PanelSplit half = detail::sketch_split(n * r, n, r, 8, PanelSchedule::kOverlap);
  CHECK(half.count == 2);
  CHECK(half.extent == 512);
  CHECK(detail::unsketch_split(n * r, n, r, 8, PanelSchedule::kOverlap).count == 2);
  // n x r above 2^24: serial caps at 2^24 entries, overlap at two buffers of 2^23.
  CHECK(detail::recommended_panel_entries(16384, 4096, 8, PanelSchedule::kSerial) == detail::kDefaultPanelEntries);
  CHECK(detail::recommended_panel_entries(16384, 4096, 8, PanelSchedule::kOverlap) == detail::kDefaultPanelEntries);
  CHECK(detail::recommended_panel_entries(index_t{1} << 31, 1 << 20, 8, PanelSchedule::kSerial) ==
        detail::min_panel_entries(index_t{1} << 31, 1 << 20, 8, PanelSchedule::kSerial));  // no n r overflow
}

// ---------------------------------------------------------------------------------------------------------------
// A model of CUDA streams and events.

namespace {

/// The device work of one operation as CUDA orders it: a node per enqueued item (kernel, GEMM, event record,
/// stream wait), with edges from the previous item of the same stream and, for a wait, from the latest record of
/// the event at the time the wait was issued (CUDA's cudaStreamWaitEvent semantics; a never-recorded event is no
/// dependency). Node 0 is the caller's earlier work on the main stream; the last node is the caller's later work.
struct StreamModel {
  struct Node {
    detail::PanelStep step;
    std::vector<int> deps;
  };
  std::vector<Node> nodes;
  int last[2] = {-1, -1};
  int latest[2] = {-1, -1};  // per event

  void add(const detail::PanelStep& s) {
    Node node{s, {}};
    const int lane = static_cast<int>(s.lane), event = static_cast<int>(s.event);
    if (last[lane] >= 0) node.deps.push_back(last[lane]);
    if (s.op == detail::PanelOp::kWait && latest[event] >= 0) node.deps.push_back(latest[event]);
    nodes.push_back(node);
    const int id = static_cast<int>(nodes.size()) - 1;
    last[lane] = id;
    if (s.op == detail::PanelOp::kRecord) latest[event] = id;
  }

  /// The model of an operation of `panels` panels issued by for_each_panel_step (or by `steps` when given).
  static StreamModel of(const std::vector<detail::PanelStep>& steps) {
    StreamModel m;
    const detail::PanelStep marker{detail::PanelOp::kRecord, detail::PanelLane::kMain, detail::PanelEvent::kConsumed,
                                   -1, -1};
    m.add(marker);  // the caller's earlier work (a record that no wait sees: it only orders the main stream)
    m.latest[static_cast<int>(detail::PanelEvent::kConsumed)] = -1;
    for (const auto& s : steps) m.add(s);
    m.add(marker);  // the caller's later work
    return m;
  }

  /// reach[a][b]: a happens before b (a path of dependencies from a to b).
  std::vector<std::vector<bool>> reachability() const {
    const std::size_t n = nodes.size();
    std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
    for (std::size_t b = 0; b < n; ++b) {  // nodes are in issue order: dependencies point backwards
      for (const int d : nodes[b].deps) {
        reach[static_cast<std::size_t>(d)][b] = true;
        for (std::size_t a = 0; a < n; ++a) {
          if (reach[a][static_cast<std::size_t>(d)]) reach[a][b] = true;
        }
      }
    }
    return reach;
  }
};

std::vector<detail::PanelStep> steps_of(index_t panels, PanelSchedule s) {
  std::vector<detail::PanelStep> steps;
  detail::for_each_panel_step(panels, s, [&](const detail::PanelStep& step) { steps.push_back(step); });
  return steps;
}

/// Violations of the ordering the overlapped schedule must guarantee, found over every execution order the model
/// allows: a GEMM not after its panel's generation, a generation into a buffer not after the GEMM that last read
/// it (or the one before), side-stream work not after the caller's earlier work or not before its later work.
std::vector<std::string> hazards(const StreamModel& m) {
  const auto reach = m.reachability();
  std::vector<std::string> found;
  const std::size_t first = 0, end = m.nodes.size() - 1;
  for (std::size_t a = 1; a < end; ++a) {
    const detail::PanelStep& s = m.nodes[a].step;
    if (s.lane == detail::PanelLane::kSide) {
      if (!reach[first][a]) found.push_back("side step " + std::to_string(a) + " may start before earlier work");
      if (!reach[a][end]) found.push_back("side step " + std::to_string(a) + " may end after the operation");
    }
    if (s.op != detail::PanelOp::kGenerate) continue;
    for (std::size_t b = 1; b < end; ++b) {
      const detail::PanelStep& t = m.nodes[b].step;
      if (t.op == detail::PanelOp::kGemm && t.panel == s.panel && (t.buffer != s.buffer || !reach[a][b]))
        found.push_back("GEMM of panel " + std::to_string(t.panel) + " may read it before it is generated");
      if (t.op == detail::PanelOp::kGemm && t.buffer == s.buffer && t.panel < s.panel && !reach[b][a])
        found.push_back("generation of panel " + std::to_string(s.panel) + " may overwrite panel " +
                        std::to_string(t.panel) + " while its GEMM reads it");
      if (t.op == detail::PanelOp::kGenerate && t.buffer == s.buffer && t.panel < s.panel && !reach[b][a])
        found.push_back("two generations into one buffer may race");
    }
  }
  return found;
}

}  // namespace

TEST_CASE("the overlapped schedule orders every panel's generation and GEMM correctly under any execution order") {
  for (const PanelSchedule s : kSchedules) {
    for (index_t panels = 1; panels <= 9; ++panels) {
      const std::vector<detail::PanelStep> steps = steps_of(panels, s);
      const std::vector<std::string> found = hazards(StreamModel::of(steps));
      CHECK_MESSAGE(found.empty(), panels << " panels: " << (found.empty() ? "" : found.front()));
      index_t generates = 0, gemms = 0, side = 0;
      for (const auto& step : steps) {
        generates += step.op == detail::PanelOp::kGenerate;
        gemms += step.op == detail::PanelOp::kGemm;
        side += step.lane == detail::PanelLane::kSide;
        if (step.op == detail::PanelOp::kGemm) CHECK(step.lane == detail::PanelLane::kMain);  // cuBLAS: caller's stream
        if (step.op == detail::PanelOp::kGenerate)
          CHECK(step.buffer == (s == PanelSchedule::kOverlap ? step.panel % 2 : 0));
      }
      CHECK(generates == panels);
      CHECK(gemms == panels);
      CHECK((side > 0) == (s == PanelSchedule::kOverlap));
    }
  }
}

TEST_CASE("only generate and GEMM steps have a buffer, and its offset lies inside the workspace") {
  // issue_panels forms `workspace + panel_buffer_offset(split, step)` for these steps alone: a record or wait step
  // carries buffer -1, whose offset would point before the workspace (undefined behaviour even if never used).
  for (const PanelSchedule s : kSchedules) {
    for (const index_t capacity : {index_t{300} * 256, index_t{300} * 520, index_t{1} << 20}) {
      const detail::PanelSplit split = detail::sketch_split(capacity, 300, 260, 8, s);
      index_t with_buffer = 0;
      detail::for_each_panel_step(split.count, s, [&](const detail::PanelStep& step) {
        const bool has = detail::panel_step_has_buffer(step);
        with_buffer += has;
        if (!has) {
          CHECK(step.buffer == -1);
          CHECK(step.panel == -1);
          return;
        }
        const index_t offset = detail::panel_buffer_offset(split, step);
        CHECK(offset >= 0);
        CHECK(offset + 300 * split.ld <= capacity);
        CHECK(offset == (step.buffer == 0 ? 0 : split.buffer_stride));
      });
      CHECK(with_buffer == 2 * split.count);
    }
  }
}

TEST_CASE("the schedule model finds the hazard of every wait left out (the ordering check can fail)") {
  const std::vector<detail::PanelStep> steps = steps_of(5, PanelSchedule::kOverlap);
  index_t waits = 0, caught = 0;
  for (std::size_t drop = 0; drop < steps.size(); ++drop) {
    if (steps[drop].op != detail::PanelOp::kWait) continue;
    ++waits;
    std::vector<detail::PanelStep> broken = steps;
    broken.erase(broken.begin() + static_cast<std::ptrdiff_t>(drop));
    caught += !hazards(StreamModel::of(broken)).empty();
  }
  CHECK(waits == 1 + 5 + 3);  // start, one per GEMM, one per generation into a reused buffer
  CHECK(caught == waits);
  // Recording "generated" before the generation instead of after it is caught too.
  std::vector<detail::PanelStep> early = steps;
  std::swap(early[2], early[3]);
  CHECK(!hazards(StreamModel::of(early)).empty());
}

// ---------------------------------------------------------------------------------------------------------------
// End to end: the schedule drives the real panel kernel body and GEMM plans in random execution orders.

namespace {

struct Identity32 {
  std::uint32_t operator()(float v) const { return compact::fp32::bits_of(v); }
};

float from_bits(std::uint32_t b) { return compact::fp32::from_bits(b); }

/// Runs the steps in a random order that the model allows (any ready node next), executing generations with
/// dense_panel_thread into double buffers and GEMMs as BLAS column-major products of the plans. Buffers carry the
/// panel they hold, so a GEMM that would read the wrong panel is counted.
struct Execution {
  std::vector<std::uint32_t> workspace;
  std::vector<index_t> holds;  // panel held by each buffer
  index_t wrong_panel = 0;
};

/// z = x P for a Gaussian P (n x r) through the split and schedule, in the order `seed` picks.
std::vector<float> sketch_by_schedule(const compact::EntryParams& params, index_t batch, index_t n, index_t r,
                                      const std::vector<float>& x, PanelSchedule schedule, index_t capacity,
                                      std::uint64_t seed, index_t* wrong_panel) {
  const detail::PanelSplit split = detail::sketch_split(capacity, n, r, 4, schedule);
  const StreamModel m = StreamModel::of(steps_of(split.count, schedule));
  Execution e{std::vector<std::uint32_t>(static_cast<std::size_t>(capacity), 0), std::vector<index_t>(2, -1), 0};
  std::vector<float> z(static_cast<std::size_t>(batch * r), -1.0f);
  std::vector<bool> done(m.nodes.size(), false);
  for (std::size_t executed = 0; executed < m.nodes.size(); ++executed) {
    std::vector<std::size_t> ready;
    for (std::size_t k = 0; k < m.nodes.size(); ++k) {
      bool ok = !done[k];
      for (const int d : m.nodes[k].deps) ok = ok && done[static_cast<std::size_t>(d)];
      if (ok) ready.push_back(k);
    }
    REQUIRE(!ready.empty());
    seed = compact::splitmix64(seed);
    const std::size_t pick = ready[seed % ready.size()];
    done[pick] = true;
    const detail::PanelStep& s = m.nodes[pick].step;
    if (s.op != detail::PanelOp::kGenerate && s.op != detail::PanelOp::kGemm) continue;
    const detail::PanelSpan c = detail::panel_span(split, s.panel, r);
    std::uint32_t* buffer = e.workspace.data() + s.buffer * split.buffer_stride;
    if (s.op == detail::PanelOp::kGenerate) {
      const detail::PanelGeometry g = detail::panel_geometry({0, n, c.start, c.start + c.size}, split.ld, 0, 4);
      const detail::PanelLaunch l = detail::panel_launch(g);
      for (std::uint32_t by = 0; by < l.blocks_y; ++by)
        for (std::uint32_t bx = 0; bx < l.blocks_x; ++bx)
          for (std::uint32_t ty = 0; ty < l.threads_y; ++ty)
            for (std::uint32_t tx = 0; tx < l.threads_x; ++tx)
              detail::dense_panel_thread<compact::Gaussian>(l, bx, by, tx, ty, params, g, Identity32{},
                                                            detail::PanelStore<std::uint32_t>{buffer});
      e.holds[static_cast<std::size_t>(s.buffer)] = s.panel;
    } else {
      e.wrong_panel += e.holds[static_cast<std::size_t>(s.buffer)] != s.panel;
      const detail::GemmPlan p = detail::sketch_panel_gemm(batch, n, c.start, c.size, split.ld, n, r);
      for (index_t j = 0; j < p.n; ++j) {  // column-major: C(i, j) = sum_l A(i, l) B(l, j), no transposes
        for (index_t i = 0; i < p.m; ++i) {
          double acc = 0;
          for (index_t l = 0; l < p.k; ++l) {
            acc += double(from_bits(buffer[p.a_offset + i + l * p.lda])) * x[std::size_t(p.b_offset + l + j * p.ldb)];
          }
          z[std::size_t(p.c_offset + i + j * p.ldc)] = float(acc);
        }
      }
    }
  }
  *wrong_panel += e.wrong_panel;
  return z;
}

}  // namespace

TEST_CASE("sketches through the serial and overlapped schedules equal x P in every random execution order") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{5, 1, 2}, 300);
  const index_t batch = 2, n = 6, r = 300;
  std::vector<float> x(static_cast<std::size_t>(batch * n));
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = float(int(k % 5) - 2);
  std::vector<double> want(static_cast<std::size_t>(batch * r), 0.0);
  for (index_t b = 0; b < batch; ++b)
    for (index_t j = 0; j < r; ++j)
      for (index_t k = 0; k < n; ++k)
        want[std::size_t(b * r + j)] += double(x[std::size_t(b * n + k)]) * compact::gaussian_entry(params, k, j);
  for (const PanelSchedule s : kSchedules) {
    for (const index_t capacity :
         {detail::min_panel_entries(n, r, 4, s), detail::recommended_panel_entries(n, r, 4, s)}) {
      for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        index_t wrong_panel = 0;
        const std::vector<float> z = sketch_by_schedule(params, batch, n, r, x, s, capacity, seed, &wrong_panel);
        index_t wrong = 0;
        for (std::size_t k = 0; k < z.size(); ++k) wrong += z[k] != float(want[k]);
        CHECK(wrong_panel == 0);
        CHECK_MESSAGE(wrong == 0, "capacity " << capacity << " seed " << seed);
      }
    }
  }
}
