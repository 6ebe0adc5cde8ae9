// SPDX-License-Identifier: MIT
/// Projector<Cpu, Srht, float|double> and the SRHT entry specification: signs, scores, the sample S, the entry
/// formula, products against materialize(), the adjoint, P^T P = (n'/r) I, E[P P^T] = I, thread invariance, bad input.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

using compact::index_t;
using compact::RowMatrix;
using compact::SketchState;
using compact::Srht;
using compact_test::gamma;
using compact_test::popcount;
using compact_test::random_matrix;

namespace {

template <class Scalar>
using SrhtCpu = compact::Projector<compact::Cpu, Srht, Scalar>;
using LongMatrix = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class Scalar>
LongMatrix widen(const RowMatrix<Scalar>& m) {
  return m.template cast<long double>();
}

/// The entry from the written specification, re-derived here from Philox alone (not through compact/spec/srht.hpp).
struct SpecReference {
  compact::Key2x32 key;
  std::uint64_t window;

  explicit SpecReference(const SketchState& s) : key(compact::philox_key(s)), window(s.window) {}

  std::uint32_t sign_bit(index_t k) const {  // block k/128, row 0xFFFFFFFF, bit k%32 of word (k%128)/32
    const compact::Words4x32 x =
        compact::philox4x32_10({{static_cast<std::uint32_t>(k / 128), 0xFFFFFFFFu, static_cast<std::uint32_t>(window),
                                 static_cast<std::uint32_t>(window >> 32)}},
                               key);
    return (x.w[(k % 128) / 32] >> (k % 32)) & 1u;
  }
  std::uint64_t score(index_t k) const {  // block k/2, row 0xFFFFFFFE, (x_{2(k%2)+1} << 32) | x_{2(k%2)}
    const compact::Words4x32 x =
        compact::philox4x32_10({{static_cast<std::uint32_t>(k / 2), 0xFFFFFFFEu, static_cast<std::uint32_t>(window),
                                 static_cast<std::uint32_t>(window >> 32)}},
                               key);
    const int lo = 2 * static_cast<int>(k % 2);
    return (std::uint64_t{x.w[lo + 1]} << 32) | x.w[lo];
  }
  /// S by sorting all n' (score, index) pairs.
  std::vector<index_t> sample(index_t n, index_t r) const {
    index_t np = 1;
    while (np < n) np *= 2;
    std::vector<std::pair<std::uint64_t, index_t>> all;
    for (index_t k = 0; k < np; ++k) all.emplace_back(score(k), k);
    std::sort(all.begin(), all.end());
    std::vector<index_t> s;
    for (index_t j = 0; j < r; ++j) s.push_back(all[static_cast<std::size_t>(j)].second);
    std::sort(s.begin(), s.end());
    return s;
  }
};

const SketchState kSrhtState{0xDEADBEEFCAFEF00Dull, 0x100000003ull, 0x700000001ull};

/// (n, r) shapes: powers of two, non-powers of two (LLM hidden sizes among them), n = r, tiny.
const std::pair<index_t, index_t> kShapes[] = {{1, 1},       {2, 1},      {3, 2},      {5, 5},
                                               {64, 16},     {100, 37},   {1000, 125}, {1000, 1000},
                                               {1024, 1024}, {3000, 750}, {4096, 512}, {11008, 1376}};

}  // namespace

TEST_CASE("next_pow2 and log2_pow2 give the padded length n' and its exponent") {
  CHECK(compact::next_pow2(1) == 1);
  CHECK(compact::next_pow2(2) == 2);
  CHECK(compact::next_pow2(3) == 4);
  CHECK(compact::next_pow2(1000) == 1024);
  CHECK(compact::next_pow2(4096) == 4096);
  CHECK(compact::next_pow2(4097) == 8192);
  CHECK(compact::next_pow2(11008) == 16384);
  CHECK(compact::next_pow2(compact::kMaxDim) == index_t{1} << 32);
  CHECK(compact::log2_pow2(1) == 0);
  CHECK(compact::log2_pow2(16384) == 14);
  static_assert(compact::next_pow2(3000) == 4096, "next_pow2 is constexpr");
}

TEST_CASE("parity64 is popcount mod 2") {
  std::mt19937_64 gen(3);
  for (int t = 0; t < 10000; ++t) {
    const std::uint64_t v = gen() >> (t % 64);
    CHECK(compact::parity64(v) == static_cast<std::uint32_t>(popcount(v) % 2));
  }
  CHECK(compact::parity64(0) == 0);
  CHECK(compact::parity64(~std::uint64_t{0}) == 0);
  CHECK(compact::parity64(std::uint64_t{1} << 63) == 1);
}

TEST_CASE("signs and scores are the Philox blocks of rows 0xFFFFFFFF and 0xFFFFFFFE the specification names") {
  for (const SketchState& s : {SketchState{0, 0, 0}, kSrhtState, SketchState{~0ull, ~0ull, ~0ull}}) {
    const SpecReference ref(s);
    const compact::Key2x32 key = compact::philox_key(s);
    for (index_t k : {index_t{0}, index_t{1}, index_t{2}, index_t{31}, index_t{32}, index_t{127}, index_t{128},
                      index_t{4095}, index_t{16383}, index_t{1} << 20, (index_t{1} << 32) - 1}) {
      CAPTURE(k);
      CHECK(compact::srht_sign_bit(key, s.window, k) == ref.sign_bit(k));
      CHECK(compact::srht_score(key, s.window, k) == ref.score(k));
    }
  }
}

TEST_CASE("srht_sample is r distinct ascending indices below n', the r smallest (score, index) pairs") {
  for (const auto& shape : kShapes) {
    const auto n = shape.first;
    const auto r = shape.second;
    const std::vector<index_t> s = compact::srht_sample(kSrhtState, n, r);
    const index_t np = compact::next_pow2(n);
    CAPTURE(n);
    CAPTURE(r);
    REQUIRE(index_t(s.size()) == r);
    CHECK(std::is_sorted(s.begin(), s.end()));
    CHECK(std::adjacent_find(s.begin(), s.end()) == s.end());
    CHECK(s.front() >= 0);
    CHECK(s.back() < np);
    CHECK(s == SpecReference(kSrhtState).sample(n, r));
  }
  // n = r = n': every column is kept.
  const std::vector<index_t> all = compact::srht_sample(kSrhtState, 256, 256);
  for (index_t k = 0; k < 256; ++k) CHECK(all[static_cast<std::size_t>(k)] == k);
}

TEST_CASE("the sample draws from all n' columns, padding included, with equal frequency") {
  // Over many states each column of the padded Hadamard matrix is kept with probability r / n'.
  const index_t n = 600, r = 100, np = 1024;
  const int states = 400;
  std::vector<int> hits(static_cast<std::size_t>(np), 0);
  for (int t = 0; t < states; ++t) {
    for (index_t k : compact::srht_sample(SketchState{7, 11, static_cast<std::uint64_t>(t)}, n, r)) {
      ++hits[static_cast<std::size_t>(k)];
    }
  }
  // Binomial(400, 100/1024): mean 39.1, sd 5.9; every column within 7 sd over 1024 columns.
  const double mean = states * double(r) / double(np), sd = std::sqrt(mean * (1 - double(r) / double(np)));
  int padded_hits = 0;
  for (index_t k = 0; k < np; ++k) {
    CHECK(std::abs(hits[static_cast<std::size_t>(k)] - mean) <= 7 * sd);
    if (k >= n) padded_hits += hits[static_cast<std::size_t>(k)];
  }
  CHECK(padded_hits > 0);
}

TEST_CASE_TEMPLATE("materialize matches d_i (-1)^popcount(i & S_j) / sqrt(r) entry for entry", Scalar, float, double) {
  for (const auto& shape : kShapes) {
    const auto n = shape.first;
    const auto r = shape.second;
    if (n > 4096) continue;
    const SrhtCpu<Scalar> proj(n, r, kSrhtState);
    const RowMatrix<Scalar> p = proj.materialize();
    const SpecReference ref(kSrhtState);
    const std::vector<index_t> s = ref.sample(n, r);
    const float scale = 1.0f / std::sqrt(static_cast<float>(r));  // correctly rounded sqrt and division
    const compact::EntryParams params = compact::entry_params(kSrhtState, r);
    index_t wrong = 0, wrong_core = 0;
    for (index_t i = 0; i < n; ++i) {
      for (index_t j = 0; j < r; ++j) {
        const index_t sj = s[static_cast<std::size_t>(j)];
        const bool negative = (ref.sign_bit(i) + popcount(static_cast<std::uint64_t>(i & sj))) % 2 != 0;
        const float want = negative ? -scale : scale;
        wrong += compact::fp32::bits_of(static_cast<float>(p(i, j))) != compact::fp32::bits_of(want) ||
                 p(i, j) != static_cast<Scalar>(want);
        wrong_core += compact::srht_entry(params, i, sj) != want;
      }
    }
    CAPTURE(n);
    CAPTURE(r);
    CHECK(wrong == 0);
    CHECK(wrong_core == 0);
  }
}

TEST_CASE_TEMPLATE("the accessors expose n', S, d and the scale of the specification", Scalar, float, double) {
  const SrhtCpu<Scalar> proj(3000, 750, kSrhtState);
  CHECK(proj.in_dim() == 3000);
  CHECK(proj.rank() == 750);
  CHECK(proj.state() == kSrhtState);
  CHECK(proj.padded_dim() == 4096);
  CHECK(proj.sample() == compact::srht_sample(kSrhtState, 3000, 750));
  CHECK(proj.scale() == static_cast<Scalar>(compact::rank_scale(750)));
  CHECK(proj.scratch_bytes_per_thread() == 4096 * sizeof(Scalar));
  const SpecReference ref(kSrhtState);
  REQUIRE(proj.signs().size() == 3000);
  for (index_t k = 0; k < 3000; ++k) CHECK(proj.signs()[static_cast<std::size_t>(k)] == (ref.sign_bit(k) ? -1 : 1));
}

TEST_CASE_TEMPLATE("sketch equals x times materialize() within the FWHT rounding bound", Scalar, float, double) {
  for (const auto& shape : kShapes) {
    const auto n = shape.first;
    const auto r = shape.second;
    const SrhtCpu<Scalar> proj(n, r, kSrhtState);
    const index_t rows = 5;
    const RowMatrix<Scalar> x = random_matrix<Scalar>(rows, n, static_cast<std::uint32_t>(n + r));
    const RowMatrix<Scalar> z = proj.sketch(x);
    const LongMatrix p = widen(proj.materialize());
    const LongMatrix want = widen(x) * p;
    const LongMatrix abs_bound = widen(x).cwiseAbs() * p.cwiseAbs();
    // z_j = fl(scale * fl(H pad(x . d))[S_j]): a depth-L addition tree, then one product: gamma_{L+1} sum |x_i P_ij|.
    const long double g = gamma<Scalar, long double>(compact::log2_pow2(proj.padded_dim()) + 1);
    long double worst = 0;
    for (index_t b = 0; b < rows; ++b)
      for (index_t j = 0; j < r; ++j)
        worst = std::max(worst, std::fabs(static_cast<long double>(z(b, j)) - want(b, j)) /
                                    (g * abs_bound(b, j) + std::numeric_limits<long double>::min()));
    CAPTURE(n);
    CAPTURE(r);
    CHECK(worst <= 1.0L);
  }
}

TEST_CASE_TEMPLATE("unsketch_grad equals alpha g materialize()^T + beta out within the FWHT rounding bound", Scalar,
                   float, double) {
  for (const auto& shape : kShapes) {
    const auto n = shape.first;
    const auto r = shape.second;
    const SrhtCpu<Scalar> proj(n, r, kSrhtState);
    const index_t m = 6;
    const RowMatrix<Scalar> g = random_matrix<Scalar>(m, r, static_cast<std::uint32_t>(3 * n + r));
    const RowMatrix<Scalar> out0 = random_matrix<Scalar>(m, n, static_cast<std::uint32_t>(5 * n + r));
    const LongMatrix p = widen(proj.materialize());
    const long double gam = gamma<Scalar, long double>(compact::log2_pow2(proj.padded_dim()) + 3);
    const LongMatrix gpt = widen(g) * p.transpose();
    const LongMatrix abs_gpt = widen(g).cwiseAbs() * p.cwiseAbs().transpose();
    for (const auto& coefficients :
         {std::pair<Scalar, Scalar>{1, 0}, {Scalar(-0.25), 0}, {Scalar(0.5), 1}, {Scalar(2), Scalar(-0.75)}}) {
      const Scalar alpha = coefficients.first, beta = coefficients.second;
      RowMatrix<Scalar> out = out0;
      if (beta == Scalar(0)) out.setConstant(std::numeric_limits<Scalar>::quiet_NaN());  // must not be read
      proj.unsketch_grad(g, out, alpha, beta);
      const LongMatrix want = static_cast<long double>(alpha) * gpt + static_cast<long double>(beta) * widen(out0);
      // fl(H scatter(g)) errs by gamma_L sum_j |g_j|, then d (exact), scale, alpha, + beta out: gamma_{L+3}.
      const LongMatrix abs_bound = std::fabs(static_cast<long double>(alpha)) * abs_gpt +
                                   std::fabs(static_cast<long double>(beta)) * widen(out0).cwiseAbs();
      long double worst = 0;
      for (index_t i = 0; i < m; ++i)
        for (index_t k = 0; k < n; ++k)
          worst = std::max(worst, std::fabs(static_cast<long double>(out(i, k)) - want(i, k)) /
                                      (gam * abs_bound(i, k) + std::numeric_limits<long double>::min()));
      CAPTURE(n);
      CAPTURE(r);
      CAPTURE(alpha);
      CAPTURE(beta);
      CHECK(worst <= 1.0L);
    }
    // The convenience returning a new matrix is alpha = 1, beta = 0.
    const RowMatrix<Scalar> fresh = proj.unsketch_grad(g);
    RowMatrix<Scalar> into(m, n);
    proj.unsketch_grad(g, into, Scalar(1), Scalar(0));
    CHECK(std::memcmp(fresh.data(), into.data(), sizeof(Scalar) * std::size_t(m * n)) == 0);
  }
}

TEST_CASE_TEMPLATE("P^T P = (n'/r) I when n = n': (P/scale)^T (P/scale) = n' I exactly", Scalar, float, double) {
  for (const auto& shape : {std::pair<index_t, index_t>{1024, 1024}, {1024, 256}, {4096, 1000}, {64, 3}}) {
    const auto n = shape.first;
    const auto r = shape.second;
    const SrhtCpu<Scalar> proj(n, r, kSrhtState);
    const double scale = double(compact::rank_scale(r));
    // P = scale Q with Q = +-1 (dividing by scale is exact), and Q^T Q is a matrix of integers <= n, exact in double.
    const Eigen::MatrixXd q = proj.materialize().template cast<double>() / scale;
    CHECK((q.array().abs() == 1.0).all());
    const Eigen::MatrixXd qtq = q.transpose() * q;
    index_t off = 0, diag = 0;
    for (index_t a = 0; a < r; ++a)
      for (index_t b = 0; b < r; ++b) {
        if (a == b) {
          diag += qtq(a, b) != double(n);
        } else {
          off += qtq(a, b) != 0.0;
        }
      }
    CAPTURE(n);
    CAPTURE(r);
    CHECK(off == 0);
    CHECK(diag == 0);
    // scale = fl(1 / fl(sqrt r)) is within 2 u of 1/sqrt(r), so scale^2 n' within 5 u (relative) of n'/r.
    CHECK(std::fabs(double(n) * scale * scale - double(n) / double(r)) <= 5 * 0x1p-24 * double(n) / double(r));
  }
}

TEST_CASE_TEMPLATE("sketch and unsketch_grad are adjoint: <x P, g> = <x, g P^T>", Scalar, float, double) {
  for (const auto& shape : {std::pair<index_t, index_t>{1000, 125}, {4096, 1024}, {11008, 1376}}) {
    const auto n = shape.first;
    const auto r = shape.second;
    const SrhtCpu<Scalar> proj(n, r, kSrhtState);
    const RowMatrix<Scalar> x = random_matrix<Scalar>(3, n, 21);
    const RowMatrix<Scalar> g = random_matrix<Scalar>(3, r, 22);
    const RowMatrix<Scalar> z = proj.sketch(x);
    const RowMatrix<Scalar> y = proj.unsketch_grad(g);
    const long double lhs = (widen(z).cwiseProduct(widen(g))).sum();
    const long double rhs = (widen(x).cwiseProduct(widen(y))).sum();
    // Both sides are the exact bilinear form plus per-element errors gamma_{L+3} |x| |P| |g| (see the tests above).
    const LongMatrix p = widen(proj.materialize());
    const long double mass = (widen(x).cwiseAbs() * p.cwiseAbs()).cwiseProduct(widen(g).cwiseAbs()).sum();
    CAPTURE(n);
    CHECK(std::fabs(lhs - rhs) <= 2 * gamma<Scalar, long double>(compact::log2_pow2(proj.padded_dim()) + 3) * mass);
  }
}

TEST_CASE("E[P P^T] = I: the diagonal is 1 for every state and the off-diagonal averages to 0") {
  // (P P^T)_ii = r scale^2 = 1 (up to the rounding of scale). For i != l, (P P^T)_il = d_i d_l c_il with
  // c_il = (1/r) sum_j (-1)^popcount((i ^ l) & S_j): mean 0 (d independent of S) and E[c^2] = (n' - r)/(r (n' - 1))
  // for a uniform r-subset of a balanced +-1 column. Averaged over K states each off-diagonal entry has standard
  // deviation sqrt(E[c^2]/K); we allow 6 of them for the largest of the n(n-1)/2 entries, and check the mean square.
  const index_t n = 64, r = 16, np = 64;
  const int states = 300;
  Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(n, n);
  for (int t = 0; t < states; ++t) {
    const SrhtCpu<float> proj(n, r, SketchState{42, 3, static_cast<std::uint64_t>(t)});
    const Eigen::MatrixXd p = proj.materialize().cast<double>();
    const Eigen::MatrixXd ppt = p * p.transpose();
    for (index_t i = 0; i < n; ++i) CHECK(std::fabs(ppt(i, i) - 1.0) <= 4 * 0x1p-24);
    sum += ppt;
  }
  const Eigen::MatrixXd mean = sum / states;
  const double ec2 = double(np - r) / (double(r) * double(np - 1));
  const double sd = std::sqrt(ec2 / states);
  double worst = 0, mean_square = 0;
  for (index_t i = 0; i < n; ++i)
    for (index_t l = 0; l < n; ++l)
      if (i != l) {
        worst = std::max(worst, std::fabs(mean(i, l)));
        mean_square += mean(i, l) * mean(i, l) / double(n * (n - 1));
      }
  CHECK(worst <= 6 * sd);
  CHECK(mean_square <= 1.5 * sd * sd);
  CHECK(mean_square >= 0.5 * sd * sd);
}

TEST_CASE_TEMPLATE("float and double projectors hold the same P", Scalar, float, double) {
  const RowMatrix<float> p32 = SrhtCpu<float>(3000, 300, kSrhtState).materialize();
  const RowMatrix<double> p64 = SrhtCpu<double>(3000, 300, kSrhtState).materialize();
  CHECK((p64 - p32.cast<double>()).cwiseAbs().maxCoeff() == 0.0);
}

TEST_CASE("sketch is row by row: a batch, single rows, strided views and every thread count give the same bits") {
  const index_t n = 3000, r = 500, rows = 67;
  const SrhtCpu<float> proj(n, r, kSrhtState);
  const RowMatrix<float> x = random_matrix<float>(rows, n, 77);
  const RowMatrix<float> z = proj.sketch(x);
  for (index_t b : {index_t{0}, index_t{13}, rows - 1}) {
    const RowMatrix<float> zb = proj.sketch(x.row(b));
    CHECK(std::memcmp(zb.data(), z.row(b).data(), sizeof(float) * std::size_t(r)) == 0);
  }
  // Strided input and output views.
  std::vector<float> xs(static_cast<std::size_t>(rows * (n + 5))), zs(static_cast<std::size_t>(rows * (r + 3)), -1.0f);
  for (index_t b = 0; b < rows; ++b)
    for (index_t k = 0; k < n; ++k) xs[static_cast<std::size_t>(b * (n + 5) + k)] = x(b, k);
  proj.sketch(compact::MatrixView<const float>(xs.data(), rows, n, n + 5),
              compact::MatrixView<float>(zs.data(), rows, r, r + 3));
  index_t wrong = 0;
  for (index_t b = 0; b < rows; ++b) {
    for (index_t j = 0; j < r; ++j) wrong += zs[static_cast<std::size_t>(b * (r + 3) + j)] != z(b, j);
    for (index_t j = r; j < r + 3; ++j) wrong += zs[static_cast<std::size_t>(b * (r + 3) + j)] != -1.0f;
  }
  CHECK(wrong == 0);
#if defined(_OPENMP)
  const int saved = omp_get_max_threads();
  const RowMatrix<float> g = random_matrix<float>(rows, r, 78);
  RowMatrix<float> u_ref = proj.unsketch_grad(g);
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    const RowMatrix<float> zt = proj.sketch(x);
    const RowMatrix<float> ut = proj.unsketch_grad(g);
    CAPTURE(threads);
    CHECK(std::memcmp(zt.data(), z.data(), sizeof(float) * std::size_t(rows * r)) == 0);
    CHECK(std::memcmp(ut.data(), u_ref.data(), sizeof(float) * std::size_t(rows * n)) == 0);
  }
  omp_set_num_threads(saved);
#endif
}

TEST_CASE("workspace_bytes(n, r) is a pure function of (n, r) and serves every call whatever the thread count") {
  const std::size_t bytes = SrhtCpu<float>::workspace_bytes(3000, 750);
  CHECK(bytes == std::size_t{SrhtCpu<float>::kMaxTeam} * 4096 * sizeof(float));  // kMaxTeam buffers of n' = 4096
  const SrhtCpu<float> proj(3000, 750, kSrhtState);
  const index_t rows = 1000;  // 125 tasks: every thread of the team gets some
  const RowMatrix<float> x = random_matrix<float>(rows, 3000, 79);
  const RowMatrix<float> z = proj.sketch(x);
  std::vector<std::max_align_t> memory(bytes / sizeof(std::max_align_t) + 1);
#if defined(_OPENMP)
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3, 200}) {
    omp_set_num_threads(threads);
#else
  for (int threads : {1}) {
#endif
    CAPTURE(threads);
    CHECK(SrhtCpu<float>::workspace_bytes(3000, 750) == bytes);
    CHECK(proj.scratch_bytes(rows) <= bytes);
    RowMatrix<float> zw(rows, 750);
    proj.sketch(compact::MatrixView<const float>(x.data(), rows, 3000),
                compact::MatrixView<float>(zw.data(), rows, 750), compact::Workspace{memory.data(), bytes});
    CHECK(std::memcmp(zw.data(), z.data(), sizeof(float) * std::size_t(rows * 750)) == 0);
  }
#if defined(_OPENMP)
  omp_set_num_threads(saved);
#endif
}

TEST_CASE("n = 1 gives P = [d_0] and empty batches are accepted") {
  const SrhtCpu<float> proj(1, 1, kSrhtState);
  CHECK(proj.padded_dim() == 1);
  const float d0 = SpecReference(kSrhtState).sign_bit(0) ? -1.0f : 1.0f;
  CHECK(proj.materialize()(0, 0) == d0);
  RowMatrix<float> x(2, 1);
  x << 3.0f, -0.5f;
  const RowMatrix<float> z = proj.sketch(x);
  CHECK(z(0, 0) == 3.0f * d0);
  CHECK(z(1, 0) == -0.5f * d0);
  const SrhtCpu<float> wide(4096, 1024, kSrhtState);
  CHECK(wide.sketch(RowMatrix<float>(0, 4096)).rows() == 0);
  CHECK(wide.unsketch_grad(RowMatrix<float>(0, 1024)).rows() == 0);
}

TEST_CASE("bad input is refused with compact::error before any output is written") {
  CHECK_THROWS_WITH_AS(SrhtCpu<float>(100, 101, kSrhtState), doctest::Contains("r = 101"), compact::error);
  CHECK_THROWS_AS(SrhtCpu<float>(100, 0, kSrhtState), compact::error);
  CHECK_THROWS_AS(SrhtCpu<float>(0, 1, kSrhtState), compact::error);
  CHECK_THROWS_AS(SrhtCpu<float>(-5, 1, kSrhtState), compact::error);
  CHECK_THROWS_WITH_AS(SrhtCpu<double>(compact::kFwhtMaxLength + 1, 8, kSrhtState), doctest::Contains("n' ="),
                       compact::error);
  CHECK_NOTHROW(SrhtCpu<float>(compact::kFwhtMaxLength, 8, kSrhtState));
  CHECK_THROWS_AS(compact::srht_sample(kSrhtState, 10, 11), compact::error);
  CHECK_THROWS_AS(compact::srht_sample(kSrhtState, 0, 0), compact::error);

  const SrhtCpu<float> proj(1000, 100, kSrhtState);
  RowMatrix<float> x = RowMatrix<float>::Ones(4, 1000);
  RowMatrix<float> z = RowMatrix<float>::Constant(4, 100, 7.0f);
  RowMatrix<float> z_short(3, 100);
  RowMatrix<float> z_narrow(4, 99);
  CHECK_THROWS_WITH_AS(proj.sketch(RowMatrix<float>::Ones(4, 999)), doctest::Contains("expected n = 1000"),
                       compact::error);
  CHECK_THROWS_AS(
      proj.sketch(compact::make_view<const float>(x.data(), 4, 1000), compact::make_view(z_short.data(), 3, 100)),
      compact::error);
  CHECK_THROWS_AS(
      proj.sketch(compact::make_view<const float>(x.data(), 4, 1000), compact::make_view(z_narrow.data(), 4, 99)),
      compact::error);
  CHECK_THROWS_AS(proj.sketch(compact::MatrixView<const float>(nullptr, 4, 1000), compact::make_view(z.data(), 4, 100)),
                  compact::error);
  CHECK_THROWS_AS(
      proj.sketch(compact::MatrixView<const float>(x.data(), 4, 1000, 999), compact::make_view(z.data(), 4, 100)),
      compact::error);
  // Output overlapping the input.
  CHECK_THROWS_AS(
      proj.sketch(compact::make_view<const float>(x.data(), 4, 1000), compact::make_view(x.data() + 10, 4, 100)),
      compact::error);
  CHECK((z.array() == 7.0f).all());

  RowMatrix<float> g = RowMatrix<float>::Ones(4, 100);
  RowMatrix<float> out = RowMatrix<float>::Constant(4, 1000, 5.0f);
  CHECK_THROWS_AS(proj.unsketch_grad(RowMatrix<float>::Ones(4, 101)), compact::error);
  CHECK_THROWS_AS(
      proj.unsketch_grad(compact::make_view<const float>(g.data(), 4, 100), compact::make_view(out.data(), 4, 999)),
      compact::error);
  CHECK_THROWS_AS(
      proj.unsketch_grad(compact::make_view<const float>(g.data(), 4, 100), compact::make_view(out.data(), 3, 1000)),
      compact::error);
  CHECK_THROWS_AS(
      proj.unsketch_grad(compact::make_view<const float>(out.data(), 4, 100), compact::make_view(out.data(), 4, 1000)),
      compact::error);
  CHECK((out.array() == 5.0f).all());
  RowMatrix<float> p_wrong(1000, 99);
  CHECK_THROWS_AS(proj.materialize(compact::make_view(p_wrong.data(), 1000, 99)), compact::error);
}
