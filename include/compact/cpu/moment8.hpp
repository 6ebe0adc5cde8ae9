// SPDX-License-Identifier: MIT
#pragma once
/// The 8-bit AdamW step on the CPU (spec/moment8.hpp): adamw8_step over fp32 or 16-bit gradients and parameters,
/// multithreaded over blocks on compact's task pool, on the active instruction set, bit for bit the reference.

#include <algorithm>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/spec/moment8.hpp"
#include "compact/api/moment8_checks.hpp"
#include "compact/kernels/convert.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/parallel.hpp"
#include "compact/cpu/isa.hpp"
#include "compact/cpu/isa_avx2.hpp"
#include "compact/cpu/isa_avx512.hpp"

namespace compact {

/// The storage type of a 16-bit gradient and parameter (raw bits): bfloat16 or IEEE binary16.
enum class Half16 { kBf16, kFp16 };

namespace detail {

/// Blocks per task of the CPU step: a fixed partition (16384 values), so nothing depends on the thread count (the
/// bits depend on nothing but the block's values anyway).
inline constexpr index_t kMoment8TaskBlocks = 64;
/// Operations per value that parallel_tasks weighs against the cost of waking the team.
inline constexpr double kMoment8OpsPerValue = 24.0;

/// Rounds fp32 to the parameter's storage: identity for fp32.
struct Moment8RoundBf16 {
  std::uint16_t operator()(float x) const { return bf16_bits_from_fp32(x); }
};
struct Moment8RoundFp16 {
  std::uint16_t operator()(float x) const { return fp16_bits_from_fp32(x); }
};
struct Moment8FromBf16 {
  float operator()(std::uint16_t b) const { return fp32_from_bf16_bits(b); }
};
struct Moment8FromFp16 {
  float operator()(std::uint16_t b) const { return fp32_from_fp16_bits(b); }
};

/// The step of n values (the first of a block at index 0) with fp32 gradient and fp32 parameter (or out) with the
/// given instruction set (which must be supported): the bits of adamw8_scalar on every one.
inline void adamw8_range_with(CpuIsa isa, const Adamw8Consts& c, const float* g, index_t n, std::int8_t* mq, float* ms,
                              std::uint8_t* vq, float* vs, float* param, float* out) {
#if COMPACT_DETAIL_AVX512_COMPILED
  if (isa == CpuIsa::kAvx512) return avx512::adamw8_range(c, g, n, mq, ms, vq, vs, param, out);
#endif
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (isa == CpuIsa::kAvx2) return avx2::adamw8_range(c, g, n, mq, ms, vq, vs, param, out);
#endif
  (void)isa;
  adamw8_scalar(c, g, n, mq, ms, vq, vs, param, out, Moment8SameFloat{}, Moment8SameFloat{}, Moment8SameFloat{});
}

/// body(first_block, first_value, values) for every task of kMoment8TaskBlocks blocks of `count` values, on the pool.
template <class Body>
void moment8_parallel_blocks(index_t count, Body&& body) {
  const index_t blocks = moment8_scale_count(count);
  const index_t tasks = (blocks + kMoment8TaskBlocks - 1) / kMoment8TaskBlocks;
  parallel_tasks(tasks, kMoment8OpsPerValue * double(count), [&](index_t t, int) {
    const index_t b0 = t * kMoment8TaskBlocks, e0 = b0 * kMoment8Block;
    body(b0, e0, std::min(count, e0 + kMoment8TaskBlocks * kMoment8Block) - e0);
  });
}

}  // namespace detail

/// One 8-bit AdamW step over `count` values (docs/spec.md, "The moment8 codec and the 8-bit AdamW step"): the
/// moments' codes m_q (int8), v_q (uint8) and their scales m_scales, v_scales (one fp32 per block of 256 values,
/// moment8_scale_count(count) each) are decoded, updated with the fp32 gradient `grad` and the constants `c`
/// (adamw8_consts), and re-encoded in place; with `param` (out null) the dense AdamW update is applied to it in place,
/// with `out` (param null) the update N = (m / bc1) / (sqrt(v / bc2) + eps) is written there. Every bit is the
/// reference's (detail::adamw8_block) whatever the thread count and instruction set. Threads: compact's task pool
/// over tasks of 64 blocks. Throws compact::error, before writing anything, for count < 0, a null pointer with
/// count > 0, both or neither of param and out, a non-finite constant or bias correction <= 0, or a buffer that
/// aliases another.
inline void adamw8_step(const Cpu&, const Adamw8Consts& c, const float* grad, index_t count, std::int8_t* m_q,
                        float* m_scales, std::uint8_t* v_q, float* v_scales, float* param, float* out) {
  detail::check_adamw8_args("adamw8_step", c, grad, count, m_q, m_scales, v_q, v_scales, param, out);
  const CpuIsa isa = active_cpu_isa();
  detail::moment8_parallel_blocks(count, [&](index_t b0, index_t e0, index_t n) {
    detail::adamw8_range_with(isa, c, grad + e0, n, m_q + e0, m_scales + b0, v_q + e0, v_scales + b0,
                              param == nullptr ? nullptr : param + e0, out == nullptr ? nullptr : out + e0);
  });
}

/// adamw8_step of a dense 16-bit parameter (raw bits of `kind`) with its 16-bit gradient: every value converted
/// exactly to fp32, the decayed parameter and the updated one each rounded to `kind` to nearest even (as torch's AdamW
/// on a 16-bit parameter rounds after each in-place operation). Scalar code, threaded as adamw8_step.
inline void adamw8_step(const Cpu&, const Adamw8Consts& c, Half16 kind, const std::uint16_t* grad, index_t count,
                        std::int8_t* m_q, float* m_scales, std::uint8_t* v_q, float* v_scales, std::uint16_t* param) {
  detail::check_adamw8_args("adamw8_step", c, grad, count, m_q, m_scales, v_q, v_scales, param,
                            static_cast<const float*>(nullptr));
  detail::moment8_parallel_blocks(count, [&](index_t b0, index_t e0, index_t n) {
    if (kind == Half16::kBf16) {
      detail::adamw8_scalar(c, grad + e0, n, m_q + e0, m_scales + b0, v_q + e0, v_scales + b0, param + e0,
                            static_cast<float*>(nullptr), detail::Moment8FromBf16{}, detail::Moment8FromBf16{},
                            detail::Moment8RoundBf16{});
    } else {
      detail::adamw8_scalar(c, grad + e0, n, m_q + e0, m_scales + b0, v_q + e0, v_scales + b0, param + e0,
                            static_cast<float*>(nullptr), detail::Moment8FromFp16{}, detail::Moment8FromFp16{},
                            detail::Moment8RoundFp16{});
    }
  });
}

}  // namespace compact
