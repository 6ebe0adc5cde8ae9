// SPDX-License-Identifier: MIT
#pragma once
/// Per-row SRHT kernels: buf = H pad(x . d) with the sign product fused into the FWHT's first pass, and the gather.
///
/// The separate sign pass (buf_k = x_k d_k, then the transform reading buf back) was a third of a row's time at
/// n = 4096; here the first pass of the in-cache FWHT (fwht_signed, cpu/fwht_passes.inl) loads x and d, multiplies
/// and transforms in registers, so a row is read once. The products and the butterfly order are those of the
/// unfused sequence, so the bits are unchanged. Transforms longer than one cache block (2^12 floats, 2^11 doubles)
/// are blocked as the FWHT blocks them, each sub-block's first pass reading its part of x.

#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/cpu/fwht.hpp"
#include "compact/cpu/isa.hpp"
#include "compact/cpu/isa_avx2.hpp"
#include "compact/cpu/isa_avx512.hpp"

namespace compact {
namespace detail {

/// buf[0, 2^log_n) = H pad(x . d): the signed, zero-padded transform of the row x[0, n) (signs d_k = +-1, n <=
/// 2^log_n, buf must not overlap x or d) on the instruction set `isa` (supported). Every path gives the bits of
/// `buf_k = x_k d_k (0 beyond n)` followed by fwht_unchecked. `ahead`: null, or the row of n elements the caller
/// transforms next, which the vector paths prefetch into L2 while they read x (the result does not depend on it).
template <class T>
void srht_transform_row(const T* x, const T* d, index_t n, T* buf, int log_n, CpuIsa isa, const T* ahead = nullptr) {
#if COMPACT_DETAIL_AVX512_COMPILED
  if (isa == CpuIsa::kAvx512 && log_n >= avx512::kFwhtMinLog<T>) {
    avx512::fwht_signed(x, d, n, buf, log_n, ahead);
    return;
  }
#endif
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (isa != CpuIsa::kScalar && log_n >= avx2::kFwhtMinLog<T>) {
    avx2::fwht_signed(x, d, n, buf, log_n, ahead);
    return;
  }
#endif
  (void)ahead;
  const index_t np = index_t{1} << log_n;
  for (index_t k = 0; k < n; ++k) buf[k] = x[k] * d[k];  // exact: d_k = +-1
  for (index_t k = n; k < np; ++k) buf[k] = T(0);
  fwht_unchecked(buf, log_n, isa);
}

#if COMPACT_DETAIL_HAS_X86_PATHS

/// srht_gather_row with non-temporal stores: eight gathered values per 32-byte-aligned streaming store (the
/// AVX2 gather instruction is slower than eight loads on Zen 2), scalar stores before the first aligned address
/// and after the last full vector. Ends with sfence so that the stores are visible before the task completes.
template <class T>
COMPACT_DETAIL_TARGET_AVX void srht_gather_row_stream(const T* buf, const std::int32_t* sample, index_t r, T scale,
                                                      T* z) {
  constexpr index_t kLanes = 32 / sizeof(T);
  index_t j = 0;
  for (; j < r && reinterpret_cast<std::uintptr_t>(z + j) % 32 != 0; ++j) z[j] = buf[sample[j]] * scale;
  const std::int32_t* s = sample;
  if constexpr (std::is_same_v<T, float>) {
    const __m256 vs = _mm256_set1_ps(scale);
    for (; j + kLanes <= r; j += kLanes) {
      const __m256 v = _mm256_setr_ps(buf[s[j]], buf[s[j + 1]], buf[s[j + 2]], buf[s[j + 3]], buf[s[j + 4]],
                                      buf[s[j + 5]], buf[s[j + 6]], buf[s[j + 7]]);
      _mm256_stream_ps(z + j, _mm256_mul_ps(v, vs));
    }
  } else {
    const __m256d vs = _mm256_set1_pd(scale);
    for (; j + kLanes <= r; j += kLanes) {
      const __m256d v = _mm256_setr_pd(buf[s[j]], buf[s[j + 1]], buf[s[j + 2]], buf[s[j + 3]]);
      _mm256_stream_pd(z + j, _mm256_mul_pd(v, vs));
    }
  }
  for (; j < r; ++j) z[j] = buf[sample[j]] * scale;
  _mm_sfence();
}

#endif  // COMPACT_DETAIL_HAS_X86_PATHS

/// z[j] = buf[sample[j]] * scale for j < r. With `stream` (on a vector instruction set) z is written with
/// non-temporal stores, which skip reading z's cache lines before writing them: for a sketch much larger than the
/// caches that is a fifth less memory traffic (x read, z written instead of z read and written). Same bits.
template <class T>
inline void srht_gather_row(const T* buf, const std::int32_t* sample, index_t r, T scale, T* z, bool stream,
                            CpuIsa isa) {
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (stream && isa != CpuIsa::kScalar) {
    srht_gather_row_stream(buf, sample, r, scale, z);
    return;
  }
#endif
  (void)stream;
  (void)isa;
  for (index_t j = 0; j < r; ++j) z[j] = buf[sample[j]] * scale;
}

}  // namespace detail
}  // namespace compact
