// SPDX-License-Identifier: MIT
#pragma once
/// The API every Projector<Backend, Dist, Scalar> shares (core/projector_fwd.hpp), as one generic check that the CPU
/// test instantiates for every CPU projector and the CUDA test, compiled by nvcc, for every CUDA projector (and for
/// the CPU ones again, in the same translation unit). Compile-time signatures, plus the run-time properties that need
/// no device: the workspace query and the shape check.

#include <compact/compact.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

namespace compact_test {

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
  return true;
}

/// The message of the compact::error that f throws, or "" when it throws none.
template <class F>
std::string message_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const compact::error& e) {
    return e.what();
  }
  return "";
}

/// What workspace_bytes(n, r) refuses, as one string: the shape check's messages for a rank above n, a zero rank and
/// (SRHT) an n that pads beyond 2^20. Equal strings on two backends mean one check refused with one message.
template <class Backend, class Dist, class Scalar>
std::string shape_refusals() {
  using P = compact::Projector<Backend, Dist, Scalar>;
  std::string all =
      message_of([] { P::workspace_bytes(16, 17); }) + "\n" + message_of([] { P::workspace_bytes(16, 0); });
  if constexpr (std::is_same_v<Dist, compact::Srht>) {
    // Appended in two steps: `"\n" + std::string&&` trips GCC 12's -Wrestrict false positive at -O3 in C++20 (GCC bug
    // 105651), which the C++20 configuration of CI builds with -Werror.
    all += '\n';
    all += message_of([] { P::workspace_bytes((compact::index_t{1} << 20) + 1, 4); });
  }
  return all;
}

}  // namespace compact_test
