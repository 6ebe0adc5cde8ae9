// SPDX-License-Identifier: MIT
/// The AVX-512 kernels on the real instructions: the bits of the reference for every panel and every FWHT length.
///
/// Exits 77 (ctest: skipped) on a CPU without AVX-512 F or in a build without the x86 vector paths; on such machines
/// test_avx512_emulated checks the same kernels through SIMDe. tests/CMakeLists.txt also compiles this file with
/// -march=x86-64-v4 (compile only), so the native AVX-512 code is built under a whole-TU AVX-512 target as well.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "cpu/kernel_cases.hpp"
#include "cpu/moment8_cases.hpp"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using compact::CpuIsa;
using compact::index_t;

/// Runs before the doctest main.
const bool kSkipUnlessAvx512 = [] {
  if (!compact::cpu_isa_supported(CpuIsa::kAvx512)) {
    std::printf("test_avx512_native: this CPU or build has no AVX-512 F path (best: %s), skipping (exit 77)\n",
                compact::cpu_isa_name(compact::detail::best_cpu_isa()));
    std::exit(77);
  }
  return true;
}();

}  // namespace

TEST_CASE_TEMPLATE("the AVX-512 Gaussian panel has the bits of the reference loop", Scalar, float, double) {
  compact_test::check_panels_against_reference<compact::Gaussian, Scalar>(
      [](auto&&... args) { compact::detail::fill_dense_panel_with<compact::Gaussian>(CpuIsa::kAvx512, args...); });
}

TEST_CASE_TEMPLATE("the AVX-512 Rademacher panel has the bits of the reference loop", Scalar, float, double) {
  compact_test::check_panels_against_reference<compact::Rademacher, Scalar>(
      [](auto&&... args) { compact::detail::fill_dense_panel_with<compact::Rademacher>(CpuIsa::kAvx512, args...); });
}

TEST_CASE_TEMPLATE("the AVX-512 FWHT has the bits of the textbook loop at every length", T, float, double) {
  compact_test::check_fwht_against_textbook<T>(
      0, 20, [](T* x, int log_n) { compact::fwht(x, index_t{1} << log_n, CpuIsa::kAvx512); });
}

TEST_CASE("the AVX-512 sr8 codec has the bits of the reference") {
  compact_test::check_sr8_against_reference(
      [](auto&&... args) { compact::detail::sr8_encode_range_with(CpuIsa::kAvx512, args...); },
      [](auto&&... args) { compact::detail::sr8_decode_range_with(CpuIsa::kAvx512, args...); });
}

TEST_CASE("the AVX-512 8-bit AdamW step has the bits of the reference") {
  for (const index_t n : compact_test::kMoment8Counts) {
    for (const bool dense : {false, true}) {
      CAPTURE(n);
      CAPTURE(dense);
      const auto want = compact_test::moment8_run(n, dense, 4, 11, compact_test::moment8_reference_step);
      const auto got = compact_test::moment8_run(
          n, dense, 4, 11, [](auto&&... args) { compact::detail::adamw8_range_with(CpuIsa::kAvx512, args...); });
      CHECK(compact_test::same_run(got, want));
    }
  }
}
