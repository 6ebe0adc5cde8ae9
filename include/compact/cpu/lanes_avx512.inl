// SPDX-License-Identifier: MIT
// No #pragma once: included once per build of the AVX-512 instance (cpu/isa_avx512.hpp, and SIMDe's in
// tests/cpu/test_avx512_emulated.cpp), inside that instance's namespace and target region.
/// Sixteen lanes of AVX-512 F: the lane types and operations that spec/fp32_lanes.inl, cpu/generate_panels.inl and
/// cpu/fwht_passes.inl are written in (the list is in each of those files' comments).
///
/// AVX-512 F only (no DQ, BW or VL). The intrinsics are chosen among those SIMDe 0.7.4 implements, so that the same
/// source also compiles against SIMDe in the emulated test: it has no _mm512_cvtepi32_ps, _mm512_cvttps_epi32,
/// _mm512_permute_ps or _mm512_cvtps_pd, so this file uses cvtepu32_ps (its lanes are non-negative), roundscale for the
/// truncation, shuffle_ps and shuffle_i32x4 for permutations, an integer xor for sign flips (_mm512_xor_ps needs
/// AVX-512 DQ) and the 256-bit conversion for double output; nor does it alias the __mmask16 type or
/// _MM_FROUND_NO_EXC, which this file therefore does not name.

// ---------------------------------------------------------------------------------------------------------------
// The lane types: 16 x fp32, 16 x u32, a 16-bit lane mask, 8 x u64.

inline constexpr int kLanes = 16;

struct F32 {
  __m512 raw;
  F32() = default;
  F32(__m512 v) : raw(v) {}                 // NOLINT: implicit, a lane type
  F32(float x) : raw(_mm512_set1_ps(x)) {}  // NOLINT: implicit broadcast
};
struct U32 {
  __m512i raw;
  U32() = default;
  U32(__m512i v) : raw(v) {}                                             // NOLINT
  U32(std::uint32_t x) : raw(_mm512_set1_epi32(static_cast<int>(x))) {}  // NOLINT: the bits, not the value, of an int
};
struct M32 {
  decltype(_mm512_cmpgt_epi32_mask(_mm512_setzero_si512(), _mm512_setzero_si512())) raw;  // __mmask16
};
struct U64 {
  __m512i raw;
  U64() = default;
  U64(__m512i v) : raw(v) {}                                                   // NOLINT
  U64(std::uint64_t x) : raw(_mm512_set1_epi64(static_cast<long long>(x))) {}  // NOLINT
};

inline F32 operator+(F32 a, F32 b) { return _mm512_add_ps(a.raw, b.raw); }
inline F32 operator-(F32 a, F32 b) { return _mm512_sub_ps(a.raw, b.raw); }
inline F32 operator*(F32 a, F32 b) { return _mm512_mul_ps(a.raw, b.raw); }
inline F32 fma(F32 a, F32 b, F32 c) { return _mm512_fmadd_ps(a.raw, b.raw, c.raw); }
inline F32 sqrt(F32 a) { return _mm512_sqrt_ps(a.raw); }
inline F32 trunc(F32 a) { return _mm512_roundscale_ps(a.raw, _MM_FROUND_TO_ZERO); }
/// Exact for lanes below 2^24 (the kernels convert nothing larger).
inline F32 to_float(U32 a) { return _mm512_cvtepu32_ps(a.raw); }
inline U32 bits_of(F32 a) { return _mm512_castps_si512(a.raw); }
inline F32 from_bits(U32 a) { return _mm512_castsi512_ps(a.raw); }

inline U32 operator+(U32 a, U32 b) { return _mm512_add_epi32(a.raw, b.raw); }
inline U32 operator-(U32 a, U32 b) { return _mm512_sub_epi32(a.raw, b.raw); }
inline U32 operator&(U32 a, U32 b) { return _mm512_and_si512(a.raw, b.raw); }
inline U32 operator|(U32 a, U32 b) { return _mm512_or_si512(a.raw, b.raw); }
inline U32 operator^(U32 a, U32 b) { return _mm512_xor_si512(a.raw, b.raw); }
template <int kBits>
inline U32 shift_left(U32 a) {
  return _mm512_slli_epi32(a.raw, kBits);
}
template <int kBits>
inline U32 shift_right(U32 a) {
  return _mm512_srli_epi32(a.raw, kBits);
}
inline M32 gt_signed(U32 a, U32 b) { return M32{_mm512_cmpgt_epi32_mask(a.raw, b.raw)}; }
inline M32 has_bit(U32 a, U32 bit) { return M32{_mm512_test_epi32_mask(a.raw, bit.raw)}; }
inline F32 if_then_else(M32 m, F32 yes, F32 no) { return _mm512_mask_blend_ps(m.raw, no.raw, yes.raw); }
inline U32 add_if(M32 m, U32 a, U32 b) { return _mm512_mask_add_epi32(a.raw, m.raw, a.raw, b.raw); }
inline U32 sub_if(M32 m, U32 a, U32 b) { return _mm512_mask_sub_epi32(a.raw, m.raw, a.raw, b.raw); }

// ---------------------------------------------------------------------------------------------------------------
// Philox (cpu/generate_panels.inl): sixteen blocks, each in a 64-bit lane so that vpmuludq yields the full
// 32 x 32 -> 64-bit product; slots 0..7 live in register a, 8..15 in register b.

/// The full 64-bit products of the low 32 bits of each 64-bit lane.
inline U64 mul_lo32(U64 a, U64 b) { return _mm512_mul_epu32(a.raw, b.raw); }
/// The high 32 bits of each 64-bit lane, in its low half.
inline U64 hi32(U64 a) { return _mm512_srli_epi64(a.raw, 32); }
/// a ^ b ^ c in one vpternlogd (truth table 0x96).
inline U64 xor3(U64 a, U64 b, U64 c) { return _mm512_ternarylogic_epi32(a.raw, b.raw, c.raw, 0x96); }
/// The low halves of the eight 64-bit lanes of a (slots 0..7), then of b (slots 8..15).
inline U32 join_lo32(U64 a, U64 b) {
  const __m512i low_halves = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_epi32(a.raw, low_halves, b.raw);
}

/// Sixteen (block, row) Philox counters: slot s in 64-bit lane s % 8 of the a registers (s < 8) or the b registers.
struct Counters {
  U64 block_a, block_b, row_a, row_b;
};
/// How a batch of slots keeps its counter words before they are loaded (cpu/generate_panels.inl): 64 bits, so that
/// a load is the register.
using CounterWord = std::uint64_t;

/// The counters of slots s = 0..15 from block[s], row[s] (64-byte aligned arrays).
inline Counters load_counters(const CounterWord* block, const CounterWord* row) {
  return Counters{_mm512_load_si512(block), _mm512_load_si512(block + 8), _mm512_load_si512(row),
                  _mm512_load_si512(row + 8)};
}
/// The counters of blocks first .. first + 15 of one row.
inline Counters run_counters(std::uint32_t first, std::uint32_t row) {
  const __m512i base = _mm512_set1_epi64(static_cast<long long>(first));
  const U64 r = U64(std::uint64_t{row});
  return Counters{_mm512_add_epi64(base, _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7)),
                  _mm512_add_epi64(base, _mm512_setr_epi64(8, 9, 10, 11, 12, 13, 14, 15)), r, r};
}

/// Four lane vectors (lane s of v[w] = value w of slot s) rearranged into slot order: out[q] holds slots 4q .. 4q + 3,
/// four consecutive values each. A 4 x 16 -> 16 x 4 transpose in two rounds of two-source permutes (an index >= 16
/// picks the second source).
inline void to_slot_order(F32 v0, F32 v1, F32 v2, F32 v3, F32 out[4]) {
  const __m512i pair_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i pair_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 v01_lo = _mm512_permutex2var_ps(v0.raw, pair_lo, v1.raw);
  const __m512 v01_hi = _mm512_permutex2var_ps(v0.raw, pair_hi, v1.raw);
  const __m512 v23_lo = _mm512_permutex2var_ps(v2.raw, pair_lo, v3.raw);
  const __m512 v23_hi = _mm512_permutex2var_ps(v2.raw, pair_hi, v3.raw);
  const __m512i quad_lo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
  const __m512i quad_hi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
  out[0] = _mm512_permutex2var_ps(v01_lo, quad_lo, v23_lo);
  out[1] = _mm512_permutex2var_ps(v01_lo, quad_hi, v23_lo);
  out[2] = _mm512_permutex2var_ps(v01_hi, quad_lo, v23_hi);
  out[3] = _mm512_permutex2var_ps(v01_hi, quad_hi, v23_hi);
}

/// The two values of a Rademacher entry, +value and -value, each broadcast (rademacher_values, below).
struct RademacherValues {
  F32 positive, negative;
};
/// +value and -value, prepared once per batch. -value is the scalar negation broadcast, not +value's lanes with the
/// sign bit flipped (the same bits): GCC 12 turns a blend of v and v ^ sign into a merge-masked xor, a register copy
/// plus vxorps{k} per 16 entries where one vblendmps does (docs/benchmarks.md, "AVX-512 Rademacher").
inline RademacherValues rademacher_values(float value) { return RademacherValues{F32(value), F32(-value)}; }
/// Lanes 16 part .. 16 part + 15 of a Rademacher word: lane l is -value where bit 16 part + l of `word` is set,
/// +value where it is clear (rademacher_value, spec/entries.hpp: the word is the blend mask).
inline F32 signed_lanes(std::uint32_t word, int part, const RademacherValues& v) {
  return _mm512_mask_blend_ps(static_cast<std::uint16_t>(word >> (16 * part)), v.positive.raw, v.negative.raw);
}

/// Stores 16 words to a 64-byte aligned address.
inline void store_aligned(std::uint32_t* dst, U32 v) { _mm512_store_si512(dst, v.raw); }
/// Stores 16 fp32 values converted to Scalar (float stays, double widens exactly, four at a time).
inline void store(float* dst, F32 v) { _mm512_storeu_ps(dst, v.raw); }
inline void store(double* dst, F32 v) {
  _mm256_storeu_pd(dst, _mm256_cvtps_pd(_mm512_extractf32x4_ps(v.raw, 0)));
  _mm256_storeu_pd(dst + 4, _mm256_cvtps_pd(_mm512_extractf32x4_ps(v.raw, 1)));
  _mm256_storeu_pd(dst + 8, _mm256_cvtps_pd(_mm512_extractf32x4_ps(v.raw, 2)));
  _mm256_storeu_pd(dst + 12, _mm256_cvtps_pd(_mm512_extractf32x4_ps(v.raw, 3)));
}

// ---------------------------------------------------------------------------------------------------------------
// The sr8 codec (cpu/sr8_blocks.inl): fp32 loads, the IEEE division, an exact floor, compares, the unsigned max,
// 16-bit uniforms out of Philox words, int8 stores and loads. AVX-512 F and SIMDe-implemented intrinsics only (no
// cvtepu16_epi32, cvtepi8_epi32 or cvtepi32_ps: permutes, variable shifts and exact bit tricks instead).

/// kLanes floats from p (any alignment).
inline F32 load(const float* p) { return _mm512_loadu_ps(p); }
/// a / b, correctly rounded (vdivps).
inline F32 operator/(F32 a, F32 b) { return _mm512_div_ps(a.raw, b.raw); }
/// The largest integer <= a, exactly.
inline F32 floor(F32 a) { return _mm512_roundscale_ps(a.raw, _MM_FROUND_TO_NEG_INF); }
/// Lane-wise maximum (lanes are never NaN where the codec calls it).
inline F32 max(F32 a, F32 b) { return _mm512_max_ps(a.raw, b.raw); }
/// a > b (ordered: false where either is NaN).
inline M32 gt(F32 a, F32 b) { return M32{_mm512_cmp_ps_mask(a.raw, b.raw, _CMP_GT_OQ)}; }
/// Lane-wise unsigned maximum.
inline U32 max_u32(U32 a, U32 b) { return _mm512_max_epu32(a.raw, b.raw); }
/// The largest lane of a (unsigned): a butterfly over 256-, 128-, 64- and 32-bit distances.
inline std::uint32_t reduce_max_u32(U32 a) {
  __m512i m = _mm512_max_epu32(a.raw, _mm512_shuffle_i32x4(a.raw, a.raw, 0x4E));  // 256-bit halves exchanged
  m = _mm512_max_epu32(m, _mm512_shuffle_i32x4(m, m, 0xB1));                      // 128-bit lanes [1,0,3,2]
  m = _mm512_max_epu32(
      m, _mm512_permutexvar_epi32(_mm512_setr_epi32(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13), m));
  m = _mm512_max_epu32(
      m, _mm512_permutexvar_epi32(_mm512_setr_epi32(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14), m));
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(m)));
}
/// The 16-bit uniforms in `words` as the exact fractions u / 2^16: `words` holds 2 kLanes uniforms in memory order
/// (lane w: uniform 2w in its low 16 bits, 2w + 1 in its high 16 bits); lane l of the result is uniform kLanes kPart +
/// l over 2^16. Word 8 kPart + l / 2 goes to lane l, a rotation brings the lane's half to bits 7..22 (left by 7 for the
/// low half, by 23 for the high one), and under the exponent of 1.0 those bits are the float 1 + u 2^-16, exactly;
/// subtracting 1 is exact too (Sterbenz).
template <int kPart>
inline F32 uniform_fractions(U32 words) {
  constexpr int w = 8 * kPart;
  const __m512i pick = _mm512_setr_epi32(w, w, w + 1, w + 1, w + 2, w + 2, w + 3, w + 3, w + 4, w + 4, w + 5, w + 5,
                                         w + 6, w + 6, w + 7, w + 7);
  const __m512i rotate = _mm512_setr_epi32(7, 23, 7, 23, 7, 23, 7, 23, 7, 23, 7, 23, 7, 23, 7, 23);
  const __m512i bits = _mm512_rolv_epi32(_mm512_permutexvar_epi32(pick, words.raw), rotate);
  // (bits & 0x007FFF80) | 0x3F800000 in one vpternlogd: truth table (A & B) | C = 0xEA.
  const __m512i one_plus =
      _mm512_ternarylogic_epi32(bits, _mm512_set1_epi32(0x007FFF80), _mm512_set1_epi32(0x3F800000), 0xEA);
  return _mm512_sub_ps(_mm512_castsi512_ps(one_plus), _mm512_set1_ps(1.0f));
}
/// Stores kLanes int32 lanes as int8 at p (any alignment), saturated to [-128, 127] (vpmovsdb).
inline void store_i8(std::int8_t* p, U32 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtsepi32_epi8(v.raw));
}
/// kLanes int8 at p (any alignment) as floats, exactly. Byte l of the 16 goes to lane l (dword l / 4 shifted right
/// by 8 (l % 4)); its low 8 bits b are q mod 256, so b ^ 0x80 = q + 128 in [0, 255], and with the bits of
/// 2^23 + 2^22 above them they are the float 12582912 + 128 + q, exactly (the ulp there is 1): subtracting
/// 12583040 leaves q.
inline F32 load_i8(const std::int8_t* p) {
  const __m512i bytes = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i dwords =
      _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), bytes);
  const __m512i shifted =
      _mm512_srlv_epi32(dwords, _mm512_setr_epi32(0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24));
  const __m512i biased =
      _mm512_xor_si512(_mm512_and_si512(shifted, _mm512_set1_epi32(0xFF)), _mm512_set1_epi32(0x4B400080));
  return _mm512_sub_ps(_mm512_castsi512_ps(biased), _mm512_set1_ps(12583040.0f));
}

/// kLanes uint8 (zero-extended) or int8 (sign-extended) at p (any alignment) as 32-bit lanes (the moment8 codes): byte
/// l of the 16 goes to lane l as in load_i8 (the instructions SIMDe 0.7.4 has, for test_avx512_emulated); the sign
/// extension is (b ^ 0x80) - 0x80.
inline U32 load_u8_lanes(const std::uint8_t* p) {
  const __m512i bytes = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i dwords =
      _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), bytes);
  const __m512i shifted =
      _mm512_srlv_epi32(dwords, _mm512_setr_epi32(0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24));
  return _mm512_and_si512(shifted, _mm512_set1_epi32(0xFF));
}
inline U32 load_i8_lanes(const std::int8_t* p) {
  const U32 b = load_u8_lanes(reinterpret_cast<const std::uint8_t*>(p));
  return _mm512_sub_epi32(_mm512_xor_si512(b.raw, _mm512_set1_epi32(0x80)), _mm512_set1_epi32(0x80));
}
/// Stores kLanes lanes holding values in [0, 255] as bytes at p (any alignment): v - 128 saturates to itself in
/// vpmovsdb, and flipping bit 7 of each byte gives v back.
inline void store_u8(std::uint8_t* p, U32 v) {
  const __m128i b = _mm512_cvtsepi32_epi8(_mm512_sub_epi32(v.raw, _mm512_set1_epi32(128)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_xor_si128(b, _mm_set1_epi8(static_cast<char>(0x80))));
}
/// Lane-wise m ? yes : no on 32-bit integer lanes.
inline U32 select_u32(M32 m, U32 yes, U32 no) { return _mm512_mask_blend_epi32(m.raw, no.raw, yes.raw); }
/// a itself, as an opaque value: a product passed through it is rounded before any following sum (g++ contracts
/// a * b + c into an fma in an FMA target region under -ffp-contract=fast, its default for C++; the moment8 step's
/// products must not be). The SIMDe build (no target region, no FMA) has nothing to contract.
inline F32 rounded(F32 a) {
#if defined(COMPACT_DETAIL_AVX512_EMULATED)
  return a;
#else
  __asm__("" : "+v"(a.raw));
  return a;
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// FWHT registers (cpu/fwht_passes.inl): 16 floats or 8 doubles. A stage s < kLogLanes acts inside a register,
// v <- (v xor signmask_s) + swap_s(v): lane i gets x[i] + x[i ^ h] where bit s of i is clear and x[i ^ h] - x[i] where
// it is set. With 32 registers a pass does up to four stages between registers (radix 16): a 4096-float row takes
// two passes over L1 (stages 0-7, then 8-11) instead of the AVX2 instance's three. The passes joining sub-blocks
// stay at radix 8 (kFwhtTopRadixLog, cpu/fwht_passes.inl).

inline constexpr int kFwhtRadixLog = 4;

/// Flips the sign bits selected by `mask_bits` (the bit patterns of -0.0 where a lane changes sign).
inline __m512 flip_signs(__m512 v, __m512i mask_bits) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), mask_bits));
}

/// The 128-bit lanes of v permuted by kImm (as _mm512_shuffle_f32x4(v, v, kImm), which SIMDe 0.7.4 does not alias).
template <int kImm>
inline __m512 permute_lanes128(__m512 v) {
  const __m512i i = _mm512_castps_si512(v);
  return _mm512_castsi512_ps(_mm512_shuffle_i32x4(i, i, kImm));
}

/// One stage inside a register: lane i <- x[i] + x[i ^ h] (bit clear) or x[i ^ h] - x[i] (bit set), i.e. the pair
/// (a + b, a - b); `swapped` is v with lanes i and i ^ h exchanged, `sign` flips the lanes whose bit is set.
inline __m512 in_register_stage(__m512 v, __m512 swapped, __m512i sign) {
  return _mm512_add_ps(flip_signs(v, sign), swapped);
}
inline __m512d in_register_stage(__m512d v, __m512 swapped, __m512i sign) {
  return _mm512_add_pd(_mm512_castps_pd(flip_signs(_mm512_castpd_ps(v), sign)), _mm512_castps_pd(swapped));
}

struct FwhtF32 {
  using Reg = __m512;
  using T = float;
  static constexpr int kLogLanes = 4;
  static Reg load(const T* p) { return _mm512_loadu_ps(p); }
  static void store(T* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  /// Stages 0..3 inside one register, in that order.
  static Reg in_register_stages(Reg v) {
    const int s = static_cast<int>(0x80000000u);
    const __m512i m0 = _mm512_setr_epi32(0, s, 0, s, 0, s, 0, s, 0, s, 0, s, 0, s, 0, s);
    const __m512i m1 = _mm512_setr_epi32(0, 0, s, s, 0, 0, s, s, 0, 0, s, s, 0, 0, s, s);
    const __m512i m2 = _mm512_setr_epi32(0, 0, 0, 0, s, s, s, s, 0, 0, 0, 0, s, s, s, s);
    const __m512i m3 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, s, s, s, s, s, s, s, s);
    v = in_register_stage(v, _mm512_shuffle_ps(v, v, 0xB1), m0);  // lanes [1,0,3,2] of each 128 bits
    v = in_register_stage(v, _mm512_shuffle_ps(v, v, 0x4E), m1);  // lanes [2,3,0,1] of each 128 bits
    v = in_register_stage(v, permute_lanes128<0xB1>(v), m2);      // 128-bit lanes [1,0,3,2]
    return in_register_stage(v, permute_lanes128<0x4E>(v), m3);   // 256-bit halves exchanged
  }
};

struct FwhtF64 {
  using Reg = __m512d;
  using T = double;
  static constexpr int kLogLanes = 3;
  static Reg load(const T* p) { return _mm512_loadu_pd(p); }
  static void store(T* p, Reg v) { _mm512_storeu_pd(p, v); }
  static Reg zero() { return _mm512_setzero_pd(); }
  static Reg add(Reg a, Reg b) { return _mm512_add_pd(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_pd(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_pd(a, b); }
  /// Stages 0..2 inside one register, in that order (a double's sign bit is the top bit of its upper 32 bits).
  static Reg in_register_stages(Reg v) {
    const long long s = static_cast<long long>(0x8000000000000000ull);
    const __m512i m0 = _mm512_setr_epi64(0, s, 0, s, 0, s, 0, s);
    const __m512i m1 = _mm512_setr_epi64(0, 0, s, s, 0, 0, s, s);
    const __m512i m2 = _mm512_setr_epi64(0, 0, 0, 0, s, s, s, s);
    __m512 f = _mm512_castpd_ps(v);
    v = in_register_stage(v, _mm512_shuffle_ps(f, f, 0x4E), m0);  // doubles [1,0] of each 128 bits
    f = _mm512_castpd_ps(v);
    v = in_register_stage(v, permute_lanes128<0xB1>(f), m1);  // 128-bit lanes [1,0,3,2]
    f = _mm512_castpd_ps(v);
    return in_register_stage(v, permute_lanes128<0x4E>(f), m2);  // 256-bit halves exchanged
  }
};
