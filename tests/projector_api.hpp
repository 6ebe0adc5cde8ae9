// SPDX-License-Identifier: MIT
#pragma once
/// The API every Projector<Backend, Dist, Scalar> shares (api/projector_fwd.hpp), as one generic check that the CPU
/// test instantiates for every CPU projector and the CUDA test, compiled by nvcc, for every CUDA projector (and for
/// the CPU ones again, in the same translation unit). Compile-time signatures — the shared API and, per backend,
/// everything that backend's optimizers call on a projector — plus the run-time properties that need no device: the
/// workspace query and the shape check.

#include <compact/compact.hpp>

#include "error_of.hpp"

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace compact_test {

/// The types of a compact::TypeList as a std::tuple, the form doctest's TEST_CASE_TEMPLATE_APPLY takes (a backend's
/// list, compact::CpuDistributions or compact::CudaDistributions, for a test of its every distribution).
template <class List>
struct AsTuple;
template <class... Ts>
struct AsTuple<compact::TypeList<Ts...>> {
  using type = std::tuple<Ts...>;
};

/// Converts implicitly to T and to nothing else: passing it where a parameter of another type is declared (say a
/// float alpha where the compute type is double) does not compile.
template <class T>
struct Only {
  template <class U, class = std::enable_if_t<std::is_same_v<U, T>>>
  operator U() const {  // NOLINT(google-explicit-constructor)
    return U{};
  }
};

/// Compiles only when Projector<Backend, Dist, Scalar> has the shared API with exactly these types.
template <class Backend, class Dist, class Scalar>
constexpr bool has_projector_api() {
  using P = compact::Projector<Backend, Dist, Scalar>;
  using C = compact::compute_t<Scalar>;
  using compact::index_t;
  using compact::MatrixView;
  const P& (*p)() = nullptr;  // p() names a projector in the unevaluated operands below
  MatrixView<const Scalar> (*in)() = nullptr;
  MatrixView<Scalar> (*out)() = nullptr;
  static_assert(std::is_base_of_v<compact::detail::ProjectorCore, P>, "every projector builds on ProjectorCore");
  static_assert(std::is_same_v<decltype(p().in_dim()), index_t>);
  static_assert(std::is_same_v<decltype(p().rank()), index_t>);
  static_assert(std::is_same_v<decltype(p().state()), compact::SketchState>);
  static_assert(std::is_same_v<decltype(P::workspace_bytes(index_t{1}, index_t{1})), std::size_t>,
                "workspace_bytes(n, r) is static: it needs no projector and no device");
  static_assert(std::is_same_v<decltype(p().sketch(in(), out())), void>);
  static_assert(std::is_same_v<decltype(p().unsketch_grad(in(), out())), void>);
  static_assert(std::is_same_v<decltype(p().unsketch_grad(in(), out(), Only<C>{}, Only<C>{})), void>,
                "alpha and beta are compute_t<Scalar> on every backend");
  static_assert(std::is_same_v<decltype(p().materialize(out())), void>);
  (void)p;
  (void)in;
  (void)out;
  static_assert(!std::is_default_constructible_v<P>, "a projector always has a shape");
  if constexpr (std::is_same_v<Backend, compact::Cpu>) {
    // What the CPU optimizers (cpu/optimizer.hpp) call besides the shared API: the constructor of a window's P, the
    // per-call workspace query and the overloads that take a lent Workspace (a step allocates everything up front).
    static_assert(std::is_constructible_v<P, index_t, index_t, compact::SketchState>);
    static_assert(std::is_same_v<decltype(p().scratch_bytes(index_t{1})), std::size_t>);
    static_assert(std::is_same_v<decltype(p().sketch(in(), out(), compact::Workspace{})), void>);
    static_assert(
        std::is_same_v<decltype(p().unsketch_grad(in(), out(), Only<C>{}, Only<C>{}, compact::Workspace{})), void>);
    // And the Eigen conveniences users call on optimizer.projector().
    using M = compact::RowMatrix<Scalar>;
    static_assert(std::is_same_v<decltype(p().sketch(std::declval<const M&>())), M>);
    static_assert(std::is_same_v<decltype(p().unsketch_grad(std::declval<const M&>())), M>);
    static_assert(std::is_same_v<decltype(p().materialize()), M>);
  }
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<Backend, compact::Cuda>) {
    // What the CUDA optimizers (cuda/optimizer.cuh) call besides the shared API: the constructor of a window's P in
    // a workspace slot, the smallest slot, and the operations on a given CUDA stream.
    static_assert(
        std::is_constructible_v<P, index_t, index_t, compact::SketchState, compact::Cuda, compact::Workspace>);
    static_assert(std::is_same_v<decltype(P::min_workspace_bytes(index_t{1}, index_t{1})), std::size_t>);
    // One workspace query for every distribution: the panel schedule is taken by all (a projector without panels
    // ignores it), so the optimizers size their slots without asking the distribution.
    static_assert(std::is_same_v<decltype(P::min_workspace_bytes(index_t{1}, index_t{1}, compact::PanelSchedule{})),
                                 std::size_t>);
    static_assert(
        std::is_same_v<decltype(P::workspace_bytes(index_t{1}, index_t{1}, compact::PanelSchedule{})), std::size_t>);
    static_assert(std::is_same_v<decltype(p().sketch(in(), out(), cudaStream_t{})), void>);
    static_assert(std::is_same_v<decltype(p().unsketch_grad(in(), out(), Only<C>{}, Only<C>{}, cudaStream_t{})), void>);
  }
#endif
  return true;
}

/// has_projector_api for every distribution of a list (a backend's list, compact::CpuDistributions or
/// compact::CudaDistributions: a distribution added to the library is checked on every backend that implements it
/// without an edit here).
template <class Backend, class Scalar, class... Dists>
constexpr bool all_have_projector_api(compact::TypeList<Dists...>) {
  return (has_projector_api<Backend, Dists, Scalar>() && ...);
}

/// What workspace_bytes(n, r) refuses, as one string: the shape check's messages for a rank above n, a zero rank and
/// (SRHT) an n that pads beyond 2^20. Equal strings on two backends mean one check refused with one message.
template <class Backend, class Dist, class Scalar>
std::string shape_refusals() {
  using P = compact::Projector<Backend, Dist, Scalar>;
  std::string all = error_of([] { P::workspace_bytes(16, 17); }) + "\n" + error_of([] { P::workspace_bytes(16, 0); });
  // Appended in two steps: `"\n" + std::string&&` trips GCC 12's -Wrestrict false positive at -O3 in C++20 (GCC bug
  // 105651), which the C++20 configuration of CI builds with -Werror. Empty for a distribution without such a rule.
  all += '\n';
  all += error_of([] { P::workspace_bytes((compact::index_t{1} << 20) + 1, 4); });
  return all;
}

}  // namespace compact_test
