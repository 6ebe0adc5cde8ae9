// SPDX-License-Identifier: MIT
// No #pragma once: included once per instruction set (cpu/isa_avx2.hpp, cpu/isa_avx512.hpp, SIMDe's
// tests/cpu/test_avx512_emulated.cpp), inside that instance's namespace and target region, after its lane types
// (cpu/lanes_<isa>.inl).
/// The 8-bit AdamW step's CPU kernel written once for every vector instruction set: a whole block of 256 values per
/// call, kLanes values per vector, in two passes: decode, step and write N or the parameter while keeping the new
/// moments (2 KiB, in L1) and their amax; then encode them with the block's new scales. Every lane performs the
/// reference's operations (spec/moment8.hpp: moment8_decode_m / _v, adamw8_moments, adamw8_update / adamw8_dense,
/// moment8_encode_m / _v) in its order, each exact or correctly rounded; every product that feeds a sum goes through
/// rounded() so that no compiler fuses it into an fma. So the results are the reference's bits
/// (tests/cpu/test_moment8_cpu.cpp, test_avx512_emulated.cpp).
///
/// The instance's lane file provides, besides the arithmetic: load, store, sqrt, operator/, to_float (of lanes
/// < 2^31), shift_left / shift_right, gt, gt_signed, has_bit, if_then_else, select_u32, max_u32, reduce_max_u32,
/// load_i8_lanes, load_u8_lanes, store_i8 (saturating), store_u8 and rounded.

static_assert(kMoment8Block % kLanes == 0, "moment8: a block is whole vectors");

/// moment8_code_value(k, bias) lane by lane: k 2^(-bias - 2) below 8 (exact), else the bits (k + 8 (127 - bias)) << 20.
inline F32 moment8_table_lanes(U32 k, int bias) {
  const F32 subnormal = to_float(k) * F32(fp32::from_bits(static_cast<std::uint32_t>(125 - bias) << 23));
  const F32 normal = from_bits(shift_left<20>(k + U32(static_cast<std::uint32_t>(8 * (127 - bias)))));
  return if_then_else(gt_signed(U32(8u), k), subnormal, normal);
}

/// moment8_code_of(r, bias) lane by lane (0 <= r <= 1): below 2^(1 - bias) the bits of r 2^(bias + 2) + 2^23 less
/// those of 2^23 (the addition rounds to an integer, ties to even; the product is exact), else the bits of r rounded
/// to 3 mantissa bits (ties to even) less 8 (127 - bias).
inline U32 moment8_code_lanes(F32 r, int bias) {
  const F32 t = r * F32(fp32::from_bits(static_cast<std::uint32_t>(129 + bias) << 23));
  const U32 subnormal = bits_of(t + F32(kMoment8RoundMagic)) - U32(fp32::bits_of(kMoment8RoundMagic));
  const U32 b = bits_of(r);
  const U32 normal = shift_right<20>(b + U32(0x7FFFFu) + (shift_right<20>(b) & U32(1u))) -
                     U32(static_cast<std::uint32_t>(8 * (127 - bias)));
  return select_u32(gt(F32(fp32::from_bits(static_cast<std::uint32_t>(128 - bias) << 23)), r), subnormal, normal);
}

/// The step of one whole block of 256 values (adamw8_block for fp32 gradient and parameter or out).
inline void adamw8_full_block(const Adamw8Consts& c, const float* g, std::int8_t* mq, float* ms, std::uint8_t* vq,
                              float* vs, float* param, float* out) {
  alignas(64) float m[kMoment8Block];
  alignas(64) float v[kMoment8Block];
  const F32 sm = *ms, sv = *vs;
  const U32 sign(fp32::kSignBit), zero(0u), magnitude(~fp32::kSignBit);
  U32 amax_m(0u), amax_v(0u);
  for (int j = 0; j < static_cast<int>(kMoment8Block); j += kLanes) {
    const U32 qm = load_i8_lanes(mq + j);
    const M32 negative = gt_signed(zero, qm);
    const F32 m_abs = moment8_table_lanes(select_u32(negative, zero - qm, qm), kMoment8BiasM) * sm;
    const F32 m_old = from_bits(bits_of(m_abs) ^ select_u32(negative, sign, zero));
    const F32 v_old = moment8_table_lanes(load_u8_lanes(vq + j), kMoment8BiasV) * sv;
    const F32 gj = load(g + j);
    const F32 mn = rounded(F32(c.b1) * m_old) + rounded(F32(c.c1) * gj);
    const F32 vn = rounded(F32(c.b2) * v_old) + rounded(rounded(F32(c.c2) * gj) * gj);
    if (param != nullptr) {
      const F32 decayed = rounded(load(param + j) * F32(c.decay));
      const F32 denom = sqrt(vn) / F32(c.sqrt_bc2) + F32(c.eps);
      store(param + j, decayed + rounded(F32(c.neg_step) * mn) / denom);
    } else {
      store(out + j, (mn / F32(c.bc1)) / (sqrt(vn / F32(c.bc2)) + F32(c.eps)));
    }
    store(m + j, mn);
    store(v + j, vn);
    amax_m = max_u32(amax_m, bits_of(mn) & magnitude);
    amax_v = max_u32(amax_v, bits_of(vn) & magnitude);
  }
  const float new_sm = moment8_scale(reduce_max_u32(amax_m)), new_sv = moment8_scale(reduce_max_u32(amax_v));
  const F32 rsm = new_sm, rsv = new_sv;
  const bool m_ok = new_sm > 0.0f, v_ok = new_sv > 0.0f;  // else every code 0 (a zero or non-finite block)
  for (int j = 0; j < static_cast<int>(kMoment8Block); j += kLanes) {
    const U32 bm = bits_of(load(m + j));
    const U32 km = m_ok ? moment8_code_lanes(from_bits(bm & magnitude) / rsm, kMoment8BiasM) : zero;
    store_i8(mq + j, select_u32(has_bit(bm, sign), zero - km, km));
    store_u8(vq + j,
             v_ok ? moment8_code_lanes(from_bits(bits_of(load(v + j)) & magnitude) / rsv, kMoment8BiasV) : zero);
  }
  *ms = new_sm;
  *vs = new_sv;
}

/// The step of n values (the first of a block at index 0): whole blocks on vectors, a last partial block through the
/// reference adamw8_block.
inline void adamw8_range(const Adamw8Consts& c, const float* g, index_t n, std::int8_t* mq, float* ms, std::uint8_t* vq,
                         float* vs, float* param, float* out) {
  const index_t full = n / kMoment8Block;
  for (index_t b = 0; b < full; ++b) {
    const index_t e = b * kMoment8Block;
    adamw8_full_block(c, g + e, mq + e, ms + b, vq + e, vs + b, param == nullptr ? nullptr : param + e,
                      out == nullptr ? nullptr : out + e);
  }
  const index_t e = full * kMoment8Block;
  if (e < n) {
    adamw8_block(c, g + e, n - e, mq + e, ms + full, vq + e, vs + full, param == nullptr ? nullptr : param + e,
                 out == nullptr ? nullptr : out + e, Moment8SameFloat{}, Moment8SameFloat{}, Moment8SameFloat{});
  }
}
