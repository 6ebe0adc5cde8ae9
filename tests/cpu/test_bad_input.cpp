// SPDX-License-Identifier: MIT
/// Every bad argument of the CPU backend is refused with a message naming the argument and its values, and no
/// output is written when a check fails.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "support.hpp"

#include <functional>
#include <string>
#include <vector>

using compact::index_t;
using compact::MatrixView;
using compact_test::error_of;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const compact::SketchState kState{1, 2, 3};

}  // namespace

TEST_CASE_TEMPLATE("constructing a projector with a bad rank or dimension is refused with the values", Dist,
                   compact::Gaussian, compact::Rademacher) {
  using P = compact::Projector<compact::Cpu, Dist, float>;
  CHECK(contains(error_of([] { P(16, 0, kState); }), "rank r = 0 must satisfy 1 <= r <= n = 16"));
  CHECK(contains(error_of([] { P(16, 17, kState); }), "rank r = 17 must satisfy 1 <= r <= n = 16"));
  CHECK(contains(error_of([] { P(16, -3, kState); }), "rank r = -3"));
  CHECK(contains(error_of([] { P(0, 1, kState); }), "input dimension n = 0"));
  CHECK(contains(error_of([] { P(-5, 1, kState); }), "input dimension n = -5"));
  CHECK(contains(error_of([] { P(index_t{1} << 33, 4, kState); }), "input dimension n = 8589934592"));
  CHECK(error_of([] { P(16, 16, kState); }) == "");
}

TEST_CASE_TEMPLATE("sketch refuses malformed views and writes nothing", Dist, compact::Gaussian, compact::Rademacher) {
  const index_t n = 20, r = 6, B = 3;
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, kState);
  std::vector<float> x(B * n, 1.0f), z(B * r, -7.0f);
  const auto untouched = [&] {
    for (float v : z)
      if (v != -7.0f) return false;
    return true;
  };
  const auto call = [&](MatrixView<const float> xv, MatrixView<float> zv) {
    return error_of([&] { proj.sketch(xv, zv); });
  };
  CHECK(contains(call({x.data(), B, n - 1}, {z.data(), B, r}), "argument x has 19 columns, expected n = 20"));
  CHECK(contains(call({x.data(), B, n}, {z.data(), B, r - 1}), "argument z has 5 columns, expected r = 6"));
  CHECK(contains(call({x.data(), B, n}, {z.data(), B - 1, r}), "argument z has 2 rows, expected x.rows = 3"));
  CHECK(contains(call({nullptr, B, n}, {z.data(), B, r}), "argument x is null with shape 3 x 20"));
  CHECK(contains(call({x.data(), B, n}, {nullptr, B, r}), "argument z is null with shape 3 x 6"));
  CHECK(contains(call({x.data(), B, n, n - 1}, {z.data(), B, r}), "argument x has row_stride = 19 < cols = 20"));
  CHECK(contains(call({x.data(), -1, n}, {z.data(), B, r}), "argument x has negative shape -1 x 20"));
  CHECK(contains(call({z.data(), 1, n}, {z.data() + 2, 1, r}), "output z overlaps input x"));
  CHECK(untouched());
  // An empty batch is valid and writes nothing.
  CHECK(call({nullptr, 0, n}, {nullptr, 0, r}) == "");
}

TEST_CASE_TEMPLATE("unsketch_grad and materialize refuse malformed views and write nothing", Dist, compact::Gaussian,
                   compact::Rademacher) {
  const index_t n = 20, r = 6, m = 4;
  const compact::Projector<compact::Cpu, Dist, double> proj(n, r, kState);
  std::vector<double> g(m * r, 1.0), out(m * n, -7.0), p(n * r, -7.0);
  const auto untouched = [](const std::vector<double>& v) {
    for (double e : v)
      if (e != -7.0) return false;
    return true;
  };
  const auto unsketch = [&](MatrixView<const double> gv, MatrixView<double> ov) {
    return error_of([&] { proj.unsketch_grad(gv, ov, 1.0, 0.0); });
  };
  CHECK(contains(unsketch({g.data(), m, r + 1}, {out.data(), m, n}), "argument g has 7 columns, expected r = 6"));
  CHECK(contains(unsketch({g.data(), m, r}, {out.data(), m, n + 1}), "argument out has 21 columns, expected n = 20"));
  CHECK(contains(unsketch({g.data(), m, r}, {out.data(), m + 1, n}), "argument out has 5 rows, expected g.rows = 4"));
  CHECK(contains(unsketch({nullptr, m, r}, {out.data(), m, n}), "argument g is null"));
  CHECK(contains(unsketch({g.data(), m, r}, {out.data(), m, n, 3}), "argument out has row_stride = 3 < cols = 20"));
  CHECK(contains(unsketch({out.data(), 1, r}, {out.data(), 1, n}), "output out overlaps input g"));
  CHECK(untouched(out));
  CHECK(contains(error_of([&] { proj.materialize(MatrixView<double>(p.data(), n - 1, r)); }),
                 "argument p has 19 rows, expected n = 20"));
  CHECK(contains(error_of([&] { proj.materialize(MatrixView<double>(p.data(), n, r + 1)); }),
                 "argument p has 7 columns, expected r = 6"));
  CHECK(contains(error_of([&] { proj.materialize(MatrixView<double>(nullptr, n, r)); }), "argument p is null"));
  CHECK(untouched(p));
}

TEST_CASE("compressed_grad refuses mismatched shapes and overlapping output, and writes nothing") {
  const index_t B = 5, m = 4, r = 3;
  std::vector<float> dy(B * m, 1.0f), z(B * r, 1.0f), g(m * r, -7.0f);
  const auto call = [&](MatrixView<const float> a, MatrixView<const float> b, MatrixView<float> c) {
    return error_of([&] { compact::compressed_grad<float>(compact::Cpu{}, a, b, c, 0.0f); });
  };
  CHECK(contains(call({dy.data(), B, m}, {z.data(), B - 1, r}, {g.data(), m, r}),
                 "argument z has 4 rows, expected dy.rows = 5"));
  CHECK(contains(call({dy.data(), B, m}, {z.data(), B, r}, {g.data(), m - 1, r}),
                 "argument g has 3 rows, expected dy.cols = 4"));
  CHECK(contains(call({dy.data(), B, m}, {z.data(), B, r}, {g.data(), m, r - 1}),
                 "argument g has 2 columns, expected z.cols = 3"));
  CHECK(contains(call({nullptr, B, m}, {z.data(), B, r}, {g.data(), m, r}), "argument dy is null"));
  CHECK(contains(call({g.data(), 1, m}, {z.data(), 1, r}, {g.data(), m, r}), "output g overlaps input dy"));
  for (float v : g) CHECK(v == -7.0f);
}

TEST_CASE("compressed_grad accumulates micro-batches with beta = 1 and overwrites with beta = 0") {
  const compact::RowMatrix<double> dy1 = compact::RowMatrix<double>::Random(7, 5);
  const compact::RowMatrix<double> z1 = compact::RowMatrix<double>::Random(7, 3);
  const compact::RowMatrix<double> dy2 = compact::RowMatrix<double>::Random(4, 5);
  const compact::RowMatrix<double> z2 = compact::RowMatrix<double>::Random(4, 3);
  compact::RowMatrix<double> g = compact::RowMatrix<double>::Constant(5, 3, std::nan(""));
  compact::compressed_grad<double>(dy1, z1, g, 0.0);
  compact::compressed_grad<double>(dy2, z2, g, 1.0);
  const Eigen::MatrixXd want = dy1.transpose() * z1 + dy2.transpose() * z2;
  CHECK((g - want).cwiseAbs().maxCoeff() <= 1e-13);
  // An empty micro-batch with beta = 0 zeroes the gradient.
  compact::compressed_grad<double>(compact::RowMatrix<double>(0, 5), compact::RowMatrix<double>(0, 3), g, 0.0);
  CHECK(g.cwiseAbs().maxCoeff() == 0.0);
}

TEST_CASE_TEMPLATE_DEFINE("views whose span overflows are refused before anything is written", Dist,
                          span_overflow_refused) {
  const index_t n = 20, r = 6;
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, kState);
  std::vector<float> x(4 * n, 1.0f), z(4 * r, -7.0f), g(4 * r, 1.0f), out(4 * n, -7.0f);
  const auto sketch = [&](MatrixView<const float> xv, MatrixView<float> zv) {
    return error_of([&] { proj.sketch(xv, zv); });
  };
  const index_t huge = index_t{1} << 62;
  // rows = 2^62: the old extent computation wrapped and the call wrote out of bounds.
  CHECK(contains(sketch({x.data(), huge, n}, {z.data(), huge, r}),
                 "argument x with rows = 4611686018427387904, cols = 20, row_stride = 20 spans"));
  // row_stride = 2^62: rows aliased through wrap-around and the call returned normally.
  CHECK(contains(sketch({x.data(), 3, n, huge}, {z.data(), 3, r}), "argument x with rows = 3"));
  CHECK(contains(sketch({x.data(), 3, n}, {z.data(), 3, r, huge}), "argument z with rows = 3"));
  for (float v : z) CHECK(v == -7.0f);
  const auto unsketch = [&](MatrixView<const float> gv, MatrixView<float> ov) {
    return error_of([&] { proj.unsketch_grad(gv, ov, 1.0f, 1.0f); });
  };
  CHECK(contains(unsketch({g.data(), 3, r, huge}, {out.data(), 3, n}), "argument g with rows = 3"));
  CHECK(contains(unsketch({g.data(), 3, r}, {out.data(), 3, n, huge / 2}), "argument out with rows = 3"));
  for (float v : out) CHECK(v == -7.0f);
  std::vector<float> p(n * r, -7.0f);
  CHECK(contains(error_of([&] { proj.materialize(MatrixView<float>(p.data(), n, r, huge)); }), "argument p with"));
  for (float v : p) CHECK(v == -7.0f);
}
TEST_CASE_TEMPLATE_APPLY(span_overflow_refused, compact_test::AllDistributions);

TEST_CASE("results that cannot exist are refused with compact::error, not std::bad_alloc") {
  using G = compact::Projector<compact::Cpu, compact::Gaussian, float>;
  // n * r at kMaxDim overflows the index type.
  CHECK(contains(error_of([] { (void)G(compact::kMaxDim, compact::kMaxDim, kState).materialize(); }),
                 "Projector::materialize: P = 4294967293 * 4294967293"));
  // 2^32 x 2^20 floats = 2^54 bytes: beyond every x86-64 address space, so the allocation itself fails.
  CHECK(contains(error_of([] { (void)G(compact::kMaxDim, index_t{1} << 20, kState).materialize(); }),
                 "Projector::materialize: cannot allocate P"));
  // unsketch_grad's Eigen convenience returns m x n: 2^40 x 2^20 doubles cannot be allocated. The view of g is
  // checked (its span fits) but never read: the result is allocated first.
  const compact::Projector<compact::Cpu, compact::Rademacher, double> wide(index_t{1} << 20, 4, kState);
  double dummy[4] = {};
  const Eigen::Map<const compact::RowMatrix<double>> g(dummy, index_t{1} << 40, 4);
  CHECK(
      contains(error_of([&] { (void)wide.unsketch_grad(g); }), "Projector::unsketch_grad: cannot allocate the result"));
}
