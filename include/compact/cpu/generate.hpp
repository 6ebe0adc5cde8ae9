// SPDX-License-Identifier: MIT
#pragma once
/// Panel generation for the dense CPU projectors: the dispatch among the instruction sets.
///
/// `detail::fill_dense_panel` writes the same bits as the reference loop `detail::fill_dense_panel_scalar`
/// (spec/entries.hpp) on the active instruction set (cpu/isa.hpp, checked at run time, so the library needs no -m
/// flags): the AVX-512 or the AVX2 + FMA instance of cpu/generate_panels.inl (one source, compiled per instruction set
/// by cpu/isa_avx512.hpp and cpu/isa_avx2.hpp), or the reference loop. The vector kernels perform exactly the
/// reference's IEEE operations (same fma sequence, same roundings, the same integer conversions), lane by lane, so
/// their results are bit-identical; tests/cpu/test_generate.cpp checks this on many panels.

#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/cpu/isa.hpp"
#include "compact/cpu/isa_avx2.hpp"
#include "compact/cpu/isa_avx512.hpp"

namespace compact {
namespace detail {

/// Writes P[i0:i1, j0:j1] of a dense distribution into out (row-major, leading dimension ld >= j1 - j0), in fp32
/// converted to Scalar, with the given instruction set (which must be supported: cpu_isa_supported(isa)).
///
/// Every instruction set gives the bits of fill_dense_panel_scalar. Preconditions (unchecked, internal):
/// 0 <= i0 <= i1 <= kMaxDim, 0 <= j0 <= j1 <= kMaxDim.
template <class Dist, class Scalar>
void fill_dense_panel_with(CpuIsa isa, const EntryParams& p, index_t i0, index_t i1, index_t j0, index_t j1,
                           Scalar* out, index_t ld) {
  static_assert(is_dense_v<Dist>, "compact::detail::fill_dense_panel: Dist must be a dense distribution");
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::detail::fill_dense_panel: Scalar must be float or double");
  if (i0 >= i1 || j0 >= j1) return;
#if COMPACT_DETAIL_AVX512_COMPILED
  if (isa == CpuIsa::kAvx512) return avx512::fill_panel<Dist>(p, i0, i1, j0, j1, out, ld);
#endif
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (isa == CpuIsa::kAvx2) return avx2::fill_panel<Dist>(p, i0, i1, j0, j1, out, ld);
#endif
  (void)isa;
  fill_dense_panel_scalar<Dist>(p, i0, i1, j0, j1, out, ld, [](float v) { return static_cast<Scalar>(v); });
}

/// fill_dense_panel_with on the active instruction set (active_cpu_isa()).
template <class Dist, class Scalar>
void fill_dense_panel(const EntryParams& p, index_t i0, index_t i1, index_t j0, index_t j1, Scalar* out, index_t ld) {
  fill_dense_panel_with<Dist>(active_cpu_isa(), p, i0, i1, j0, j1, out, ld);
}

}  // namespace detail
}  // namespace compact
