// SPDX-License-Identifier: MIT
/// The multi-panel path of the dense CPU projectors (a panel budget shrunk through the constructor) and the row
/// blocks of compressed_grad: several panels, a ragged last panel, n·r just inside and just outside the budget.
///
/// Where the results are exact they are compared bit for bit: P itself, x P for x = I (each entry of z is one
/// product with 1 plus zeros), g Pᵀ for g = I, and any result for 1 vs 2 threads. Elsewhere each result is compared
/// with a long double reference under the GEMM rounding bound
///   |ẑ_ij − z_ij| ≤ γ_k Σ_l |x_il| |P_lj|,  γ_k = k·u / (1 − k·u),  u = ε/2,
/// for a k-term dot product (Higham, Accuracy and Stability, §3.5), checked with γ_k = k·ε (twice the bound, for
/// the one extra rounding of alpha·(..) + beta·out). A panel that is generated at the wrong offset, skipped or
/// written twice gives O(1) relative errors, orders of magnitude above it.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "support.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using compact::index_t;
using compact::RowMatrix;
using compact_test::random_matrix;
using compact_test::with_threads;

const compact::SketchState kPanelsState{11, 22, 33};

template <class Scalar>
bool same_bits(const RowMatrix<Scalar>& a, const RowMatrix<Scalar>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(Scalar) * static_cast<std::size_t>(a.size())) == 0;
}

/// Largest |got - want| / (k eps sum |a||b|) over the entries of got = a b (k = a.cols()), with `want` and the
/// magnitudes in a wider type (double for float: its own rounding, ~k 2^-53, is 2^-29 of the bound; long double
/// for double: 2^-11 of it): at most 1 when the GEMM bound holds.
template <class Scalar>
double bound_ratio(const RowMatrix<Scalar>& got, const RowMatrix<Scalar>& a, const RowMatrix<Scalar>& b) {
  using Wide = std::conditional_t<std::is_same_v<Scalar, float>, double, long double>;
  using WideMatrix = Eigen::Matrix<Wide, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const WideMatrix wa = a.template cast<Wide>(), wb = b.template cast<Wide>();
  const WideMatrix want = wa * wb, mag = wa.cwiseAbs() * wb.cwiseAbs();
  const Wide gamma = Wide(a.cols()) * std::numeric_limits<Scalar>::epsilon();
  double worst = 0;
  for (index_t i = 0; i < got.rows(); ++i) {
    for (index_t j = 0; j < got.cols(); ++j) {
      const Wide err = std::fabs(Wide(got(i, j)) - want(i, j));
      const Wide allowed = gamma * mag(i, j) + std::numeric_limits<Wide>::min();
      worst = std::max(worst, double(err / allowed));
    }
  }
  return worst;
}

struct PanelCase {
  index_t n, r, budget;
  index_t width, height;  // expected panel_width() and panel_height()
};

// Budgets relative to n·r: several panels with a ragged last one in both directions, exactly n·r (one panel),
// one entry short of n·r, one entry above it, and a budget below the narrowest panel (panels of kPanelMin).
const PanelCase kCases[] = {
    {300, 200, 300 * 128, 128, 128},      // sketch: 128 + 72; unsketch: 128 + 128 + 44
    {300, 200, 300 * 200, 200, 300},      // n·r = budget: one panel each way
    {300, 200, 300 * 200 - 1, 128, 256},  // one short: sketch 128 + 72, unsketch 256 + 44
    {300, 200, 300 * 200 + 1, 200, 300},  // one above: one panel
    {260, 259, 1, 128, 128},              // below the narrowest panel: 128 + 128 + 3 columns, 128 + 128 + 4 rows
    {129, 129, 129 * 128, 128, 128},      // a one-wide ragged last panel each way
};

template <class Dist, class Scalar>
void check_panel_case(const PanelCase& c) {
  CAPTURE(c.n);
  CAPTURE(c.r);
  CAPTURE(c.budget);
  using P = compact::Projector<compact::Cpu, Dist, Scalar>;
  const P small(c.n, c.r, kPanelsState, c.budget), whole(c.n, c.r, kPanelsState);
  REQUIRE(small.panel_entries() == c.budget);
  CHECK(small.panel_width() == c.width);
  CHECK(small.panel_height() == c.height);
  CHECK(whole.panel_width() == c.r);  // the default budget holds all of these in one panel
  CHECK(whole.panel_height() == c.n);
  CHECK(small.scratch_bytes() == sizeof(Scalar) * std::size_t(std::max(c.n * c.width, c.height * c.r)));

  // P itself and the exact products: bit for bit.
  const RowMatrix<Scalar> p = whole.materialize();
  CHECK(same_bits(small.materialize(), p));
  const RowMatrix<Scalar> eye_n = RowMatrix<Scalar>::Identity(c.n, c.n), eye_r = RowMatrix<Scalar>::Identity(c.r, c.r);
  CHECK(same_bits(small.sketch(eye_n), p));
  CHECK(same_bits(small.unsketch_grad(eye_r), RowMatrix<Scalar>(p.transpose())));

  // Random inputs: within the GEMM bound, like the one-panel result.
  const index_t b = 37, m = 41;
  const RowMatrix<Scalar> x = random_matrix<Scalar>(b, c.n, 1), g = random_matrix<Scalar>(m, c.r, 2);
  const RowMatrix<Scalar> z_small = small.sketch(x), z_whole = whole.sketch(x);
  CHECK(bound_ratio(z_small, x, p) <= 1.0);
  CHECK(bound_ratio(z_whole, x, p) <= 1.0);
  const RowMatrix<Scalar> pt = p.transpose();
  CHECK(bound_ratio(small.unsketch_grad(g), g, pt) <= 1.0);
  // alpha and beta: out = alpha g Pᵀ + beta out0 = [alpha g | beta out0] [Pᵀ ; I] as one (r + n)-term product.
  const RowMatrix<Scalar> out0 = random_matrix<Scalar>(m, c.n, 3);
  RowMatrix<Scalar> out = out0;
  const Scalar alpha = Scalar(-0.375), beta = Scalar(0.625);
  small.unsketch_grad(g, out, alpha, beta);
  RowMatrix<Scalar> a(m, c.r + c.n), bmat(c.r + c.n, c.n);
  a << alpha * g, beta * out0;
  bmat << pt, RowMatrix<Scalar>::Identity(c.n, c.n);
  CHECK(bound_ratio(out, a, bmat) <= 1.0);

#if defined(_OPENMP)
  // Bitwise identical for 1 and 2 threads on the multi-panel path too.
  RowMatrix<Scalar> z1, z2, o1 = out0, o2 = out0;
  with_threads(1, [&] {
    z1 = small.sketch(x);
    small.unsketch_grad(g, o1, alpha, beta);
  });
  with_threads(2, [&] {
    z2 = small.sketch(x);
    small.unsketch_grad(g, o2, alpha, beta);
  });
  CHECK(same_bits(z1, z2));
  CHECK(same_bits(o1, o2));
  CHECK(same_bits(z1, z_small));
#endif
}

}  // namespace

TEST_CASE_TEMPLATE("the multi-panel path gives P and its products for every panel split", Dist, compact::Gaussian,
                   compact::Rademacher) {
  for (const PanelCase& c : kCases) {
    check_panel_case<Dist, float>(c);
    check_panel_case<Dist, double>(c);
  }
}

TEST_CASE("a panel budget below 1 is refused") {
  using P = compact::Projector<compact::Cpu, compact::Gaussian, float>;
  CHECK(compact_test::error_of([] { P(8, 4, kPanelsState, 0); }).find("argument panel_entries = 0 must be >= 1") !=
        std::string::npos);
}

TEST_CASE_TEMPLATE("compressed_grad over several row blocks, a ragged last one and a single row", Scalar, float,
                   double) {
  // g = dyᵀ z is formed in blocks of 128 rows of g: m just below, at and above one block, and several blocks.
  const index_t batch = 53, r = 70;
  for (const index_t m : {1, 127, 128, 129, 300}) {
    CAPTURE(m);
    const RowMatrix<Scalar> dy = random_matrix<Scalar>(batch, m, 4), z = random_matrix<Scalar>(batch, r, 5);
    const RowMatrix<Scalar> dyt = dy.transpose();
    const RowMatrix<Scalar> g = compact::compressed_grad<Scalar>(dy, z);
    CHECK(bound_ratio(g, dyt, z) <= 1.0);
    // beta = 1 accumulates: g + dyᵀ z = [I | dyᵀ] [g ; z] as one (m + batch)-term product.
    RowMatrix<Scalar> acc = g;
    compact::compressed_grad<Scalar>(dy, z, acc, Scalar(1));
    RowMatrix<Scalar> a(m, m + batch), b(m + batch, r);
    a << RowMatrix<Scalar>::Identity(m, m), dyt;
    b << g, z;
    CHECK(bound_ratio(acc, a, b) <= 1.0);
#if defined(_OPENMP)
    RowMatrix<Scalar> g1, g2;
    with_threads(1, [&] { g1 = compact::compressed_grad<Scalar>(dy, z); });
    with_threads(2, [&] { g2 = compact::compressed_grad<Scalar>(dy, z); });
    CHECK(same_bits(g1, g2));
    CHECK(same_bits(g1, g));
#endif
  }
}

namespace {

/// A block of P from materialize(p, row0, col0) against the same block of the whole P: bit for bit.
template <class Dist, class Scalar>
void check_blocks(index_t n, index_t r) {
  const compact::Projector<compact::Cpu, Dist, Scalar> proj(n, r, kPanelsState);
  const RowMatrix<Scalar> whole = proj.materialize();
  // Unaligned offsets and ragged sizes (the generators' blocks are 4 and 128 columns wide), the whole P, one entry.
  const index_t blocks[][4] = {
      {0, 0, n, r}, {3, 5, n - 7, r - 9}, {n - 1, r - 1, 1, 1}, {1, 127, n / 2, r - 127}, {0, r, n, 0}};
  for (const auto& b : blocks) {
    const index_t row0 = b[0], col0 = b[1], rows = b[2], cols = b[3];
    // A wider row stride than the block: materialize writes only the block's columns.
    RowMatrix<Scalar> out = RowMatrix<Scalar>::Constant(std::max<index_t>(rows, 1), cols + 3, Scalar(-7));
    proj.materialize(compact::MatrixView<Scalar>(out.data(), rows, cols, cols + 3), row0, col0);
    for (index_t i = 0; i < rows; ++i) {
      // An empty block (cols = 0, col0 = r) has no element of P to compare, and whole(., r) is outside P.
      if (cols > 0) REQUIRE(std::memcmp(&out(i, 0), &whole(row0 + i, col0), sizeof(Scalar) * std::size_t(cols)) == 0);
      for (index_t j = cols; j < cols + 3; ++j) REQUIRE(out(i, j) == Scalar(-7));
    }
  }
}

}  // namespace

TEST_CASE_TEMPLATE("materialize(p, row0, col0) gives the block of P bit for bit, at any offset", Dist,
                   compact::Gaussian, compact::Rademacher, compact::Srht) {
  check_blocks<Dist, float>(300, 200);
  check_blocks<Dist, double>(300, 200);
}

TEST_CASE_TEMPLATE("materialize(p, row0, col0) refuses a block outside P before writing", Dist, compact::Gaussian,
                   compact::Rademacher, compact::Srht) {
  const compact::Projector<compact::Cpu, Dist, float> proj(64, 16, kPanelsState);
  std::vector<float> out(64 * 16, -7.0f);
  const auto block = [&](index_t rows, index_t cols) { return compact::MatrixView<float>(out.data(), rows, cols, 16); };
  CHECK_THROWS_WITH_AS(proj.materialize(block(2, 2), 63, 0),
                       "compact: Projector::materialize: rows [63, 63 + 2) of the block are not inside the n = 64 rows "
                       "of P",
                       compact::error);
  CHECK_THROWS_WITH_AS(proj.materialize(block(2, 2), 0, 15),
                       "compact: Projector::materialize: columns [15, 15 + 2) of the block are not inside the r = 16 "
                       "columns of P",
                       compact::error);
  CHECK_THROWS_AS(proj.materialize(block(1, 1), -1, 0), compact::error);
  CHECK_THROWS_AS(proj.materialize(block(1, 1), 0, -1), compact::error);
  for (float v : out) REQUIRE(v == -7.0f);
}
