// SPDX-License-Identifier: MIT
#pragma once
/// The library's distributions as one type list, which backend implements which (supports_v, DistributionsOf), and
/// what iterates over the lists: names, record codes, run-time dispatch.
///
/// `Distributions` is the one place that enumerates the distributions. Whatever must handle each of them by a value
/// known only at run time — a binding choosing P by name (examples/torch, compact_torch), a fuzzer choosing one by a
/// byte, the checkpoint record's messages (distribution_name), the golden-value printer — iterates over this list, or
/// over a backend's part of it (CpuDistributions in cpu/distributions.hpp, CudaDistributions in
/// cuda/distributions.cuh), instead of spelling the three names again, so a new distribution reaches all of them by
/// being added here. The public walks are for_each_distribution (every one, in order), visit_distribution_at (by
/// position) and visit_distribution (by name), each over Distributions or a list it is given; an integration needs
/// nothing from namespace detail. What a distribution is, it says itself, next to its entry specification: its tag
/// and DistributionTraits (spec/tags.hpp); which backends implement it, each backend's file for it says
/// (BackendSupports).
///
/// Distributions kept outside the library's sources (a test's, or a user's own) join the list through two macros,
/// defined for every translation unit of a program alike (the list is part of the ODR):
///   COMPACT_EXTRA_DISTRIBUTIONS_HEADER  a header, e.g. "my_dist.hpp", included here: it declares the tags, their
///                                       DistributionTraits and BackendSupports specializations (forward-declaring
///                                       the backend tags, `namespace compact { struct Cpu; }`);
///   COMPACT_EXTRA_DISTRIBUTIONS         the tags, comma-separated, appended to Distributions in that order (that
///                                       header may define it).
/// tests/toy_distribution.hpp is one, compiled into test_projector_api: a CPU-only distribution, which the CUDA
/// backend's list leaves out.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"  // Gaussian, Rademacher and their DistributionTraits
#include "compact/spec/srht.hpp"     // Srht and its DistributionTraits
#include "compact/spec/tags.hpp"

namespace compact {

/// A list of types.
template <class... Ts>
struct TypeList {
  static constexpr std::size_t kSize = sizeof...(Ts);
};

/// Whether Backend implements Dist (Projector<Backend, Dist, Scalar> and the optimizers on it): false unless the
/// backend's file for the distribution specializes BackendSupports<Backend, Dist> as std::true_type
/// (cpu/dense_projector.hpp, cpu/srht_projector.hpp, cuda/dense_projector.cuh, cuda/srht_projector.cuh).
template <class Backend, class Dist>
struct BackendSupports : std::false_type {};
template <class Backend, class Dist>
inline constexpr bool supports_v = BackendSupports<Backend, Dist>::value;

}  // namespace compact

#if defined(COMPACT_EXTRA_DISTRIBUTIONS_HEADER)
#include COMPACT_EXTRA_DISTRIBUTIONS_HEADER
#endif
#if defined(COMPACT_EXTRA_DISTRIBUTIONS)
#define COMPACT_DETAIL_EXTRA_DISTRIBUTIONS , COMPACT_EXTRA_DISTRIBUTIONS
#else
#define COMPACT_DETAIL_EXTRA_DISTRIBUTIONS
#endif

namespace compact {

/// Every distribution of the library, in record-code order (the order the fuzzers' selector bytes and the bindings'
/// listings follow), then those of COMPACT_EXTRA_DISTRIBUTIONS.
using Distributions = TypeList<Gaussian, Rademacher, Srht COMPACT_DETAIL_EXTRA_DISTRIBUTIONS>;

namespace detail {
/// The types of the pack that Backend supports, appended to Kept in order.
template <class Backend, class Kept, class... Rest>
struct SupportedBy {
  using type = Kept;
};
template <class Backend, class... Kept, class First, class... Rest>
struct SupportedBy<Backend, TypeList<Kept...>, First, Rest...>
    : SupportedBy<Backend, std::conditional_t<supports_v<Backend, First>, TypeList<Kept..., First>, TypeList<Kept...>>,
                  Rest...> {};
template <class Backend, class List>
struct FilterSupported;
template <class Backend, class... Ts>
struct FilterSupported<Backend, TypeList<Ts...>> : SupportedBy<Backend, TypeList<>, Ts...> {};
}  // namespace detail

/// The distributions of List that Backend implements (supports_v), in List's order: what iterates over "every
/// distribution of a backend". Named after the backend's projector files are included: CpuDistributions
/// (cpu/distributions.hpp), CudaDistributions (cuda/distributions.cuh).
template <class Backend, class List = Distributions>
using DistributionsOf = typename detail::FilterSupported<Backend, List>::type;

namespace detail {

/// Calls f(T{}) for every T of the list, in order.
template <class... Ts, class F>
void for_each_type(TypeList<Ts...>, F&& f) {
  (f(Ts{}), ...);
}

/// Calls f(T{}) for the type at position `index` of the list; false (and no call) when index >= the list's size.
template <class... Ts, class F>
bool visit_type_at(TypeList<Ts...>, std::size_t index, F&& f) {
  std::size_t position = 0;
  bool found = false;
  ((position++ == index ? (f(Ts{}), found = true) : false), ...);
  return found;
}

/// True when a and b are equal ignoring ASCII case.
inline bool equal_ignoring_case(const char* a, const std::string& b) {
  std::size_t i = 0;
  for (; a[i] != '\0' && i < b.size(); ++i) {
    const char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    const char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] - 'A' + 'a') : b[i];
    if (x != y) return false;
  }
  return a[i] == '\0' && i == b.size();
}

/// Whether the record codes and names of a list are pairwise distinct (checked at compile time for Distributions).
template <class... Ts>
constexpr bool distinct_record_codes(TypeList<Ts...>) {
  const std::uint32_t codes[] = {DistributionTraits<Ts>::kRecordCode..., 0u};
  for (std::size_t i = 0; i < sizeof...(Ts); ++i) {
    if (codes[i] == 0) return false;  // 0 is no distribution's code
    for (std::size_t j = 0; j < i; ++j) {
      if (codes[i] == codes[j]) return false;
    }
  }
  return true;
}
static_assert(distinct_record_codes(Distributions{}), "compact::Distributions: record codes must be distinct and > 0");

/// The name of a record's distribution code (DistributionTraits<D>::kName), or "unknown" (a record may carry a code
/// no distribution has).
template <class List = Distributions>
const char* distribution_name(std::uint32_t code) {
  const char* name = "unknown";
  for_each_type(List{}, [&](auto dist) {
    using D = decltype(dist);
    if (DistributionTraits<D>::kRecordCode == code) name = DistributionTraits<D>::kName;
  });
  return name;
}

/// The names of a list's distributions, separated by `separator` (for messages: "Gaussian, Rademacher, Srht").
template <class List = Distributions>
std::string distribution_names(const char* separator = ", ") {
  std::string all;
  for_each_type(List{}, [&](auto dist) {
    if (!all.empty()) all += separator;
    all += DistributionTraits<decltype(dist)>::kName;
  });
  return all;
}

}  // namespace detail

/// Calls f(Dist{}) for every distribution of `List`, in list order (record-code order for Distributions): how a
/// binding lists the names it accepts, or instantiates something per distribution, without spelling them.
template <class List = Distributions, class F>
void for_each_distribution(F&& f) {
  detail::for_each_type(List{}, f);
}

/// Calls f(Dist{}) for the distribution at position `index` of `List` (the position for_each_distribution gives it):
/// how a binding that stored a distribution as an integer gets its compile-time tag back. f is instantiated for every
/// distribution. Throws compact::error naming `index` and the list when index >= List::kSize (f is not called).
template <class List = Distributions, class F>
void visit_distribution_at(std::size_t index, F&& f) {
  COMPACT_REQUIRE(index < List::kSize, "visit_distribution_at: argument index = "
                                           << index << " is not below the " << List::kSize << " distributions ("
                                           << detail::distribution_names<List>() << ")");
  detail::visit_type_at(List{}, index, f);
}

/// Calls f(Dist{}) for the distribution of `List` whose name (DistributionTraits<Dist>::kName) equals `name`
/// ignoring ASCII case ("srht", "Srht"); throws compact::error naming `name` and the choices when there is none.
/// How a binding turns a run-time name into a compile-time tag: f is instantiated for every distribution.
template <class List = Distributions, class F>
void visit_distribution(const std::string& name, F&& f) {
  bool found = false;
  for_each_distribution<List>([&](auto dist) {
    if (!found && detail::equal_ignoring_case(DistributionTraits<decltype(dist)>::kName, name)) {
      found = true;
      f(dist);
    }
  });
  COMPACT_REQUIRE(found, "distribution '" << name << "' is not one of " << detail::distribution_names<List>());
}

}  // namespace compact
