// SPDX-License-Identifier: MIT
/// Projector<Cpu, Gaussian|Rademacher, float|double>: products against materialize(), adjointness, moments,
/// distribution, thread-count invariance, strides and panel edges.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

using compact::index_t;
using compact::RowMatrix;
using compact_test::gamma;
using compact_test::random_matrix;

namespace {

/// max over entries of |got - want| / bound, where want and bound are computed in double; <= 1 means within the
/// rigorous rounding-error bound of a length-k product.
template <class Scalar>
double error_over_bound(const RowMatrix<Scalar>& got, const Eigen::MatrixXd& want, const Eigen::MatrixXd& abs_bound,
                        index_t k) {
  const double g = gamma<Scalar>(k) + std::numeric_limits<double>::epsilon() * 4;
  double worst = 0;
  for (index_t i = 0; i < got.rows(); ++i)
    for (index_t j = 0; j < got.cols(); ++j) {
      const double bound = g * abs_bound(i, j) + std::numeric_limits<double>::min();
      worst = std::max(worst, std::abs(double(got(i, j)) - want(i, j)) / bound);
    }
  return worst;
}

const compact::SketchState kState{2024, 0x100000001ull, 0x300000002ull};

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("sketch equals x times the materialized P within the fp32 GEMM error bound", T, sketch_id) {
  using Dist = typename T::first_type;
  using Scalar = typename T::second_type;
  const index_t shapes[][3] = {{7, 300, 130}, {33, 64, 64}, {5, 1, 1}, {300, 257, 255}, {1, 1000, 3}};
  for (const auto& s : shapes) {
    const index_t B = s[0], n = s[1], r = s[2];
    CAPTURE(B);
    CAPTURE(n);
    CAPTURE(r);
    const compact::Projector<compact::Cpu, Dist, Scalar> proj(n, r, kState);
    CHECK(proj.in_dim() == n);
    CHECK(proj.rank() == r);
    CHECK(proj.state() == kState);
    const RowMatrix<Scalar> x = random_matrix<Scalar>(B, n, 1);
    const RowMatrix<Scalar> p = proj.materialize();
    const RowMatrix<Scalar> z = proj.sketch(x);
    const Eigen::MatrixXd xd = x.template cast<double>(), pd = p.template cast<double>();
    CHECK(error_over_bound<Scalar>(z, xd * pd, xd.cwiseAbs() * pd.cwiseAbs(), n) <= 1.0);

    // unsketch_grad: out = alpha g P^T + beta out.
    const RowMatrix<Scalar> g = random_matrix<Scalar>(B, r, 2);
    RowMatrix<Scalar> out = random_matrix<Scalar>(B, n, 3);
    const Eigen::MatrixXd out0 = out.template cast<double>(), gd = g.template cast<double>();
    const Scalar alpha = Scalar(-0.75), beta = Scalar(0.5);
    proj.unsketch_grad(g, out, alpha, beta);
    const Eigen::MatrixXd want = double(alpha) * gd * pd.transpose() + double(beta) * out0;
    const Eigen::MatrixXd bound =
        std::abs(double(alpha)) * gd.cwiseAbs() * pd.cwiseAbs().transpose() + std::abs(double(beta)) * out0.cwiseAbs();
    CHECK(error_over_bound<Scalar>(out, want, bound, r + 2) <= 1.0);
    const RowMatrix<Scalar> plain = proj.unsketch_grad(g);
    CHECK(error_over_bound<Scalar>(plain, gd * pd.transpose(), gd.cwiseAbs() * pd.cwiseAbs().transpose(), r) <= 1.0);
  }
}
TEST_CASE_TEMPLATE_INVOKE(sketch_id, std::pair<compact::Gaussian, float>, std::pair<compact::Gaussian, double>,
                          std::pair<compact::Rademacher, float>, std::pair<compact::Rademacher, double>);

TEST_CASE_TEMPLATE("the adjoint identity <xP, y> = <x, yP^T> holds to double rounding", Dist, compact::Gaussian,
                   compact::Rademacher) {
  const index_t B = 9, n = 200, r = 70;
  const compact::Projector<compact::Cpu, Dist, double> proj(n, r, kState);
  const RowMatrix<double> x = random_matrix<double>(B, n, 4), y = random_matrix<double>(B, r, 5);
  const double lhs = (proj.sketch(x).array() * y.array()).sum();
  const double rhs = (x.array() * proj.unsketch_grad(y).array()).sum();
  // Both sides are sums of B n r products of magnitude ~ |x||y||P|; 1e-12 relative covers double rounding.
  const double scale = (x.cwiseAbs() * proj.materialize().cwiseAbs()).cwiseProduct(y.cwiseAbs()).sum();
  CHECK(std::abs(lhs - rhs) <= 1e-12 * scale);
}

TEST_CASE_TEMPLATE("beta = 0 overwrites the output without reading it, beta = 1 accumulates", Dist, compact::Gaussian,
                   compact::Rademacher) {
  const compact::Projector<compact::Cpu, Dist, float> proj(40, 12, kState);
  const RowMatrix<float> g = random_matrix<float>(6, 12, 6);
  RowMatrix<float> out = RowMatrix<float>::Constant(6, 40, std::numeric_limits<float>::quiet_NaN());
  proj.unsketch_grad(g, out, 1.0f, 0.0f);
  CHECK(out.allFinite());
  const RowMatrix<float> once = out;
  proj.unsketch_grad(g, out, 1.0f, 1.0f);
  CHECK((out - 2.0f * once).cwiseAbs().maxCoeff() <= 1e-5f * once.cwiseAbs().maxCoeff());
}

TEST_CASE_TEMPLATE("views with row strides give the same bits as contiguous matrices", Dist, compact::Gaussian,
                   compact::Rademacher) {
  const index_t B = 10, n = 150, r = 40, pad = 7;
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, kState);
  const RowMatrix<float> x = random_matrix<float>(B, n, 7);
  RowMatrix<float> xs = RowMatrix<float>::Zero(B, n + pad);
  xs.leftCols(n) = x;
  RowMatrix<float> zs = RowMatrix<float>::Constant(B, r + pad, 42.0f);
  proj.sketch(compact::MatrixView<const float>(xs.data(), B, n, n + pad),
              compact::MatrixView<float>(zs.data(), B, r, r + pad));
  const RowMatrix<float> z = proj.sketch(x);
  CHECK((zs.leftCols(r) - z).cwiseAbs().maxCoeff() == 0.0f);
  CHECK((zs.rightCols(pad).array() == 42.0f).all());  // padding untouched

  RowMatrix<float> ps = RowMatrix<float>::Constant(n, r + pad, 42.0f);
  proj.materialize(compact::MatrixView<float>(ps.data(), n, r, r + pad));
  CHECK((ps.leftCols(r) - proj.materialize()).cwiseAbs().maxCoeff() == 0.0f);
  CHECK((ps.rightCols(pad).array() == 42.0f).all());
}

TEST_CASE_TEMPLATE("different states give different matrices and one state gives one matrix", Dist, compact::Gaussian,
                   compact::Rademacher) {
  const index_t n = 64, r = 32;
  const RowMatrix<float> a = compact::Projector<compact::Cpu, Dist, float>(n, r, kState).materialize();
  const RowMatrix<float> b = compact::Projector<compact::Cpu, Dist, float>(n, r, kState).materialize();
  CHECK((a - b).cwiseAbs().maxCoeff() == 0.0f);
  for (int field = 0; field < 3; ++field) {
    compact::SketchState s = kState;
    (field == 0 ? s.seed : field == 1 ? s.stream : s.window) ^= 1;
    const RowMatrix<float> c = compact::Projector<compact::Cpu, Dist, float>(n, r, s).materialize();
    // Two independent matrices agree in an entry with probability 1/2 (Rademacher) or ~0 (Gaussian).
    CHECK((a.array() == c.array()).count() < n * r * 3 / 4);
  }
}

TEST_CASE("E[P P^T] = I and E|P^T g|^2 = |g|^2 over many states") {
  // Gaussian: (P P^T)_ii = sum_j P_ij^2 has mean 1 and variance 2/r, off-diagonal entries mean 0 and variance 1/r.
  // Rademacher: the diagonal is exactly 1, off-diagonal variance 1/r. |P^T g|^2 has mean |g|^2 and variance
  // 2|g|^4/r (Gaussian; smaller for Rademacher). Averages over S states have standard deviations
  // sqrt(var / S); the tolerance is 5 of them (fixed seeds, so the test is deterministic).
  const index_t n = 16, r = 8;
  const int S = 2000;
  const Eigen::VectorXd g = random_matrix<double>(n, 1, 8).col(0);
  Eigen::MatrixXd sum_g = Eigen::MatrixXd::Zero(n, n), sum_r = Eigen::MatrixXd::Zero(n, n);
  double norm_g = 0, norm_r = 0;
  for (int s = 0; s < S; ++s) {
    const compact::SketchState st{99, 5, std::uint64_t(s)};
    const RowMatrix<double> pg = compact::Projector<compact::Cpu, compact::Gaussian, double>(n, r, st).materialize();
    const RowMatrix<double> pr = compact::Projector<compact::Cpu, compact::Rademacher, double>(n, r, st).materialize();
    sum_g += pg * pg.transpose();
    sum_r += pr * pr.transpose();
    norm_g += (pg.transpose() * g).squaredNorm();
    norm_r += (pr.transpose() * g).squaredNorm();
  }
  const Eigen::MatrixXd eye = Eigen::MatrixXd::Identity(n, n);
  const Eigen::MatrixXd dev_g = sum_g / S - eye, dev_r = sum_r / S - eye;
  const double sd_diag = std::sqrt(2.0 / (r * S)), sd_off = std::sqrt(1.0 / (r * S));
  CHECK(dev_g.diagonal().cwiseAbs().maxCoeff() <= 5 * sd_diag);
  CHECK((dev_g - Eigen::MatrixXd(dev_g.diagonal().asDiagonal())).cwiseAbs().maxCoeff() <= 5 * sd_off);
  // Rademacher diagonal: r (fl32(1/sqrt(r)))^2, off 1 only by the scale's fp32 rounding: |error| <= 2 u (1 + u).
  CHECK(dev_r.diagonal().cwiseAbs().maxCoeff() <= 2.0 * 0x1p-24 * (1 + 0x1p-24) + 1e-15);
  CHECK((dev_r - Eigen::MatrixXd(dev_r.diagonal().asDiagonal())).cwiseAbs().maxCoeff() <= 5 * sd_off);
  const double g2 = g.squaredNorm(), sd_norm = g2 * std::sqrt(2.0 / (r * S));
  CHECK(std::abs(norm_g / S - g2) <= 5 * sd_norm);
  CHECK(std::abs(norm_r / S - g2) <= 5 * sd_norm);
}

TEST_CASE_TEMPLATE("the decompressed gradient G P P^T is an unbiased estimate of G", Dist, compact::Gaussian,
                   compact::Rademacher) {
  // G = dy^T x, compressed Ghat = dy^T (x P) = G P, decompressed Ghat P^T = G P P^T. For Gaussian P each entry
  // (G P P^T)_ab has variance (|G_a|^2 + G_ab^2)/r; Rademacher's is no larger. The mean over S states deviates from
  // G_ab by at most 5 standard deviations sqrt((|G_a|^2 + G_ab^2) / (r S)).
  const index_t B = 6, m = 5, n = 12, r = 4;
  const int S = 3000;
  const RowMatrix<double> dy = random_matrix<double>(B, m, 9), x = random_matrix<double>(B, n, 10);
  const Eigen::MatrixXd G = dy.transpose() * x;
  Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(m, n);
  RowMatrix<double> ghat(m, r), est(m, n);
  for (int s = 0; s < S; ++s) {
    const compact::Projector<compact::Cpu, Dist, double> proj(n, r, compact::SketchState{7, 1, std::uint64_t(s)});
    compact::compressed_grad<double>(dy, proj.sketch(x), ghat, 0.0);
    proj.unsketch_grad(ghat, est);
    sum += est;
  }
  const Eigen::MatrixXd mean = sum / S;
  for (index_t a = 0; a < m; ++a)
    for (index_t b = 0; b < n; ++b) {
      const double sd = std::sqrt((G.row(a).squaredNorm() + G(a, b) * G(a, b)) / (double(r) * S));
      CHECK(std::abs(mean(a, b) - G(a, b)) <= 5 * sd);
    }
}

TEST_CASE("Gaussian entries pass a Kolmogorov-Smirnov test per Box-Muller lane") {
  // sqrt(r) P_ij should be N(0, 1). With N samples per lane, the KS statistic exceeds 1.95/sqrt(N) with
  // probability 0.001 under the null; each of the 4 lanes is tested separately so a wrong lane cannot hide.
  const index_t n = 512, r = 512;
  const RowMatrix<double> p =
      compact::Projector<compact::Cpu, compact::Gaussian, double>(n, r, compact::SketchState{3, 1, 4}).materialize();
  for (index_t lane = 0; lane < 4; ++lane) {
    std::vector<double> v;
    for (index_t i = 0; i < n; ++i)
      for (index_t j = lane; j < r; j += 4) v.push_back(p(i, j) * std::sqrt(double(r)));
    std::sort(v.begin(), v.end());
    const double N = double(v.size());
    double d = 0;
    for (std::size_t k = 0; k < v.size(); ++k) {
      const double cdf = 0.5 * std::erfc(-v[k] / std::sqrt(2.0));
      d = std::max({d, std::abs(cdf - double(k) / N), std::abs(double(k + 1) / N - cdf)});
    }
    CAPTURE(lane);
    CHECK(d <= 1.95 / std::sqrt(N));
  }
}

TEST_CASE("Rademacher entries are exactly +-1/sqrt(r) and balanced") {
  const index_t n = 300, r = 200;
  const RowMatrix<float> p = compact::Projector<compact::Cpu, compact::Rademacher, float>(n, r, kState).materialize();
  const float s = 1.0f / std::sqrt(float(r));
  CHECK((p.array().abs() == s).all());
  // The count of positive entries is Binomial(n r, 1/2): standard deviation sqrt(n r)/2, tolerance 5 of them.
  const double pos = double((p.array() > 0).count());
  CHECK(std::abs(pos - n * r / 2.0) <= 5 * std::sqrt(double(n * r)) / 2);
}

#if defined(_OPENMP)
TEST_CASE_TEMPLATE("results are bitwise identical for 1 and 2 threads", Dist, compact::Gaussian, compact::Rademacher) {
  const index_t B = 300, n = 700, r = 300, m = 260;
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, kState);
  const RowMatrix<float> x = random_matrix<float>(B, n, 11), g = random_matrix<float>(m, r, 12);
  const RowMatrix<float> dy = random_matrix<float>(B, m, 13);
  const int saved = omp_get_max_threads();
  RowMatrix<float> z[2], out[2], p[2], gc[2];
  for (int t = 0; t < 2; ++t) {
    omp_set_num_threads(t + 1);
    z[t] = proj.sketch(x);
    out[t] = proj.unsketch_grad(g);
    p[t] = proj.materialize();
    gc[t] = compact::compressed_grad<float>(dy, z[t]);
  }
  omp_set_num_threads(saved);
  CHECK((z[0].array() == z[1].array()).all());
  CHECK((out[0].array() == out[1].array()).all());
  CHECK((p[0].array() == p[1].array()).all());
  CHECK((gc[0].array() == gc[1].array()).all());
}
#endif
