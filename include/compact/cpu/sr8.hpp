// SPDX-License-Identifier: MIT
#pragma once
/// The sr8 codec on the CPU: sr8_encode / sr8_decode of fp32 values, multithreaded over blocks on compact's task pool,
/// on the active instruction set, bit for bit the reference of spec/sr8.hpp.

#include <algorithm>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/spec/sr8.hpp"
#include "compact/api/sr8_checks.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/parallel.hpp"
#include "compact/cpu/isa.hpp"
#include "compact/cpu/isa_avx2.hpp"
#include "compact/cpu/isa_avx512.hpp"

namespace compact {
namespace detail {

/// Blocks per task of the CPU encode and decode: a fixed partition (16384 values, 64 KiB of fp32 input), so the
/// results never depend on the thread count (they depend on nothing but the state and the values anyway).
inline constexpr index_t kSr8TaskBlocks = 256;
/// Operations per value that parallel_tasks weighs against the cost of waking the team: the pool joins in from
/// 2^17 values on (about 40 us of one core's encode).
inline constexpr double kSr8OpsPerValue = 16.0;

/// Encodes the n values x[0, n) whose flat indices start at 64 first_block (q[0, n), scales[0, ceil(n / 64))) with
/// the given instruction set (which must be supported: cpu_isa_supported(isa)). Every instruction set gives the bits
/// of sr8_encode_scalar. Preconditions (unchecked, internal): n >= 0, first_block >= 0.
inline void sr8_encode_range_with(CpuIsa isa, const Sr8Params& p, index_t first_block, const float* x, index_t n,
                                  std::int8_t* q, float* scales) {
#if COMPACT_DETAIL_AVX512_COMPILED
  if (isa == CpuIsa::kAvx512) return avx512::sr8_encode_range(p, first_block, x, n, q, scales);
#endif
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (isa == CpuIsa::kAvx2) return avx2::sr8_encode_range(p, first_block, x, n, q, scales);
#endif
  (void)isa;
  sr8_encode_scalar(p, first_block, x, n, q, scales);
}

/// Decodes n values (the first one the first of a block) with the given instruction set: the bits of
/// sr8_decode_scalar on every one.
inline void sr8_decode_range_with(CpuIsa isa, const std::int8_t* q, const float* scales, index_t n, float* out) {
#if COMPACT_DETAIL_AVX512_COMPILED
  if (isa == CpuIsa::kAvx512) return avx512::sr8_decode_range(q, scales, n, out);
#endif
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (isa == CpuIsa::kAvx2) return avx2::sr8_decode_range(q, scales, n, out);
#endif
  (void)isa;
  sr8_decode_scalar(q, scales, n, out);
}

/// body(first_block, first_value, values) for every task of kSr8TaskBlocks blocks of `count` values, on the pool.
template <class Body>
void sr8_parallel_blocks(index_t count, Body&& body) {
  const index_t blocks = sr8_scale_count(count);
  const index_t tasks = (blocks + kSr8TaskBlocks - 1) / kSr8TaskBlocks;
  parallel_tasks(tasks, kSr8OpsPerValue * double(count), [&](index_t t, int) {
    const index_t b0 = t * kSr8TaskBlocks, e0 = b0 * kSr8Block;
    body(b0, e0, std::min(count, e0 + kSr8TaskBlocks * kSr8Block) - e0);
  });
}

}  // namespace detail

/// Encodes `count` fp32 values x (contiguous) with the sr8 codec (docs/spec.md, "The sr8 codec"): q[count] int8 and
/// scales[sr8_scale_count(count)] fp32, one scale per block of 64 values, with stochastic rounding whose uniforms
/// come from `state` (philox_key(state), window) and each value's flat index. Every bit is the reference's
/// (sr8_encode_block) whatever the thread count and instruction set. Threads: compact's task pool over tasks of 256
/// blocks. Throws compact::error, before writing anything, for count < 0, a null pointer with count > 0 or an output
/// that aliases x or the other output.
inline void sr8_encode(const Cpu&, const float* x, index_t count, const SketchState& state, std::int8_t* q,
                       float* scales) {
  detail::check_sr8_encode_args("sr8_encode", x, count, q, scales);
  const Sr8Params p = sr8_params(state);
  const CpuIsa isa = active_cpu_isa();
  detail::sr8_parallel_blocks(count, [&](index_t b0, index_t e0, index_t n) {
    detail::sr8_encode_range_with(isa, p, b0, x + e0, n, q + e0, scales + b0);
  });
}

/// Decodes `count` values of the sr8 codec: out[i] = float(q[i]) * scales[i / 64] (one fp32 multiply; a block
/// encoded from non-finite values decodes to NaN throughout, a block below 2^-120 to zeros). Same threads and
/// instruction sets as sr8_encode, same bits as sr8_decode_value. Throws compact::error, before writing anything, for
/// count < 0, a null pointer with count > 0 or an out that aliases q or scales.
inline void sr8_decode(const Cpu&, const std::int8_t* q, const float* scales, index_t count, float* out) {
  detail::check_sr8_decode_args("sr8_decode", q, scales, count, out);
  const CpuIsa isa = active_cpu_isa();
  detail::sr8_parallel_blocks(count, [&](index_t b0, index_t e0, index_t n) {
    detail::sr8_decode_range_with(isa, q + e0, scales + b0, n, out + e0);
  });
}

}  // namespace compact
