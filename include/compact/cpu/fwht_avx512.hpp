// SPDX-License-Identifier: MIT
#pragma once
/// AVX-512 Walsh-Hadamard transform: 16 floats (8 doubles) per register, radix-16 passes over 32 registers.
///
/// Same butterfly order and the same IEEE additions and subtractions as every other path of cpu/fwht.hpp (see its
/// file comment), so the bits are those of the textbook loop. A register holds 2^kLogLanes consecutive elements;
/// the stages s < kLogLanes act inside it (v <- (v xor signmask_s) + swap_s(v): lane i gets x[i] + x[i ^ h] where
/// bit s of i is clear and x[i ^ h] - x[i] where it is set), the other stages between registers. With 32 registers
/// a pass does four stages between registers (radix 16): a 4096-float row takes two passes over L1 (stages 0-7,
/// then 8-11) instead of the AVX path's three.
///
/// AVX-512 F only, compiled with a target attribute and called after the run-time CPU check; compiled a second time
/// against SIMDe by tests/cpu/test_avx512_emulated.cpp (see cpu/isa.hpp). Intrinsics are chosen among those SIMDe
/// 0.7.4 implements: the in-lane swaps use _mm512_shuffle_ps (it has no _mm512_permute_ps), the 128-bit lane swaps
/// _mm512_shuffle_i32x4, the sign flips an integer xor (_mm512_xor_ps needs AVX-512 DQ).
///
/// The passes mirror the AVX path's templates in cpu/fwht.hpp but cannot share them: a function's target attribute
/// is fixed where it is defined, and g++ and clang++ refuse to inline AVX-512 intrinsics into a function compiled
/// for AVX (nor do lambdas inherit the attribute, hence the function objects below).

#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
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

/// Flips the sign bits selected by `mask_bits` (the bit patterns of -0.0 where a lane changes sign).
COMPACT_DETAIL_TARGET_AVX512 inline __m512 flip_signs(__m512 v, __m512i mask_bits) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), mask_bits));
}

/// The 128-bit lanes of v permuted by kImm (as _mm512_shuffle_f32x4(v, v, kImm), which SIMDe 0.7.4 does not alias).
template <int kImm>
COMPACT_DETAIL_TARGET_AVX512 inline __m512 permute_lanes128(__m512 v) {
  const __m512i i = _mm512_castps_si512(v);
  return _mm512_castsi512_ps(_mm512_shuffle_i32x4(i, i, kImm));
}

/// One stage inside a register: lane i <- x[i] + x[i ^ h] (bit clear) or x[i ^ h] - x[i] (bit set), i.e. the pair
/// (a + b, a - b); `swapped` is v with lanes i and i ^ h exchanged, `sign` flips the lanes whose bit is set.
COMPACT_DETAIL_TARGET_AVX512 inline __m512 in_register_stage(__m512 v, __m512 swapped, __m512i sign) {
  return _mm512_add_ps(flip_signs(v, sign), swapped);
}
COMPACT_DETAIL_TARGET_AVX512 inline __m512d in_register_stage(__m512d v, __m512 swapped, __m512i sign) {
  return _mm512_add_pd(_mm512_castps_pd(flip_signs(_mm512_castpd_ps(v), sign)), _mm512_castps_pd(swapped));
}

struct Avx512F32 {
  using Reg = __m512;
  using T = float;
  static constexpr int kLogLanes = 4;
  COMPACT_DETAIL_TARGET_AVX512 static Reg load(const T* p) { return _mm512_loadu_ps(p); }
  COMPACT_DETAIL_TARGET_AVX512 static void store(T* p, Reg v) { _mm512_storeu_ps(p, v); }
  COMPACT_DETAIL_TARGET_AVX512 static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  COMPACT_DETAIL_TARGET_AVX512 static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  COMPACT_DETAIL_TARGET_AVX512 static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  /// Stages 0..3 inside one register, in that order.
  COMPACT_DETAIL_TARGET_AVX512 static Reg in_register_stages(Reg v) {
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

struct Avx512F64 {
  using Reg = __m512d;
  using T = double;
  static constexpr int kLogLanes = 3;
  COMPACT_DETAIL_TARGET_AVX512 static Reg load(const T* p) { return _mm512_loadu_pd(p); }
  COMPACT_DETAIL_TARGET_AVX512 static void store(T* p, Reg v) { _mm512_storeu_pd(p, v); }
  COMPACT_DETAIL_TARGET_AVX512 static Reg add(Reg a, Reg b) { return _mm512_add_pd(a, b); }
  COMPACT_DETAIL_TARGET_AVX512 static Reg sub(Reg a, Reg b) { return _mm512_sub_pd(a, b); }
  COMPACT_DETAIL_TARGET_AVX512 static Reg mul(Reg a, Reg b) { return _mm512_mul_pd(a, b); }
  /// Stages 0..2 inside one register, in that order (a double's sign bit is the top bit of its upper 32 bits).
  COMPACT_DETAIL_TARGET_AVX512 static Reg in_register_stages(Reg v) {
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

/// log2(R) stages among R registers holding elements at stride h, 2h, ...: stage q pairs (v[t], v[t + 2^q]).
template <class V, int R>
COMPACT_DETAIL_TARGET_AVX512 inline void butterflies(typename V::Reg* v) {
  for (int hs = 1; hs < R; hs *= 2) {
    for (int t = 0; t < R; ++t) {
      if (t & hs) continue;
      const typename V::Reg a = v[t], b = v[t + hs];
      v[t] = V::add(a, b);
      v[t + hs] = V::sub(a, b);
    }
  }
}

/// Stages 0 .. kLogLanes + log2(R) - 1 of x[0, n): groups of R consecutive registers, read by load(i) (the
/// register of elements i .. i + lanes - 1 before the transform) and stored to x.
template <class V, int R, class Load>
COMPACT_DETAIL_TARGET_AVX512 inline void first_pass(typename V::T* x, index_t n, const Load& load) {
  constexpr index_t kLanes = index_t{1} << V::kLogLanes;
  for (index_t i = 0; i < n; i += R * kLanes) {
    typename V::Reg v[R];
    for (int t = 0; t < R; ++t) v[t] = V::in_register_stages(load(i + t * kLanes));
    butterflies<V, R>(v);
    for (int t = 0; t < R; ++t) V::store(x + i + t * kLanes, v[t]);
  }
}

/// Stages s .. s + log2(R) - 1 (h = 2^s >= lanes) of x[0, n): R registers at stride h per group.
template <class V, int R>
COMPACT_DETAIL_TARGET_AVX512 inline void radix_pass(typename V::T* x, index_t n, index_t h) {
  constexpr index_t kLanes = index_t{1} << V::kLogLanes;
  for (index_t blk = 0; blk < n; blk += R * h) {
    for (index_t o = 0; o < h; o += kLanes) {
      typename V::T* p = x + blk + o;
      typename V::Reg v[R];
      for (int t = 0; t < R; ++t) v[t] = V::load(p + t * h);
      butterflies<V, R>(v);
      for (int t = 0; t < R; ++t) V::store(p + t * h, v[t]);
    }
  }
}

/// Stages s .. s + m - 1 (1 <= m <= 4) of x[0, n) in one radix-2^m pass.
template <class V>
COMPACT_DETAIL_TARGET_AVX512 inline void radix_pass_of(typename V::T* x, index_t n, index_t h, int m) {
  switch (m) {
    case 4:
      radix_pass<V, 16>(x, n, h);
      break;
    case 3:
      radix_pass<V, 8>(x, n, h);
      break;
    case 2:
      radix_pass<V, 4>(x, n, h);
      break;
    default:
      radix_pass<V, 2>(x, n, h);
      break;
  }
}

/// The first pass of an in-cache transform of length 2^log_n (log_n >= kLogLanes): radix 2^min(4, log_n - kLogLanes)
/// between registers; returns the first stage left to do.
template <class V, class Load>
COMPACT_DETAIL_TARGET_AVX512 inline int first_pass_of(typename V::T* x, int log_n, const Load& load) {
  const index_t n = index_t{1} << log_n;
  const int between = log_n - V::kLogLanes < 4 ? log_n - V::kLogLanes : 4;  // stages between registers
  switch (between) {
    case 4:
      first_pass<V, 16>(x, n, load);
      break;
    case 3:
      first_pass<V, 8>(x, n, load);
      break;
    case 2:
      first_pass<V, 4>(x, n, load);
      break;
    case 1:
      first_pass<V, 2>(x, n, load);
      break;
    default:
      first_pass<V, 1>(x, n, load);
      break;
  }
  return V::kLogLanes + between;
}

/// Stages `from` .. log_n - 1 of x[0, 2^log_n) in radix-16 passes (the last one shorter when needed).
template <class V>
COMPACT_DETAIL_TARGET_AVX512 inline void stages_from(typename V::T* x, int log_n, int from) {
  for (int s = from; s < log_n; s += 4)
    radix_pass_of<V>(x, index_t{1} << log_n, index_t{1} << s, log_n - s < 4 ? log_n - s : 4);
}

/// Transforms of at most this log2 length (16 KiB) run pass by pass in L1.
template <class T>
inline constexpr int kAvx512BlockLog = sizeof(T) == 4 ? 12 : 11;

/// Loads of an in-place transform (a function object: lambdas would not inherit the target attribute).
template <class V>
struct LoadInPlace {
  const typename V::T* x;
  COMPACT_DETAIL_TARGET_AVX512 typename V::Reg operator()(index_t i) const { return V::load(x + i); }
};

/// Loads of the SRHT's first pass: x_k d_k for k < n, 0 beyond (exact: d_k = +-1).
template <class V>
struct LoadSigned {
  const typename V::T* x;
  const typename V::T* d;
  index_t n;
  COMPACT_DETAIL_TARGET_AVX512 typename V::Reg operator()(index_t i) const {
    constexpr index_t kLanes = index_t{1} << V::kLogLanes;
    if (i + kLanes <= n) return V::mul(V::load(x + i), V::load(d + i));
    if (i >= n) return typename V::Reg{};
    alignas(64) typename V::T lanes[kLanes];
    for (index_t k = 0; k < kLanes; ++k) lanes[k] = i + k < n ? x[i + k] * d[i + k] : typename V::T(0);
    return V::load(lanes);
  }
};

/// In-cache transform of x[0, 2^log_n), log_n >= kLogLanes: one first pass, then radix-16 passes.
template <class V>
COMPACT_DETAIL_TARGET_AVX512 inline void transform_block(typename V::T* x, int log_n) {
  stages_from<V>(x, log_n, first_pass_of<V>(x, log_n, LoadInPlace<V>{x}));
}

/// Transforms of at most 2^kAvx512BlockLog elements run pass by pass in L1; longer ones are split into 2^m
/// sub-blocks (m <= 4) transformed recursively while in cache, then joined by one radix-2^m pass (the top stages).
template <class V>
COMPACT_DETAIL_TARGET_AVX512 inline void transform_recursive(typename V::T* x, int log_n) {
  constexpr int kBlockLog = kAvx512BlockLog<typename V::T>;
  if (log_n <= kBlockLog) {
    transform_block<V>(x, log_n);
    return;
  }
  const int m = log_n - kBlockLog < 4 ? log_n - kBlockLog : 4;
  const int sub = log_n - m;
  for (int t = 0; t < (1 << m); ++t) transform_recursive<V>(x + (index_t{t} << sub), sub);
  radix_pass_of<V>(x, index_t{1} << log_n, index_t{1} << sub, m);
}

/// AVX-512 transform of x[0, 2^log_n), float or double; requires log_n >= 4 (float) or 3 (double), i.e. at least
/// one register (cpu/fwht.hpp sends shorter transforms to another path). Not inlined into callers compiled without
/// AVX-512 (a call, not an inline expansion).
template <class T>
COMPACT_DETAIL_TARGET_AVX512 void fwht_avx512(T* x, int log_n) {
  using V = std::conditional_t<std::is_same_v<T, float>, Avx512F32, Avx512F64>;
  transform_recursive<V>(x, log_n);
}

/// buf[0, 2^log_n) = H pad(x . d), the SRHT's signed, zero-padded transform of a row x[0, n) with signs d[0, n)
/// (n <= 2^log_n; buf must not overlap x). The product x_k d_k (exact for d_k = +-1) is formed as the first pass
/// loads x, so the row is read once and nothing beyond x[n - 1] is read; longer transforms are blocked as in
/// transform_recursive, the product formed by the first pass of each sub-block. Requires log_n >=
/// kFwhtAvx512MinLog (the caller takes another path otherwise).
template <class T>
COMPACT_DETAIL_TARGET_AVX512 void fwht_signed_avx512(const T* x, const T* d, index_t n, T* buf, int log_n) {
  using V = std::conditional_t<std::is_same_v<T, float>, Avx512F32, Avx512F64>;
  constexpr int kBlockLog = kAvx512BlockLog<T>;
  if (log_n <= kBlockLog) {
    stages_from<V>(buf, log_n, first_pass_of<V>(buf, log_n, LoadSigned<V>{x, d, n}));
    return;
  }
  const int m = log_n - kBlockLog < 4 ? log_n - kBlockLog : 4;
  const int sub = log_n - m;
  for (int t = 0; t < (1 << m); ++t) {
    const index_t offset = index_t{t} << sub, rest = n > offset ? n - offset : 0;  // x[offset, n) if any
    fwht_signed_avx512(rest > 0 ? x + offset : x, rest > 0 ? d + offset : d, rest, buf + offset, sub);
  }
  radix_pass_of<V>(buf, index_t{1} << log_n, index_t{1} << sub, m);
}

/// The smallest log2 length fwht_avx512 takes: one register.
template <class T>
inline constexpr int kFwhtAvx512MinLog = std::is_same_v<T, float> ? 4 : 3;

}  // namespace COMPACT_DETAIL_AVX512_NAMESPACE
}  // namespace detail
}  // namespace compact

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // COMPACT_DETAIL_AVX512_COMPILED
