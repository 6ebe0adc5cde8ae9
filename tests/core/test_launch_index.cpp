// SPDX-License-Identifier: MIT
/// Host tests of core/launch_index.hpp: a host loop over every (block, thread) of the CUDA kernels' launches.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "compact/core/convert.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/launch_index.hpp"
#include "compact/core/srht.hpp"

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

/// How the host loop walks the launch: the dense kernel's 2-D grid (panel_launch, or a forced small grid so the
/// grid-stride loops do several rounds), or the 1-D grid-stride loop over panel_task (SRHT materialize).
struct LaunchShape {
  bool two_d;
  index_t threads;     // 1-D: block size
  index_t max_blocks;  // 1-D: grid cap; 2-D: 0 = panel_launch as is, else blocks_x = blocks_y = max_blocks
};

/// Runs a panel kernel's loops on the host: every (block, thread) of the launch walks its grid-stride tasks and
/// calls fill_dense_panel_scalar exactly as cuda/panel.cuh does. The panel sits in a buffer with leading
/// dimension ld > width and a guard row, so stray writes are visible. Convert gives the stored bits.
template <class Dist, class Convert>
void check_panel_launch(const compact::EntryParams& params, detail::PanelRect rect, LaunchShape shape,
                        Convert convert) {
  const index_t chunk = detail::kPanelChunkCols<Dist>;
  const index_t h = rect.i1 - rect.i0, w = rect.j1 - rect.j0, ld = w + 3;
  std::vector<CountingCell> out(static_cast<std::size_t>((h + 1) * ld));
  const auto run = [&](const detail::PanelTask& task) {
    REQUIRE(task.j0 < task.j1);
    REQUIRE(task.j0 / chunk == (task.j1 - 1) / chunk);  // a task never straddles a chunk
    detail::fill_dense_panel_scalar<Dist>(params, task.i, task.i + 1, task.j0, task.j1,
                                          out.data() + (task.i - rect.i0) * ld + (task.j0 - rect.j0), ld, convert);
  };
  if (shape.two_d) {
    detail::PanelLaunch l = detail::panel_launch(rect, chunk);
    REQUIRE(l.threads_x * l.threads_y == 256);
    if (shape.max_blocks > 0) l.blocks_x = l.blocks_y = shape.max_blocks;
    const index_t per_row = detail::panel_chunks_per_row(rect, chunk);
    for (index_t by = 0; by < l.blocks_y; ++by) {
      for (index_t bx = 0; bx < l.blocks_x; ++bx) {
        for (index_t ty = 0; ty < l.threads_y; ++ty) {
          for (index_t tx = 0; tx < l.threads_x; ++tx) {
            for (index_t row = detail::grid_stride_first(by, ty, l.threads_y); row < h;
                 row += detail::grid_stride_step(l.blocks_y, l.threads_y)) {
              for (index_t c = detail::grid_stride_first(bx, tx, l.threads_x); c < per_row;
                   c += detail::grid_stride_step(l.blocks_x, l.threads_x)) {
                run(detail::panel_task_at(rect, chunk, row, c));
              }
            }
          }
        }
      }
    }
  } else {
    const index_t tasks = detail::panel_task_count(rect, chunk);
    const detail::Launch1d launch = detail::grid_stride_launch(tasks, shape.threads, shape.max_blocks);
    for (index_t block = 0; block < launch.blocks; ++block) {
      for (index_t thread = 0; thread < launch.threads; ++thread) {
        for (index_t t = detail::grid_stride_first(block, thread, launch.threads); t < tasks;
             t += detail::grid_stride_step(launch.blocks, launch.threads)) {
          run(detail::panel_task(rect, chunk, t));
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
                                           << "), 2-D " << shape.two_d << ", threads " << shape.threads
                                           << ", max_blocks " << shape.max_blocks);
  CHECK(wrong_value == 0);
}

struct Fp32Bits {
  std::uint32_t operator()(float v) const { return compact::fp32::bits_of(v); }
};
struct Bf16Bits {
  std::uint32_t operator()(float v) const { return compact::bf16_bits_from_fp32(v); }
};
struct Fp16Bits {
  std::uint32_t operator()(float v) const { return compact::fp16_bits_from_fp32(v); }
};

const detail::PanelRect kRects[] = {
    {0, 1, 0, 1},      {0, 7, 0, 5},   {3, 9, 1, 130}, {0, 33, 128, 256}, {5, 6, 127, 129},
    {10, 17, 29, 301}, {0, 64, 0, 64}, {2, 4, 4, 8},   {0, 3, 250, 517},  {1, 40, 33, 34},
};

/// Naive Walsh-Hadamard transform in double: y_i = sum_k (-1)^popcount(i & k) x_k (Sylvester ordering).
std::vector<double> naive_fwht(const std::vector<float>& x) {
  const std::size_t n = x.size();
  std::vector<double> y(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    if (x[k] == 0.0f) continue;
    for (std::size_t i = 0; i < n; ++i) y[i] += (__builtin_popcountll(i & k) & 1) ? -double(x[k]) : double(x[k]);
  }
  return y;
}

/// Runs the FWHT kernel's three stages on the host for one row, through the launch_index functions only:
/// registers (fwht_register_levels), warp shuffles (partner lane t ^ 2^b, butterfly side from the lane bit),
/// shared memory (fwht_pair over pairs t + k T). Checks that the register -> shared map and every shared level
/// touch each element exactly once.
/// `load(t, q)` gives the initial value of register q of thread t (the kernels' load step).
template <int kElems, class Load>
std::vector<float> simulate_fwht_block(int log2_len, Load load) {
  const detail::FwhtShape s = detail::fwht_shape(log2_len);
  const std::size_t len = std::size_t{1} << log2_len;
  const index_t threads = index_t{1} << s.log2_threads;
  const int elems = 1 << s.log2_elems;
  REQUIRE(elems <= kElems);
  std::vector<std::vector<float>> reg(static_cast<std::size_t>(threads), std::vector<float>(kElems, 0.0f));
  for (index_t t = 0; t < threads; ++t) {
    float v[kElems] = {};
    for (int q = 0; q < elems; ++q) v[q] = load(t, q);
    detail::fwht_register_levels(v, s.log2_elems);
    for (int q = 0; q < kElems; ++q) reg[static_cast<std::size_t>(t)][static_cast<std::size_t>(q)] = v[q];
  }
  for (int b = 0; b < detail::fwht_warp_levels(s); ++b) {
    const auto before = reg;
    for (index_t t = 0; t < threads; ++t) {
      const index_t partner = t ^ (index_t{1} << b);
      REQUIRE(partner / 32 == t / 32);  // a shuffle never leaves the warp
      for (int q = 0; q < elems; ++q) {
        reg[std::size_t(t)][std::size_t(q)] = detail::fwht_butterfly(
            before[std::size_t(t)][std::size_t(q)], before[std::size_t(partner)][std::size_t(q)], (t >> b) & 1);
      }
    }
  }
  std::vector<float> sm(len, 0.0f);
  std::vector<int> touched(len, 0);
  for (index_t t = 0; t < threads; ++t) {
    for (int q = 0; q < elems; ++q) {
      const index_t e = detail::fwht_element(s, t, q);
      sm[std::size_t(e)] = reg[std::size_t(t)][std::size_t(q)];
      ++touched[std::size_t(e)];
    }
  }
  for (int c : touched) REQUIRE(c == 1);
  for (int level = 5; level < s.log2_threads; ++level) {
    std::vector<int> hits(len, 0);
    for (index_t t = 0; t < threads; ++t) {
      for (index_t k = 0; k < detail::fwht_shared_pairs_per_thread(s); ++k) {
        const detail::IndexPair pr = detail::fwht_pair(t + k * threads, level);
        const float a = sm[std::size_t(pr.lo)], b = sm[std::size_t(pr.hi)];
        sm[std::size_t(pr.lo)] = a + b;
        sm[std::size_t(pr.hi)] = a - b;
        ++hits[std::size_t(pr.lo)];
        ++hits[std::size_t(pr.hi)];
      }
    }
    for (int c : hits) REQUIRE(c == 1);
  }
  return sm;
}

/// The FWHT of x (length a power of two) through the kernel's stages.
template <int kElems>
std::vector<float> simulate_fwht(const std::vector<float>& x) {
  const detail::FwhtShape s = detail::fwht_shape(detail::ceil_log2(static_cast<index_t>(x.size())));
  return simulate_fwht_block<kElems>(
      s.log2_len, [&](index_t t, int q) { return x[static_cast<std::size_t>(detail::fwht_element(s, t, q))]; });
}

}  // namespace

/// Launch shapes: the dense kernel's own 2-D grid, the same with 1 and 2 blocks per dimension (several
/// grid-stride rounds), and 1-D grids of several block sizes and caps.
const LaunchShape kLaunches[] = {{true, 0, 0},   {true, 0, 1},   {true, 0, 2},  {false, 256, 1 << 16},
                                 {false, 32, 2}, {false, 64, 3}, {false, 96, 1}};

TEST_CASE("every Gaussian panel entry is written exactly once, with the spec value, for every launch shape") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{7, 3, 11}, 64);
  for (const auto& rect : kRects) {
    for (const auto& launch : kLaunches) {
      check_panel_launch<compact::Gaussian>(params, rect, launch, Fp32Bits{});
      check_panel_launch<compact::Gaussian>(params, rect, launch, Bf16Bits{});
      check_panel_launch<compact::Gaussian>(params, rect, launch, Fp16Bits{});
    }
  }
}

TEST_CASE("every Rademacher panel entry is written exactly once, with the spec value, for every launch shape") {
  const compact::EntryParams params = compact::entry_params(compact::SketchState{7, 3, 11}, 100);
  for (const auto& rect : kRects) {
    for (const auto& launch : kLaunches) {
      check_panel_launch<compact::Rademacher>(params, rect, launch, Fp32Bits{});
      check_panel_launch<compact::Rademacher>(params, rect, launch, Bf16Bits{});
      check_panel_launch<compact::Rademacher>(params, rect, launch, Fp16Bits{});
    }
  }
}

TEST_CASE("panel tasks address rows and windows above 2^32 without truncation") {
  // Window above 2^32 exercises the counter's high word; the row index stays below kMaxDim as the spec requires.
  const compact::EntryParams params =
      compact::entry_params(compact::SketchState{1, 2, (std::uint64_t{1} << 33) + 5}, 8);
  for (const auto& launch : kLaunches) {
    check_panel_launch<compact::Gaussian>(params, {4000000000, 4000000003, 0, 9}, launch, Fp32Bits{});
    check_panel_launch<compact::Rademacher>(params, {4000000000, 4000000003, 60, 200}, launch, Fp32Bits{});
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

TEST_CASE("the FWHT kernel's register, warp and shared stages compute the Hadamard transform for lengths 1 to 2^12") {
  std::uint64_t seed = 99;
  for (int log2_len = 0; log2_len <= 12; ++log2_len) {
    const std::size_t len = std::size_t{1} << log2_len;
    std::vector<float> x(len);
    for (float& v : x) {
      seed = compact::splitmix64(seed);
      v = float(int(seed % 17) - 8);  // small integers: every partial sum is exact in fp32
    }
    const std::vector<float> got = simulate_fwht<16>(x);
    const std::vector<double> want = naive_fwht(x);
    index_t wrong = 0;
    for (std::size_t i = 0; i < len; ++i) wrong += double(got[i]) != want[i];
    CHECK_MESSAGE(wrong == 0, "length 2^" << log2_len);
  }
}

TEST_CASE("the FWHT kernel's stages compute the Hadamard transform for lengths 2^13 to 2^15 (sparse inputs)") {
  for (int log2_len = 13; log2_len <= compact::detail::kFwhtMaxLog2; ++log2_len) {
    const std::size_t len = std::size_t{1} << log2_len;
    std::vector<float> x(len, 0.0f);
    x[0] = 3.0f;
    x[len / 3] = -2.0f;
    x[len - 1] = 5.0f;
    x[12345 % len] = 1.0f;
    const std::vector<float> got = simulate_fwht<compact::detail::kFwhtMaxElems>(x);
    const std::vector<double> want = naive_fwht(x);
    index_t wrong = 0;
    for (std::size_t i = 0; i < len; ++i) wrong += double(got[i]) != want[i];
    CHECK_MESSAGE(wrong == 0, "length 2^" << log2_len);
  }
}

TEST_CASE("FWHT launch shapes use at most 1024 threads and 32 registers, and whole warps from length 512 on") {
  for (int log2_len = 0; log2_len <= compact::detail::kFwhtMaxLog2; ++log2_len) {
    const detail::FwhtShape s = detail::fwht_shape(log2_len);
    CHECK(s.log2_elems + s.log2_threads == log2_len);
    CHECK(s.log2_threads <= 10);
    CHECK((1 << s.log2_elems) <= compact::detail::kFwhtMaxElems);
    if (log2_len >= 9) CHECK(s.log2_threads >= 5);
  }
  CHECK(detail::ceil_log2(1) == 0);
  CHECK(detail::ceil_log2(3000) == 12);
  CHECK(detail::ceil_log2(4096) == 12);
  CHECK(detail::ceil_log2(4097) == 13);
}

TEST_CASE("fwht_pair lists each element once per level") {
  for (int log2_len = 1; log2_len <= 10; ++log2_len) {
    const index_t len = index_t{1} << log2_len;
    for (int level = 0; level < log2_len; ++level) {
      std::vector<int> hits(static_cast<std::size_t>(len), 0);
      for (index_t p = 0; p < len / 2; ++p) {
        const detail::IndexPair pr = detail::fwht_pair(p, level);
        REQUIRE(pr.hi - pr.lo == (index_t{1} << level));
        REQUIRE(pr.hi < len);
        ++hits[std::size_t(pr.lo)];
        ++hits[std::size_t(pr.hi)];
      }
      for (int c : hits) REQUIRE(c == 1);
    }
  }
}

TEST_CASE("packed SRHT sign words and per-thread masks hold d_k of core/srht.hpp for every element") {
  const compact::SketchState state{5, 6, (std::uint64_t{1} << 32) + 9};
  const compact::Key2x32 key = compact::philox_key(state);
  for (int log2_len = 0; log2_len <= compact::detail::kFwhtMaxLog2; ++log2_len) {
    const index_t np = index_t{1} << log2_len;
    std::vector<std::uint32_t> words(static_cast<std::size_t>((np + 31) / 32));
    for (index_t w = 0; w < index_t(words.size()); ++w) {
      words[std::size_t(w)] = detail::srht_sign_word(key, state.window, w, np);
    }
    const detail::FwhtShape s = detail::fwht_shape(log2_len);
    index_t wrong = 0;
    for (index_t t = 0; t < (index_t{1} << s.log2_threads); ++t) {
      const std::uint32_t mask = detail::srht_thread_sign_mask(s, words.data(), t);
      for (int q = 0; q < (1 << s.log2_elems); ++q) {
        wrong += ((mask >> q) & 1u) != compact::srht_sign_bit(key, state.window, detail::fwht_element(s, t, q));
      }
      if (s.log2_elems < 5) wrong += (mask >> (1 << s.log2_elems)) != 0;  // no stray bits
    }
    CHECK_MESSAGE(wrong == 0, "n' = 2^" << log2_len);
  }
}

namespace {

/// Runs the SRHT row kernels' steps on the host for one row (sign mask, padded load, the three FWHT stages, gather
/// for sketch; scatter, FWHT, signs for unsketch) and compares with x P and g P^T built from srht_entry. Inputs are
/// small integers, so every FWHT sum is exact and each result is one fp32 rounding of scale times an integer: the
/// comparison is exact (==, so a zero may come out as -0 where the double reference has +0).
void check_srht_row_kernels(index_t n, index_t r) {
  const compact::SketchState state{21, 4, (std::uint64_t{1} << 35) + 2};
  const compact::EntryParams params = compact::entry_params(state, r);
  const index_t np = compact::next_pow2(n);
  const int log2_len = compact::log2_pow2(np);
  const detail::FwhtShape s = detail::fwht_shape(log2_len);
  std::vector<std::uint32_t> words(static_cast<std::size_t>((np + 31) / 32));
  for (index_t w = 0; w < index_t(words.size()); ++w) {
    words[std::size_t(w)] = detail::srht_sign_word(params.key, params.window, w, np);
  }
  const std::vector<index_t> sample = compact::srht_sample(state, n, r);
  std::uint64_t seed = std::uint64_t(n * 131 + r);
  const auto small_int = [&seed] {
    seed = compact::splitmix64(seed);
    return float(int(seed % 9) - 4);
  };
  std::vector<float> x(static_cast<std::size_t>(n)), g(static_cast<std::size_t>(r));
  for (float& v : x) v = small_int();
  for (float& v : g) v = small_int();

  // sketch: v[q] = x_k (-1 if the mask bit is set), 0 beyond n; then z_j = scale * y[S_j].
  const std::vector<float> y = simulate_fwht_block<compact::detail::kFwhtMaxElems>(log2_len, [&](index_t t, int q) {
    const index_t k = detail::fwht_element(s, t, q);
    const std::uint32_t mask = detail::srht_thread_sign_mask(s, words.data(), t);
    const float xk = k < n ? x[std::size_t(k)] : 0.0f;
    return ((mask >> q) & 1u) ? -xk : xk;
  });
  index_t wrong = 0;
  for (index_t j = 0; j < r; ++j) {
    double want = 0;  // exact: integers times +-scale, summed in double
    for (index_t k = 0; k < n; ++k)
      want += double(x[std::size_t(k)]) * compact::srht_entry(params, k, sample[std::size_t(j)]);
    wrong += params.scale * y[std::size_t(sample[std::size_t(j)])] != float(want);
  }
  CHECK_MESSAGE(wrong == 0, "sketch n = " << n << " r = " << r);

  // unsketch_grad: scatter g to S, FWHT, out_k = scale * y_k * d_k.
  std::vector<float> scattered(static_cast<std::size_t>(np), 0.0f);
  for (index_t j = 0; j < r; ++j) scattered[std::size_t(sample[std::size_t(j)])] = g[std::size_t(j)];
  const std::vector<float> u = simulate_fwht_block<compact::detail::kFwhtMaxElems>(
      log2_len, [&](index_t t, int q) { return scattered[std::size_t(detail::fwht_element(s, t, q))]; });
  wrong = 0;
  for (index_t t = 0; t < (index_t{1} << s.log2_threads); ++t) {
    const std::uint32_t mask = detail::srht_thread_sign_mask(s, words.data(), t);
    for (int q = 0; q < (1 << s.log2_elems); ++q) {
      const index_t k = detail::fwht_element(s, t, q);
      if (k >= n) continue;
      const float yk = params.scale * u[std::size_t(k)];
      const float got = ((mask >> q) & 1u) ? -yk : yk;
      double want = 0;
      for (index_t j = 0; j < r; ++j)
        want += double(g[std::size_t(j)]) * compact::srht_entry(params, k, sample[std::size_t(j)]);
      wrong += got != float(want);
    }
  }
  CHECK_MESSAGE(wrong == 0, "unsketch n = " << n << " r = " << r);
}

}  // namespace

TEST_CASE("the SRHT row kernels' steps give x P and g P^T of srht_entry exactly on integer inputs") {
  const index_t shapes[][2] = {{1, 1},     {2, 1},      {5, 3},       {16, 16},   {17, 9},    {100, 37},
                               {513, 100}, {1000, 300}, {4096, 1024}, {5000, 64}, {20000, 40}};
  for (const auto& sh : shapes) check_srht_row_kernels(sh[0], sh[1]);
}

namespace {

/// Executes a GemmPlan as BLAS defines it (column-major, op(A) m x k, op(B) k x n) on host arrays of the given
/// sizes, checking BLAS's leading-dimension rules and every index against the array bounds. Exact in double for
/// the small-integer inputs used here.
void run_plan(const detail::GemmPlan& p, double alpha, const std::vector<float>& a, const std::vector<float>& b,
              double beta, std::vector<float>& c) {
  REQUIRE(p.lda >= std::max<index_t>(1, p.trans_a ? p.k : p.m));
  REQUIRE(p.ldb >= std::max<index_t>(1, p.trans_b ? p.n : p.k));
  REQUIRE(p.ldc >= std::max<index_t>(1, p.m));
  const auto at = [](const std::vector<float>& v, index_t k) {
    REQUIRE(k >= 0);
    REQUIRE(k < index_t(v.size()));
    return double(v[std::size_t(k)]);
  };
  for (index_t j = 0; j < p.n; ++j) {
    for (index_t i = 0; i < p.m; ++i) {
      double acc = 0;
      for (index_t l = 0; l < p.k; ++l) {
        const double av = p.trans_a ? at(a, p.a_offset + l + i * p.lda) : at(a, p.a_offset + i + l * p.lda);
        const double bv = p.trans_b ? at(b, p.b_offset + j + l * p.ldb) : at(b, p.b_offset + l + j * p.ldb);
        acc += av * bv;
      }
      const index_t ci = p.c_offset + i + j * p.ldc;
      const double old = at(c, ci);
      c[std::size_t(ci)] = float(alpha * acc + (beta == 0.0 ? 0.0 : beta * old));
    }
  }
}

std::vector<float> small_ints(std::size_t count, std::uint64_t seed) {
  std::vector<float> v(count);
  for (float& x : v) {
    seed = compact::splitmix64(seed);
    x = float(int(seed % 7) - 3);
  }
  return v;
}

constexpr float kSentinel = 12345.0f;

/// z = x P through the projector's panel loop (panel_extent, sketch_panel_gemm), compared with the row-major product.
void check_sketch_plan(index_t batch, index_t n, index_t r, index_t capacity, index_t align) {
  const index_t ldx = n + 3, ldz = r + 2;
  const std::vector<float> x = small_ints(std::size_t(batch * ldx), 1), p = small_ints(std::size_t(n * r), 2);
  std::vector<float> z(std::size_t(batch * ldz), kSentinel);
  const index_t w_max = detail::panel_extent(capacity, n, r, align);
  index_t panels = 0;
  for (index_t j0 = 0; j0 < r; j0 += w_max, ++panels) {
    const index_t w = std::min(w_max, r - j0);
    REQUIRE(n * w <= std::max(capacity, n * std::min(r, align)));  // the panel fits the workspace
    std::vector<float> panel(std::size_t(n * w));                  // P[:, j0:j0+w], row-major, ld w
    for (index_t i = 0; i < n; ++i) {
      for (index_t j = 0; j < w; ++j) panel[std::size_t(i * w + j)] = p[std::size_t(i * r + j0 + j)];
    }
    run_plan(detail::sketch_panel_gemm(batch, n, j0, w, ldx, ldz), 1.0, panel, x, 0.0, z);
  }
  index_t wrong = 0;
  for (index_t b = 0; b < batch; ++b) {
    for (index_t j = 0; j < ldz; ++j) {
      double want = kSentinel;
      if (j < r) {
        want = 0;
        for (index_t k = 0; k < n; ++k) want += double(x[std::size_t(b * ldx + k)]) * p[std::size_t(k * r + j)];
      }
      wrong += double(z[std::size_t(b * ldz + j)]) != want;
    }
  }
  CHECK_MESSAGE(wrong == 0, "sketch B = " << batch << " n = " << n << " r = " << r << " panels " << panels);
}

/// out = alpha g P^T + beta out through the projector's row-panel loop (panel_extent, unsketch_panel_gemm).
void check_unsketch_plan(index_t m, index_t n, index_t r, index_t capacity, index_t align, float alpha, float beta) {
  const index_t ldg = r + 1, ldo = n + 4;
  const std::vector<float> g = small_ints(std::size_t(m * ldg), 3), p = small_ints(std::size_t(n * r), 4);
  const std::vector<float> out0 = small_ints(std::size_t(m * ldo), 5);
  std::vector<float> out = out0;
  const index_t h_max = detail::panel_extent(capacity, r, n, align);
  for (index_t i0 = 0; i0 < n; i0 += h_max) {
    const index_t h = std::min(h_max, n - i0);
    const std::vector<float> panel(p.begin() + i0 * r, p.begin() + (i0 + h) * r);  // P[i0:i0+h, :], ld r
    run_plan(detail::unsketch_panel_gemm(m, r, i0, h, ldg, ldo), alpha, panel, g, beta, out);
  }
  index_t wrong = 0;
  for (index_t i = 0; i < m; ++i) {
    for (index_t k = 0; k < ldo; ++k) {
      double want = out0[std::size_t(i * ldo + k)];
      if (k < n) {
        double acc = 0;
        for (index_t j = 0; j < r; ++j) acc += double(g[std::size_t(i * ldg + j)]) * p[std::size_t(k * r + j)];
        want = alpha * acc + beta * want;
      }
      wrong += double(out[std::size_t(i * ldo + k)]) != want;
    }
  }
  CHECK_MESSAGE(wrong == 0, "unsketch m = " << m << " n = " << n << " r = " << r << " beta " << beta);
}

}  // namespace

TEST_CASE("the sketch GEMM plans compute z = x P over every panel split, leaving the row-stride gap alone") {
  check_sketch_plan(5, 7, 3, 7 * 3, 1);            // one panel
  check_sketch_plan(5, 7, 30, 7 * 8, 4);           // panels of 8 columns
  check_sketch_plan(9, 33, 70, 33 * 20, 16);       // 16-column panels, last one short
  check_sketch_plan(4, 300, 260, 300 * 128, 128);  // the projector's minimum workspace: 128, 128, 4
  check_sketch_plan(3, 130, 129, 130 * 129, 128);
  check_sketch_plan(1, 1, 1, 1, 128);
}

TEST_CASE("the unsketch GEMM plans compute alpha g P^T + beta out over every panel split") {
  check_unsketch_plan(6, 9, 4, 4 * 9, 1, 1.0f, 0.0f);
  check_unsketch_plan(6, 30, 7, 7 * 8, 4, 2.0f, -1.0f);
  check_unsketch_plan(11, 70, 33, 33 * 20, 16, -1.0f, 1.0f);
  check_unsketch_plan(3, 300, 150, 150 * 128, 128, 1.0f, 0.0f);  // minimum workspace: 128, 128, 44 rows
  check_unsketch_plan(2, 1, 1, 1, 128, 3.0f, 2.0f);
}

TEST_CASE("the compressed_grad GEMM plan computes dy^T z + beta g, including an empty batch") {
  for (const index_t batch : {index_t{13}, index_t{1}, index_t{0}}) {
    for (const float beta : {0.0f, 1.0f, -2.0f}) {
      const index_t m = 9, r = 5, lddy = m + 2, ldz = r + 1, ldg = r + 3;
      const std::vector<float> dy = small_ints(std::size_t(std::max<index_t>(batch, 1) * lddy), 6);
      const std::vector<float> z = small_ints(std::size_t(std::max<index_t>(batch, 1) * ldz), 7);
      const std::vector<float> g0 = small_ints(std::size_t(m * ldg), 8);
      std::vector<float> g = g0;
      run_plan(detail::compressed_grad_gemm(batch, m, r, lddy, ldz, ldg), 1.0, z, dy, beta, g);
      index_t wrong = 0;
      for (index_t i = 0; i < m; ++i) {
        for (index_t j = 0; j < ldg; ++j) {
          double want = g0[std::size_t(i * ldg + j)];
          if (j < r) {
            double acc = 0;
            for (index_t b = 0; b < batch; ++b)
              acc += double(dy[std::size_t(b * lddy + i)]) * z[std::size_t(b * ldz + j)];
            want = acc + beta * want;
          }
          wrong += double(g[std::size_t(i * ldg + j)]) != want;
        }
      }
      CHECK_MESSAGE(wrong == 0, "batch " << batch << " beta " << beta);
    }
  }
}

TEST_CASE("panel_extent takes all of P when it fits, else the most aligned panel the workspace holds") {
  CHECK(detail::panel_extent(4096 * 1024, 4096, 1024, 128) == 1024);
  CHECK(detail::panel_extent(4096 * 1000, 4096, 1024, 128) == 896);
  CHECK(detail::panel_extent(4096 * 128, 4096, 1024, 128) == 128);
  CHECK(detail::panel_extent(4096 * 200, 4096, 100, 128) == 100);
  for (index_t capacity : {index_t{128 * 300}, index_t{1000 * 300}, index_t{1 << 20}}) {
    for (index_t extent : {index_t{1}, index_t{129}, index_t{1000}, index_t{5000}}) {
      const index_t e = detail::panel_extent(capacity, 300, extent, 128);
      CHECK(e >= 1);
      CHECK(e <= std::max(extent, index_t{128}));
      if (e != extent) {
        CHECK(e % 128 == 0);
        CHECK(e * 300 <= capacity);
      }
    }
  }
}
