// SPDX-License-Identifier: MIT
/// The AVX-512 kernels, compiled against SIMDe's portable AVX-512 intrinsics, give the reference's bits on any CPU.
///
/// The AVX-512 instance of the kernels (cpu/isa_avx512.hpp: cpu/generate_panels.inl, cpu/sr8_blocks.inl and
/// cpu/fwht_passes.inl on the lane types of cpu/lanes_avx512.inl) is compiled here a second time, without its target
/// region, with every _mm512 name resolved by SIMD Everywhere (Debian libsimde-dev; SIMDe's native aliases), so the
/// kernels' logic is checked bit for bit against the scalar reference on CPUs without AVX-512 (test_avx512_native runs
/// the real instructions where the CPU has them). Two gaps of SIMDe 0.7.4 are patched here, in the test only:
///   - _mm512_fmadd_ps: without FMA hardware SIMDe computes a * b + c with two roundings; the kernels need the fused
///     operation (the reference uses fma), so it is replaced by a lane-wise std::fma;
///   - _mm512_cvtepu32_ps: SIMDe implements it but aliases it under the wrong name (_mm512_cvtepu32_epi32).
/// The permutations the kernels rely on are also checked against Intel's definitions, so that SIMDe and the real
/// instructions are known to agree on them. Without SIMDe the test exits 77 (ctest: skipped).

#if __has_include(<simde/x86/avx512.h>)

// With -march=x86-64-v4 SIMDe maps its functions to the native intrinsics, and GCC 12 then reports its false positive
// inside avx512fintrin.h (`__Y may be used uninitialized`, GCC bug 105593) at this file's direct intrinsic calls. The
// library's own headers keep the warning (see cpu/eigen.hpp); this test file does not.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cmath>

namespace compact_test_simde {
/// Lane-wise fused multiply-add (IEEE fusedMultiplyAdd), the semantics of vfmadd*ps.
inline simde__m512 fused_fmadd_ps(simde__m512 a, simde__m512 b, simde__m512 c) {
  alignas(64) float av[16], bv[16], cv[16];
  simde_mm512_store_ps(av, a);
  simde_mm512_store_ps(bv, b);
  simde_mm512_store_ps(cv, c);
  for (int i = 0; i < 16; ++i) av[i] = std::fma(av[i], bv[i], cv[i]);
  return simde_mm512_load_ps(av);
}
}  // namespace compact_test_simde

#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps(a, b, c) compact_test_simde::fused_fmadd_ps(a, b, c)
#undef _mm512_cvtepu32_ps
#define _mm512_cvtepu32_ps(a) simde_mm512_cvtepu32_ps(a)

#define COMPACT_DETAIL_AVX512_EMULATED 1
#include <compact/cpu/isa_avx512.hpp>

#include "cpu/kernel_cases.hpp"
#include "cpu/moment8_cases.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

using compact::index_t;
namespace emulated = compact::detail::avx512_emulated;

/// The lanes of a vector register.
template <class V, class T>
std::vector<T> lanes(V v, int count) {
  std::vector<T> out(static_cast<std::size_t>(count));
  std::memcpy(out.data(), &v, sizeof(V));
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("the emulated AVX-512 Gaussian panel has the bits of the reference loop", Scalar, float, double) {
  compact_test::check_panels_against_reference<compact::Gaussian, Scalar>(
      [](auto&&... args) { emulated::fill_gaussian_panel(args...); });
}

TEST_CASE_TEMPLATE("the emulated AVX-512 Rademacher panel has the bits of the reference loop", Scalar, float, double) {
  compact_test::check_panels_against_reference<compact::Rademacher, Scalar>(
      [](auto&&... args) { emulated::fill_rademacher_panel(args...); });
}

TEST_CASE_TEMPLATE("the emulated AVX-512 FWHT has the bits of the textbook loop at every length", T, float, double) {
  // Up to 2^20: two levels of cache blocking joined by radix-16 and radix-2 passes (12 + 4 + 4, 11 + 4 + 4 + 1).
  compact_test::check_fwht_against_textbook<T>(emulated::kFwhtMinLog<T>, 20,
                                               [](T* x, int log_n) { emulated::fwht_in_place(x, log_n); });
}

TEST_CASE_TEMPLATE("the emulated AVX-512 signed transform of the SRHT has the bits of the unfused sequence", T, float,
                   double) {
  compact_test::check_signed_transform_against_reference<T>(
      emulated::kFwhtMinLog<T>, emulated::kFwhtBlockLog<T> + 5,  // + 5: blocked with radix-16 and radix-2 joins
      [](const T* x, const T* d, index_t n, T* buf, int log_n) { emulated::fwht_signed(x, d, n, buf, log_n); });
}

TEST_CASE("the emulated AVX-512 sr8 codec has the bits of the reference") {
  compact_test::check_sr8_against_reference([](auto&&... args) { emulated::sr8_encode_range(args...); },
                                            [](auto&&... args) { emulated::sr8_decode_range(args...); });
}

TEST_CASE("the emulated AVX-512 8-bit AdamW step has the bits of the reference") {
  CHECK(compact_test::first_moment8_mismatch([](auto&&... args) { emulated::adamw8_range(args...); }) == "");
}

// Each subcase models the Intel Intrinsics Guide's pseudo-code of an instruction lane by lane.
TEST_CASE("SIMDe's permutations used by the kernels follow Intel's definitions") {
  std::vector<std::uint32_t> a(16), b(16);
  for (int i = 0; i < 16; ++i) {
    a[static_cast<std::size_t>(i)] = 0x1000u + static_cast<std::uint32_t>(i);
    b[static_cast<std::size_t>(i)] = 0x2000u + static_cast<std::uint32_t>(i);
  }
  const __m512i va = _mm512_loadu_si512(a.data()), vb = _mm512_loadu_si512(b.data());
  const auto u32 = [](__m512i v) { return lanes<__m512i, std::uint32_t>(v, 16); };
  SUBCASE("_mm512_shuffle_ps: per 128-bit lane, two elements of a then two of b, by imm8 fields") {
    for (const int imm : {0xB1, 0x4E}) {
      std::vector<std::uint32_t> got;
      if (imm == 0xB1) {
        got = u32(_mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(va), _mm512_castsi512_ps(vb), 0xB1)));
      } else {
        got = u32(_mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(va), _mm512_castsi512_ps(vb), 0x4E)));
      }
      for (int l = 0; l < 4; ++l) {
        const int base = 4 * l;
        CHECK(got[base + 0] == a[base + ((imm >> 0) & 3)]);
        CHECK(got[base + 1] == a[base + ((imm >> 2) & 3)]);
        CHECK(got[base + 2] == b[base + ((imm >> 4) & 3)]);
        CHECK(got[base + 3] == b[base + ((imm >> 6) & 3)]);
      }
    }
  }
  SUBCASE("_mm512_shuffle_i32x4: 128-bit lanes 0, 1 of the result from a, 2, 3 from b, by imm8 fields") {
    const std::vector<std::uint32_t> g1 = u32(_mm512_shuffle_i32x4(va, vb, 0xB1)),
                                     g2 = u32(_mm512_shuffle_i32x4(va, vb, 0x4E));
    for (int pass = 0; pass < 2; ++pass) {
      const int imm = pass == 0 ? 0xB1 : 0x4E;
      const std::vector<std::uint32_t>& got = pass == 0 ? g1 : g2;
      for (int l = 0; l < 4; ++l) {
        const int src = (imm >> (2 * l)) & 3;
        for (int e = 0; e < 4; ++e) CHECK(got[4 * l + e] == (l < 2 ? a : b)[4 * src + e]);
      }
    }
  }
  SUBCASE("_mm512_permutex2var: index bit 4 selects b, bits 0-3 the element") {
    std::mt19937 gen(3);
    std::vector<std::uint32_t> idx(16);
    for (auto& v : idx) v = gen() & 31u;
    const std::vector<std::uint32_t> got = u32(_mm512_permutex2var_epi32(va, _mm512_loadu_si512(idx.data()), vb));
    const std::vector<std::uint32_t> gotf = u32(_mm512_castps_si512(
        _mm512_permutex2var_ps(_mm512_castsi512_ps(va), _mm512_loadu_si512(idx.data()), _mm512_castsi512_ps(vb))));
    for (int i = 0; i < 16; ++i) {
      const std::uint32_t k = idx[static_cast<std::size_t>(i)];
      CHECK(got[static_cast<std::size_t>(i)] == (k & 16u ? b : a)[k & 15u]);
      CHECK(gotf[static_cast<std::size_t>(i)] == (k & 16u ? b : a)[k & 15u]);
    }
  }
  SUBCASE("mask blend, mask test, 32 x 32 -> 64-bit multiply and three-way xor") {
    const std::vector<std::uint32_t> blend =
        u32(_mm512_castps_si512(_mm512_mask_blend_ps(0xA5C3, _mm512_castsi512_ps(va), _mm512_castsi512_ps(vb))));
    for (int i = 0; i < 16; ++i) CHECK(blend[static_cast<std::size_t>(i)] == ((0xA5C3 >> i) & 1 ? b : a)[i]);
    CHECK(_mm512_test_epi32_mask(va, _mm512_set1_epi32(1)) == 0xAAAA);
    const __m512i x = _mm512_set1_epi64(static_cast<long long>(0xDEADBEEF12345678ull));
    const __m512i m = _mm512_set1_epi64(static_cast<long long>(0x77777777D2511F53ull));
    const std::vector<std::uint64_t> prod = lanes<__m512i, std::uint64_t>(_mm512_mul_epu32(x, m), 8);
    for (std::uint64_t v : prod) CHECK(v == 0x12345678ull * 0xD2511F53ull);
    const std::vector<std::uint32_t> x3 = u32(_mm512_ternarylogic_epi32(va, vb, _mm512_set1_epi32(0x0F0F0F0F), 0x96));
    for (int i = 0; i < 16; ++i) CHECK(x3[static_cast<std::size_t>(i)] == (a[i] ^ b[i] ^ 0x0F0F0F0Fu));
  }
}

#else  // no SIMDe

#include <cstdio>
#include <cstdlib>

namespace {
/// Runs before the doctest main: ctest reports the test as skipped.
const int kSkipped = [] {
  std::printf("test_avx512_emulated: SIMDe (simde/x86/avx512.h) not found, skipping (exit 77)\n");
  std::exit(77);
  return 0;
}();
}  // namespace

#endif
