// SPDX-License-Identifier: MIT
#pragma once
/// The AVX-512 instance of the CPU kernels (CpuIsa::kAvx512): the one source of each kernel compiled for AVX-512 F in
/// namespace detail::avx512.
///
/// As cpu/isa_avx2.hpp, with the lane types of cpu/lanes_avx512.inl between COMPACT_DETAIL_BEGIN_AVX512 and
/// COMPACT_DETAIL_END_TARGET. tests/cpu/test_avx512_emulated.cpp compiles the same instance a second time, against
/// SIMDe's portable AVX-512 intrinsics: that translation unit includes SIMDe with native aliases first and defines
/// COMPACT_DETAIL_AVX512_EMULATED, which drops the target region and moves the instance into namespace
/// detail::avx512_emulated (the library itself never includes SIMDe).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/sr8.hpp"
#include "compact/spec/moment8.hpp"
#include "compact/cpu/fwht_portable.hpp"
#include "compact/cpu/isa.hpp"

#if COMPACT_DETAIL_AVX512_COMPILED

// GCC 12.2's AVX-512 intrinsics read _mm512_undefined_* values and warn about it under -Wall (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if !defined(COMPACT_DETAIL_AVX512_EMULATED)
COMPACT_DETAIL_BEGIN_AVX512
#endif
namespace compact {
namespace detail {
namespace COMPACT_DETAIL_AVX512_NAMESPACE {

#define COMPACT_DETAIL_LANES_FN inline
#include "compact/cpu/lanes_avx512.inl"  // first: the lane types the kernels below are written in
#include "compact/spec/fp32_lanes.inl"
#include "compact/cpu/generate_panels.inl"
#include "compact/cpu/sr8_blocks.inl"
#include "compact/cpu/moment8_blocks.inl"
#include "compact/cpu/fwht_passes.inl"
#undef COMPACT_DETAIL_LANES_FN

}  // namespace COMPACT_DETAIL_AVX512_NAMESPACE
}  // namespace detail
}  // namespace compact
#if !defined(COMPACT_DETAIL_AVX512_EMULATED)
COMPACT_DETAIL_END_TARGET
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // COMPACT_DETAIL_AVX512_COMPILED
