// SPDX-License-Identifier: MIT
#pragma once
/// A distribution kept outside the library, joined to compact::Distributions through the extension hook of
/// api/distributions.hpp: test targets compiled with COMPACT_EXTRA_DISTRIBUTIONS_HEADER="toy_distribution.hpp"
/// (tests/CMakeLists.txt: test_projector_api, and test_cuda_backend under nvcc) include this header from
/// api/distributions.hpp, after compact::BackendSupports is declared, and get the toy in the global list.
///
/// ToyCountSketch: P[i][j] = 1 when j = i mod r, else 0 (CountSketch with a fixed hash and signs), a family of its
/// own, implemented on the CPU only (tests/toy_projector.hpp): supports_v<Cpu, Toy> is true, supports_v<Cuda, Toy>
/// false, so CpuDistributions holds it and CudaDistributions does not, and the nvcc-compiled targets build with it in
/// the global list.

#include <cstdint>
#include <type_traits>

#include <compact/config.hpp>
#include <compact/spec/tags.hpp>

namespace compact_test {
/// The toy's tag.
struct ToyCountSketch {};
/// The toy's family: neither dense (no entry function, no lane generator) nor a transform.
struct CountSketchFamily {};
}  // namespace compact_test

namespace compact {
struct Cpu;  // the backend tag (cpu/backend.hpp), declared for BackendSupports

template <>
struct DistributionTraits<compact_test::ToyCountSketch> {
  static constexpr bool kIsDistribution = true;
  using Family = compact_test::CountSketchFamily;
  static constexpr const char* kName = "ToyCountSketch";
  static constexpr std::uint32_t kRecordCode = 99;
  static void check_shape(const char* fn, index_t, index_t r) {
    COMPACT_REQUIRE(r >= 2, fn << ": ToyCountSketch needs r >= 2, got r = " << r);
  }
};

/// Implemented on the CPU (tests/toy_projector.hpp) and nowhere else.
template <>
struct BackendSupports<Cpu, compact_test::ToyCountSketch> : std::true_type {};
}  // namespace compact

/// The tags appended to compact::Distributions.
#define COMPACT_EXTRA_DISTRIBUTIONS compact_test::ToyCountSketch
