// SPDX-License-Identifier: MIT
#pragma once
/// The AVX2 + FMA instance of the CPU kernels (CpuIsa::kAvx2): the one source of each kernel compiled for this
/// instruction set in namespace detail::avx2.
///
/// Highway's pattern: the lane types and operations of the instruction set (cpu/lanes_avx2.inl), then the kernels
/// written against them (spec/fp32_lanes.inl, cpu/generate_panels.inl, cpu/sr8_blocks.inl, cpu/fwht_passes.inl), all
/// included between COMPACT_DETAIL_BEGIN_AVX2 and COMPACT_DETAIL_END_TARGET, which compile every function in between
/// for AVX2 + FMA whatever the translation unit's -m flags (cpu/isa.hpp). cpu/generate.hpp, cpu/fwht.hpp,
/// cpu/srht_row_transform.hpp and cpu/sr8.hpp call them after the run-time CPU check.

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

#if COMPACT_DETAIL_HAS_X86_PATHS

COMPACT_DETAIL_BEGIN_AVX2
namespace compact {
namespace detail {
namespace avx2 {

#define COMPACT_DETAIL_LANES_FN inline
#include "compact/cpu/lanes_avx2.inl"  // first: the lane types the kernels below are written in
#include "compact/spec/fp32_lanes.inl"
#include "compact/cpu/generate_panels.inl"
#include "compact/cpu/sr8_blocks.inl"
#include "compact/cpu/moment8_blocks.inl"
#include "compact/cpu/fwht_passes.inl"
#undef COMPACT_DETAIL_LANES_FN

}  // namespace avx2
}  // namespace detail
}  // namespace compact
COMPACT_DETAIL_END_TARGET

#endif  // COMPACT_DETAIL_HAS_X86_PATHS
