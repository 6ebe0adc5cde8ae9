// SPDX-License-Identifier: MIT
/// The GEMM engines (cpu/gemm_engine.hpp, cpu/blas.hpp): correct products on each, the engine chosen per projector at
/// run time, both engines in one program and across translation units, and bits independent of the thread count.
///
/// Built twice: test_blas without a BLAS (only the Eigen engine exists) and, where OpenBLAS is installed,
/// test_blas_openblas linked with compact::blas (both engines); COMPACT_TEST_EXPECT_BLAS says which. Both include a
/// second translation unit compiled without the BLAS header (blas_second_tu.cpp).
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "cpu/blas_second_tu.hpp"
#include "support.hpp"

#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#if !defined(COMPACT_TEST_EXPECT_BLAS)
#error "tests/CMakeLists.txt defines COMPACT_TEST_EXPECT_BLAS (0 or 1)"
#endif
#if COMPACT_TEST_EXPECT_BLAS
#include <compact/cpu/blas.hpp>
#endif

namespace {

using compact::GemmEngine;
using compact::index_t;
using compact_test::error_of;

template <class Scalar>
compact::RowMatrix<Scalar> uniform(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  compact::RowMatrix<Scalar> m(rows, cols);
  for (index_t k = 0; k < m.size(); ++k) m.data()[k] = static_cast<Scalar>(u(rng));
  return m;
}

template <class Scalar>
bool same_bits(const compact::RowMatrix<Scalar>& a, const compact::RowMatrix<Scalar>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(Scalar) * static_cast<std::size_t>(a.size())) == 0;
}

/// The engines this executable has: Eigen always, the BLAS when linked with compact::blas.
std::vector<GemmEngine> engines() {
  std::vector<GemmEngine> out{GemmEngine::kEigen};
  if (compact::gemm_engine_available(GemmEngine::kBlas)) out.push_back(GemmEngine::kBlas);
  return out;
}

#if COMPACT_TEST_EXPECT_BLAS && defined(OPENBLAS_VERSION)
// Sets both thread pools (compact's OpenMP team and OpenBLAS's) for the scope.
struct Threads {
  explicit Threads(int n) {
    openblas_set_num_threads(n);
#if defined(_OPENMP)
    omp_set_num_threads(n);
#endif
  }
  ~Threads() {
    openblas_set_num_threads(2);
#if defined(_OPENMP)
    omp_set_num_threads(2);
#endif
  }
};
#endif

}  // namespace

TEST_CASE("the default engine is the BLAS exactly when the executable links one, in every translation unit") {
  const GemmEngine expected = COMPACT_TEST_EXPECT_BLAS ? GemmEngine::kBlas : GemmEngine::kEigen;
  CHECK(compact::gemm_engine_available(GemmEngine::kEigen));
  CHECK(compact::gemm_engine_available(GemmEngine::kBlas) == bool(COMPACT_TEST_EXPECT_BLAS));
  CHECK(compact::default_gemm_engine() == expected);
  CHECK(compact_test::default_engine_in_second_tu() == expected);
  const compact::Projector<compact::Cpu, compact::Rademacher, float> proj(64, 8, compact::SketchState{1, 2, 3});
  CHECK(proj.gemm_engine() == expected);
  CHECK(std::string(compact::gemm_engine_name(GemmEngine::kEigen)) == "eigen");
  CHECK(std::string(compact::gemm_engine_name(GemmEngine::kBlas)) == "blas");
}

TEST_CASE_TEMPLATE("serial_gemm computes alpha A op(B) + beta C in row-major layout on every engine", Scalar, float,
                   double) {
  const index_t m = 37, n = 29, k = 53;
  const auto a = uniform<Scalar>(m, k, 1);
  const auto b = uniform<Scalar>(k, n, 2);
  const compact::RowMatrix<Scalar> bt = b.transpose();
  const auto c0 = uniform<Scalar>(m, n, 3);
  for (const GemmEngine engine : engines()) {
    CAPTURE(compact::gemm_engine_name(engine));
    const compact::detail::SerialBlasScope serial(engine);
    for (const Scalar beta : {Scalar(0), Scalar(1), Scalar(-0.5)}) {
      const Scalar alpha = Scalar(0.75);
      const compact::RowMatrix<double> expect =
          double(alpha) * (a.template cast<double>() * b.template cast<double>()) +
          double(beta) * c0.template cast<double>();
      // Each element is a k-term dot product of entries in [-1, 1]: |error| <= k eps sum |a_i b_i| + |beta c| eps,
      // below (k + 1) k eps.
      const double tol = double(k + 1) * double(k) * double(std::numeric_limits<Scalar>::epsilon());
      for (const bool trans : {false, true}) {
        compact::RowMatrix<Scalar> c = c0;
        compact::detail::serial_gemm<Scalar>(engine, m, n, k, alpha, a.data(), k, trans ? bt.data() : b.data(),
                                             trans ? k : n, trans, beta, c.data(), n);
        CHECK((c.template cast<double>() - expect).cwiseAbs().maxCoeff() <= tol);
      }
    }
  }
}

TEST_CASE_TEMPLATE("serial_gemm_tn computes alpha A^T B + beta C with A stored k x m, on every engine", Scalar, float,
                   double) {
  const index_t m = 37, n = 29, k = 53;
  const auto at = uniform<Scalar>(k, m + 3, 4);  // a row stride wider than m
  const auto b = uniform<Scalar>(k, n, 5);
  const auto c0 = uniform<Scalar>(m, n, 6);
  for (const GemmEngine engine : engines()) {
    CAPTURE(compact::gemm_engine_name(engine));
    const compact::detail::SerialBlasScope serial(engine);
    for (const Scalar beta : {Scalar(0), Scalar(1), Scalar(-0.5)}) {
      const Scalar alpha = Scalar(0.75);
      const compact::RowMatrix<double> expect =
          double(alpha) * (at.leftCols(m).template cast<double>().transpose() * b.template cast<double>()) +
          double(beta) * c0.template cast<double>();
      const double tol = double(k + 1) * double(k) * double(std::numeric_limits<Scalar>::epsilon());  // as above
      compact::RowMatrix<Scalar> c = c0;
      if (beta == Scalar(0)) c.setConstant(std::numeric_limits<Scalar>::quiet_NaN());  // beta = 0 never reads C
      compact::detail::serial_gemm_tn<Scalar>(engine, m, n, k, alpha, at.data(), m + 3, b.data(), n, beta, c.data(), n);
      CHECK((c.template cast<double>() - expect).cwiseAbs().maxCoeff() <= tol);
    }
  }
}

TEST_CASE("compressed_grad gives dy^T z on every engine, with bits independent of the thread count") {
  const index_t batch = 300, m = 200, r = 48;  // two row blocks of g, the second ragged
  const auto dy = uniform<float>(batch, m, 7);
  const auto z = uniform<float>(batch, r, 8);
  const compact::RowMatrix<double> expect = dy.cast<double>().transpose() * z.cast<double>();
  const double tol = double(batch) * double(batch + 1) * double(std::numeric_limits<float>::epsilon());
  for (const GemmEngine engine : engines()) {
    CAPTURE(compact::gemm_engine_name(engine));
    compact::RowMatrix<float> g1(m, r), g2(m, r);
    (void)g2;
    const auto run = [&](compact::RowMatrix<float>* g) {
      compact::compressed_grad<float>(compact::Cpu{}, compact::detail::as_view<float>(dy),
                                      compact::detail::as_view<float>(z), compact::detail::as_mutable_view<float>(*g),
                                      0.0f, engine);
    };
#if defined(_OPENMP)
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    run(&g1);
    omp_set_num_threads(2);
    run(&g2);
    omp_set_num_threads(saved);
    CHECK(same_bits(g1, g2));
#else
    run(&g1);
#endif
    CHECK((g1.cast<double>() - expect).cwiseAbs().maxCoeff() <= tol);
  }
}

#if defined(_OPENMP)
TEST_CASE("serial_gemm gives the same bits on its own as inside a team of threads, on every engine") {
  // Large enough that Eigen (or a threaded BLAS) would parallelize it, with a different k blocking, if serial_gemm
  // let it.
  const index_t m = 301, n = 257, k = 1031;
  const auto a = uniform<float>(m, k, 4);
  const auto b = uniform<float>(k, n, 5);
  for (const GemmEngine engine : engines()) {
    CAPTURE(compact::gemm_engine_name(engine));
    const compact::detail::SerialBlasScope serial(engine);
    compact::RowMatrix<float> alone(m, n), in_team(m, n);
    compact::detail::serial_gemm<float>(engine, m, n, k, 1.0f, a.data(), k, b.data(), n, false, 0.0f, alone.data(), n);
#pragma omp parallel num_threads(2)
    {
#pragma omp master
      compact::detail::serial_gemm<float>(engine, m, n, k, 1.0f, a.data(), k, b.data(), n, false, 0.0f, in_team.data(),
                                          n);
    }
    CHECK(same_bits(alone, in_team));
  }
}
#endif

TEST_CASE("projectors on each engine agree within GEMM rounding, and a second translation unit gives the same bits") {
  const index_t b = 70, n = 300, r = 45;
  const compact::SketchState state{5, 6, 7};
  const auto x = uniform<float>(b, n, 8);
  const compact::RowMatrix<double> p =
      compact::Projector<compact::Cpu, compact::Gaussian, float>(n, r, state).materialize().cast<double>();
  const compact::RowMatrix<double> expect = x.cast<double>() * p;
  // |error| <= n eps sum_i |x_i p_i| (a float n-term dot product) <= n eps * n max|p| (|x| <= 1); max|p| over this
  // P bounds every term.
  const double tol = double(n) * double(n) * p.cwiseAbs().maxCoeff() * double(std::numeric_limits<float>::epsilon());
  for (const GemmEngine engine : engines()) {
    CAPTURE(compact::gemm_engine_name(engine));
    compact::Projector<compact::Cpu, compact::Gaussian, float> proj(n, r, state);
    proj.set_gemm_engine(engine);
    CHECK(proj.gemm_engine() == engine);
    const compact::RowMatrix<float> z = proj.sketch(x);
    CHECK((z.cast<double>() - expect).cwiseAbs().maxCoeff() <= tol);
    CHECK(same_bits(z, compact_test::sketch_in_second_tu(engine, x, r, state)));
  }
}

TEST_CASE("set_gemm_engine refuses a value that is not an engine and leaves the projector unchanged") {
  compact::Projector<compact::Cpu, compact::Gaussian, double> proj(32, 4, compact::SketchState{1, 1, 1});
  const GemmEngine before = proj.gemm_engine();
  const std::string message = error_of([&] { proj.set_gemm_engine(static_cast<GemmEngine>(7)); });
  CHECK(message.find("Projector::set_gemm_engine: argument engine = 7 is not a GemmEngine") != std::string::npos);
  CHECK(proj.gemm_engine() == before);
}

#if !COMPACT_TEST_EXPECT_BLAS

TEST_CASE("without a registered BLAS the BLAS engine is refused before anything is touched") {
  compact::Projector<compact::Cpu, compact::Gaussian, float> proj(32, 4, compact::SketchState{1, 1, 1});
  const std::string message = error_of([&] { proj.set_gemm_engine(GemmEngine::kBlas); });
  CHECK(message.find("GEMM engine blas is not available") != std::string::npos);
  CHECK(message.find("compact/cpu/blas.hpp") != std::string::npos);
  CHECK(proj.gemm_engine() == GemmEngine::kEigen);
  float c = 5.0f;
  const float one = 1.0f;
  CHECK_THROWS_AS(compact::detail::blas_gemm<float>(1, 1, 1, 1.0f, &one, 1, &one, 1, false, 0.0f, &c, 1),
                  compact::error);
  CHECK(c == 5.0f);
}

#else

TEST_CASE("blas_gemm refuses sizes beyond the 32-bit BLAS integer before touching memory") {
  float dummy = 0.0f;
  CHECK_THROWS_AS(
      compact::detail::blas_gemm<float>(index_t{1} << 31, 1, 1, 1.0f, &dummy, 1, &dummy, 1, false, 0.0f, &dummy, 1),
      compact::error);
  CHECK(dummy == 0.0f);
}

TEST_CASE("the BLAS engine refuses n and row strides beyond the 32-bit BLAS integer before any write") {
  const index_t big = index_t{INT_MAX} + 1;
  const std::string message =
      error_of([&] { compact::Projector<compact::Cpu, compact::Gaussian, float>(big, 1, compact::SketchState{}); });
  CHECK(message.find("Projector: input dimension n = 2147483648 exceeds 2147483647") != std::string::npos);
  compact::Projector<compact::Cpu, compact::Gaussian, float> proj(8, 2, compact::SketchState{});
  // z below x in one buffer: x's claimed span (one row, a huge stride) lies above z, so no overlap is reported.
  float buffer[10] = {3.0f, 3.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  float* z = buffer;
  const float* x = buffer + 2;
  const std::string stride = error_of([&] {
    proj.sketch(compact::MatrixView<const float>{x, 1, 8, big}, compact::MatrixView<float>{z, 1, 2});
  });
  CHECK_MESSAGE(stride.find("argument x has row_stride = 2147483648 > 2147483647") != std::string::npos, stride);
  CHECK(z[0] == 3.0f);
  CHECK(z[1] == 3.0f);
}

#if defined(OPENBLAS_VERSION)
TEST_CASE("SerialBlasScope runs OpenBLAS on one thread and restores the previous count; the Eigen scope is a no-op") {
  openblas_set_num_threads(2);
  {
    const compact::detail::SerialBlasScope scope(GemmEngine::kEigen);
    CHECK(openblas_get_num_threads() == 2);
  }
  {
    const compact::detail::SerialBlasScope scope(GemmEngine::kBlas);
    CHECK(openblas_get_num_threads() == 1);
  }
  CHECK(openblas_get_num_threads() == 2);
  // Overlapping scopes (as from two threads calling projectors): the count comes back only when the last one ends.
  auto first = std::make_unique<compact::detail::SerialBlasScope>(GemmEngine::kBlas);
  auto second = std::make_unique<compact::detail::SerialBlasScope>(GemmEngine::kBlas);
  first.reset();
  CHECK(openblas_get_num_threads() == 1);
  second.reset();
  CHECK(openblas_get_num_threads() == 2);
}

TEST_CASE_TEMPLATE("sketch and unsketch_grad on OpenBLAS are bitwise identical for 1 and 2 threads", Dist,
                   compact::Gaussian, compact::Rademacher) {
  // Large enough that a threaded OpenBLAS would split the GEMM; odd sizes exercise the edge kernels and the k
  // blocking that differs between OpenBLAS's one- and multi-threaded drivers.
  const index_t b = 515, n = 1031, r = 259;
  const compact::Projector<compact::Cpu, Dist, float> proj(n, r, compact::SketchState{9, 8, 7});
  REQUIRE(proj.gemm_engine() == GemmEngine::kBlas);
  const auto x = uniform<float>(b, n, 4);
  const auto g = uniform<float>(b, r, 5);
  const auto w0 = uniform<float>(b, n, 6);
  compact::RowMatrix<float> z1, z2, w1 = w0, w2 = w0;
  {
    Threads one(1);
    z1 = proj.sketch(x);
    proj.unsketch_grad(g, w1, -0.25f, 1.0f);
  }
  {
    Threads two(2);
    z2 = proj.sketch(x);
    proj.unsketch_grad(g, w2, -0.25f, 1.0f);
  }
  CHECK(same_bits(z1, z2));
  CHECK(same_bits(w1, w2));
}
#endif

#endif
