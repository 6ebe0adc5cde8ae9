// SPDX-License-Identifier: MIT
/// The instruction-set vocabulary (cpu/isa.hpp): run-time choice, cap, COMPACT_CPU_ISA, COMPACT_DISABLE_SIMD, and the
/// same bits from every CPU projector and the FWHT on every instruction set this CPU supports.
///
/// Paths the CPU lacks are reported (MESSAGE "skipped: ...") and left to test_avx512_emulated. tests/CMakeLists.txt
/// builds this file a second time with -DCOMPACT_DISABLE_SIMD (test_cpu_isa_no_simd).
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "cpu/kernel_cases.hpp"
#include "support.hpp"

#include <cstdlib>
#include <string>
#include <vector>

namespace {

using compact::CpuIsa;
using compact::index_t;

using compact_test::CapGuard;
using compact_test::kAllIsas;

/// Sets or clears an environment variable for the scope.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;
  ~EnvGuard() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

template <class Scalar>
std::vector<Scalar> as_vector(const compact::RowMatrix<Scalar>& m) {
  return std::vector<Scalar>(m.data(), m.data() + m.size());
}

/// sketch, unsketch_grad (beta = 0 and accumulating) and materialize of one projector, flattened.
template <class Dist, class Scalar>
std::vector<Scalar> projector_outputs(index_t n, index_t r) {
  const compact::Projector<compact::Cpu, Dist, Scalar> proj(n, r, compact::SketchState{11, 3, 0x100000002ull});
  const auto x = compact_test::random_matrix<Scalar>(37, n, 1);
  const auto g = compact_test::random_matrix<Scalar>(29, r, 2);
  auto w = compact_test::random_matrix<Scalar>(29, n, 3);
  proj.unsketch_grad(g, w, Scalar(-0.5), Scalar(1));
  std::vector<Scalar> out = as_vector<Scalar>(proj.sketch(x));
  for (const auto& part :
       {as_vector<Scalar>(proj.unsketch_grad(g)), as_vector<Scalar>(w), as_vector<Scalar>(proj.materialize())}) {
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

template <class Scalar>
void check_projectors_on(CpuIsa isa) {
  // n = 300 pads the SRHT to 512 and leaves partial blocks at the panel edges; r = 77 is not a multiple of 4.
  std::vector<Scalar> expect_g, expect_r, expect_s;
  {
    const CapGuard scalar(CpuIsa::kScalar);
    expect_g = projector_outputs<compact::Gaussian, Scalar>(300, 77);
    expect_r = projector_outputs<compact::Rademacher, Scalar>(300, 77);
    expect_s = projector_outputs<compact::Srht, Scalar>(300, 77);
  }
  const CapGuard cap(isa);
  REQUIRE(compact::active_cpu_isa() == isa);
  CHECK(compact_test::same_bits(projector_outputs<compact::Gaussian, Scalar>(300, 77), expect_g));
  CHECK(compact_test::same_bits(projector_outputs<compact::Rademacher, Scalar>(300, 77), expect_r));
  CHECK(compact_test::same_bits(projector_outputs<compact::Srht, Scalar>(300, 77), expect_s));
}

}  // namespace

TEST_CASE("every instruction set has a name") {
  CHECK(std::string(compact::cpu_isa_name(CpuIsa::kScalar)) == "scalar");
  CHECK(std::string(compact::cpu_isa_name(CpuIsa::kAvx2)) == "avx2");
  CHECK(std::string(compact::cpu_isa_name(CpuIsa::kAvx512)) == "avx512");
}

TEST_CASE("the supported instruction sets are a prefix of scalar < avx2 < avx512 and the active one is the best") {
  CHECK(compact::cpu_isa_supported(CpuIsa::kScalar));
  if (compact::cpu_isa_supported(CpuIsa::kAvx512)) CHECK(compact::cpu_isa_supported(CpuIsa::kAvx2));
  CHECK(compact::cpu_isa_supported(compact::detail::best_cpu_isa()));
  const CapGuard none(CpuIsa::kAvx512);
  CHECK(compact::active_cpu_isa() == compact::detail::best_cpu_isa());
#if defined(COMPACT_DISABLE_SIMD)
  CHECK(compact::detail::best_cpu_isa() == CpuIsa::kScalar);  // every vector path compiled out
#endif
  MESSAGE("best instruction set of this CPU and build: "
          << std::string(compact::cpu_isa_name(compact::detail::best_cpu_isa())));
}

TEST_CASE("set_cpu_isa_cap lowers the active instruction set, never raises it, and returns the previous cap") {
  const CapGuard outer(CpuIsa::kAvx512);
  for (CpuIsa cap : kAllIsas) {
    const CpuIsa previous = compact::set_cpu_isa_cap(cap);
    CHECK(previous == CpuIsa::kAvx512);
    const CpuIsa expect = static_cast<int>(cap) < static_cast<int>(compact::detail::best_cpu_isa())
                              ? cap
                              : compact::detail::best_cpu_isa();
    CHECK(compact::active_cpu_isa() == expect);
    compact::set_cpu_isa_cap(CpuIsa::kAvx512);
  }
}

TEST_CASE("COMPACT_CPU_ISA names the cap, and any other value is refused with its name and value") {
  {
    const EnvGuard unset("COMPACT_CPU_ISA", nullptr);
    CHECK(compact::detail::cpu_isa_cap_from_environment() == CpuIsa::kAvx512);
  }
  for (CpuIsa isa : kAllIsas) {
    const EnvGuard set("COMPACT_CPU_ISA", compact::cpu_isa_name(isa));
    CHECK(compact::detail::cpu_isa_cap_from_environment() == isa);
  }
  const EnvGuard bad("COMPACT_CPU_ISA", "AVX2");
  const std::string message = compact_test::error_of([] { compact::detail::cpu_isa_cap_from_environment(); });
  CHECK(message.find("COMPACT_CPU_ISA") != std::string::npos);
  CHECK(message.find("\"AVX2\"") != std::string::npos);
}

TEST_CASE_TEMPLATE("every supported instruction set gives the scalar path's bits through every CPU projector", Scalar,
                   float, double) {
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!compact::cpu_isa_supported(isa)) {
      MESSAGE("skipped: this CPU or build has no " << std::string(compact::cpu_isa_name(isa)) << " path");
      continue;
    }
    const std::string isa_name = compact::cpu_isa_name(isa);
    CAPTURE(isa_name);
    check_projectors_on<Scalar>(isa);
  }
}

TEST_CASE_TEMPLATE("fwht on every supported instruction set gives the textbook bits; others are refused", T, float,
                   double) {
  for (CpuIsa isa : kAllIsas) {
    std::vector<T> x(16, T(1));
    if (!compact::cpu_isa_supported(isa)) {
      MESSAGE("skipped: this CPU or build has no " << std::string(compact::cpu_isa_name(isa)) << " path");
      const std::string message = compact_test::error_of([&] { compact::fwht(x.data(), 16, isa); });
      CHECK(message.find(compact::cpu_isa_name(isa)) != std::string::npos);
      CHECK(x == std::vector<T>(16, T(1)));  // nothing written
      continue;
    }
    const std::string isa_name = compact::cpu_isa_name(isa);
    CAPTURE(isa_name);
    compact_test::check_fwht_against_textbook<T>(
        0, 16, [isa](T* v, int log_n) { compact::fwht(v, index_t{1} << log_n, isa); });
  }
}

TEST_CASE_TEMPLATE("the SRHT's fused signed transform gives the unfused bits on every supported instruction set", T,
                   float, double) {
  for (CpuIsa isa : kAllIsas) {
    if (!compact::cpu_isa_supported(isa)) {
      MESSAGE("skipped: this CPU or build has no " << std::string(compact::cpu_isa_name(isa)) << " path");
      continue;
    }
    const std::string isa_name = compact::cpu_isa_name(isa);
    CAPTURE(isa_name);
    // Up to 2^16: beyond one cache block (2^12 floats, 2^11 doubles) the transform is blocked.
    compact_test::check_signed_transform_against_reference<T>(
        0, 16, [isa](const T* x, const T* d, index_t n, T* buf, int log_n) {
          compact::detail::srht_transform_row(x, d, n, buf, log_n, isa);
        });
    // With a next row to prefetch (the sketch passes the thread's next row): a hint that reads nothing into buf.
    std::vector<T> next(std::size_t{1} << 16, T(3));
    compact_test::check_signed_transform_against_reference<T>(
        0, 16, [isa, &next](const T* x, const T* d, index_t n, T* buf, int log_n) {
          compact::detail::srht_transform_row(x, d, n, buf, log_n, isa, next.data());
        });
  }
}

TEST_CASE_TEMPLATE("the SRHT gather with streaming stores writes the bits of the plain gather at every alignment", T,
                   float, double) {
  const compact::index_t n = 4096;
  std::vector<T> buf(static_cast<std::size_t>(n));
  for (compact::index_t k = 0; k < n; ++k) buf[static_cast<std::size_t>(k)] = static_cast<T>(k) * T(0.37) - T(700);
  for (CpuIsa isa : kAllIsas) {
    if (!compact::cpu_isa_supported(isa)) continue;
    for (const compact::index_t r : {compact::index_t{1}, compact::index_t{7}, compact::index_t{8},
                                     compact::index_t{37}, compact::index_t{1024}}) {
      std::vector<std::int32_t> sample(static_cast<std::size_t>(r));
      for (compact::index_t j = 0; j < r; ++j)
        sample[static_cast<std::size_t>(j)] = static_cast<std::int32_t>((j * 97) % n);
      for (int offset = 0; offset < 8; ++offset) {  // z at every alignment mod 32 bytes (float) / 64 bytes (double)
        std::vector<T> expect(static_cast<std::size_t>(r + 16), T(-1)), got = expect;
        compact::detail::srht_gather_row(buf.data(), sample.data(), r, T(0.03125), expect.data() + offset, false,
                                         CpuIsa::kScalar);
        compact::detail::srht_gather_row(buf.data(), sample.data(), r, T(0.03125), got.data() + offset, true, isa);
        CAPTURE(r);
        CAPTURE(offset);
        CHECK(compact_test::same_bits(got, expect));
      }
    }
  }
}

#if defined(COMPACT_DISABLE_SIMD)
// One compile-time switch for every vector path: with it off, neither generation nor the FWHT compiled one.
static_assert(COMPACT_DETAIL_HAS_X86_PATHS == 0, "COMPACT_DISABLE_SIMD must turn off the x86 vector paths");
static_assert(COMPACT_DETAIL_AVX512_COMPILED == 0, "COMPACT_DISABLE_SIMD must turn off the AVX-512 kernels");
#if defined(COMPACT_DETAIL_TARGET_AVX) || defined(COMPACT_DETAIL_BEGIN_AVX2) || defined(COMPACT_DETAIL_BEGIN_AVX512)
#error "COMPACT_DISABLE_SIMD must leave no target attribute or target region defined"
#endif

TEST_CASE_TEMPLATE("under COMPACT_DISABLE_SIMD a request for a vector path runs the scalar generator and FWHT", T,
                   float, double) {
  // The internal dispatchers fall through to the scalar code when no vector path is compiled: asking them for
  // kAvx2 or kAvx512 (which the public entry points refuse here) must give the scalar reference's bits.
  const compact::EntryParams p = compact::entry_params(compact::SketchState{4, 5, 6}, 77);
  const compact::index_t n = 1024;
  std::vector<T> x(static_cast<std::size_t>(n));
  for (compact::index_t k = 0; k < n; ++k) x[static_cast<std::size_t>(k)] = static_cast<T>(k % 13) - T(6);
  std::vector<T> gauss_ref(40 * 77), rad_ref(40 * 77), fwht_ref = x;
  compact::detail::fill_dense_panel_with<compact::Gaussian>(CpuIsa::kScalar, p, 3, 43, 0, 77, gauss_ref.data(), 77);
  compact::detail::fill_dense_panel_with<compact::Rademacher>(CpuIsa::kScalar, p, 3, 43, 0, 77, rad_ref.data(), 77);
  compact::detail::fwht_unchecked(fwht_ref.data(), 10, CpuIsa::kScalar);
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    CHECK_FALSE(compact::cpu_isa_supported(isa));
    std::vector<T> gauss(gauss_ref.size()), rad(rad_ref.size()), y = x;
    compact::detail::fill_dense_panel_with<compact::Gaussian>(isa, p, 3, 43, 0, 77, gauss.data(), 77);
    compact::detail::fill_dense_panel_with<compact::Rademacher>(isa, p, 3, 43, 0, 77, rad.data(), 77);
    compact::detail::fwht_unchecked(y.data(), 10, isa);
    CHECK(compact_test::same_bits(gauss, gauss_ref));
    CHECK(compact_test::same_bits(rad, rad_ref));
    CHECK(compact_test::same_bits(y, fwht_ref));
    std::vector<T> z = x;
    CHECK_THROWS_AS(compact::fwht(z.data(), n, isa), compact::error);
  }
}
#endif
