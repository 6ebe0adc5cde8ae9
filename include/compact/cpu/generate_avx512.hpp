// SPDX-License-Identifier: MIT
#pragma once
/// AVX-512 panel generation: sixteen Philox4x32-10 blocks per step, 16-lane Box-Muller, mask-blend Rademacher.
///
/// The kernels perform the reference's IEEE operations (core/entries.hpp, core/fp32_math.hpp) lane by lane, in the
/// same order and with the same fma's, so their results are the bits of `detail::fill_dense_panel_scalar`. They use
/// AVX-512 F only (no DQ, BW or VL) and are compiled with a target attribute; cpu/generate.hpp calls them after the
/// run-time CPU check (CpuIsa::kAvx512, cpu/isa.hpp).
///
/// The same source is compiled a second time by tests/cpu/test_avx512_emulated.cpp against SIMDe's portable
/// implementations of the AVX-512 intrinsics, so that the kernels' logic is checked bit for bit on CPUs without
/// AVX-512: that translation unit includes SIMDe with native aliases first and defines
/// COMPACT_DETAIL_AVX512_EMULATED, which empties the target attribute and moves the kernels into the namespace
/// `detail::avx512_emulated` (the library itself never includes SIMDe). The intrinsics below are therefore chosen
/// among those SIMDe 0.7.4 implements: it has no _mm512_cvtepi32_ps, _mm512_cvttps_epi32, _mm512_permute_ps or
/// _mm512_cvtps_pd, so the kernels use cvtepu32_ps on non-negative values, roundscale for the truncation, and the
/// 256-bit conversion for double output; nor does it alias the __mmask16 type or _MM_FROUND_NO_EXC, which the
/// kernels therefore do not name.
///
/// The structure follows the AVX2 kernels of cpu/generate.hpp (which it cannot share code with: the target attribute
/// of a function is fixed where it is defined).

#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/core/entries.hpp"
#include "compact/cpu/isa.hpp"

#if COMPACT_DETAIL_AVX512_COMPILED && !defined(COMPACT_DETAIL_AVX512_EMULATED)
#include <immintrin.h>
#endif

#if COMPACT_DETAIL_AVX512_COMPILED

// GCC 12.2's AVX-512 intrinsics read _mm512_undefined_* values and warn about it under -Wall (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace compact {
namespace detail {
namespace COMPACT_DETAIL_AVX512_NAMESPACE {

/// The Philox round keys (core/philox.hpp's schedule), each broadcast to the eight 64-bit lanes of a register.
struct PhiloxRoundKeys16 {
  __m512i k0[kPhiloxRounds];
  __m512i k1[kPhiloxRounds];
};

COMPACT_DETAIL_TARGET_AVX512 inline PhiloxRoundKeys16 philox_round_keys16(Key2x32 key) {
  PhiloxRoundKeys16 rk;
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) key = philox_next_key(key);
    rk.k0[round] = _mm512_set1_epi64(static_cast<long long>(key.w[0]));
    rk.k1[round] = _mm512_set1_epi64(static_cast<long long>(key.w[1]));
  }
  return rk;
}

/// An unsigned 32-bit constant broadcast to the sixteen lanes (the bits, not the value, of an int).
COMPACT_DETAIL_TARGET_AVX512 inline __m512i set1_u32(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }

/// Sixteen (block, row) counters: slot s in 64-bit lane s % 8 of `lo` (s < 8) or `hi` (s >= 8); only the low 32
/// bits of each lane are read.
struct Counters16 {
  __m512i block_lo, block_hi, row_lo, row_hi;
};

/// Sixteen Philox4x32-10 blocks, counters {block[s], row[s], lo32(window), hi32(window)}; out[w] = output word w of
/// every slot, 32-bit lane s = slot s.
///
/// As in the AVX2 path, a block lives in a 64-bit lane so that vpmuludq yields the full 32 x 32 -> 64-bit product:
/// its high half is the reference's hi, its low half the reference's lo (the high halves of c1, c3 then carry
/// garbage that vpmuludq never reads). vpternlogd (0x96: a ^ b ^ c) folds the two xors of each Feistel step.
COMPACT_DETAIL_TARGET_AVX512 inline void philox16(const Counters16& c, std::uint64_t window,
                                                  const PhiloxRoundKeys16& rk, __m512i out[4]) {
  const __m512i m0 = _mm512_set1_epi64(kPhiloxM0);
  const __m512i m1 = _mm512_set1_epi64(kPhiloxM1);
  const __m512i w0 = _mm512_set1_epi64(static_cast<long long>(static_cast<std::uint32_t>(window)));
  const __m512i w1 = _mm512_set1_epi64(static_cast<long long>(static_cast<std::uint32_t>(window >> 32)));
  __m512i a0 = c.block_lo, a1 = c.row_lo, a2 = w0, a3 = w1;
  __m512i b0 = c.block_hi, b1 = c.row_hi, b2 = w0, b3 = w1;
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const __m512i pa0 = _mm512_mul_epu32(a0, m0), pa1 = _mm512_mul_epu32(a2, m1);
    const __m512i pb0 = _mm512_mul_epu32(b0, m0), pb1 = _mm512_mul_epu32(b2, m1);
    // c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0.
    a0 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(pa1, 32), a1, rk.k0[round], 0x96);
    a2 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(pa0, 32), a3, rk.k1[round], 0x96);
    a1 = pa1;
    a3 = pa0;
    b0 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(pb1, 32), b1, rk.k0[round], 0x96);
    b2 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(pb0, 32), b3, rk.k1[round], 0x96);
    b1 = pb1;
    b3 = pb0;
  }
  // The low 32-bit halves of the eight lanes of a (slots 0..7), then of b (slots 8..15).
  const __m512i low_halves = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  out[0] = _mm512_permutex2var_epi32(a0, low_halves, b0);
  out[1] = _mm512_permutex2var_epi32(a1, low_halves, b1);
  out[2] = _mm512_permutex2var_epi32(a2, low_halves, b2);
  out[3] = _mm512_permutex2var_epi32(a3, low_halves, b3);
}

COMPACT_DETAIL_TARGET_AVX512 inline __m512 xor_ps(__m512 a, __m512i b) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), b));  // _mm512_xor_ps would need AVX-512 DQ
}

/// fp32::log, lane by lane, with the reference's operation sequence (x a positive normal float).
COMPACT_DETAIL_TARGET_AVX512 inline __m512 log16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  __m512i biased = _mm512_srli_epi32(u, fp32::kMantissaBits);  // e + kExponentBias
  __m512i mant = _mm512_or_si512(_mm512_and_si512(u, set1_u32(fp32::kMantissaMask)), set1_u32(fp32::kOneBits));
  // mant and kSqrt2Bits are below 2^31, so the signed compare is the reference's unsigned one.
  const auto big = _mm512_cmpgt_epi32_mask(mant, set1_u32(fp32::kSqrt2Bits));
  mant = _mm512_mask_sub_epi32(mant, big, mant, set1_u32(fp32::kExponentUnit));
  biased = _mm512_mask_add_epi32(biased, big, biased, _mm512_set1_epi32(1));
  const __m512 f = _mm512_sub_ps(_mm512_castsi512_ps(mant), _mm512_set1_ps(1.0f));
  __m512 q = _mm512_set1_ps(fp32::kLogQ7);
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(fp32::kLogQ6));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(fp32::kLogQ5));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(fp32::kLogQ4));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(fp32::kLogQ3));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(fp32::kLogQ2));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(fp32::kLogQ1));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(fp32::kLogQ0));
  const __m512 t = _mm512_fmadd_ps(q, f, _mm512_set1_ps(-0.5f));
  const __m512 f2 = _mm512_mul_ps(f, f);
  const __m512 p = _mm512_fmadd_ps(f2, t, f);
  // float(e) = float(e + 127) - 127, both steps exact (|e| < 2^8): the unsigned conversion suffices.
  const __m512 fe = _mm512_sub_ps(_mm512_cvtepu32_ps(biased), _mm512_set1_ps(static_cast<float>(fp32::kExponentBias)));
  const __m512 lo = _mm512_fmadd_ps(fe, _mm512_set1_ps(fp32::kLn2Lo), p);
  return _mm512_fmadd_ps(fe, _mm512_set1_ps(fp32::kLn2Hi), lo);
}

/// Box-Muller of fp32 (box_muller in core/entries.hpp) on sixteen pairs: lane0 = rho cos(2 pi t), lane1 = rho sin.
COMPACT_DETAIL_TARGET_AVX512 inline void box_muller16(__m512i a, __m512i b, __m512* lane0, __m512* lane1) {
  const __m512 scale24 = _mm512_set1_ps(kBoxMullerScale);
  // (a >> 8) + 1 <= 2^24 and b >> 8 < 2^24: exact conversions, as in the reference.
  const __m512 u = _mm512_mul_ps(
      _mm512_cvtepu32_ps(_mm512_add_epi32(_mm512_srli_epi32(a, kBoxMullerShift), _mm512_set1_epi32(1))), scale24);
  const __m512 t = _mm512_mul_ps(_mm512_cvtepu32_ps(_mm512_srli_epi32(b, kBoxMullerShift)), scale24);
  const __m512 rho = _mm512_sqrt_ps(_mm512_mul_ps(_mm512_set1_ps(-2.0f), log16(u)));
  // fp32::sincos_2pi: y = 4t exact, k = (int)(y + 0.5) (truncation), r = y - k exact. y + 0.5 >= 0.5, so the
  // truncation is roundscale's round-toward-zero, and k & 3 is read from the low bits of k + 2^23 (exact, k <= 4).
  const __m512 y = _mm512_mul_ps(t, _mm512_set1_ps(4.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_add_ps(y, _mm512_set1_ps(0.5f)), _MM_FROUND_TO_ZERO);
  const __m512 r = _mm512_sub_ps(y, k);
  const __m512i quadrant =
      _mm512_and_si512(_mm512_castps_si512(_mm512_add_ps(k, _mm512_set1_ps(0x1p23f))), _mm512_set1_epi32(3));
  const __m512 s = _mm512_mul_ps(r, r);
  __m512 ps = _mm512_set1_ps(fp32::kSinS4);
  ps = _mm512_fmadd_ps(ps, s, _mm512_set1_ps(fp32::kSinS3));
  ps = _mm512_fmadd_ps(ps, s, _mm512_set1_ps(fp32::kSinS2));
  ps = _mm512_fmadd_ps(ps, s, _mm512_set1_ps(fp32::kSinS1));
  ps = _mm512_fmadd_ps(ps, s, _mm512_set1_ps(fp32::kSinS0));
  const __m512 sin_r = _mm512_mul_ps(r, ps);
  __m512 pc = _mm512_set1_ps(fp32::kCosC4);
  pc = _mm512_fmadd_ps(pc, s, _mm512_set1_ps(fp32::kCosC3));
  pc = _mm512_fmadd_ps(pc, s, _mm512_set1_ps(fp32::kCosC2));
  pc = _mm512_fmadd_ps(pc, s, _mm512_set1_ps(fp32::kCosC1));
  pc = _mm512_fmadd_ps(pc, s, _mm512_set1_ps(fp32::kCosC0));
  const __m512 cos_r = _mm512_fmadd_ps(pc, s, _mm512_set1_ps(1.0f));
  // Quadrant k & 3: odd quadrants swap sin and cos; sin is negated in quadrants 2, 3, cos in 1, 2.
  const auto odd = _mm512_test_epi32_mask(quadrant, _mm512_set1_epi32(1));
  const __m512i sin_sign = _mm512_slli_epi32(_mm512_srli_epi32(quadrant, 1), 31);
  const __m512i cos_sign =
      _mm512_slli_epi32(_mm512_srli_epi32(_mm512_add_epi32(quadrant, _mm512_set1_epi32(1)), 1), 31);
  const __m512 sin_v = xor_ps(_mm512_mask_blend_ps(odd, sin_r, cos_r), sin_sign);
  const __m512 cos_v = xor_ps(_mm512_mask_blend_ps(odd, cos_r, sin_r), cos_sign);
  *lane0 = _mm512_mul_ps(rho, cos_v);
  *lane1 = _mm512_mul_ps(rho, sin_v);
}

/// The scaled Gaussian entries of sixteen blocks in slot order: out[q] holds slots 4q .. 4q + 3, four lanes each.
COMPACT_DETAIL_TARGET_AVX512 inline void gaussian16(const Counters16& c, std::uint64_t window,
                                                    const PhiloxRoundKeys16& rk, __m512 scale, __m512 out[4]) {
  __m512i x[4];
  philox16(c, window, rk, x);
  __m512 l0, l1, l2, l3;
  box_muller16(x[0], x[1], &l0, &l1);
  box_muller16(x[2], x[3], &l2, &l3);
  l0 = _mm512_mul_ps(l0, scale);
  l1 = _mm512_mul_ps(l1, scale);
  l2 = _mm512_mul_ps(l2, scale);
  l3 = _mm512_mul_ps(l3, scale);
  // Transpose 4 x 16 -> 16 x 4 with two rounds of two-source permutes (index >= 16 picks the second source).
  const __m512i pair_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i pair_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 l01_lo = _mm512_permutex2var_ps(l0, pair_lo, l1), l01_hi = _mm512_permutex2var_ps(l0, pair_hi, l1);
  const __m512 l23_lo = _mm512_permutex2var_ps(l2, pair_lo, l3), l23_hi = _mm512_permutex2var_ps(l2, pair_hi, l3);
  const __m512i quad_lo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
  const __m512i quad_hi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
  out[0] = _mm512_permutex2var_ps(l01_lo, quad_lo, l23_lo);
  out[1] = _mm512_permutex2var_ps(l01_lo, quad_hi, l23_lo);
  out[2] = _mm512_permutex2var_ps(l01_hi, quad_lo, l23_hi);
  out[3] = _mm512_permutex2var_ps(l01_hi, quad_hi, l23_hi);
}

/// Stores 16 fp32 values converted to Scalar (float stays, double widens exactly, four at a time).
template <class Scalar>
COMPACT_DETAIL_TARGET_AVX512 inline void store16(Scalar* dst, __m512 v) {
  if constexpr (std::is_same_v<Scalar, float>) {
    _mm512_storeu_ps(dst, v);
  } else {
    _mm256_storeu_pd(dst, _mm256_cvtps_pd(_mm512_extractf32x4_ps(v, 0)));
    _mm256_storeu_pd(dst + 4, _mm256_cvtps_pd(_mm512_extractf32x4_ps(v, 1)));
    _mm256_storeu_pd(dst + 8, _mm256_cvtps_pd(_mm512_extractf32x4_ps(v, 2)));
    _mm256_storeu_pd(dst + 12, _mm256_cvtps_pd(_mm512_extractf32x4_ps(v, 3)));
  }
}

/// Up to sixteen arbitrary (row, block) pairs of a panel, generated together and stored clipped to its columns.
struct PendingBlocks16 {
  int count = 0;
  alignas(64) std::uint64_t block[16];
  alignas(64) std::uint64_t row[16];

  /// Adds a pair; true when the batch is full.
  bool push(index_t i, index_t b) {
    block[count] = static_cast<std::uint32_t>(b);
    row[count] = static_cast<std::uint32_t>(i);
    return ++count == 16;
  }

  /// The counters of the batch, unused slots repeating slot 0 (computed, never stored).
  COMPACT_DETAIL_TARGET_AVX512 Counters16 counters() {
    for (int s = count; s < 16; ++s) {
      block[s] = block[0];
      row[s] = row[0];
    }
    return Counters16{_mm512_load_si512(block), _mm512_load_si512(block + 8), _mm512_load_si512(row),
                      _mm512_load_si512(row + 8)};
  }
};

/// Writes the values of one block, vals[0, cols), at panel column `col` of dst, skipping columns outside [0, width).
template <class Scalar>
inline void store_clipped(Scalar* dst, index_t col, index_t width, const float* vals, index_t cols) {
  for (index_t l = 0; l < cols; ++l) {
    if (col + l >= 0 && col + l < width) dst[col + l] = static_cast<Scalar>(vals[l]);
  }
}

template <class Scalar>
COMPACT_DETAIL_TARGET_AVX512 inline void flush_gaussian16(PendingBlocks16* q, std::uint64_t window,
                                                          const PhiloxRoundKeys16& rk, __m512 scale, index_t i0,
                                                          index_t j0, index_t width, Scalar* out, index_t ld) {
  __m512 u[4];
  gaussian16(q->counters(), window, rk, scale, u);
  alignas(64) float vals[64];
  for (int m = 0; m < 4; ++m) _mm512_store_ps(vals + 16 * m, u[m]);
  for (int s = 0; s < q->count; ++s) {
    Scalar* dst = out + (static_cast<index_t>(q->row[s]) - i0) * ld;
    const index_t col = static_cast<index_t>(q->block[s]) * kGaussianBlockCols - j0;
    store_clipped(dst, col, width, vals + 4 * s, kGaussianBlockCols);
  }
  q->count = 0;
}

/// AVX-512 Gaussian panel: P[i0:i1, j0:j1] into out (leading dimension ld); bit-identical to the reference loop.
///
/// Runs of sixteen whole blocks inside one row are generated and stored as 64 contiguous entries; the rest
/// (partial blocks at the panel's edges, short leftovers, narrow panels) is batched across rows sixteen at a time.
template <class Scalar>
COMPACT_DETAIL_TARGET_AVX512 inline void fill_gaussian_panel_avx512(const EntryParams& p, index_t i0, index_t i1,
                                                                    index_t j0, index_t j1, Scalar* out, index_t ld) {
  const PhiloxRoundKeys16 rk = philox_round_keys16(p.key);
  const __m512 scale = _mm512_set1_ps(p.scale);
  const __m512i lane_lo = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i lane_hi = _mm512_setr_epi64(8, 9, 10, 11, 12, 13, 14, 15);
  const index_t width = j1 - j0;
  const index_t first_block = j0 / kGaussianBlockCols, end_block = (j1 - 1) / kGaussianBlockCols + 1;
  const index_t full_begin = (j0 + kGaussianBlockCols - 1) / kGaussianBlockCols, full_end = j1 / kGaussianBlockCols;
  PendingBlocks16 pending;
  for (index_t i = i0; i < i1; ++i) {
    Scalar* dst = out + (i - i0) * ld;
    index_t b = first_block;
    if (b < full_begin && pending.push(i, b++)) flush_gaussian16(&pending, p.window, rk, scale, i0, j0, width, out, ld);
    const __m512i row = _mm512_set1_epi64(static_cast<long long>(static_cast<std::uint32_t>(i)));
    for (; b + 16 <= full_end; b += 16) {
      const __m512i base = _mm512_set1_epi64(static_cast<long long>(static_cast<std::uint32_t>(b)));
      // Blocks b .. b + 15 never wrap: b + 15 < full_end <= 2^32 / 4.
      const Counters16 c{_mm512_add_epi64(base, lane_lo), _mm512_add_epi64(base, lane_hi), row, row};
      __m512 u[4];
      gaussian16(c, p.window, rk, scale, u);
      Scalar* d = dst + (b * kGaussianBlockCols - j0);
      for (int m = 0; m < 4; ++m) store16(d + 16 * m, u[m]);
    }
    for (; b < end_block; ++b) {
      if (pending.push(i, b)) flush_gaussian16(&pending, p.window, rk, scale, i0, j0, width, out, ld);
    }
  }
  if (pending.count > 0) flush_gaussian16(&pending, p.window, rk, scale, i0, j0, width, out, ld);
}

template <class Scalar>
COMPACT_DETAIL_TARGET_AVX512 inline void flush_rademacher16(PendingBlocks16* q, const EntryParams& p,
                                                            const PhiloxRoundKeys16& rk, index_t i0, index_t j0,
                                                            index_t width, Scalar* out, index_t ld) {
  __m512i x[4];
  philox16(q->counters(), p.window, rk, x);
  alignas(64) std::uint32_t words[4][16];
  for (int w = 0; w < 4; ++w) _mm512_store_si512(words[w], x[w]);
  // rademacher_value: entry k of a word is -scale where bit k is set, so the word itself is the blend mask of
  // 2 x 16 lanes.
  const __m512 pos = _mm512_set1_ps(p.scale), neg = _mm512_set1_ps(-p.scale);
  for (int s = 0; s < q->count; ++s) {
    Scalar* dst = out + (static_cast<index_t>(q->row[s]) - i0) * ld;
    for (int w = 0; w < 4; ++w) {
      const index_t col = static_cast<index_t>(q->block[s]) * kRademacherBlockCols + kRademacherWordCols * w - j0;
      const std::uint32_t word = words[w][s];
      if (col >= 0 && col + kRademacherWordCols <= width) {
        store16(dst + col, _mm512_mask_blend_ps(static_cast<std::uint16_t>(word & 0xFFFFu), pos, neg));
        store16(dst + col + 16, _mm512_mask_blend_ps(static_cast<std::uint16_t>(word >> 16), pos, neg));
      } else if (col + kRademacherWordCols > 0 && col < width) {
        for (index_t k = 0; k < kRademacherWordCols; ++k) {
          if (col + k >= 0 && col + k < width)
            dst[col + k] = static_cast<Scalar>(rademacher_value((word >> k) & 1u, p.scale));
        }
      }
    }
  }
  q->count = 0;
}

/// AVX-512 Rademacher panel: P[i0:i1, j0:j1] into out (leading dimension ld); bit-identical to the reference loop.
template <class Scalar>
COMPACT_DETAIL_TARGET_AVX512 inline void fill_rademacher_panel_avx512(const EntryParams& p, index_t i0, index_t i1,
                                                                      index_t j0, index_t j1, Scalar* out, index_t ld) {
  const PhiloxRoundKeys16 rk = philox_round_keys16(p.key);
  const index_t width = j1 - j0;
  const index_t first_block = j0 / kRademacherBlockCols, end_block = (j1 - 1) / kRademacherBlockCols + 1;
  PendingBlocks16 pending;
  for (index_t i = i0; i < i1; ++i) {
    for (index_t b = first_block; b < end_block; ++b) {
      if (pending.push(i, b)) flush_rademacher16(&pending, p, rk, i0, j0, width, out, ld);
    }
  }
  if (pending.count > 0) flush_rademacher16(&pending, p, rk, i0, j0, width, out, ld);
}

}  // namespace COMPACT_DETAIL_AVX512_NAMESPACE
}  // namespace detail
}  // namespace compact

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // COMPACT_DETAIL_AVX512_COMPILED
