// SPDX-License-Identifier: MIT
// No #pragma once: included once per instruction set (cpu/isa_avx2.hpp, cpu/isa_avx512.hpp, SIMDe's
// tests/cpu/test_avx512_emulated.cpp), inside that instance's namespace and target region, after its lane file.
/// The in-cache Walsh-Hadamard transform written once for every vector instruction set: a register holds
/// 2^kLogLanes consecutive elements, the stages below kLogLanes act inside it, the others between registers, up to
/// kFwhtRadixLog stages per pass over L1.
///
/// The instance's lane file provides kFwhtRadixLog (3 for AVX2's 16 registers, 4 for AVX-512's 32) and the register
/// types FwhtF32, FwhtF64: Reg, T, kLogLanes, load, store, zero, add, sub, mul, in_register_stages. Same butterfly
/// order and the same IEEE additions and subtractions as every other path of cpu/fwht.hpp (see its file comment), so
/// the bits are those of the textbook loop whatever the radix.
///
/// Function objects instead of lambdas: a lambda's call operator would not inherit the target region's attribute.

/// Transforms of at most 2^kFwhtBlockLog elements (kFwhtBlockBytes, cpu/fwht_portable.hpp) run in place pass by pass
/// (L1-resident); longer ones are split, as on the portable path.
template <class T>
inline constexpr int kFwhtBlockLog = fwht_block_log2<T>();

/// Stages per pass joining sub-blocks (stride >= kFwhtBlockBytes = 16 KiB, which maps all of a group's streams to one
/// L1 set): at most 3, i.e. 8 streams. Radix 16 there (AVX-512) overflowed a 12-way L1 and measured 10-20% slower
/// from 2^16 up on an AVX-512 Xeon (docs/benchmarks.md, "The AVX-512 FWHT after issue 20").
inline constexpr int kFwhtTopRadixLog = kFwhtRadixLog < 3 ? kFwhtRadixLog : 3;

/// The register type of T.
template <class T>
using FwhtRegister = std::conditional_t<std::is_same_v<T, float>, FwhtF32, FwhtF64>;

/// The smallest log2 length fwht_in_place and fwht_signed take: one register.
template <class T>
inline constexpr int kFwhtMinLog = FwhtRegister<T>::kLogLanes;

/// One butterfly between registers t and t + hs.
template <class V>
inline void butterfly(typename V::Reg* v, int t, int hs) {
  const typename V::Reg a = v[t], b = v[t + hs];
  v[t] = V::add(a, b);
  v[t + hs] = V::sub(a, b);
}

/// The stage of distance kHs among R registers: the R/2 pairs (v[t], v[t + kHs]) with bit kHs of t clear, t
/// ascending (pair k is t = (k / kHs) 2 kHs + k % kHs).
template <class V, int kHs, std::size_t... K>
inline void butterfly_stage(typename V::Reg* v, std::index_sequence<K...>) {
  (butterfly<V>(v, static_cast<int>(K) / kHs * 2 * kHs + static_cast<int>(K) % kHs, kHs), ...);
}

/// log2(R) stages among R registers holding elements at stride h, 2h, ...: stage q pairs (v[t], v[t + 2^q]) for bit q
/// of t clear. Expanded at compile time (a fold, not loops): GCC 12 left the loops of the radix-16 case rolled, with
/// v[] on the stack (93 vmovaps per group for 30 additions), which made the AVX-512 instance slower than AVX2's.
template <class V, int R, int kHs = 1>
inline void butterflies(typename V::Reg* v) {
  if constexpr (kHs < R) {
    butterfly_stage<V, kHs>(v, std::make_index_sequence<static_cast<std::size_t>(R / 2)>{});
    butterflies<V, R, kHs * 2>(v);
  }
}

/// Stages 0 .. kLogLanes + log2(R) - 1 of x[0, n): groups of R consecutive registers, read by load(i) (the register
/// of elements i .. i + lanes - 1 before the transform) and stored to x.
template <class V, int R, class Load>
inline void first_pass(typename V::T* x, index_t n, const Load& load) {
  constexpr index_t kRegLanes = index_t{1} << V::kLogLanes;
  for (index_t i = 0; i < n; i += R * kRegLanes) {
    typename V::Reg v[R];
    for (int t = 0; t < R; ++t) v[t] = V::in_register_stages(load(i + t * kRegLanes));
    butterflies<V, R>(v);
    for (int t = 0; t < R; ++t) V::store(x + i + t * kRegLanes, v[t]);
  }
}

/// Stages s .. s + log2(R) - 1 (h = 2^s >= lanes) of x[0, n): R registers at stride h per group.
template <class V, int R>
inline void radix_pass(typename V::T* x, index_t n, index_t h) {
  constexpr index_t kRegLanes = index_t{1} << V::kLogLanes;
  for (index_t blk = 0; blk < n; blk += R * h) {
    for (index_t o = 0; o < h; o += kRegLanes) {
      typename V::T* p = x + blk + o;
      typename V::Reg v[R];
      for (int t = 0; t < R; ++t) v[t] = V::load(p + t * h);
      butterflies<V, R>(v);
      for (int t = 0; t < R; ++t) V::store(p + t * h, v[t]);
    }
  }
}

/// Stages s .. s + m - 1 (1 <= m <= kFwhtRadixLog) of x[0, n) in one radix-2^m pass.
template <class V>
inline void radix_pass_of(typename V::T* x, index_t n, index_t h, int m) {
  if constexpr (kFwhtRadixLog >= 4) {
    if (m == 4) return radix_pass<V, 16>(x, n, h);
  }
  switch (m) {
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

/// The first pass of an in-cache transform of length 2^log_n (log_n >= kLogLanes): radix
/// 2^min(kFwhtRadixLog, log_n - kLogLanes) between registers; returns the first stage left to do.
template <class V, class Load>
inline int first_pass_of(typename V::T* x, int log_n, const Load& load) {
  const index_t n = index_t{1} << log_n;
  const int between = log_n - V::kLogLanes < kFwhtRadixLog ? log_n - V::kLogLanes : kFwhtRadixLog;
  if constexpr (kFwhtRadixLog >= 4) {
    if (between == 4) {
      first_pass<V, 16>(x, n, load);
      return V::kLogLanes + between;
    }
  }
  switch (between) {
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

/// Stages `from` .. log_n - 1 of x[0, 2^log_n) in passes of kFwhtRadixLog stages (the last one shorter when needed).
template <class V>
inline void stages_from(typename V::T* x, int log_n, int from) {
  for (int s = from; s < log_n; s += kFwhtRadixLog)
    radix_pass_of<V>(x, index_t{1} << log_n, index_t{1} << s, log_n - s < kFwhtRadixLog ? log_n - s : kFwhtRadixLog);
}

/// Loads of an in-place transform.
template <class V>
struct LoadInPlace {
  const typename V::T* x;
  typename V::Reg operator()(index_t i) const { return V::load(x + i); }
};

/// Loads of the SRHT's first pass: x_k d_k for k < n, 0 beyond (exact: d_k = +-1). With `ahead` (the row the caller
/// transforms next, or null), each load that starts a 64-byte line of x also prefetches the same offset of `ahead`
/// into L2 (prefetcht1): the next row's reads from memory then overlap this row's in-cache passes and gather, where
/// without it each row's first pass waited for memory alone (docs/benchmarks.md, "SRHT: the next row prefetched").
template <class V>
struct LoadSigned {
  const typename V::T* x;
  const typename V::T* d;
  index_t n;
  const typename V::T* ahead;
  typename V::Reg operator()(index_t i) const {
    constexpr index_t kRegLanes = index_t{1} << V::kLogLanes;
    constexpr index_t kLine = 64 / static_cast<index_t>(sizeof(typename V::T));
    if (ahead != nullptr && i < n && i % kLine == 0) __builtin_prefetch(ahead + i, 0, 2);
    if (i + kRegLanes <= n) return V::mul(V::load(x + i), V::load(d + i));
    if (i >= n) return V::zero();  // padding
    alignas(64) typename V::T lanes[kRegLanes];
    for (index_t k = 0; k < kRegLanes; ++k) lanes[k] = i + k < n ? x[i + k] * d[i + k] : typename V::T(0);
    return V::load(lanes);
  }
};

/// In-cache transform of x[0, 2^log_n), log_n >= kLogLanes: one first pass, then passes of up to kFwhtRadixLog
/// stages.
template <class V>
inline void transform_block(typename V::T* x, int log_n) {
  stages_from<V>(x, log_n, first_pass_of<V>(x, log_n, LoadInPlace<V>{x}));
}

/// Transforms of at most 2^kFwhtBlockLog elements run pass by pass in L1; longer ones are split into 2^m sub-blocks
/// (m <= kFwhtTopRadixLog) transformed recursively while in cache, then joined by one radix-2^m pass (the top stages).
template <class V>
inline void transform_recursive(typename V::T* x, int log_n) {
  constexpr int kBlockLog = kFwhtBlockLog<typename V::T>;
  if (log_n <= kBlockLog) {
    transform_block<V>(x, log_n);
    return;
  }
  const int m = log_n - kBlockLog < kFwhtTopRadixLog ? log_n - kBlockLog : kFwhtTopRadixLog;
  const int sub = log_n - m;
  for (int t = 0; t < (1 << m); ++t) transform_recursive<V>(x + (index_t{t} << sub), sub);
  radix_pass_of<V>(x, index_t{1} << log_n, index_t{1} << sub, m);
}

/// Transform of x[0, 2^log_n), float or double; requires log_n >= kFwhtMinLog<T> (one register; cpu/fwht.hpp sends
/// shorter transforms to the portable path). Not inlined into callers compiled for another target (a call, not an
/// inline expansion).
template <class T>
void fwht_in_place(T* x, int log_n) {
  transform_recursive<FwhtRegister<T>>(x, log_n);
}

/// buf[0, 2^log_n) = H pad(x . d), the SRHT's signed, zero-padded transform of a row x[0, n) with signs d[0, n)
/// (n <= 2^log_n; buf must not overlap x). The product x_k d_k (exact for d_k = +-1) is formed as the first pass
/// loads x, so the row is read once and nothing beyond x[n - 1] is read; longer transforms are blocked as in
/// transform_recursive, the product formed by the first pass of each sub-block. `ahead`: null, or a row of n
/// elements the caller transforms next, prefetched into L2 as x is read (see LoadSigned; no effect on the result).
/// Requires log_n >= kFwhtMinLog<T>.
template <class T>
void fwht_signed(const T* x, const T* d, index_t n, T* buf, int log_n, const T* ahead = nullptr) {
  using V = FwhtRegister<T>;
  constexpr int kBlockLog = kFwhtBlockLog<T>;
  if (log_n <= kBlockLog) {
    stages_from<V>(buf, log_n, first_pass_of<V>(buf, log_n, LoadSigned<V>{x, d, n, ahead}));
    return;
  }
  const int m = log_n - kBlockLog < kFwhtTopRadixLog ? log_n - kBlockLog : kFwhtTopRadixLog;
  const int sub = log_n - m;
  for (int t = 0; t < (1 << m); ++t) {
    const index_t offset = index_t{t} << sub, rest = n > offset ? n - offset : 0;  // x[offset, n) if any
    fwht_signed(rest > 0 ? x + offset : x, rest > 0 ? d + offset : d, rest, buf + offset, sub,
                rest > 0 && ahead != nullptr ? ahead + offset : nullptr);
  }
  radix_pass_of<V>(buf, index_t{1} << log_n, index_t{1} << sub, m);
}
