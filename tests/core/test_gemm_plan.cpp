// SPDX-License-Identifier: MIT
/// Host tests of core/gemm_plan.hpp: the row-major -> column-major GEMM plans of the dense projectors and
/// compressed_grad, executed by a naive BLAS-semantics GEMM over every panel split the projectors use.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "compact/core/gemm_plan.hpp"
#include "compact/core/philox.hpp"

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
