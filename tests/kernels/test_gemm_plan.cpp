// SPDX-License-Identifier: MIT
/// Host tests of kernels/gemm_plan.hpp: the row-major -> column-major GEMM plans of the dense projectors, of a stored
/// P and of compressed_grad, executed by a naive BLAS-semantics GEMM over the panel splits of
/// kernels/panel_schedule.hpp (serial and overlapped, padded leading dimensions).

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "compact/spec/philox.hpp"
#include "compact/kernels/gemm_plan.hpp"
#include "compact/kernels/panel_schedule.hpp"

namespace {

using compact::index_t;
namespace detail = compact::detail;

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

/// z = x P through the projector's panel loop (sketch_split, sketch_panel_gemm), each panel copied into a buffer of
/// its padded leading dimension, compared with the row-major product.
void check_sketch_plan(index_t batch, index_t n, index_t r, index_t capacity, index_t vec,
                       compact::PanelSchedule schedule) {
  const index_t ldx = n + 3, ldz = r + 2;
  const std::vector<float> x = small_ints(std::size_t(batch * ldx), 1), p = small_ints(std::size_t(n * r), 2);
  std::vector<float> z(std::size_t(batch * ldz), kSentinel);
  const detail::PanelSplit split = detail::sketch_split(capacity, n, r, vec, schedule);
  for (index_t k = 0; k < split.count; ++k) {
    const detail::PanelSpan c = detail::panel_span(split, k, r);
    std::vector<float> panel(std::size_t(n * split.ld), kSentinel);  // P[:, j0:j0+w], row-major, padded rows
    for (index_t i = 0; i < n; ++i) {
      for (index_t j = 0; j < c.size; ++j) panel[std::size_t(i * split.ld + j)] = p[std::size_t(i * r + c.start + j)];
    }
    run_plan(detail::sketch_panel_gemm(batch, n, c.start, c.size, split.ld, ldx, ldz), 1.0, panel, x, 0.0, z);
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
  CHECK_MESSAGE(wrong == 0, "sketch B = " << batch << " n = " << n << " r = " << r << " panels " << split.count);
}

/// out = alpha g P^T + beta out through the projector's row-panel loop (unsketch_split, unsketch_panel_gemm).
void check_unsketch_plan(index_t m, index_t n, index_t r, index_t capacity, index_t vec,
                         compact::PanelSchedule schedule, float alpha, float beta) {
  const index_t ldg = r + 1, ldo = n + 4;
  const std::vector<float> g = small_ints(std::size_t(m * ldg), 3), p = small_ints(std::size_t(n * r), 4);
  const std::vector<float> out0 = small_ints(std::size_t(m * ldo), 5);
  std::vector<float> out = out0;
  const detail::PanelSplit split = detail::unsketch_split(capacity, n, r, vec, schedule);
  for (index_t k = 0; k < split.count; ++k) {
    const detail::PanelSpan c = detail::panel_span(split, k, n);
    std::vector<float> panel(std::size_t(c.size * split.ld), kSentinel);  // P[i0:i0+h, :], padded rows
    for (index_t i = 0; i < c.size; ++i) {
      for (index_t j = 0; j < r; ++j) panel[std::size_t(i * split.ld + j)] = p[std::size_t((c.start + i) * r + j)];
    }
    run_plan(detail::unsketch_panel_gemm(m, r, c.start, c.size, split.ld, ldg, ldo), alpha, panel, g, beta, out);
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
  using S = compact::PanelSchedule;
  for (const S s : {S::kSerial, S::kOverlap}) {
    for (const index_t vec : {index_t{4}, index_t{8}}) {
      check_sketch_plan(5, 7, 3, detail::recommended_panel_entries(7, 3, vec, s), vec, s);  // one panel, padded rows
      check_sketch_plan(4, 30, 260, detail::min_panel_entries(30, 260, vec, s), vec, s);    // panels of 128, 128, 4
      check_sketch_plan(3, 20, 300, detail::recommended_panel_entries(20, 300, vec, s), vec, s);
      check_sketch_plan(3, 9, 129, detail::min_panel_entries(9, 129, vec, s) + 77, vec, s);
      check_sketch_plan(1, 1, 1, detail::min_panel_entries(1, 1, vec, s), vec, s);
    }
  }
}

TEST_CASE("the unsketch GEMM plans compute alpha g P^T + beta out over every panel split") {
  using S = compact::PanelSchedule;
  for (const S s : {S::kSerial, S::kOverlap}) {
    for (const index_t vec : {index_t{4}, index_t{8}}) {
      check_unsketch_plan(6, 9, 5, detail::recommended_panel_entries(9, 5, vec, s), vec, s, 1.0f, 0.0f);
      check_unsketch_plan(3, 300, 7, detail::min_panel_entries(300, 7, vec, s), vec, s, 2.0f, -1.0f);  // 128,128,44
      check_unsketch_plan(2, 260, 30, detail::recommended_panel_entries(260, 30, vec, s), vec, s, -1.0f, 1.0f);
      check_unsketch_plan(2, 1, 1, detail::min_panel_entries(1, 1, vec, s), vec, s, 3.0f, 2.0f);
    }
  }
}

TEST_CASE("a stored P with the padded row stride issues exactly the one-panel projector's GEMMs (same bits)") {
  // MaterializedP issues sketch_panel_gemm(B, n, 0, r, ld, ...) and unsketch_panel_gemm(m, r, 0, n, ld, ...); with
  // ld = panel_ld(r, V) and the serial recommended workspace (all of P) the projector's split is one panel with that
  // ld, so both issue identical GEMM arguments on identical P and cuBLAS returns identical bits.
  const auto same = [](const detail::GemmPlan& a, const detail::GemmPlan& b) {
    return a.trans_a == b.trans_a && a.trans_b == b.trans_b && a.m == b.m && a.n == b.n && a.k == b.k &&
           a.lda == b.lda && a.ldb == b.ldb && a.ldc == b.ldc && a.a_offset == b.a_offset && a.b_offset == b.b_offset &&
           a.c_offset == b.c_offset;
  };
  for (const index_t vec : {index_t{4}, index_t{8}}) {
    for (const auto& nr : {std::pair<index_t, index_t>{4096, 1024}, {300, 77}, {1000, 999}, {64, 1}}) {
      const index_t n = nr.first, r = nr.second, ld = detail::panel_ld(r, vec);
      const index_t capacity = detail::recommended_panel_entries(n, r, vec, compact::PanelSchedule::kSerial);
      const detail::PanelSplit s = detail::sketch_split(capacity, n, r, vec, compact::PanelSchedule::kSerial);
      const detail::PanelSplit u = detail::unsketch_split(capacity, n, r, vec, compact::PanelSchedule::kSerial);
      REQUIRE(s.count == 1);
      REQUIRE(u.count == 1);
      CHECK(same(detail::sketch_panel_gemm(37, n, 0, s.extent, s.ld, n + 1, r + 2),
                 detail::sketch_panel_gemm(37, n, 0, r, ld, n + 1, r + 2)));
      CHECK(same(detail::unsketch_panel_gemm(5, r, 0, u.extent, u.ld, r, n),
                 detail::unsketch_panel_gemm(5, r, 0, n, ld, r, n)));
    }
  }
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
