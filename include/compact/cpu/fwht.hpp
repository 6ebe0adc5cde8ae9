// SPDX-License-Identifier: MIT
#pragma once
/// In-place fast Walsh-Hadamard transform (Sylvester order, unnormalized) of float/double arrays, length 2^L <= 2^20.
///
/// y = H x with H[i][k] = (-1)^popcount(i & k). The butterfly order is fixed: stage s = 0, 1, ..., L-1 maps every
/// pair (x[i], x[i + 2^s]) with bit s of i clear to (x[i] + x[i + 2^s], x[i] - x[i + 2^s]), each stage reading the
/// previous stage's values. Every path below (the 256-bit AVX kernels, the portable loops, any cache blocking)
/// performs exactly these additions and subtractions, and no multiplications, so each output is bitwise identical
/// across paths, thread counts, optimisation levels and contraction settings, and equal to the textbook loop
/// `for (h = 1; h < n; h *= 2) for (i ...) for (j ...) { a = x[j]; b = x[j+h]; x[j] = a+b; x[j+h] = a-b; }`.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/cpu/fwht_avx512.hpp"
#include "compact/cpu/isa.hpp"

// The 256-bit path (CpuIsa::kAvx2) uses AVX instructions only (vaddps, vsubps, vxorps, vpermilps, vperm2f128), so
// every AVX2 CPU runs it. It is compiled with a target attribute (COMPACT_DETAIL_TARGET_AVX, cpu/isa.hpp) where
// COMPACT_DETAIL_HAS_X86_PATHS, and chosen at run time, so no -mavx/-march flag is needed.

namespace compact {

/// Longest transform supported: 2^20 elements (4 MiB of float).
inline constexpr index_t kFwhtMaxLength = index_t{1} << 20;

namespace detail {

/// Transforms of at most this many bytes run in place pass by pass (L1-resident); longer ones are split.
inline constexpr std::size_t kFwhtBlockBytes = 16 * 1024;

/// log2 of the number of T in kFwhtBlockBytes (12 for float, 11 for double).
template <class T>
inline constexpr int fwht_block_log2() {
  int l = 0;
  while ((sizeof(T) << (l + 1)) <= kFwhtBlockBytes) ++l;
  return l;
}

// ---------------------------------------------------------------------------------------------------------------
// Portable path: plain loops in the fixed butterfly order (the compiler vectorizes the stages with 2^s >= its
// vector width).

/// Stage s of an in-place transform of x[0, n): butterflies (x[j], x[j + h]) with h = 2^s.
template <class T>
inline void fwht_stage_portable(T* x, index_t n, index_t h) {
  for (index_t i = 0; i < n; i += 2 * h) {
    T* lo = x + i;
    T* hi = x + i + h;
    for (index_t j = 0; j < h; ++j) {
      const T a = lo[j], b = hi[j];
      lo[j] = a + b;
      hi[j] = a - b;
    }
  }
}

/// Stages s and s + 1 (h = 2^s) of x[0, n) in one sweep over quadruples (x[j], x[j+h], x[j+2h], x[j+3h]).
template <class T>
inline void fwht_two_stages_portable(T* x, index_t n, index_t h) {
  for (index_t i = 0; i < n; i += 4 * h) {
    T* p0 = x + i;
    T* p1 = p0 + h;
    T* p2 = p1 + h;
    T* p3 = p2 + h;
    for (index_t j = 0; j < h; ++j) {
      const T a0 = p0[j], a1 = p1[j], a2 = p2[j], a3 = p3[j];
      const T b0 = a0 + a1, b1 = a0 - a1, b2 = a2 + a3, b3 = a2 - a3;  // stage s
      p0[j] = b0 + b2;                                                 // stage s + 1
      p1[j] = b1 + b3;
      p2[j] = b0 - b2;
      p3[j] = b1 - b3;
    }
  }
}

/// Stages 0, 1, 2 of x[0, n), n a multiple of 8, eight elements at a time in registers.
template <class T>
inline void fwht_first_stages_portable(T* x, index_t n) {
  for (index_t i = 0; i < n; i += 8) {
    T v[8];
    for (int t = 0; t < 8; ++t) v[t] = x[i + t];
    for (int hs = 1; hs < 8; hs *= 2) {
      for (int t = 0; t < 8; ++t) {
        if (t & hs) continue;
        const T a = v[t], b = v[t + hs];
        v[t] = a + b;
        v[t + hs] = a - b;
      }
    }
    for (int t = 0; t < 8; ++t) x[i + t] = v[t];
  }
}

/// Stages first .. first+m-1 (m <= 3) of a transform of length 2^L (L = first + m, i.e. the top stages), applied to
/// 2^m streams of stride M = 2^first, in chunks of kChunk columns so the working set stays in L1.
template <class T>
inline void fwht_top_stages_portable(T* x, int first, int m) {
  constexpr index_t kChunk = 64;
  const index_t stride = index_t{1} << first;
  const int streams = 1 << m;
  for (index_t c0 = 0; c0 < stride; c0 += kChunk) {
    const index_t w = stride - c0 < kChunk ? stride - c0 : kChunk;
    for (int hs = 1; hs < streams; hs *= 2) {
      for (int t = 0; t < streams; ++t) {
        if (t & hs) continue;
        T* lo = x + t * stride + c0;
        T* hi = x + (t + hs) * stride + c0;
        for (index_t j = 0; j < w; ++j) {
          const T a = lo[j], b = hi[j];
          lo[j] = a + b;
          hi[j] = a - b;
        }
      }
    }
  }
}

/// Portable transform of x[0, 2^L): blocks of kFwhtBlockBytes stage by stage, then the remaining top stages
/// three at a time (recursively, so each block is transformed while it is in cache).
template <class T>
inline void fwht_portable(T* x, int log_n) {
  constexpr int kBlock = fwht_block_log2<T>();
  if (log_n <= kBlock) {
    const index_t n = index_t{1} << log_n;
    index_t h = 1;
    if (n >= 8) {
      fwht_first_stages_portable(x, n);
      h = 8;
    }
    for (; 4 * h <= n; h *= 4) fwht_two_stages_portable(x, n, h);
    if (h < n) fwht_stage_portable(x, n, h);
    return;
  }
  const int m = log_n - kBlock < 3 ? log_n - kBlock : 3;
  const int sub = log_n - m;
  for (int t = 0; t < (1 << m); ++t) fwht_portable(x + (index_t{t} << sub), sub);
  fwht_top_stages_portable(x, sub, m);
}

#if COMPACT_DETAIL_HAS_X86_PATHS
// ---------------------------------------------------------------------------------------------------------------
// AVX path. A register holds kLanes consecutive elements; stages s < log2(kLanes) act inside a register
// (permute + sign flip + add: lane i gets x[i] + x[i^h] where bit s of i is clear and -x[i] + x[i^h] = x[i^h] - x[i]
// where it is set, exactly the pair (a + b, a - b) of the textbook butterfly); the other stages act between
// registers (add and sub).

struct AvxF32 {
  using Reg = __m256;
  using T = float;
  static constexpr int kLogLanes = 3;
  COMPACT_DETAIL_TARGET_AVX static Reg load(const T* p) { return _mm256_loadu_ps(p); }
  COMPACT_DETAIL_TARGET_AVX static void store(T* p, Reg v) { _mm256_storeu_ps(p, v); }
  COMPACT_DETAIL_TARGET_AVX static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  COMPACT_DETAIL_TARGET_AVX static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  COMPACT_DETAIL_TARGET_AVX static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  /// Stages 0, 1, 2 inside one register, in that order.
  COMPACT_DETAIL_TARGET_AVX static Reg in_register_stages(Reg v) {
    const Reg m0 = _mm256_setr_ps(0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f);
    const Reg m1 = _mm256_setr_ps(0.0f, 0.0f, -0.0f, -0.0f, 0.0f, 0.0f, -0.0f, -0.0f);
    const Reg m2 = _mm256_setr_ps(0.0f, 0.0f, 0.0f, 0.0f, -0.0f, -0.0f, -0.0f, -0.0f);
    v = _mm256_add_ps(_mm256_xor_ps(v, m0), _mm256_permute_ps(v, 0xB1));          // lanes [1,0,3,2 | 5,4,7,6]
    v = _mm256_add_ps(_mm256_xor_ps(v, m1), _mm256_permute_ps(v, 0x4E));          // lanes [2,3,0,1 | 6,7,4,5]
    v = _mm256_add_ps(_mm256_xor_ps(v, m2), _mm256_permute2f128_ps(v, v, 0x01));  // swap the 128-bit halves
    return v;
  }
};

struct AvxF64 {
  using Reg = __m256d;
  using T = double;
  static constexpr int kLogLanes = 2;
  COMPACT_DETAIL_TARGET_AVX static Reg load(const T* p) { return _mm256_loadu_pd(p); }
  COMPACT_DETAIL_TARGET_AVX static void store(T* p, Reg v) { _mm256_storeu_pd(p, v); }
  COMPACT_DETAIL_TARGET_AVX static Reg add(Reg a, Reg b) { return _mm256_add_pd(a, b); }
  COMPACT_DETAIL_TARGET_AVX static Reg sub(Reg a, Reg b) { return _mm256_sub_pd(a, b); }
  COMPACT_DETAIL_TARGET_AVX static Reg mul(Reg a, Reg b) { return _mm256_mul_pd(a, b); }
  /// Stages 0, 1 inside one register, in that order.
  COMPACT_DETAIL_TARGET_AVX static Reg in_register_stages(Reg v) {
    const Reg m0 = _mm256_setr_pd(0.0, -0.0, 0.0, -0.0);
    const Reg m1 = _mm256_setr_pd(0.0, 0.0, -0.0, -0.0);
    v = _mm256_add_pd(_mm256_xor_pd(v, m0), _mm256_permute_pd(v, 0x5));           // lanes [1,0 | 3,2]
    v = _mm256_add_pd(_mm256_xor_pd(v, m1), _mm256_permute2f128_pd(v, v, 0x01));  // swap the 128-bit halves
    return v;
  }
};

/// log2(R) consecutive stages among R registers v[0..R) holding elements at stride h, 2h, ...: stage q pairs
/// (v[t], v[t + 2^q]) for bit q of t clear.
template <class V, int R>
COMPACT_DETAIL_TARGET_AVX inline void avx_butterflies(typename V::Reg* v) {
  for (int hs = 1; hs < R; hs *= 2) {
    for (int t = 0; t < R; ++t) {
      if (t & hs) continue;
      const typename V::Reg a = v[t], b = v[t + hs];
      v[t] = V::add(a, b);
      v[t + hs] = V::sub(a, b);
    }
  }
}

/// First pass over x[0, n): groups of R consecutive registers get the in-register stages and then log2(R)
/// stages between registers, i.e. stages 0 .. kLogLanes + log2(R) - 1.
template <class V, int R>
COMPACT_DETAIL_TARGET_AVX inline void avx_first_pass(typename V::T* x, index_t n) {
  constexpr index_t kLanes = index_t{1} << V::kLogLanes;
  for (index_t i = 0; i < n; i += R * kLanes) {
    typename V::Reg v[R];
    for (int t = 0; t < R; ++t) v[t] = V::in_register_stages(V::load(x + i + t * kLanes));
    avx_butterflies<V, R>(v);
    for (int t = 0; t < R; ++t) V::store(x + i + t * kLanes, v[t]);
  }
}

/// Stages s .. s + log2(R) - 1 (h = 2^s >= kLanes) over x[0, n): R registers at stride h per group.
template <class V, int R>
COMPACT_DETAIL_TARGET_AVX inline void avx_radix_pass(typename V::T* x, index_t n, index_t h) {
  constexpr index_t kLanes = index_t{1} << V::kLogLanes;
  for (index_t blk = 0; blk < n; blk += R * h) {
    for (index_t o = 0; o < h; o += kLanes) {
      typename V::T* p = x + blk + o;
      typename V::Reg v[R];
      for (int t = 0; t < R; ++t) v[t] = V::load(p + t * h);
      avx_butterflies<V, R>(v);
      for (int t = 0; t < R; ++t) V::store(p + t * h, v[t]);
    }
  }
}

/// Stages `from` .. log_n - 1 of x[0, 2^log_n) in passes of up to three stages (radix 8, then 4 or 2).
template <class V>
COMPACT_DETAIL_TARGET_AVX inline void avx_stages_from(typename V::T* x, int log_n, int from) {
  const index_t n = index_t{1} << log_n;
  int s = from;
  while (s < log_n) {
    const int m = log_n - s >= 3 ? 3 : log_n - s;
    const index_t h = index_t{1} << s;
    if (m == 3) {
      avx_radix_pass<V, 8>(x, n, h);
    } else if (m == 2) {
      avx_radix_pass<V, 4>(x, n, h);
    } else {
      avx_radix_pass<V, 2>(x, n, h);
    }
    s += m;
  }
}

/// In-cache transform of x[0, 2^log_n), log_n >= kLogLanes.
template <class V>
COMPACT_DETAIL_TARGET_AVX inline void avx_block(typename V::T* x, int log_n) {
  const index_t n = index_t{1} << log_n;
  const int between = log_n - V::kLogLanes;  // stages between registers
  if (between >= 3) {
    avx_first_pass<V, 8>(x, n);
  } else if (between == 2) {
    avx_first_pass<V, 4>(x, n);
  } else if (between == 1) {
    avx_first_pass<V, 2>(x, n);
  } else {
    avx_first_pass<V, 1>(x, n);
  }
  avx_stages_from<V>(x, log_n, V::kLogLanes + (between < 3 ? between : 3));
}

/// The top m stages (first .. first + m - 1) of x[0, 2^(first + m)): 2^m streams of stride 2^first.
template <class V>
COMPACT_DETAIL_TARGET_AVX inline void avx_top_stages(typename V::T* x, int first, int m) {
  const index_t n = index_t{1} << (first + m);
  const index_t h = index_t{1} << first;
  if (m == 3) {
    avx_radix_pass<V, 8>(x, n, h);
  } else if (m == 2) {
    avx_radix_pass<V, 4>(x, n, h);
  } else {
    avx_radix_pass<V, 2>(x, n, h);
  }
}

template <class V>
COMPACT_DETAIL_TARGET_AVX inline void avx_recursive(typename V::T* x, int log_n) {
  constexpr int kBlock = fwht_block_log2<typename V::T>();
  if (log_n <= kBlock) {
    avx_block<V>(x, log_n);
    return;
  }
  const int m = log_n - kBlock < 3 ? log_n - kBlock : 3;
  const int sub = log_n - m;
  for (int t = 0; t < (1 << m); ++t) avx_recursive<V>(x + (index_t{t} << sub), sub);
  avx_top_stages<V>(x, sub, m);
}

/// AVX transform of x[0, 2^log_n). Not inlined into callers compiled without AVX (a call, not an inline expansion).
template <class T>
COMPACT_DETAIL_TARGET_AVX void fwht_avx(T* x, int log_n) {
  using V = std::conditional_t<std::is_same_v<T, float>, AvxF32, AvxF64>;
  if (log_n < V::kLogLanes) {
    fwht_portable(x, log_n);  // fewer elements than one register
    return;
  }
  avx_recursive<V>(x, log_n);
}
#endif  // COMPACT_DETAIL_HAS_X86_PATHS

/// The transform without argument checks: x[0, 2^log_n) on the path of `isa`, which must be supported. Transforms
/// shorter than one AVX-512 register take the 256-bit path on kAvx512.
template <class T>
inline void fwht_unchecked(T* x, int log_n, CpuIsa isa) {
#if COMPACT_DETAIL_AVX512_COMPILED
  if (isa == CpuIsa::kAvx512 && log_n >= avx512::kFwhtAvx512MinLog<T>) {
    avx512::fwht_avx512(x, log_n);
    return;
  }
#endif
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (isa != CpuIsa::kScalar) {
    fwht_avx(x, log_n);
    return;
  }
#endif
  (void)isa;
  fwht_portable(x, log_n);
}

}  // namespace detail

/// In place: x[0, n) <- H x, H the n x n Sylvester Hadamard matrix (H[i][k] = (-1)^popcount(i & k), no scaling), on
/// the instruction set `isa`.
///
/// Requires T = float or double, n a power of two in [1, kFwhtMaxLength], x non-null (n elements, any alignment),
/// and `isa` supported by this build and CPU (cpu_isa_supported); otherwise throws compact::error. Butterfly order as
/// in the file comment; every instruction set gives the same bits.
template <class T>
void fwht(T* x, index_t n, CpuIsa isa) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "compact::fwht: T must be float or double");
  COMPACT_REQUIRE(n >= 1 && n <= kFwhtMaxLength && (n & (n - 1)) == 0,
                  "fwht: length n = " << n << " must be a power of two in [1, " << kFwhtMaxLength << "]");
  COMPACT_REQUIRE(x != nullptr, "fwht: argument x is null with length n = " << n);
  COMPACT_REQUIRE(cpu_isa_supported(isa),
                  "fwht: instruction set " << cpu_isa_name(isa) << " requested but unavailable on this build or CPU");
  int log_n = 0;
  while ((index_t{1} << log_n) < n) ++log_n;
  detail::fwht_unchecked(x, log_n, isa);
}

/// fwht on the active instruction set (active_cpu_isa()).
template <class T>
void fwht(T* x, index_t n) {
  fwht(x, n, active_cpu_isa());
}

}  // namespace compact
