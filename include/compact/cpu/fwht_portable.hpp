// SPDX-License-Identifier: MIT
#pragma once
/// The portable FWHT: plain loops in the fixed butterfly order (cpu/fwht.hpp), and the cache blocking every path
/// shares.
///
/// CpuIsa::kScalar's path, every CPU's path without x86 vector instances (COMPACT_DISABLE_SIMD, other architectures)
/// and the vector paths' fallback for transforms shorter than one register. The compiler vectorizes the stages with
/// 2^s >= its vector width.

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"

namespace compact {
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

}  // namespace detail
}  // namespace compact
