// SPDX-License-Identifier: MIT
/// Allocation failure inside the library is a compact::error, never std::bad_alloc and never std::terminate (an
/// exception escaping an OpenMP team): every operator new the library makes is failed in turn, and each call must
/// either succeed or throw compact::error with its outputs (and an optimizer's state) untouched.
///
/// This executable replaces the global operator new/delete (on malloc) to inject the failures. Eigen allocates with
/// malloc, so its matrices are not covered here; test_optimizer_record.cpp and test_bad_input.cpp fail those with
/// sizes beyond the address space.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "support.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace {

/// Allocations left before the injected failure; -1: no failure armed.
std::atomic<long> g_countdown{-1};
/// Whether the armed failure has happened.
std::atomic<bool> g_failed{false};
/// Allocations made through operator new so far (all threads).
std::atomic<long> g_allocations{0};

bool inject_failure() {
  long c = g_countdown.load();
  while (c >= 0) {
    if (g_countdown.compare_exchange_weak(c, c - 1)) {
      if (c > 0) return false;
      g_failed = true;  // c == 0: this allocation fails, and no later one (the countdown is now -1)
      return true;
    }
  }
  return false;
}

void* allocate(std::size_t size, std::size_t align) {
  if (inject_failure()) throw std::bad_alloc();
  ++g_allocations;
  if (size == 0) size = 1;
  void* p = align == 0 ? std::malloc(size) : std::aligned_alloc(align, (size + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size, 0); }
void* operator new[](std::size_t size) { return allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t align) { return allocate(size, std::size_t(align)); }
void* operator new[](std::size_t size, std::align_val_t align) { return allocate(size, std::size_t(align)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

using compact::index_t;
using compact::MatrixView;
using compact::RowMatrix;
using compact_test::random_matrix;

/// Runs `op` with its k-th allocation failing, for k = 0, 1, ... until op makes fewer than k + 1 allocations.
/// `reset` restores the inputs before each run; `untouched` says whether the outputs are as `reset` left them;
/// `correct` whether they hold the result of a run without failures. A failing run must either throw compact::error
/// naming the allocation with the outputs untouched, or absorb the failure and give the correct result (the task
/// pool does: a worker thread that cannot be started leaves its tasks to the calling thread). The last run must
/// succeed. Returns the number of allocations op makes. The thread's kept scratch is freed before each run, so that
/// op allocates it (and its failure is exercised) as a thread's first call does.
template <class Reset, class Op, class Untouched, class Correct>
long fail_each_allocation(Reset reset, Op op, Untouched untouched, Correct correct) {
  for (long k = 0; k < 1000; ++k) {
    reset();
    compact::release_thread_scratch();
    std::string error;
    bool other = false;
    g_failed = false;
    g_countdown = k;
    try {
      op();
    } catch (const compact::error& e) {
      error = e.what();
    } catch (...) {
      other = true;
    }
    g_countdown = -1;
    CAPTURE(k);
    CAPTURE(error);
    CHECK_FALSE(other);
    if (!g_failed) {
      CHECK(error.empty());
      CHECK(correct());
      return k;
    }
    if (error.empty()) {
      CHECK(correct());  // the failure was absorbed
    } else {
      CHECK(error.find("cannot allocate") != std::string::npos);
      CHECK(untouched());
    }
  }
  FAIL("more than 1000 allocations");
  return -1;
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("sketch and unsketch_grad report a failed allocation and write nothing", Dist,
                          allocation_failure_writes_nothing) {
  // Large enough that the work runs on an OpenMP team (where an escaping exception would terminate).
  const index_t b = 64, n = 300, r = 96;
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, compact::SketchState{1, 2, 3});
  const RowMatrix<float> x = random_matrix<float>(b, n, 1), g = random_matrix<float>(b, r, 2);
  RowMatrix<float> z(b, r), out(b, n);
  const auto reset = [&] {
    z.setConstant(-7.0f);
    out.setConstant(-7.0f);
  };
  const auto untouched = [&] { return (z.array() == -7.0f).all() && (out.array() == -7.0f).all(); };
  const RowMatrix<float> z_ref = proj.sketch(x);
  RowMatrix<float> out_ref = RowMatrix<float>::Constant(b, n, -7.0f);
  proj.unsketch_grad(g, out_ref, 1.0f, 1.0f);
  const long sketch_allocations = fail_each_allocation(
      reset, [&] { proj.sketch(compact::detail::as_view<float>(x), compact::detail::as_mutable_view<float>(z)); },
      untouched, [&] { return z == z_ref; });
  const long unsketch_allocations = fail_each_allocation(
      reset,
      [&] {
        proj.unsketch_grad(compact::detail::as_view<float>(g), compact::detail::as_mutable_view<float>(out), 1.0f,
                           1.0f);
      },
      untouched, [&] { return out == out_ref; });
  CHECK(sketch_allocations >= 1);  // the panel (dense) or the transform buffers (SRHT)
  CHECK(unsketch_allocations >= 1);
  // materialize into a view allocates nothing.
  RowMatrix<float> p(n, r);
  const RowMatrix<float> p_ref = proj.materialize();
  CHECK(fail_each_allocation([] {}, [&] { proj.materialize(compact::detail::as_mutable_view<float>(p)); },
                             [] { return true; }, [&] { return p == p_ref; }) == 0);
}
TEST_CASE_TEMPLATE_APPLY(allocation_failure_writes_nothing, compact_test::AllDistributions);

TEST_CASE_TEMPLATE_DEFINE("a repeated allocating call of the same or fewer rows allocates nothing, with the same bits",
                          Dist, kept_scratch_is_reused) {
  // The allocating sketch and unsketch_grad lease the calling thread's kept scratch (detail::ScratchLease): after a
  // thread's first call, a call that needs no more scratch allocates nothing, so it faults in no fresh pages. Its
  // contents are left over from another shape's call, which must not change a bit of the result.
  const index_t b = 64, n = 300, r = 96;
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, compact::SketchState{1, 2, 3});
  const compact::Projector<compact::Cpu, Dist, float> other(1000, 200, compact::SketchState{4, 5, 6});
  const RowMatrix<float> x = random_matrix<float>(b, n, 1), g = random_matrix<float>(b, r, 2);
  const RowMatrix<float> x_other = random_matrix<float>(b, 1000, 3);
  compact::release_thread_scratch();
  std::vector<unsigned char> zeroed(proj.scratch_bytes(b) + 64, 0);
  const compact::Workspace ws{zeroed.data() + (64 - reinterpret_cast<std::uintptr_t>(zeroed.data()) % 64) % 64,
                              proj.scratch_bytes(b)};
  RowMatrix<float> z(b, r), out(b, n), z_ref(b, r), out_ref(b, n), z_other(b, 200);
  other.sketch(compact::detail::as_view<float>(x_other), compact::detail::as_mutable_view<float>(z_other));  // dirty
  for (const index_t rows : {b, b, b / 2, index_t{1}}) {
    CAPTURE(rows);
    const MatrixView<const float> xv(x.data(), rows, n, n), gv(g.data(), rows, r, r);
    // The reference: the same call on a zeroed workspace of its own.
    std::fill(zeroed.begin(), zeroed.end(), static_cast<unsigned char>(0));
    proj.sketch(xv, MatrixView<float>(z_ref.data(), rows, r, r), ws);
    std::fill(zeroed.begin(), zeroed.end(), static_cast<unsigned char>(0));
    proj.unsketch_grad(gv, MatrixView<float>(out_ref.data(), rows, n, n), 1.0f, 0.0f, ws);
    const long before = g_allocations.load();
    proj.sketch(xv, MatrixView<float>(z.data(), rows, r, r));
    proj.unsketch_grad(gv, MatrixView<float>(out.data(), rows, n, n), 1.0f, 0.0f);
    CHECK(g_allocations.load() - before == 0);
    CHECK(z.topRows(rows) == z_ref.topRows(rows));
    CHECK(out.topRows(rows) == out_ref.topRows(rows));
  }
  // A larger need grows the scratch once, then is reused too; release_thread_scratch frees it.
  const long before = g_allocations.load();
  RowMatrix<float> z_big(4 * b, r);
  const RowMatrix<float> x_big = random_matrix<float>(4 * b, n, 4);
  for (int k = 0; k < 3; ++k) {
    proj.sketch(compact::detail::as_view<float>(x_big), compact::detail::as_mutable_view<float>(z_big));
  }
  CHECK(g_allocations.load() - before <= 1);
  compact::release_thread_scratch();
  const long released = g_allocations.load();
  proj.sketch(compact::detail::as_view<float>(x), compact::detail::as_mutable_view<float>(z));
  CHECK(g_allocations.load() - released == 1);
}
TEST_CASE_TEMPLATE_APPLY(kept_scratch_is_reused, compact_test::AllDistributions);

TEST_CASE("constructing an SRHT projector reports a failed allocation") {
  CHECK(fail_each_allocation([] {},
                             [] {
                               const compact::Projector<compact::Cpu, compact::Srht, double> proj(
                                   1000, 100, compact::SketchState{4, 5, 6});
                               (void)proj;
                             },
                             [] { return true; }, [] { return true; }) >= 2);
}

TEST_CASE_TEMPLATE("an optimizer step at a window change reports a failed allocation and leaves W untouched", Dist,
                   compact::Gaussian, compact::Srht) {
  const index_t m = 40, n = 200, r = 64;
  compact::AdamWOptions o;
  o.window_policy = compact::WindowPolicy::kTransferFirst;
  const compact::Schedule schedule(3, 1);  // every step changes the window
  const RowMatrix<float> w0 = random_matrix<float>(m, n, 3), dy = random_matrix<float>(8, m, 4);
  const RowMatrix<float> x = random_matrix<float>(8, n, 5);
  compact::CompressedAdamW<compact::Cpu, Dist, float> opt(m, n, r, schedule, 0, o);
  RowMatrix<float> w = w0;
  std::vector<std::uint8_t> before;
  const auto reset = [&] {
    opt = compact::CompressedAdamW<compact::Cpu, Dist, float>(m, n, r, schedule, 0, o);
    const RowMatrix<float> z = opt.projector().sketch(x);
    opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z));
    before = opt.save_state();
    w = w0;
  };
  reset();
  opt.step(w);
  const RowMatrix<float> w_ref = w;
  const std::vector<std::uint8_t> after = opt.save_state();
  const long allocations = fail_each_allocation(
      reset, [&] { opt.step(w); }, [&] { return w == w0 && opt.save_state() == before && opt.step_count() == 0; },
      [&] { return w == w_ref && opt.save_state() == after; });
  CHECK(allocations >= 1);
  CHECK(opt.step_count() == 1);
  // save_state and load_state: a failure leaves the optimizer as it was.
  std::vector<std::uint8_t> record;
  fail_each_allocation([] {}, [&] { record = opt.save_state(); }, [] { return true; }, [] { return true; });
  compact::CompressedAdamW<compact::Cpu, Dist, float> fresh(m, n, r, schedule, 0, o);
  const std::vector<std::uint8_t> fresh_record = fresh.save_state();
  fail_each_allocation([] {}, [&] { fresh.load_state(record); }, [&] { return fresh.save_state() == fresh_record; },
                       [&] { return fresh.save_state() == record; });
  CHECK(fresh.save_state() == record);
}
