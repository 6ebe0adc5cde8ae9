// SPDX-License-Identifier: MIT
/// The projector core shared by every backend: one API (checked at compile time for every CPU projector; the CUDA
/// test checks the same template for the CUDA ones), one shape check, the workspace query, compute_t alpha/beta; and
/// the extension points: this target is compiled with COMPACT_EXTRA_DISTRIBUTIONS_HEADER="toy_distribution.hpp"
/// (tests/CMakeLists.txt), so compact::Distributions holds the toy distribution of tests/toy_distribution.hpp, a
/// CPU-only distribution of a family of its own, added exactly as docs/design.md's recipe says.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "projector_api.hpp"
#include "support.hpp"
#include "toy_projector.hpp"  // the toy distribution's CPU projector; this target adds the toy to the global list

namespace compact {
struct Cuda;  // the CUDA backend's tag (cuda/backend.cuh), declared only: its supports_v is asked below
}  // namespace compact

namespace {

using compact::Cpu;
using compact::Gaussian;
using compact::index_t;
using compact::MatrixView;
using compact::Rademacher;
using compact::SketchState;
using compact::Srht;

// Every CPU projector of every distribution of the library (and the toy), in both scalars.
static_assert(compact_test::all_have_projector_api<Cpu, float>(compact::CpuDistributions{}));
static_assert(compact_test::all_have_projector_api<Cpu, double>(compact::CpuDistributions{}));

// The toy joined the global list through the hook, after the library's distributions; the CPU backend implements
// every one of them, the CUDA backend (declared, not included: no nvcc here) none that this TU can see.
using Toy4 = compact_test::ToyCountSketch;
static_assert(std::is_same_v<compact::Distributions, compact::TypeList<Gaussian, Rademacher, Srht, Toy4>>);
static_assert(std::is_same_v<compact::CpuDistributions, compact::Distributions>);
static_assert(compact::supports_v<Cpu, Toy4> && compact::supports_v<Cpu, Srht>);
static_assert(!compact::supports_v<compact::Cuda, Toy4>);
static_assert(!compact::supports_v<Cpu, int>);
// A list filtered by a backend keeps the list's order and drops what the backend lacks.
struct NoBackend {};
static_assert(std::is_same_v<compact::DistributionsOf<NoBackend>, compact::TypeList<>>);
static_assert(std::is_same_v<compact::DistributionsOf<Cpu, compact::TypeList<Toy4, Gaussian>>,
                             compact::TypeList<Toy4, Gaussian>>);

// The families: what shared code asks instead of naming a distribution.
static_assert(compact::is_dense_v<Gaussian> && compact::is_dense_v<Rademacher> && !compact::is_dense_v<Srht>);
static_assert(compact::is_transform_v<Srht> && !compact::is_transform_v<Gaussian>);
static_assert(!compact::is_dense_v<Toy4> && !compact::is_transform_v<Toy4>);
static_assert(std::is_same_v<compact::family_t<Toy4>, compact_test::CountSketchFamily>);
static_assert(std::is_same_v<compact::family_t<int>, void> && !compact::is_dense_v<int>);
static_assert(std::is_same_v<compact::dense_lanes_t<Gaussian>, compact::GaussianLanes> &&
              compact::dense_lanes_t<Rademacher>::kBlockCols == compact::kRademacherBlockCols);

static_assert(std::is_same_v<compact::compute_t<float>, float>);
static_assert(std::is_same_v<compact::compute_t<double>, double>);
static_assert(std::is_same_v<compact::CpuScratch, compact::Workspace>, "CpuScratch is the older name of Workspace");

// A distribution is a tag with DistributionTraits; anything else is not.
static_assert(compact::detail::is_distribution<Gaussian> && compact::detail::is_distribution<Rademacher> &&
              compact::detail::is_distribution<Srht>);
static_assert(!compact::detail::is_distribution<int> && !compact::detail::is_distribution<Cpu>);
static_assert(compact::DistributionTraits<Gaussian>::kRecordCode == 1 &&
              compact::DistributionTraits<Rademacher>::kRecordCode == 2 &&
              compact::DistributionTraits<Srht>::kRecordCode == 3);

template <class Dist>
using P = compact::Projector<Cpu, Dist, float>;

TEST_CASE("one shape check: constructors, workspace_bytes and srht_sample refuse a shape with the same message") {
  const std::string rank = "rank r = 17 must satisfy 1 <= r <= n = 16";
  CHECK(compact_test::error_of([] { P<Gaussian>(16, 17, {}); }) == "compact: Projector: " + rank);
  CHECK(compact_test::error_of([] { P<Srht>(16, 17, {}); }) == "compact: Projector: " + rank);
  CHECK(compact_test::error_of([] { P<Rademacher>::workspace_bytes(16, 17); }) ==
        "compact: Projector::workspace_bytes: " + rank);
  CHECK(compact_test::error_of([] { compact::srht_sample({}, 16, 17); }) == "compact: srht_sample: " + rank);
  // The distribution's own rule, through DistributionTraits<Srht>::check_shape.
  const std::string pads = "input dimension n = 1048577 pads to n' = 2097152 > 1048576";
  CHECK(compact_test::error_of([] { P<Srht>((1 << 20) + 1, 4, {}); }).find(pads) != std::string::npos);
  CHECK(compact_test::error_of([] { P<Srht>::workspace_bytes((1 << 20) + 1, 4); }).find(pads) != std::string::npos);
  CHECK_NOTHROW(P<Srht>(1 << 20, 4, {}));
  CHECK_NOTHROW(P<Gaussian>((1 << 20) + 1, 4, {}));  // no such rule for a dense P
  // The same refusals for every scalar (the check does not depend on it).
  CHECK(compact_test::shape_refusals<Cpu, Srht, float>() == compact_test::shape_refusals<Cpu, Srht, double>());
  CHECK(compact_test::shape_refusals<Cpu, Gaussian, float>().find(rank) != std::string::npos);
}

TEST_CASE_TEMPLATE("the accessors of the core report the constructor's arguments", Dist, Gaussian, Rademacher, Srht) {
  const SketchState s{11, 12, 13};
  const compact::Projector<Cpu, Dist, double> p(300, 77, s);
  CHECK(p.in_dim() == 300);
  CHECK(p.rank() == 77);
  CHECK(p.state() == s);
}

/// A Workspace of workspace_bytes(n, r) serves every call of every row count, and the result is the allocating
/// call's bit for bit; scratch_bytes(rows), one call's exact need, never exceeds it.
template <class Dist, class Scalar>
void check_workspace(index_t n, index_t r) {
  const compact::Projector<Cpu, Dist, Scalar> p(n, r, SketchState{5, 6, 7});
  const std::size_t bytes = compact::Projector<Cpu, Dist, Scalar>::workspace_bytes(n, r);
  std::vector<std::max_align_t> memory(bytes / sizeof(std::max_align_t) + 1);
  const compact::Workspace w{memory.data(), bytes};
  for (const index_t rows : {index_t{1}, index_t{9}, index_t{700}}) {
    CHECK(p.scratch_bytes(rows) <= bytes);
    const auto x = compact_test::random_matrix<Scalar>(rows, n, 1);
    const compact::RowMatrix<Scalar> z = p.sketch(x);
    compact::RowMatrix<Scalar> zw(rows, r);
    p.sketch(MatrixView<const Scalar>(x.data(), rows, n), MatrixView<Scalar>(zw.data(), rows, r), w);
    CHECK(std::memcmp(z.data(), zw.data(), sizeof(Scalar) * std::size_t(rows * r)) == 0);
    const auto g = compact_test::random_matrix<Scalar>(rows, r, 2);
    compact::RowMatrix<Scalar> out = compact_test::random_matrix<Scalar>(rows, n, 3), outw = out;
    p.unsketch_grad(g, out, 0.5, 0.25);
    p.unsketch_grad(MatrixView<const Scalar>(g.data(), rows, r), MatrixView<Scalar>(outw.data(), rows, n), 0.5, 0.25,
                    w);
    CHECK(std::memcmp(out.data(), outw.data(), sizeof(Scalar) * std::size_t(rows * n)) == 0);
  }
  const compact::Workspace short_by_one{memory.data(), p.scratch_bytes(700) - 1};
  compact::RowMatrix<Scalar> z(700, r);
  const auto x = compact_test::random_matrix<Scalar>(700, n, 1);
  CHECK(compact_test::error_of([&] {
          p.sketch(MatrixView<const Scalar>(x.data(), 700, n), MatrixView<Scalar>(z.data(), 700, r), short_by_one);
        }).find("argument workspace has") != std::string::npos);
}

TEST_CASE_TEMPLATE("workspace_bytes(n, r) is a Workspace that every call takes, with the allocating call's bits", T,
                   float, double) {
  check_workspace<Gaussian, T>(300, 77);
  check_workspace<Rademacher, T>(300, 77);
  check_workspace<Srht, T>(300, 77);
}

TEST_CASE("a dense projector's workspace follows its panel budget") {
  // n = 1000, r = 300 in panels of at most 2^16 entries: sketch panels 1000 x 128, unsketch panels 128 x 300.
  using G = compact::Projector<Cpu, Gaussian, float>;
  CHECK_THROWS_AS(G::workspace_bytes(1000, 300, compact::PanelSchedule::kOverlap), compact::error);
  CHECK(G(1000, 300, {}, index_t{1} << 16).scratch_bytes(5) == sizeof(float) * 1000 * 128);
  CHECK(G::workspace_bytes(1000, 300) == sizeof(float) * 1000 * 300);  // the default budget holds all of P
}

TEST_CASE("alpha and beta keep double precision for a double projector") {
  // alpha = 1 + 2^-40 is not a float: in a float it would round to 1 and out would equal g P^T exactly.
  using D = compact::Projector<Cpu, Rademacher, double>;
  const D p(64, 8, SketchState{1, 2, 3});
  const auto g = compact_test::random_matrix<double>(3, 8, 4);
  const compact::RowMatrix<double> one = p.unsketch_grad(g);
  compact::RowMatrix<double> scaled(3, 64);
  const double alpha = 1.0 + std::ldexp(1.0, -40);
  p.unsketch_grad(g, scaled, alpha, 0.0);
  CHECK((scaled - one).cwiseAbs().maxCoeff() > 0.0);
  // Rademacher entries are +-1/sqrt(8): each output is alpha times a sum the GEMM rounds once per term; the scaled
  // result differs from alpha * one by at most the rounding of that one product, |alpha * one| 2^-52 each.
  CHECK(((scaled - alpha * one).cwiseAbs() - one.cwiseAbs() * std::ldexp(2.0, -52)).maxCoeff() <= 0.0);
}

}  // namespace

namespace {

using Toy = compact::Projector<Cpu, compact_test::ToyCountSketch, float>;
static_assert(compact_test::has_projector_api<Cpu, compact_test::ToyCountSketch, float>());

TEST_CASE(
    "a distribution added through DistributionTraits and one implementation gets the core and the Eigen conveniences") {
  // The shape check: the entry spec's rule, then the toy's own, with the same function names as every projector.
  CHECK(compact_test::error_of([] { Toy(16, 17, {}); }) ==
        "compact: Projector: rank r = 17 must satisfy 1 <= r <= n = 16");
  CHECK(compact_test::error_of([] { Toy(16, 1, {}); }) == "compact: Projector: ToyCountSketch needs r >= 2, got r = 1");
  CHECK(compact_test::error_of([] { Toy::workspace_bytes(16, 1); }).find("needs r >= 2") != std::string::npos);
  const Toy p(10, 4, SketchState{1, 2, 3});
  CHECK(p.in_dim() == 10);
  CHECK(p.rank() == 4);
  CHECK(p.state() == SketchState{1, 2, 3});
  // The Eigen conveniences, written once in CpuProjector, on integer-valued data (every sum exact in float).
  compact::RowMatrix<float> x(3, 10);
  for (index_t k = 0; k < x.size(); ++k) x.data()[k] = float(k % 7) - 3.0f;
  const compact::RowMatrix<float> pm = p.materialize();
  CHECK(p.sketch(x) == x * pm);
  const compact::RowMatrix<float> g = p.sketch(x);
  CHECK(p.unsketch_grad(g) == g * pm.transpose());
  compact::RowMatrix<float> out = x;
  p.unsketch_grad(g, out, 2.0f, 1.0f);
  CHECK(out == 2.0f * (g * pm.transpose()) + x);
}

TEST_CASE("the optimizers need no edit: CompressedAdamW<Cpu, ToyCountSketch> trains, saves and restores") {
  using Adam = compact::CompressedAdamW<Cpu, compact_test::ToyCountSketch, float>;
  const index_t m = 3, n = 10, r = 4;
  compact::AdamWOptions o;
  o.lr = 0.5;
  o.alpha = 0.25;
  o.weight_decay = 0.125;
  Adam opt(m, n, r, compact::Schedule(7, 0), 1, o);
  compact::RowMatrix<float> w(m, n), dy(5, m), x(5, n);
  for (index_t k = 0; k < w.size(); ++k) w.data()[k] = float(k % 5) - 2.0f;
  for (index_t k = 0; k < dy.size(); ++k) dy.data()[k] = float(k % 3) - 1.0f;
  for (index_t k = 0; k < x.size(); ++k) x.data()[k] = float(k % 7) - 3.0f;
  // One micro-batch: z = x P through the optimizer's projector, Ĝ = dyᵀ z.
  const compact::RowMatrix<float> z = opt.projector().sketch(x);
  opt.accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z));
  const compact::RowMatrix<float> g = dy.transpose() * z;  // integer-valued: exact in float
  const compact::RowMatrix<float> w0 = w;
  opt.step(w);
  // The expected step, from the optimizer's per-element math (kernels/optimizer_step.hpp) and the toy's P:
  // N = adamw_element(Ĝ) (M, V from zero), W <- (1 - lr wd) W - lr alpha N Pᵀ, evaluated as unsketch_grad evaluates it.
  // Each entry is a·N + b·W (two products, one sum): with or without a contracted fma the two evaluations differ by
  // less than 2 eps (|a·N| + |b·W|), the bound checked.
  const auto s = compact::detail::adamw_step_scalars<float>(o, 1, 1);
  const float a = static_cast<float>(-o.lr * o.alpha), b = static_cast<float>(1.0 - o.lr * o.weight_decay);
  const float eps = std::numeric_limits<float>::epsilon();
  for (index_t i = 0; i < m; ++i) {
    for (index_t j = 0; j < n; ++j) {
      float mi = 0, vi = 0;
      const float nij = compact::detail::adamw_element(g(i, j % r), &mi, &vi, s);
      const float expect = a * nij + b * w0(i, j);
      CAPTURE(i);
      CAPTURE(j);
      CHECK(std::fabs(w(i, j) - expect) <= 2 * eps * (std::fabs(a * nij) + std::fabs(b * w0(i, j))));
    }
  }
  CHECK(w != w0);
  CHECK(opt.step_count() == 1);
  // The record names the toy by its record code; another optimizer restores it and takes the same next step.
  const std::vector<std::uint8_t> record = opt.save_state();
  CHECK(compact::detail::get_u32(record.data() + 12) == 99u);
  Adam again(m, n, r, compact::Schedule(7, 0), 1, o);
  again.load_state(record);
  compact::RowMatrix<float> w1 = w, w2 = w;
  for (Adam* each : {&opt, &again}) {
    each->accumulate_grad(compact::detail::as_view<float>(dy), compact::detail::as_view<float>(z));
    each->step(each == &opt ? w1 : w2);
  }
  CHECK(w1 == w2);
  CHECK(opt.save_state() == again.save_state());
  // A record of another distribution is refused, and named from the distribution list.
  const std::vector<std::uint8_t> gaussian =
      compact::CompressedAdamW<Cpu, Gaussian, float>(m, n, r, compact::Schedule(7, 0), 1, o).save_state();
  CHECK(compact_test::error_of([&] { again.load_state(gaussian); }).find("record distribution = 1 (Gaussian)") !=
        std::string::npos);
  // And the toy's record, offered to a Gaussian optimizer, is named from the global list, which holds the toy.
  CHECK(compact_test::error_of([&] {
          compact::CompressedAdamW<Cpu, Gaussian, float>(m, n, r, compact::Schedule(7, 0), 1, o).load_state(record);
        }).find("record distribution = 99 (ToyCountSketch), this optimizer has 1 (Gaussian)") != std::string::npos);
}

TEST_CASE("the distribution list drives names, codes and run-time dispatch, the toy's included") {
  CHECK(compact::Distributions::kSize == 4);
  CHECK(compact::detail::distribution_names() == "Gaussian, Rademacher, Srht, ToyCountSketch");
  CHECK(std::string(compact::detail::distribution_name(3)) == "Srht");
  CHECK(std::string(compact::detail::distribution_name(99)) == "ToyCountSketch");
  CHECK(std::string(compact::detail::distribution_name(7)) == "unknown");
  std::string visited;
  compact::visit_distribution("SRHT", [&](auto dist) { visited = compact::DistributionTraits<decltype(dist)>::kName; });
  CHECK(visited == "Srht");
  CHECK(compact_test::error_of([] { compact::visit_distribution("uniform", [](auto) {}); }) ==
        "compact: distribution 'uniform' is not one of Gaussian, Rademacher, Srht, ToyCountSketch");
  // The toy by its run-time name, from the global list: a binding choosing P by name reaches it without an edit.
  index_t rank = 0;
  compact::visit_distribution("toycountsketch", [&](auto dist) {
    rank = compact::Projector<Cpu, decltype(dist), float>(10, 4, SketchState{}).rank();
  });
  CHECK(rank == 4);
  // The backend's list serves the same helpers: the names of what the CPU backend implements.
  CHECK(compact::detail::distribution_names<compact::CpuDistributions>() ==
        "Gaussian, Rademacher, Srht, ToyCountSketch");
}
}  // namespace
