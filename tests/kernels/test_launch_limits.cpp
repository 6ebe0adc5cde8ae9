// SPDX-License-Identifier: MIT
/// The CUDA backend's launch geometry against the device limits, on the host: every launch the projectors, the SRHT
/// setup and the optimizers compute for n up to 2^20 and B (or m) up to 65536 fits sm_80 and sm_90 (grid and block
/// dimensions, threads within each kernel's __launch_bounds__, dynamic shared memory within the opt-in maximum). And
/// the rule for a kernel's shared-memory limit: raised, never lowered, also under concurrent constructors.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "compact/kernels/dense_panel.hpp"
#include "compact/kernels/fwht_block.hpp"
#include "compact/kernels/launch_limits.hpp"
#include "compact/kernels/optimizer_step.hpp"
#include "compact/kernels/panel_schedule.hpp"
#include "compact/kernels/srht_row_kernels.hpp"
#include "compact/kernels/srht_select.hpp"
#include "compact/kernels/srht_workspace.hpp"

namespace {

using compact::index_t;
namespace detail = compact::detail;

const detail::DeviceLimits kDevices[] = {detail::kSm80Limits, detail::kSm90Limits};

/// Every launch shape checked, and the violations found.
struct Audit {
  explicit Audit(const detail::DeviceLimits& d) : device(d) {}
  const detail::DeviceLimits& device;
  index_t launches = 0;
  std::vector<std::string> violations;
  void check(const detail::LaunchShape& l) {
    ++launches;
    const std::string v = detail::launch_violation(l, device);
    if (!v.empty() && violations.size() < 10) violations.push_back(v);
  }
};

const index_t kLaunchRows[] = {1, 2, 3, 7, 64, 255, 256, 257, 4096, 65535, 65536};

/// The launches of an SRHT projector (setup, one- or two-pass rows, materialize) for n' = 2^log2_len on `device`,
/// as srht_projector.cuh and srht_kernels.cuh compute them.
void audit_srht(Audit& a, int log2_len) {
  const index_t np = index_t{1} << log2_len;
  const detail::SrhtPlan plan = detail::srht_plan(log2_len, detail::srht_max_chunk_bits(a.device.max_shared_optin));
  REQUIRE(plan.high_bits <= detail::kSrhtMaxHighBits);  // the constructor's check: every n' <= 2^20 is done
  // Setup: signs and select.
  a.check(detail::launch_shape_1d("srht_setup_kernel", detail::srht_select_word_launch(np), 0, detail::kSelectThreads));
  a.check(detail::launch_shape_1d("srht_select_histogram_kernel", detail::srht_select_histogram_launch(np),
                                  detail::kSelectHistogramSharedBytes, detail::kSelectThreads));
  a.check(detail::LaunchShape{"srht_select_choose_kernel", 1, 1, 1, 1, 1, 1, 0, 1});
  a.check(detail::LaunchShape{"srht_select_scan_kernel", 1, 1, 1, detail::kSelectScanThreads, 1, 1,
                              detail::select_scan_shared_bytes(detail::kSelectScanThreads),
                              detail::kSelectScanThreads});
  // Rows: every batch size, with the scratch rows of the minimum and the recommended workspace.
  const std::size_t smem = detail::fwht_shared_bytes(plan.chunk);
  const index_t threads = detail::fwht_block_threads(plan.chunk);
  const index_t bound = detail::srht_chunk_max_threads(detail::srht_chunk_elems(plan));
  for (const index_t rank : {index_t{1}, np}) {
    const detail::SrhtLayout layout = detail::srht_layout(np, rank);
    for (const index_t scratch_rows :
         {detail::srht_scratch_rows(layout, detail::srht_workspace_bytes(layout, detail::srht_min_scratch_rows(np))),
          detail::srht_scratch_rows(layout,
                                    detail::srht_workspace_bytes(layout, detail::srht_recommended_scratch_rows(np)))}) {
      if (detail::srht_two_pass(plan)) REQUIRE(scratch_rows >= 1);
      for (const index_t rows : kLaunchRows) {
        const index_t group = detail::srht_group_rows(plan, rows, scratch_rows);
        a.check(detail::LaunchShape{"srht_*_chunks_kernel", detail::srht_chunk_blocks(plan, group), 1, 1, threads, 1, 1,
                                    smem, bound});
        if (detail::srht_two_pass(plan)) {
          a.check(detail::launch_shape_1d("srht_*_registers_kernel", detail::srht_register_launch(plan, group), 0,
                                          detail::kSrhtRegisterThreads));
        }
      }
    }
  }
  for (const index_t r : {index_t{1}, np / 2 + 1, np}) {
    a.check(
        detail::launch_shape_1d("srht_materialize_kernel",
                                detail::grid_stride_launch(detail::panel_task_count(detail::PanelRect{0, np, 0, r}, 1),
                                                           detail::kSrhtRegisterThreads),
                                0, detail::kSrhtRegisterThreads));
  }
}

/// The panel launches that write rect to an output with leading dimension ld at 16-byte phase `phase`.
void audit_panel(Audit& a, const detail::PanelRect& rect, index_t ld, index_t phase, index_t vec) {
  detail::for_each_panel_part(rect, ld, phase, vec,
                              [&](const detail::PanelRect&, index_t, const detail::PanelGeometry& g) {
                                const detail::PanelLaunch l = detail::panel_launch(g);
                                a.check(detail::LaunchShape{"dense_panel_kernel", l.blocks_x, l.blocks_y, 1,
                                                            l.threads_x, l.threads_y, 1, 0, detail::kPanelThreads});
                              });
}

/// The launches of a dense projector's sketch, unsketch_grad and materialize for (n, r), both schedules, the minimum
/// and the recommended workspace, V entries per 16 bytes (4: fp32, 8: fp16/bf16).
void audit_dense(Audit& a, index_t n, index_t r, index_t vec) {
  using compact::PanelSchedule;
  for (const PanelSchedule s : {PanelSchedule::kSerial, PanelSchedule::kOverlap}) {
    for (const index_t capacity :
         {detail::min_panel_entries(n, r, vec, s), detail::recommended_panel_entries(n, r, vec, s)}) {
      const detail::PanelSplit sk = detail::sketch_split(capacity, n, r, vec, s);
      for (index_t k = 0; k < sk.count; k += std::max<index_t>(1, sk.count - 1)) {  // first and last panel
        const detail::PanelSpan c = detail::panel_span(sk, k, r);
        audit_panel(a, detail::PanelRect{0, n, c.start, c.start + c.size}, sk.ld, 0, vec);
      }
      const detail::PanelSplit un = detail::unsketch_split(capacity, n, r, vec, s);
      for (index_t k = 0; k < un.count; k += std::max<index_t>(1, un.count - 1)) {
        const detail::PanelSpan c = detail::panel_span(un, k, n);
        audit_panel(a, detail::PanelRect{c.start, c.start + c.size, 0, r}, un.ld, 0, vec);
      }
    }
  }
  for (index_t phase = 0; phase < vec; phase += vec - 1) {
    for (const index_t ld : {r, r + 1, detail::panel_ld(r, vec)})
      audit_panel(a, detail::PanelRect{0, n, 0, r}, ld, phase, vec);
  }
}

const index_t kDims[] = {1, 7, 128, 129, 300, 4096, 65535, 65536, (index_t{1} << 20) - 1, index_t{1} << 20};

}  // namespace

TEST_CASE("every SRHT launch for n' up to 2^20 and up to 65536 rows fits sm_80 and sm_90") {
  for (const detail::DeviceLimits& d : kDevices) {
    CAPTURE(d.name);
    Audit a(d);
    for (int log2_len = 0; log2_len <= compact::kSrhtMaxPaddedLog2; ++log2_len) audit_srht(a, log2_len);
    CHECK_MESSAGE(a.violations.empty(), (a.violations.empty() ? std::string() : a.violations.front()));
    CHECK(a.launches > 1000);
  }
  // sm_80 and sm_90 transform rows of up to 2^15 in one block: 133,120 bytes, above the 48 KiB default (the
  // constructor raises the kernels' limit) and within both opt-in maxima.
  CHECK(detail::srht_max_chunk_bits(detail::kSm80Limits.max_shared_optin) == 15);
  CHECK(detail::srht_max_chunk_bits(detail::kSm90Limits.max_shared_optin) == 15);
  CHECK(detail::fwht_shared_bytes(detail::fwht_shape(15)) == 133120);
}

TEST_CASE("every dense panel launch for n, r up to 2^20 fits sm_80 and sm_90, in both schedules and at any phase") {
  for (const detail::DeviceLimits& d : kDevices) {
    CAPTURE(d.name);
    Audit a(d);
    for (const index_t n : kDims) {
      for (const index_t r : kDims) {
        if (r > n) continue;
        audit_dense(a, n, r, 4);
        audit_dense(a, n, r, 8);
      }
    }
    CHECK_MESSAGE(a.violations.empty(), (a.violations.empty() ? std::string() : a.violations.front()));
    CHECK(a.launches > 1000);
  }
}

TEST_CASE("the optimizers' fused step launches fit for m up to 65536 and r up to 2^20") {
  for (const detail::DeviceLimits& d : kDevices) {
    Audit a(d);
    for (const index_t m : kLaunchRows) {
      for (const index_t r : kDims) {
        a.check(detail::launch_shape_1d("adamw_step_kernel/sgd_step_kernel", detail::optimizer_step_launch(m * r), 0,
                                        detail::kOptimizerThreads));
      }
    }
    CHECK_MESSAGE(a.violations.empty(), (a.violations.empty() ? std::string() : a.violations.front()));
  }
}

TEST_CASE("launch_violation names what a launch exceeds (the audit can fail)") {
  const detail::DeviceLimits& d = detail::kSm80Limits;
  const detail::LaunchShape ok{"k", 65536, 65535, 1, 256, 1, 1, 133120, 256};
  CHECK(detail::launch_violation(ok, d).empty());
  detail::LaunchShape l = ok;
  l.grid_y = 65536;
  CHECK(detail::launch_violation(l, d).find("gridDim.y = 65536 outside [1, 65535] on sm_80") != std::string::npos);
  l = ok;
  l.block_x = 512;
  CHECK(detail::launch_violation(l, d).find("(the kernel's __launch_bounds__)") != std::string::npos);
  l = ok;
  l.shared_bytes = 200 * 1024;  // fits sm_90's 227 KiB, not sm_80's 163 KiB
  CHECK(detail::launch_violation(l, d).find("dynamic shared memory 204800 bytes > 166912 on sm_80") !=
        std::string::npos);
  CHECK(detail::launch_violation(l, detail::kSm90Limits).empty());
  l = ok;
  l.grid_x = 0;
  CHECK(!detail::launch_violation(l, d).empty());
  // Registers: a bound of 1024 threads leaves 64 per thread, 256 threads 255 (the per-thread maximum).
  CHECK(detail::register_budget(d, 1024) == 64);
  CHECK(detail::register_budget(d, 512) == 128);
  CHECK(detail::register_budget(d, 256) == 255);
}

namespace {

/// A kernel attribute store per (kernel, device) standing in for cudaFuncGetAttributes / cudaFuncSetAttribute: the
/// limit starts at the 48 KiB default and keeps the last value set; every set is logged.
struct FakeAttributes {
  std::map<std::pair<int, int>, std::size_t> limit;
  std::map<std::pair<int, int>, std::vector<std::size_t>> sets;
  std::size_t raise(int kernel, int device, std::size_t bytes) {
    const auto key = std::make_pair(kernel, device);
    return detail::raise_shared_memory_limit(
        bytes, [&] { return limit.count(key) ? limit[key] : std::size_t{48 * 1024}; },
        [&](std::size_t b) {
          limit[key] = b;
          sets[key].push_back(b);
        });
  }
};

}  // namespace

TEST_CASE("a kernel's shared-memory limit is raised when needed and never lowered (rows of 2^15, then 2^14)") {
  // SRHT rows of 2^15 and 2^14 run one chunk-kernel instantiation: a bf16 projector with n = 20000 needs 133,120
  // bytes, one with n = 12000 built after it 66,560. Setting the attribute unconditionally would leave 66,560, and
  // the first projector's next launch would fail with cudaErrorInvalidValue.
  const std::size_t longer = detail::fwht_shared_bytes(detail::srht_plan(15, 15).chunk);
  const std::size_t shorter = detail::fwht_shared_bytes(detail::srht_plan(14, 15).chunk);
  CHECK(longer == 133120);
  CHECK(shorter == 66560);
  CHECK(detail::srht_chunk_elems(detail::srht_plan(15, 15)) == detail::srht_chunk_elems(detail::srht_plan(14, 15)));
  FakeAttributes f;
  CHECK(f.raise(0, 0, longer) == longer);
  CHECK(f.raise(0, 0, shorter) == longer);  // not lowered
  CHECK(f.limit[{0, 0}] == longer);
  CHECK(f.sets[{0, 0}] == std::vector<std::size_t>{longer});
  // The other order raises twice; another device or kernel has its own limit.
  CHECK(f.raise(1, 0, shorter) == shorter);
  CHECK(f.raise(1, 0, longer) == longer);
  CHECK(f.sets[{1, 0}] == (std::vector<std::size_t>{shorter, longer}));
  CHECK(f.raise(0, 1, shorter) == shorter);
  CHECK(f.limit[{0, 0}] == longer);
  // At or below the default nothing is set.
  CHECK(f.raise(2, 0, 1024) == 48 * 1024);
  CHECK(f.sets.count({2, 0}) == 0);
}

TEST_CASE("concurrent raises of one kernel's limit leave the largest, set in increasing order") {
  // Constructors on several host threads: the read and the raise are one step under the lock, so no thread can
  // set a smaller value after a larger one was set.
  FakeAttributes f;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&f, t] {
      for (int k = 0; k < 200; ++k) f.raise(0, 0, std::size_t(49 * 1024 + ((k * 37 + t * 101) % 400) * 256));
    });
  }
  for (auto& th : threads) th.join();
  const std::vector<std::size_t>& s = f.sets[{0, 0}];
  REQUIRE(!s.empty());
  CHECK(std::is_sorted(s.begin(), s.end()));
  CHECK(std::adjacent_find(s.begin(), s.end()) == s.end());  // strictly increasing
  std::size_t largest = 0;
  for (int t = 0; t < 8; ++t)
    for (int k = 0; k < 200; ++k)
      largest = std::max(largest, std::size_t(49 * 1024 + ((k * 37 + t * 101) % 400) * 256));
  CHECK(f.limit[{0, 0}] == largest);
}
