// SPDX-License-Identifier: MIT
#pragma once
/// In-place fast Walsh-Hadamard transform (Sylvester order, unnormalized) of float/double arrays, length 2^L <= 2^20.
///
/// y = H x with H[i][k] = (-1)^popcount(i & k). The butterfly order is fixed: stage s = 0, 1, ..., L-1 maps every
/// pair (x[i], x[i + 2^s]) with bit s of i clear to (x[i] + x[i + 2^s], x[i] - x[i + 2^s]), each stage reading the
/// previous stage's values. Every path (the vector instances of cpu/fwht_passes.inl, the portable loops of
/// cpu/fwht_portable.hpp, any cache blocking) performs exactly these additions and subtractions, and no
/// multiplications, so each output is bitwise identical across paths, thread counts, optimisation levels and
/// contraction settings, and equal to the textbook loop `for (h = 1; h < n; h *= 2) for (i ...) for (j ...) { a = x[j];
/// b = x[j+h]; x[j] = a+b; x[j+h] = a-b; }`.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/spec/srht.hpp"
#include "compact/cpu/fwht_portable.hpp"
#include "compact/cpu/isa.hpp"
#include "compact/cpu/isa_avx2.hpp"
#include "compact/cpu/isa_avx512.hpp"

// The vector paths (CpuIsa::kAvx2, kAvx512) are one source, cpu/fwht_passes.inl, compiled per instruction set
// (cpu/isa_avx2.hpp, cpu/isa_avx512.hpp) and chosen at run time, so no -m/-march flag is needed. The scalar
// path is the portable loops of cpu/fwht_portable.hpp, not a one-lane instance of fwht_passes.inl: compilers
// vectorize those plain loops (the portable path is what runs on other CPUs, e.g. NEON), while the one-lane instance of
// the register passes was measured 2.7-3.9x slower at -O2 without -march (n = 2^8..2^20).

namespace compact {

/// Longest transform supported: 2^20 elements (4 MiB of float), the SRHT's longest padded row (spec/srht.hpp).
inline constexpr index_t kFwhtMaxLength = kSrhtMaxPaddedDim;

namespace detail {

/// The transform without argument checks: x[0, 2^log_n) on the path of `isa`, which must be supported. Transforms
/// shorter than one register of the instruction set take the next narrower path.
template <class T>
inline void fwht_unchecked(T* x, int log_n, CpuIsa isa) {
#if COMPACT_DETAIL_AVX512_COMPILED
  if (isa == CpuIsa::kAvx512 && log_n >= avx512::kFwhtMinLog<T>) {
    avx512::fwht_in_place(x, log_n);
    return;
  }
#endif
#if COMPACT_DETAIL_HAS_X86_PATHS
  if (isa != CpuIsa::kScalar && log_n >= avx2::kFwhtMinLog<T>) {
    avx2::fwht_in_place(x, log_n);
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
