// SPDX-License-Identifier: MIT
#pragma once
/// Panel generation for the dense CPU projectors: 8-lane AVX2 Philox4x32-10, Box-Muller and bit expansion.
///
/// `detail::fill_dense_panel` writes the same bits as the reference loop `detail::fill_dense_panel_scalar`
/// (core/entries.hpp) on the active instruction set (cpu/isa.hpp, checked at run time, so the library needs no -m
/// flags): the AVX-512 path (cpu/generate_avx512.hpp), the AVX2 + FMA path below, or the reference loop. The AVX2 path
/// performs exactly the reference's IEEE operations (same fma sequence, same roundings, the same integer conversions),
/// lane by lane, so its results are bit-identical; tests/cpu/test_generate.cpp checks this on many panels.

#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/core/entries.hpp"
#include "compact/cpu/generate_avx512.hpp"
#include "compact/cpu/isa.hpp"

namespace compact {
namespace detail {

#if COMPACT_DETAIL_HAS_X86_PATHS

/// An unsigned 32-bit constant broadcast to the eight lanes (the bits, not the value, of an int).
COMPACT_DETAIL_TARGET_AVX2 inline __m256i set1_u32(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }

/// The Philox round keys (core/philox.hpp's schedule), each broadcast to the four 64-bit lanes of a register.
struct PhiloxRoundKeys {
  __m256i k0[kPhiloxRounds];
  __m256i k1[kPhiloxRounds];
};

COMPACT_DETAIL_TARGET_AVX2 inline PhiloxRoundKeys philox_round_keys(Key2x32 key) {
  PhiloxRoundKeys rk;
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) key = philox_next_key(key);
    rk.k0[round] = _mm256_set1_epi64x(static_cast<long long>(key.w[0]));
    rk.k1[round] = _mm256_set1_epi64x(static_cast<long long>(key.w[1]));
  }
  return rk;
}

/// 32-bit lanes (a0, a1, b0, b1 | a2, a3, b2, b3): the low halves of the 64-bit lanes of a and b in slot order.
COMPACT_DETAIL_TARGET_AVX2 inline __m256i join_slots(__m256i a, __m256i b) {
  return _mm256_castps_si256(
      _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), _MM_SHUFFLE(2, 0, 2, 0)));
}

/// Eight Philox4x32-10 blocks at once: counters {block[s], row[s], w0, w1} for slots s = 0..7.
///
/// Each 256-bit register holds four blocks in 64-bit lanes (only the low 32 bits matter): vpmuludq then yields the
/// full 32x32 -> 64-bit products of the reference directly. Slots (0, 1, 4, 5) live in `a`, (2, 3, 6, 7) in `b`,
/// which is the order unpack{lo,hi}_epi32 produces and shuffle_ps(a, b, 2020) undoes. out[w] = output word w of
/// every slot, 32-bit lanes in slot order.
COMPACT_DETAIL_TARGET_AVX2 inline void philox8(__m256i block, __m256i row, std::uint64_t window,
                                               const PhiloxRoundKeys& rk, __m256i out[4]) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i m0 = _mm256_set1_epi64x(kPhiloxM0);
  const __m256i m1 = _mm256_set1_epi64x(kPhiloxM1);
  const __m256i w0 = _mm256_set1_epi64x(static_cast<long long>(static_cast<std::uint32_t>(window)));
  const __m256i w1 = _mm256_set1_epi64x(static_cast<long long>(static_cast<std::uint32_t>(window >> 32)));
  __m256i a0 = _mm256_unpacklo_epi32(block, zero), a1 = _mm256_unpacklo_epi32(row, zero), a2 = w0, a3 = w1;
  __m256i b0 = _mm256_unpackhi_epi32(block, zero), b1 = _mm256_unpackhi_epi32(row, zero), b2 = w0, b3 = w1;
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const __m256i pa0 = _mm256_mul_epu32(a0, m0), pa1 = _mm256_mul_epu32(a2, m1);
    const __m256i pb0 = _mm256_mul_epu32(b0, m0), pb1 = _mm256_mul_epu32(b2, m1);
    // c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0 (high halves of c1, c3 are ignored garbage).
    a0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pa1, 32), a1), rk.k0[round]);
    a2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pa0, 32), a3), rk.k1[round]);
    a1 = pa1;
    a3 = pa0;
    b0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pb1, 32), b1), rk.k0[round]);
    b2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(pb0, 32), b3), rk.k1[round]);
    b1 = pb1;
    b3 = pb0;
  }
  out[0] = join_slots(a0, b0);
  out[1] = join_slots(a1, b1);
  out[2] = join_slots(a2, b2);
  out[3] = join_slots(a3, b3);
}

/// fp32::log, lane by lane, with the reference's operation sequence.
COMPACT_DETAIL_TARGET_AVX2 inline __m256 log8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(u, fp32::kMantissaBits), _mm256_set1_epi32(fp32::kExponentBias));
  __m256i mant = _mm256_or_si256(_mm256_and_si256(u, set1_u32(fp32::kMantissaMask)), set1_u32(fp32::kOneBits));
  // mant and kSqrt2Bits are below 2^31, so the signed compare is the reference's unsigned one.
  const __m256i big = _mm256_cmpgt_epi32(mant, set1_u32(fp32::kSqrt2Bits));
  mant = _mm256_sub_epi32(mant, _mm256_and_si256(big, set1_u32(fp32::kExponentUnit)));
  e = _mm256_sub_epi32(e, big);  // big is -1 where m > sqrt(2)
  const __m256 f = _mm256_sub_ps(_mm256_castsi256_ps(mant), _mm256_set1_ps(1.0f));
  __m256 q = _mm256_set1_ps(fp32::kLogQ7);
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(fp32::kLogQ6));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(fp32::kLogQ5));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(fp32::kLogQ4));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(fp32::kLogQ3));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(fp32::kLogQ2));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(fp32::kLogQ1));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(fp32::kLogQ0));
  const __m256 t = _mm256_fmadd_ps(q, f, _mm256_set1_ps(-0.5f));
  const __m256 f2 = _mm256_mul_ps(f, f);
  const __m256 p = _mm256_fmadd_ps(f2, t, f);
  const __m256 fe = _mm256_cvtepi32_ps(e);
  const __m256 lo = _mm256_fmadd_ps(fe, _mm256_set1_ps(fp32::kLn2Lo), p);
  return _mm256_fmadd_ps(fe, _mm256_set1_ps(fp32::kLn2Hi), lo);
}

/// Box-Muller of fp32 (box_muller in core/entries.hpp), lane by lane: lane0 = rho cos(2 pi t), lane1 = rho sin.
COMPACT_DETAIL_TARGET_AVX2 inline void box_muller8(__m256i a, __m256i b, __m256* lane0, __m256* lane1) {
  const __m256 scale24 = _mm256_set1_ps(kBoxMullerScale);
  // (a >> 8) + 1 <= 2^24 and b >> 8 < 2^24: the signed int -> float conversions are exact, as in the reference.
  const __m256 u = _mm256_mul_ps(
      _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_srli_epi32(a, kBoxMullerShift), _mm256_set1_epi32(1))), scale24);
  const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b, kBoxMullerShift)), scale24);
  const __m256 rho = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), log8(u)));
  // fp32::sincos_2pi: y = 4t exact, k = (int)(y + 0.5) (truncation), r = y - k exact.
  const __m256 y = _mm256_mul_ps(t, _mm256_set1_ps(4.0f));
  const __m256i k = _mm256_cvttps_epi32(_mm256_add_ps(y, _mm256_set1_ps(0.5f)));
  const __m256 r = _mm256_sub_ps(y, _mm256_cvtepi32_ps(k));
  const __m256 s = _mm256_mul_ps(r, r);
  __m256 ps = _mm256_set1_ps(fp32::kSinS4);
  ps = _mm256_fmadd_ps(ps, s, _mm256_set1_ps(fp32::kSinS3));
  ps = _mm256_fmadd_ps(ps, s, _mm256_set1_ps(fp32::kSinS2));
  ps = _mm256_fmadd_ps(ps, s, _mm256_set1_ps(fp32::kSinS1));
  ps = _mm256_fmadd_ps(ps, s, _mm256_set1_ps(fp32::kSinS0));
  const __m256 sin_r = _mm256_mul_ps(r, ps);
  __m256 pc = _mm256_set1_ps(fp32::kCosC4);
  pc = _mm256_fmadd_ps(pc, s, _mm256_set1_ps(fp32::kCosC3));
  pc = _mm256_fmadd_ps(pc, s, _mm256_set1_ps(fp32::kCosC2));
  pc = _mm256_fmadd_ps(pc, s, _mm256_set1_ps(fp32::kCosC1));
  pc = _mm256_fmadd_ps(pc, s, _mm256_set1_ps(fp32::kCosC0));
  const __m256 cos_r = _mm256_fmadd_ps(pc, s, _mm256_set1_ps(1.0f));
  // Quadrant k & 3: odd quadrants swap sin and cos; sin is negated in quadrants 2, 3, cos in 1, 2.
  const __m256i quadrant = _mm256_and_si256(k, _mm256_set1_epi32(3));
  const __m256 odd =
      _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(quadrant, _mm256_set1_epi32(1)), _mm256_set1_epi32(1)));
  const __m256 sin_sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(quadrant, 1), 31));
  const __m256 cos_sign = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_srli_epi32(_mm256_add_epi32(quadrant, _mm256_set1_epi32(1)), 1), 31));
  const __m256 sin_v = _mm256_xor_ps(_mm256_blendv_ps(sin_r, cos_r, odd), sin_sign);
  const __m256 cos_v = _mm256_xor_ps(_mm256_blendv_ps(cos_r, sin_r, odd), cos_sign);
  *lane0 = _mm256_mul_ps(rho, cos_v);
  *lane1 = _mm256_mul_ps(rho, sin_v);
}

/// Stores 4 fp32 values converted to Scalar (float stays, double widens exactly).
template <class Scalar>
COMPACT_DETAIL_TARGET_AVX2 inline void store4(Scalar* dst, __m128 v) {
  if constexpr (std::is_same_v<Scalar, float>) {
    _mm_storeu_ps(dst, v);
  } else {
    _mm256_storeu_pd(dst, _mm256_cvtps_pd(v));
  }
}

/// Stores 8 fp32 values converted to Scalar.
template <class Scalar>
COMPACT_DETAIL_TARGET_AVX2 inline void store8(Scalar* dst, __m256 v) {
  if constexpr (std::is_same_v<Scalar, float>) {
    _mm256_storeu_ps(dst, v);
  } else {
    _mm256_storeu_pd(dst, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    _mm256_storeu_pd(dst + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
}

/// Walks the (row, block) pairs of a panel in row-major order, eight at a time.
struct PairCursor {
  index_t row;
  index_t block;
  index_t first_block;
  index_t last_block;  // inclusive
};

/// Next eight (row, block) pairs into block[], row[]; returns how many are real (the rest repeat the last one).
inline int next_pairs(PairCursor* c, index_t row_end, std::uint32_t block[8], std::uint32_t row[8], index_t rows[8],
                      index_t blocks[8]) {
  int count = 0;
  for (int s = 0; s < 8; ++s) {
    if (c->row < row_end) {
      rows[s] = c->row;
      blocks[s] = c->block;
      ++count;
      if (++c->block > c->last_block) {
        c->block = c->first_block;
        ++c->row;
      }
    } else {
      rows[s] = rows[s > 0 ? s - 1 : 0];
      blocks[s] = blocks[s > 0 ? s - 1 : 0];
    }
    block[s] = static_cast<std::uint32_t>(blocks[s]);
    row[s] = static_cast<std::uint32_t>(rows[s]);
  }
  return count;
}

/// The scaled Gaussian entries of eight blocks (slots), transposed: group s (the 4 entries of slot s, in lane
/// order) is the low half of u[s] for s < 4 and the high half of u[s - 4] otherwise.
COMPACT_DETAIL_TARGET_AVX2 inline void gaussian8(__m256i block, __m256i row, std::uint64_t window,
                                                 const PhiloxRoundKeys& rk, __m256 scale, __m256 u[4]) {
  __m256i x[4];
  philox8(block, row, window, rk, x);
  __m256 l0, l1, l2, l3;
  box_muller8(x[0], x[1], &l0, &l1);
  box_muller8(x[2], x[3], &l2, &l3);
  l0 = _mm256_mul_ps(l0, scale);
  l1 = _mm256_mul_ps(l1, scale);
  l2 = _mm256_mul_ps(l2, scale);
  l3 = _mm256_mul_ps(l3, scale);
  const __m256 t0 = _mm256_unpacklo_ps(l0, l1), t1 = _mm256_unpackhi_ps(l0, l1);
  const __m256 t2 = _mm256_unpacklo_ps(l2, l3), t3 = _mm256_unpackhi_ps(l2, l3);
  u[0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  u[1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  u[2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  u[3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
}

/// Up to eight arbitrary (row, block) pairs of a Gaussian panel, each clipped to the panel's columns.
struct GaussianPending {
  int count = 0;
  alignas(32) std::uint32_t block[8];
  alignas(32) std::uint32_t row[8];
};

template <class Scalar>
COMPACT_DETAIL_TARGET_AVX2 inline void flush_gaussian(GaussianPending* q, std::uint64_t window,
                                                      const PhiloxRoundKeys& rk, __m256 scale, index_t i0, index_t j0,
                                                      index_t width, Scalar* out, index_t ld) {
  for (int s = q->count; s < 8; ++s) {  // pad with a repeat of slot 0: computed, never stored
    q->block[s] = q->block[0];
    q->row[s] = q->row[0];
  }
  __m256 u[4];
  gaussian8(_mm256_load_si256(reinterpret_cast<const __m256i*>(q->block)),
            _mm256_load_si256(reinterpret_cast<const __m256i*>(q->row)), window, rk, scale, u);
  for (int s = 0; s < q->count; ++s) {
    const __m128 g = s < 4 ? _mm256_castps256_ps128(u[s]) : _mm256_extractf128_ps(u[s - 4], 1);
    Scalar* dst = out + (index_t{q->row[s]} - i0) * ld;
    const index_t col = index_t{q->block[s]} * kGaussianBlockCols - j0;
    if (col >= 0 && col + kGaussianBlockCols <= width) {
      store4(dst + col, g);
    } else {
      alignas(16) float lanes[4];
      _mm_store_ps(lanes, g);
      for (index_t l = 0; l < kGaussianBlockCols; ++l) {
        if (col + l >= 0 && col + l < width) dst[col + l] = static_cast<Scalar>(lanes[l]);
      }
    }
  }
  q->count = 0;
}

/// AVX2 Gaussian panel: P[i0:i1, j0:j1] into out (leading dimension ld); bit-identical to the reference loop.
///
/// Runs of eight whole blocks inside one row are generated and stored as 32 contiguous entries; the rest (partial
/// blocks at the panel's edges, short leftovers, narrow panels) is batched across rows eight blocks at a time.
template <class Scalar>
COMPACT_DETAIL_TARGET_AVX2 inline void fill_gaussian_panel_avx2(const EntryParams& p, index_t i0, index_t i1,
                                                                index_t j0, index_t j1, Scalar* out, index_t ld) {
  const PhiloxRoundKeys rk = philox_round_keys(p.key);
  const __m256 scale = _mm256_set1_ps(p.scale);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const index_t width = j1 - j0;
  const index_t first_block = j0 / kGaussianBlockCols, end_block = (j1 - 1) / kGaussianBlockCols + 1;
  const index_t full_begin = (j0 + kGaussianBlockCols - 1) / kGaussianBlockCols, full_end = j1 / kGaussianBlockCols;
  GaussianPending pending;
  const auto push = [&pending](index_t i, index_t b) {
    pending.block[pending.count] = static_cast<std::uint32_t>(b);
    pending.row[pending.count] = static_cast<std::uint32_t>(i);
    return ++pending.count == 8;
  };
  for (index_t i = i0; i < i1; ++i) {
    Scalar* dst = out + (i - i0) * ld - j0;
    index_t b = first_block;
    if (b < full_begin && push(i, b++)) flush_gaussian(&pending, p.window, rk, scale, i0, j0, width, out, ld);
    const __m256i row = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(i)));
    for (; b + 8 <= full_end; b += 8) {
      __m256 u[4];
      gaussian8(_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(b))), lane), row,
                p.window, rk, scale, u);
      Scalar* d = dst + b * kGaussianBlockCols;
      store8(d, _mm256_permute2f128_ps(u[0], u[1], 0x20));       // slots 0, 1
      store8(d + 8, _mm256_permute2f128_ps(u[2], u[3], 0x20));   // slots 2, 3
      store8(d + 16, _mm256_permute2f128_ps(u[0], u[1], 0x31));  // slots 4, 5
      store8(d + 24, _mm256_permute2f128_ps(u[2], u[3], 0x31));  // slots 6, 7
    }
    for (; b < end_block; ++b) {
      if (push(i, b)) flush_gaussian(&pending, p.window, rk, scale, i0, j0, width, out, ld);
    }
  }
  if (pending.count > 0) flush_gaussian(&pending, p.window, rk, scale, i0, j0, width, out, ld);
}

/// AVX2 Rademacher panel: P[i0:i1, j0:j1] into out (leading dimension ld); bit-identical to the reference loop.
template <class Scalar>
COMPACT_DETAIL_TARGET_AVX2 inline void fill_rademacher_panel_avx2(const EntryParams& p, index_t i0, index_t i1,
                                                                  index_t j0, index_t j1, Scalar* out, index_t ld) {
  const PhiloxRoundKeys rk = philox_round_keys(p.key);
  const index_t width = j1 - j0;
  // rademacher_value: entry k of a 32-bit word is +-scale with bit k moved to the sign,
  // (word << (31 - k)) & kSignBit | bits(scale).
  const __m256i scale_bits = set1_u32(fp32::bits_of(p.scale));
  const __m256i sign = set1_u32(fp32::kSignBit);
  __m256i shift[4];
  for (int m = 0; m < 4; ++m) {
    shift[m] = _mm256_setr_epi32(31 - 8 * m, 30 - 8 * m, 29 - 8 * m, 28 - 8 * m, 27 - 8 * m, 26 - 8 * m, 25 - 8 * m,
                                 24 - 8 * m);
  }
  PairCursor cursor{i0, j0 / kRademacherBlockCols, j0 / kRademacherBlockCols, (j1 - 1) / kRademacherBlockCols};
  alignas(32) std::uint32_t block[8], row[8], words[4][8];
  index_t rows[8], blocks[8];
  while (cursor.row < i1) {
    const int count = next_pairs(&cursor, i1, block, row, rows, blocks);
    __m256i x[4];
    philox8(_mm256_load_si256(reinterpret_cast<const __m256i*>(block)),
            _mm256_load_si256(reinterpret_cast<const __m256i*>(row)), p.window, rk, x);
    for (int w = 0; w < 4; ++w) _mm256_store_si256(reinterpret_cast<__m256i*>(words[w]), x[w]);
    for (int s = 0; s < count; ++s) {
      Scalar* dst = out + (rows[s] - i0) * ld;
      for (int w = 0; w < 4; ++w) {
        const index_t col = blocks[s] * kRademacherBlockCols + kRademacherWordCols * w - j0;
        const std::uint32_t word = words[w][s];
        if (col >= 0 && col + kRademacherWordCols <= width) {
          const __m256i wv = _mm256_set1_epi32(static_cast<int>(word));
          for (int m = 0; m < 4; ++m) {
            const __m256i bits = _mm256_or_si256(_mm256_and_si256(_mm256_sllv_epi32(wv, shift[m]), sign), scale_bits);
            store8(dst + col + 8 * m, _mm256_castsi256_ps(bits));
          }
        } else if (col + kRademacherWordCols > 0 && col < width) {
          for (index_t k = 0; k < kRademacherWordCols; ++k) {
            if (col + k >= 0 && col + k < width)
              dst[col + k] = static_cast<Scalar>(rademacher_value((word >> k) & 1u, p.scale));
          }
        }
      }
    }
  }
}

#endif  // COMPACT_DETAIL_HAS_X86_PATHS

/// Writes P[i0:i1, j0:j1] of a dense distribution into out (row-major, leading dimension ld >= j1 - j0), in fp32
/// converted to Scalar, with the given instruction set (which must be supported: cpu_isa_supported(isa)).
///
/// Every instruction set gives the bits of fill_dense_panel_scalar. Preconditions (unchecked, internal):
/// 0 <= i0 <= i1 <= kMaxDim, 0 <= j0 <= j1 <= kMaxDim.
template <class Dist, class Scalar>
void fill_dense_panel_with(CpuIsa isa, const EntryParams& p, index_t i0, index_t i1, index_t j0, index_t j1,
                           Scalar* out, index_t ld) {
  static_assert(std::is_same_v<Dist, Gaussian> || std::is_same_v<Dist, Rademacher>,
                "compact::detail::fill_dense_panel: Dist must be Gaussian or Rademacher");
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::detail::fill_dense_panel: Scalar must be float or double");
  if (i0 >= i1 || j0 >= j1) return;
#if COMPACT_DETAIL_AVX512_COMPILED
  if (isa == CpuIsa::kAvx512) {
    if constexpr (std::is_same_v<Dist, Gaussian>) {
      avx512::fill_gaussian_panel_avx512(p, i0, i1, j0, j1, out, ld);
    } else {
      avx512::fill_rademacher_panel_avx512(p, i0, i1, j0, j1, out, ld);
    }
    return;
  }
#endif
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (isa == CpuIsa::kAvx2) {
    if constexpr (std::is_same_v<Dist, Gaussian>) {
      fill_gaussian_panel_avx2(p, i0, i1, j0, j1, out, ld);
    } else {
      fill_rademacher_panel_avx2(p, i0, i1, j0, j1, out, ld);
    }
    return;
  }
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
