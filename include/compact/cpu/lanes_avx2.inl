// SPDX-License-Identifier: MIT
// No #pragma once: included once, by cpu/isa_avx2.hpp, inside namespace detail::avx2 and its target region.
/// Eight lanes of AVX2 + FMA: the lane types and operations that spec/fp32_lanes.inl, cpu/generate_panels.inl and
/// cpu/fwht_passes.inl are written in (the list is in each of those files' comments).
///
/// Every operation is one instruction (or a short exact sequence) whose IEEE result is that of the one-lane instance
/// (namespace detail::scalar, spec/fp32_math.hpp), lane by lane; where an instruction only agrees on a range (the
/// signed compare and conversion below), the comment names the range and the kernels stay inside it.

// ---------------------------------------------------------------------------------------------------------------
// The lane types: 8 x fp32, 8 x u32, a mask of 8 lanes (all-ones or zero per lane), 4 x u64.

inline constexpr int kLanes = 8;

struct F32 {
  __m256 raw;
  F32() = default;
  F32(__m256 v) : raw(v) {}                 // NOLINT: implicit, a lane type
  F32(float x) : raw(_mm256_set1_ps(x)) {}  // NOLINT: implicit broadcast
};
struct U32 {
  __m256i raw;
  U32() = default;
  U32(__m256i v) : raw(v) {}                                             // NOLINT
  U32(std::uint32_t x) : raw(_mm256_set1_epi32(static_cast<int>(x))) {}  // NOLINT: the bits, not the value, of an int
};
struct M32 {
  __m256i raw;
};
struct U64 {
  __m256i raw;
  U64() = default;
  U64(__m256i v) : raw(v) {}                                                    // NOLINT
  U64(std::uint64_t x) : raw(_mm256_set1_epi64x(static_cast<long long>(x))) {}  // NOLINT
};

inline F32 operator+(F32 a, F32 b) { return _mm256_add_ps(a.raw, b.raw); }
inline F32 operator-(F32 a, F32 b) { return _mm256_sub_ps(a.raw, b.raw); }
inline F32 operator*(F32 a, F32 b) { return _mm256_mul_ps(a.raw, b.raw); }
inline F32 fma(F32 a, F32 b, F32 c) { return _mm256_fmadd_ps(a.raw, b.raw, c.raw); }
inline F32 sqrt(F32 a) { return _mm256_sqrt_ps(a.raw); }
inline F32 trunc(F32 a) { return _mm256_round_ps(a.raw, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
/// Exact for lanes below 2^24; the conversion is signed, so lanes must be below 2^31.
inline F32 to_float(U32 a) { return _mm256_cvtepi32_ps(a.raw); }
inline U32 bits_of(F32 a) { return _mm256_castps_si256(a.raw); }
inline F32 from_bits(U32 a) { return _mm256_castsi256_ps(a.raw); }

inline U32 operator+(U32 a, U32 b) { return _mm256_add_epi32(a.raw, b.raw); }
inline U32 operator-(U32 a, U32 b) { return _mm256_sub_epi32(a.raw, b.raw); }
inline U32 operator&(U32 a, U32 b) { return _mm256_and_si256(a.raw, b.raw); }
inline U32 operator|(U32 a, U32 b) { return _mm256_or_si256(a.raw, b.raw); }
inline U32 operator^(U32 a, U32 b) { return _mm256_xor_si256(a.raw, b.raw); }
template <int kBits>
inline U32 shift_left(U32 a) {
  return _mm256_slli_epi32(a.raw, kBits);
}
template <int kBits>
inline U32 shift_right(U32 a) {
  return _mm256_srli_epi32(a.raw, kBits);
}
inline M32 gt_signed(U32 a, U32 b) { return M32{_mm256_cmpgt_epi32(a.raw, b.raw)}; }
inline M32 has_bit(U32 a, U32 bit) { return M32{_mm256_cmpeq_epi32(_mm256_and_si256(a.raw, bit.raw), bit.raw)}; }
inline F32 if_then_else(M32 m, F32 yes, F32 no) {
  return _mm256_blendv_ps(no.raw, yes.raw, _mm256_castsi256_ps(m.raw));
}
inline U32 add_if(M32 m, U32 a, U32 b) { return _mm256_add_epi32(a.raw, _mm256_and_si256(m.raw, b.raw)); }
inline U32 sub_if(M32 m, U32 a, U32 b) { return _mm256_sub_epi32(a.raw, _mm256_and_si256(m.raw, b.raw)); }

// ---------------------------------------------------------------------------------------------------------------
// Philox (cpu/generate_panels.inl): eight blocks, each in a 64-bit lane so that vpmuludq yields the full
// 32 x 32 -> 64-bit product; slots (0, 1, 4, 5) live in register a, (2, 3, 6, 7) in register b, which is the order
// unpack{lo,hi}_epi32 produces and shuffle_ps(a, b, 2020) undoes.

/// The full 64-bit products of the low 32 bits of each 64-bit lane.
inline U64 mul_lo32(U64 a, U64 b) { return _mm256_mul_epu32(a.raw, b.raw); }
/// The high 32 bits of each 64-bit lane, in its low half.
inline U64 hi32(U64 a) { return _mm256_srli_epi64(a.raw, 32); }
inline U64 xor3(U64 a, U64 b, U64 c) { return _mm256_xor_si256(_mm256_xor_si256(a.raw, b.raw), c.raw); }
/// The low halves of the 64-bit lanes of a and b, back in slot order.
inline U32 join_lo32(U64 a, U64 b) {
  return _mm256_castps_si256(
      _mm256_shuffle_ps(_mm256_castsi256_ps(a.raw), _mm256_castsi256_ps(b.raw), _MM_SHUFFLE(2, 0, 2, 0)));
}

/// Eight (block, row) Philox counters, split over two registers of 64-bit lanes (only the low halves are read).
struct Counters {
  U64 block_a, block_b, row_a, row_b;
};
/// How a batch of slots keeps its counter words before they are loaded (cpu/generate_panels.inl).
using CounterWord = std::uint32_t;

inline Counters counters_of(U32 block, U32 row) {
  const __m256i zero = _mm256_setzero_si256();
  return Counters{_mm256_unpacklo_epi32(block.raw, zero), _mm256_unpackhi_epi32(block.raw, zero),
                  _mm256_unpacklo_epi32(row.raw, zero), _mm256_unpackhi_epi32(row.raw, zero)};
}
/// The counters of slots s = 0..7 from block[s], row[s] (32-byte aligned arrays).
inline Counters load_counters(const CounterWord* block, const CounterWord* row) {
  return counters_of(_mm256_load_si256(reinterpret_cast<const __m256i*>(block)),
                     _mm256_load_si256(reinterpret_cast<const __m256i*>(row)));
}
/// The counters of blocks first .. first + 7 of one row.
inline Counters run_counters(std::uint32_t first, std::uint32_t row) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return counters_of(_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), lane), U32(row));
}

/// Four lane vectors (lane s of v[w] = value w of slot s) rearranged into slot order: out[q] holds slots 2q, 2q + 1,
/// four consecutive values each.
inline void to_slot_order(F32 v0, F32 v1, F32 v2, F32 v3, F32 out[4]) {
  const __m256 t0 = _mm256_unpacklo_ps(v0.raw, v1.raw), t1 = _mm256_unpackhi_ps(v0.raw, v1.raw);
  const __m256 t2 = _mm256_unpacklo_ps(v2.raw, v3.raw), t3 = _mm256_unpackhi_ps(v2.raw, v3.raw);
  // u[s] holds slot s in its low 128 bits and slot s + 4 in its high 128 bits.
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  out[0] = _mm256_permute2f128_ps(u0, u1, 0x20);  // slots 0, 1
  out[1] = _mm256_permute2f128_ps(u2, u3, 0x20);  // slots 2, 3
  out[2] = _mm256_permute2f128_ps(u0, u1, 0x31);  // slots 4, 5
  out[3] = _mm256_permute2f128_ps(u2, u3, 0x31);  // slots 6, 7
}

/// The value of a Rademacher entry, broadcast: signed_lanes sets the sign bit itself, so -value is not needed.
struct RademacherValues {
  F32 positive;
};
/// +value, prepared once per batch (the AVX-512 instance prepares -value too: cpu/lanes_avx512.inl says why).
inline RademacherValues rademacher_values(float value) { return RademacherValues{F32(value)}; }
/// Lanes 8 part .. 8 part + 7 of a Rademacher word: lane l is -value where bit 8 part + l of `word` is set, +value
/// where it is clear (rademacher_value, spec/entries.hpp: the bit moved into value's sign).
inline F32 signed_lanes(std::uint32_t word, int part, const RademacherValues& v) {
  const F32 value = v.positive;
  const int top = 31 - 8 * part;
  const __m256i shift = _mm256_setr_epi32(top, top - 1, top - 2, top - 3, top - 4, top - 5, top - 6, top - 7);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(fp32::kSignBit));
  const __m256i bits = _mm256_sllv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shift);
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, sign), _mm256_castps_si256(value.raw)));
}

/// Stores 8 words to a 32-byte aligned address.
inline void store_aligned(std::uint32_t* dst, U32 v) { _mm256_store_si256(reinterpret_cast<__m256i*>(dst), v.raw); }
/// Stores 8 fp32 values converted to Scalar (float stays, double widens exactly).
inline void store(float* dst, F32 v) { _mm256_storeu_ps(dst, v.raw); }
inline void store(double* dst, F32 v) {
  _mm256_storeu_pd(dst, _mm256_cvtps_pd(_mm256_castps256_ps128(v.raw)));
  _mm256_storeu_pd(dst + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(v.raw, 1)));
}

// ---------------------------------------------------------------------------------------------------------------
// The sr8 codec (cpu/sr8_blocks.inl): fp32 loads, the IEEE division, an exact floor, compares, the unsigned max,
// 16-bit uniforms out of Philox words, int8 stores and loads.

/// kLanes floats from p (any alignment).
inline F32 load(const float* p) { return _mm256_loadu_ps(p); }
/// a / b, correctly rounded (vdivps).
inline F32 operator/(F32 a, F32 b) { return _mm256_div_ps(a.raw, b.raw); }
/// The largest integer <= a, exactly.
inline F32 floor(F32 a) { return _mm256_round_ps(a.raw, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
/// Lane-wise maximum (lanes are never NaN where the codec calls it).
inline F32 max(F32 a, F32 b) { return _mm256_max_ps(a.raw, b.raw); }
/// a > b (ordered: false where either is NaN).
inline M32 gt(F32 a, F32 b) { return M32{_mm256_castps_si256(_mm256_cmp_ps(a.raw, b.raw, _CMP_GT_OQ))}; }
/// Lane-wise unsigned maximum.
inline U32 max_u32(U32 a, U32 b) { return _mm256_max_epu32(a.raw, b.raw); }
/// The largest lane of a (unsigned).
inline std::uint32_t reduce_max_u32(U32 a) {
  __m256i m = _mm256_max_epu32(a.raw, _mm256_permute2x128_si256(a.raw, a.raw, 0x01));
  m = _mm256_max_epu32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  m = _mm256_max_epu32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(m)));
}
/// The 16-bit uniforms in `words` as the exact fractions u / 2^16: `words` holds 2 kLanes uniforms in memory order
/// (lane w: uniform 2w in its low 16 bits, 2w + 1 in its high 16 bits); lane l of the result is uniform kLanes kPart +
/// l over 2^16 (zero-extended, converted exactly, scaled by a power of two).
template <int kPart>
inline F32 uniform_fractions(U32 words) {
  const __m128i half = kPart == 0 ? _mm256_castsi256_si128(words.raw) : _mm256_extracti128_si256(words.raw, 1);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(half)), _mm256_set1_ps(0x1p-16f));
}
/// Stores kLanes int32 lanes as int8 at p (any alignment), saturated to [-128, 127] (two saturating packs).
inline void store_i8(std::int8_t* p, U32 v) {
  const __m256i w16 = _mm256_packs_epi32(v.raw, v.raw);  // per 128 bits: lanes 0-3, 0-3 (or 4-7, 4-7) as int16
  const __m256i w8 = _mm256_packs_epi16(w16, w16);       // per 128 bits: those four lanes as bytes, four times
  const __m256i both = _mm256_permutevar8x32_epi32(w8, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(both));
}
/// kLanes int8 at p (any alignment) as floats, exactly.
inline F32 load_i8(const std::int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

/// kLanes int8 (sign-extended) or uint8 (zero-extended) at p (any alignment) as 32-bit lanes (the moment8 codes).
inline U32 load_i8_lanes(const std::int8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline U32 load_u8_lanes(const std::uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
/// Stores kLanes lanes holding values in [0, 255] as bytes at p (any alignment; two unsigned saturating packs).
inline void store_u8(std::uint8_t* p, U32 v) {
  const __m256i w16 = _mm256_packus_epi32(v.raw, v.raw);
  const __m256i w8 = _mm256_packus_epi16(w16, w16);
  const __m256i both = _mm256_permutevar8x32_epi32(w8, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(both));
}
/// Lane-wise m ? yes : no on 32-bit integer lanes.
inline U32 select_u32(M32 m, U32 yes, U32 no) { return _mm256_blendv_epi8(no.raw, yes.raw, m.raw); }
/// a itself, as an opaque value: a product passed through it is rounded before any following sum (g++ contracts
/// a * b + c into an fma in an FMA target region under -ffp-contract=fast, its default for C++; the moment8 step's
/// products must not be).
inline F32 rounded(F32 a) {
  __asm__("" : "+x"(a.raw));
  return a;
}

// ---------------------------------------------------------------------------------------------------------------
// FWHT registers (cpu/fwht_passes.inl): 8 floats or 4 doubles; the stages below log2(lanes) act inside a register
// (permute + sign flip + add: lane i gets x[i] + x[i^h] where bit s of i is clear and -x[i] + x[i^h] = x[i^h] - x[i]
// where it is set, exactly the pair (a + b, a - b) of the textbook butterfly). With 16 registers a pass does up to
// three stages between registers (radix 8).

inline constexpr int kFwhtRadixLog = 3;

struct FwhtF32 {
  using Reg = __m256;
  using T = float;
  static constexpr int kLogLanes = 3;
  static Reg load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  /// Stages 0, 1, 2 inside one register, in that order.
  static Reg in_register_stages(Reg v) {
    const Reg m0 = _mm256_setr_ps(0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f);
    const Reg m1 = _mm256_setr_ps(0.0f, 0.0f, -0.0f, -0.0f, 0.0f, 0.0f, -0.0f, -0.0f);
    const Reg m2 = _mm256_setr_ps(0.0f, 0.0f, 0.0f, 0.0f, -0.0f, -0.0f, -0.0f, -0.0f);
    v = _mm256_add_ps(_mm256_xor_ps(v, m0), _mm256_permute_ps(v, 0xB1));          // lanes [1,0,3,2 | 5,4,7,6]
    v = _mm256_add_ps(_mm256_xor_ps(v, m1), _mm256_permute_ps(v, 0x4E));          // lanes [2,3,0,1 | 6,7,4,5]
    v = _mm256_add_ps(_mm256_xor_ps(v, m2), _mm256_permute2f128_ps(v, v, 0x01));  // swap the 128-bit halves
    return v;
  }
};

struct FwhtF64 {
  using Reg = __m256d;
  using T = double;
  static constexpr int kLogLanes = 2;
  static Reg load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, Reg v) { _mm256_storeu_pd(p, v); }
  static Reg zero() { return _mm256_setzero_pd(); }
  static Reg add(Reg a, Reg b) { return _mm256_add_pd(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_pd(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_pd(a, b); }
  /// Stages 0, 1 inside one register, in that order.
  static Reg in_register_stages(Reg v) {
    const Reg m0 = _mm256_setr_pd(0.0, -0.0, 0.0, -0.0);
    const Reg m1 = _mm256_setr_pd(0.0, 0.0, -0.0, -0.0);
    v = _mm256_add_pd(_mm256_xor_pd(v, m0), _mm256_permute_pd(v, 0x5));           // lanes [1,0 | 3,2]
    v = _mm256_add_pd(_mm256_xor_pd(v, m1), _mm256_permute2f128_pd(v, v, 0x01));  // swap the 128-bit halves
    return v;
  }
};
