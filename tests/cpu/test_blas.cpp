// SPDX-License-Identifier: MIT
/// The optional BLAS engine (cpu/blas.hpp): correct products, and bits independent of the BLAS's thread count.
#include <doctest/doctest.h>

#include <compact/compact.hpp>
#include <compact/cpu/blas.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

using compact::index_t;

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

#if defined(COMPACT_USE_BLAS) && defined(OPENBLAS_VERSION)
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

TEST_CASE_TEMPLATE("serial_gemm computes alpha A op(B) + beta C in row-major layout", Scalar, float, double) {
  const index_t m = 37, n = 29, k = 53;
  const auto a = uniform<Scalar>(m, k, 1);
  const auto b = uniform<Scalar>(k, n, 2);
  const compact::RowMatrix<Scalar> bt = b.transpose();
  const auto c0 = uniform<Scalar>(m, n, 3);
  for (const Scalar beta : {Scalar(0), Scalar(1), Scalar(-0.5)}) {
    const Scalar alpha = Scalar(0.75);
    const compact::RowMatrix<double> expect = double(alpha) * (a.template cast<double>() * b.template cast<double>()) +
                                              double(beta) * c0.template cast<double>();
    // Each element is a k-term dot product of entries in [-1, 1]: |error| <= k eps sum |a_i b_i| + |beta c| eps,
    // below (k + 1) k eps.
    const double tol = double(k + 1) * double(k) * double(std::numeric_limits<Scalar>::epsilon());
    for (const bool trans : {false, true}) {
      compact::RowMatrix<Scalar> c = c0;
      compact::detail::serial_gemm<Scalar>(m, n, k, alpha, a.data(), k, trans ? bt.data() : b.data(), trans ? k : n,
                                           trans, beta, c.data(), n);
      CHECK((c.template cast<double>() - expect).cwiseAbs().maxCoeff() <= tol);
    }
  }
}

#if defined(_OPENMP)
TEST_CASE("serial_gemm gives the same bits on its own as inside a team of threads") {
  // Large enough that Eigen would parallelize it (with a different k blocking) if serial_gemm let it.
  const index_t m = 301, n = 257, k = 1031;
  const auto a = uniform<float>(m, k, 4);
  const auto b = uniform<float>(k, n, 5);
  compact::RowMatrix<float> alone(m, n), in_team(m, n);
  compact::detail::serial_gemm<float>(m, n, k, 1.0f, a.data(), k, b.data(), n, false, 0.0f, alone.data(), n);
#pragma omp parallel num_threads(2)
  {
#pragma omp master
    compact::detail::serial_gemm<float>(m, n, k, 1.0f, a.data(), k, b.data(), n, false, 0.0f, in_team.data(), n);
  }
  CHECK(same_bits(alone, in_team));
}
#endif

#if defined(COMPACT_USE_BLAS)

TEST_CASE("blas_gemm refuses sizes beyond the 32-bit BLAS integer before touching memory") {
  float dummy = 0.0f;
  CHECK_THROWS_AS(
      compact::detail::blas_gemm<float>(index_t{1} << 31, 1, 1, 1.0f, &dummy, 1, &dummy, 1, false, 0.0f, &dummy, 1),
      compact::error);
  CHECK(dummy == 0.0f);
}

#if defined(OPENBLAS_VERSION)
TEST_CASE("SerialBlasScope runs OpenBLAS on one thread and restores the previous count") {
  openblas_set_num_threads(2);
  {
    const compact::detail::SerialBlasScope scope;
    CHECK(openblas_get_num_threads() == 1);
  }
  CHECK(openblas_get_num_threads() == 2);
  // Overlapping scopes (as from two threads calling projectors): the count comes back only when the last one ends.
  auto first = std::make_unique<compact::detail::SerialBlasScope>();
  auto second = std::make_unique<compact::detail::SerialBlasScope>();
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

#if defined(COMPACT_TEST_EXPECT_BLAS)
TEST_CASE("the GEMM engine is the one the build configured") {
  // tests/CMakeLists.txt says which engine this executable was configured with (the CMake option, or the
  // OpenBLAS variant of this test): the option must reach the headers.
  CHECK(compact::detail::kUseBlas == (COMPACT_TEST_EXPECT_BLAS != 0));
}
#endif
