// SPDX-License-Identifier: MIT
// No #pragma once: included once per instruction set (cpu/isa_avx2.hpp, cpu/isa_avx512.hpp, SIMDe's
// tests/cpu/test_avx512_emulated.cpp), inside that instance's namespace and target region, after its lane types
// (cpu/lanes_<isa>.inl) and cpu/generate_panels.inl (whose Philox it runs).
/// The sr8 codec's CPU kernels written once for every vector instruction set: kLanes Philox calls give the uniforms of
/// kLanes * 8 values (one or two blocks); per group of 16 blocks (4 KiB, in L1) one vector pass finds every block's
/// amax and scale and a second quantizes, the reference's IEEE operations lane by lane.
///
/// The instance's lane file provides, besides what cpu/generate_panels.inl uses: load(const float*), operator/ on
/// F32 (correctly rounded), floor (exact), max, gt (ordered a > b), max_u32, reduce_max_u32, uniform_fractions<kPart>,
/// store_i8 (saturating), load_i8. Every lane performs sr8_quantize's operations (spec/sr8.hpp) in its order:
/// y = x / s, floor, y - f, the comparison with the uniform, f + 1, the clamp, each exact or correctly rounded, so the
/// results are the reference's bits (tests/cpu/test_sr8_cpu.cpp, test_avx512_native.cpp, test_avx512_emulated.cpp).

/// Blocks whose uniforms one batch of kLanes Philox calls gives: kLanes groups of 8 values (1 on AVX2, 2 on AVX-512).
inline constexpr index_t kSr8BatchBlocks = kLanes * kSr8PhiloxValues / kSr8Block;
/// Vectors of kLanes values in a block.
inline constexpr int kSr8BlockVectors = static_cast<int>(kSr8Block) / kLanes;
static_assert(kSr8BatchBlocks >= 1 && kSr8BlockVectors % 2 == 0, "sr8: a batch holds whole blocks, a block pairs");

/// 1.5 * 2^23: an integer q with |q| < 2^22 added to it lands, exactly, in the low bits of kSr8IntMagicBits.
inline constexpr float kSr8IntMagic = 12582912.0f;
inline constexpr std::uint32_t kSr8IntMagicBits = 0x4B400000u;

/// The 16-bit uniforms of the batch of blocks first_block .. first_block + kSr8BatchBlocks - 1 (first_block a multiple
/// of kSr8BatchBlocks), in element order: register r holds values 2 kLanes r .. 2 kLanes (r + 1) - 1 of the batch as
/// 16-bit halves (uniform_fractions<kPart> reads them). They are the Philox outputs of groups g = 8 first_block + s,
/// s < kLanes, counter {lo32(g), hi32(g), window}, transposed so that each group's four words are consecutive
/// (to_slot_order): in memory order the words' halves are the group's eight uniforms (sr8_uniform_of). lo32(g) never
/// wraps inside the batch: 8 first_block is a multiple of kLanes, which divides 2^32.
inline void sr8_batch_uniforms(const PhiloxKeys& rk, std::uint64_t window, index_t first_block, U32 out[4]) {
  const std::uint64_t group = static_cast<std::uint64_t>(first_block) * (kSr8Block / kSr8PhiloxValues);
  U32 words[4];
  philox(run_counters(static_cast<std::uint32_t>(group), static_cast<std::uint32_t>(group >> 32)), window, rk, words);
  F32 ordered[4];
  to_slot_order(from_bits(words[0]), from_bits(words[1]), from_bits(words[2]), from_bits(words[3]), ordered);
  for (int r = 0; r < 4; ++r) out[r] = bits_of(ordered[r]);
}

/// sr8_quantize (spec/sr8.hpp) of kLanes values v of a block with scale s > 0, stored at q; `uniform` holds their
/// uniforms u16 as u16 / 2^16 (uniform_fractions). frac > u16 / 2^16 is the reference's frac * 2^16 > u16: both
/// scalings by 2^16 are exact. The clamp to [-127, 127]: f + 1 is at most 128 (|y| <= 127 (1 + 2^-22)), which
/// store_i8's saturation makes 127; the lower end is clamped here.
inline void sr8_quantize_lanes(F32 v, F32 s, F32 uniform, std::int8_t* q) {
  const F32 y = v / s;
  const F32 f = floor(y);
  F32 qf = if_then_else(gt(y - f, uniform), f + 1.0f, f);
  qf = max(qf, F32(-static_cast<float>(kSr8MaxQ)));
  store_i8(q, bits_of(qf + kSr8IntMagic) - U32(kSr8IntMagicBits));
}

/// Blocks whose amax passes run before their quantization passes: the amax -> scale -> quantization chain of a block
/// is long (a reduction across lanes, two divisions), and with a group of blocks the chains overlap. The group's
/// values stay in L1 between the passes (4 KiB).
inline constexpr index_t kSr8GroupBlocks = 16;

/// The scale of the whole block of 64 values at x (sr8_encode_block's amax and sr8_scale).
inline float sr8_block_scale(const float* x) {
  U32 amax(0u);
  for (int j = 0; j < kSr8BlockVectors; ++j) amax = max_u32(amax, bits_of(load(x + kLanes * j)) & U32(~fp32::kSignBit));
  return sr8_scale(reduce_max_u32(amax));
}

/// Quantizes the whole block of 64 values at x with its scale into q (sr8_encode_block); its uniforms are those of
/// vectors first_vector .. first_vector + kSr8BlockVectors - 1 of the batch in u (sr8_batch_uniforms).
inline void sr8_quantize_block(const float* x, float scale, const U32 u[4], int first_vector, std::int8_t* q) {
  if (!(scale > 0.0f)) {  // a non-finite value (scale NaN) or amax < 2^-120 (scale 0): every q is 0
    for (int j = 0; j < kSr8BlockVectors; ++j) store_i8(q + kLanes * j, U32(0u));
    return;
  }
  const F32 s = scale;
  for (int j = 0; j < kSr8BlockVectors; j += 2) {
    const U32 words = u[(first_vector + j) / 2];
    sr8_quantize_lanes(load(x + kLanes * j), s, uniform_fractions<0>(words), q + kLanes * j);
    sr8_quantize_lanes(load(x + kLanes * (j + 1)), s, uniform_fractions<1>(words), q + kLanes * (j + 1));
  }
}

/// Encodes the n values x[0, n) whose flat indices start at 64 first_block: q[0, n) and scales[0, ceil(n / 64)).
/// Whole blocks on vectors, in groups of kSr8GroupBlocks: the scales of the group, then its quantization with one
/// Philox batch per kSr8BatchBlocks blocks; a last partial block through the reference sr8_encode_block.
inline void sr8_encode_range(const Sr8Params& p, index_t first_block, const float* x, index_t n, std::int8_t* q,
                             float* scales) {
  const PhiloxKeys rk = philox_keys(p.key);
  const index_t full = n / kSr8Block;
  for (index_t k0 = 0; k0 < full; k0 += kSr8GroupBlocks) {
    const index_t k1 = std::min(full, k0 + kSr8GroupBlocks);
    for (index_t k = k0; k < k1; ++k) scales[k] = sr8_block_scale(x + kSr8Block * k);
    for (index_t k = k0; k < k1;) {
      const index_t b = first_block + k, first = b - b % kSr8BatchBlocks;
      U32 u[4];
      sr8_batch_uniforms(rk, p.window, first, u);
      for (index_t j = b - first; j < kSr8BatchBlocks && k < k1; ++j, ++k) {
        sr8_quantize_block(x + kSr8Block * k, scales[k], u, static_cast<int>(j) * kSr8BlockVectors, q + kSr8Block * k);
      }
    }
  }
  if (n % kSr8Block != 0) {
    const index_t e = kSr8Block * full;
    scales[full] = sr8_encode_block(p, x + e, n - e, (first_block + full) * kSr8Block, q + e);
  }
}

/// Decodes n values: out[i] = float(q[i]) * scales[i / 64] (sr8_decode_value), whole blocks on vectors.
inline void sr8_decode_range(const std::int8_t* q, const float* scales, index_t n, float* out) {
  const index_t full = n / kSr8Block;
  for (index_t k = 0; k < full; ++k) {
    const F32 s = scales[k];
    for (int j = 0; j < kSr8BlockVectors; ++j) {
      const index_t e = kSr8Block * k + kLanes * j;
      store(out + e, load_i8(q + e) * s);
    }
  }
  const index_t e = kSr8Block * full;
  sr8_decode_scalar(q + e, scales + full, n - e, out + e);
}
