// SPDX-License-Identifier: MIT
/// What an integration (compact_torch's C++, the libtorch examples) takes from compact's public API instead of
/// namespace detail: the walks over the distribution list, compressed_grad's argument checks for an integration that
/// forms Ghat with its own GEMM, and the CPU backend's thread count. Bad input is refused naming the argument and its
/// values, before anything is called or written.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "support.hpp"

#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

using compact::index_t;
using compact::MatrixView;
using compact_test::error_of;

namespace {

template <class Dist>
std::string name_of(Dist) {
  return compact::DistributionTraits<Dist>::kName;
}

}  // namespace

TEST_CASE("for_each_distribution walks the list in record-code order") {
  std::vector<std::string> names;
  compact::for_each_distribution([&](auto dist) { names.push_back(name_of(dist)); });
  CHECK(names == std::vector<std::string>{"Gaussian", "Rademacher", "Srht"});
  // Another list is walked in its own order.
  using Other = compact::TypeList<compact::Srht, compact::Gaussian>;
  names.clear();
  compact::for_each_distribution<Other>([&](auto dist) { names.push_back(name_of(dist)); });
  CHECK(names == std::vector<std::string>{"Srht", "Gaussian"});
}

TEST_CASE("visit_distribution_at gives the tag at a position and refuses one past the list, naming index and list") {
  std::vector<std::string> walked;
  compact::for_each_distribution([&](auto dist) { walked.push_back(name_of(dist)); });
  for (std::size_t i = 0; i < compact::Distributions::kSize; ++i) {
    std::string visited;
    compact::visit_distribution_at(i, [&](auto dist) { visited = name_of(dist); });
    CHECK(visited == walked[i]);
  }
  int calls = 0;
  CHECK(error_of([&] { compact::visit_distribution_at(3, [&](auto) { ++calls; }); }) ==
        "compact: visit_distribution_at: argument index = 3 is not below the 3 distributions (Gaussian, Rademacher, "
        "Srht)");
  CHECK(error_of([&] {
          compact::visit_distribution_at(std::size_t(-1), [&](auto) { ++calls; });
        }).find("argument index = 18446744073709551615 is not below the 3 distributions") != std::string::npos);
  CHECK(calls == 0);
  using Other = compact::TypeList<compact::Srht, compact::Gaussian>;
  std::string visited;
  compact::visit_distribution_at<Other>(1, [&](auto dist) { visited = name_of(dist); });
  CHECK(visited == "Gaussian");
  CHECK(error_of([&] { compact::visit_distribution_at<Other>(2, [&](auto) { ++calls; }); }) ==
        "compact: visit_distribution_at: argument index = 2 is not below the 2 distributions (Srht, Gaussian)");
  CHECK(calls == 0);
}

TEST_CASE_TEMPLATE("check_compressed_grad_args refuses what compressed_grad refuses, with the same messages", Scalar,
                   float, double) {
  const index_t B = 5, m = 4, r = 3;
  std::vector<Scalar> dy(B * m, Scalar(1)), z(B * r, Scalar(1)), g(m * r, Scalar(-7));
  const auto check = [](MatrixView<const Scalar> a, MatrixView<const Scalar> b, MatrixView<Scalar> c) {
    return error_of([&] { compact::check_compressed_grad_args(a, b, c); });
  };
  const auto call = [](MatrixView<const Scalar> a, MatrixView<const Scalar> b, MatrixView<Scalar> c) {
    return error_of([&] { compact::compressed_grad<Scalar>(compact::Cpu{}, a, b, c, Scalar(0)); });
  };
  struct Case {
    MatrixView<const Scalar> dy, z;
    MatrixView<Scalar> g;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{dy.data(), B, m}, {z.data(), B - 1, r}, {g.data(), m, r}, "argument z has 4 rows, expected dy.rows = 5"},
      {{dy.data(), B, m}, {z.data(), B, r}, {g.data(), m - 1, r}, "argument g has 3 rows, expected dy.cols = 4"},
      {{dy.data(), B, m}, {z.data(), B, r}, {g.data(), m, r - 1}, "argument g has 2 columns, expected z.cols = 3"},
      {{nullptr, B, m}, {z.data(), B, r}, {g.data(), m, r}, "argument dy is null with shape 5 x 4"},
      {{dy.data(), B, m, m - 1}, {z.data(), B, r}, {g.data(), m, r}, "argument dy has row_stride = 3 < cols = 4"},
      {{g.data(), 1, m}, {z.data(), 1, r}, {g.data(), m, r}, "output g overlaps input dy"},
      {{dy.data(), 1, m}, {g.data(), 1, r}, {g.data(), m, r}, "output g overlaps input z"},
  };
  for (const Case& c : cases) {
    const std::string message = check(c.dy, c.z, c.g);
    CAPTURE(message);
    CHECK(message.rfind("compact: compressed_grad: ", 0) == 0);
    CHECK(message.find(c.message) != std::string::npos);
    CHECK(message == call(c.dy, c.z, c.g));
  }
  for (Scalar v : g) CHECK(v == Scalar(-7));
  CHECK(check({dy.data(), B, m}, {z.data(), B, r}, {g.data(), m, r}) == "");
  CHECK(check({nullptr, 0, m}, {nullptr, 0, r}, {g.data(), m, r}) == "");  // an empty batch
}

TEST_CASE("check_compressed_grad_args takes a g of another type than dy and z (an fp32 g for 16-bit activations)") {
  std::vector<double> dy(6, 1.0), z(4, 1.0);
  std::vector<float> g(6, -7.0f);
  CHECK(error_of([&] {
          compact::check_compressed_grad_args(MatrixView<const double>(dy.data(), 2, 3),
                                              MatrixView<const double>(z.data(), 2, 2),
                                              MatrixView<float>(g.data(), 3, 2));
        }) == "");
  CHECK(error_of([&] {
          compact::check_compressed_grad_args(MatrixView<const double>(dy.data(), 2, 3),
                                              MatrixView<const double>(z.data(), 2, 2),
                                              MatrixView<float>(g.data(), 2, 2));
        }).find("argument g has 2 rows, expected dy.cols = 3") != std::string::npos);
}

TEST_CASE("cpu_max_threads is the thread count a CPU call may use: OpenMP's, 1 without OpenMP") {
#if defined(_OPENMP)
  const int saved = omp_get_max_threads();
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    CHECK(compact::cpu_max_threads() == threads);
    // No team a call forms is larger (the size of its per-thread scratch arrays).
    CHECK(compact::detail::team_size(1000, 1e12) <= compact::cpu_max_threads());
  }
  omp_set_num_threads(saved);
#else
  CHECK(compact::cpu_max_threads() == 1);
#endif
}
