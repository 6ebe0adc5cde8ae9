// SPDX-License-Identifier: MIT
#pragma once
/// The instruction sets of the CPU kernels (scalar, AVX2, AVX-512), the run-time CPU check and the process-wide cap.
///
/// Every CPU kernel with vector paths (panel generation in cpu/generate.hpp, the FWHT in cpu/fwht.hpp) has one path
/// per CpuIsa, and every path gives the bits of the scalar reference. The vector paths are one source compiled per
/// instruction set in target regions (below), so the library needs no -m flags; which one runs is decided at run time:
///
///   active_cpu_isa() = min(best ISA of this CPU, cap),
///
/// the cap being kAvx512 unless lowered by set_cpu_isa_cap() or the environment variable COMPACT_CPU_ISA (read once,
/// at the first call: `scalar`, `avx2` or `avx512`). Tests force each path the CPU supports through the cap or the
/// `*_with(isa, ...)` entry points (compact::fwht(x, n, isa)); benchmarks record active_cpu_isa(). Defining
/// COMPACT_DISABLE_SIMD (a compile-time switch, for every translation unit of a program alike) compiles every vector
/// path out: only kScalar is then supported, and every kernel runs its scalar reference.
///
/// kAvx2 means AVX2 + FMA (every x86-64-v3 CPU); kAvx512 means AVX-512 F (the kernels use no other AVX-512 subset).

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "compact/config.hpp"

#if !defined(COMPACT_DISABLE_SIMD) && (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
/// 1 where the x86 vector paths are compiled (g++ or clang++ on x86, COMPACT_DISABLE_SIMD not defined).
#define COMPACT_DETAIL_HAS_X86_PATHS 1
#else
#define COMPACT_DETAIL_HAS_X86_PATHS 0
#endif

// The one switch of every x86 vector path (generation and the FWHT in cpu/kernels_*.hpp, the SRHT gather in
// cpu/srht_row_transform.hpp): COMPACT_DETAIL_HAS_X86_PATHS. Under COMPACT_DISABLE_SIMD none of them is compiled (no
// intrinsics header, no target region) and best_cpu_isa() is kScalar, so every kernel takes its scalar reference.
//
// Each kernel is written once (cpu/fwht_passes.inl, cpu/generate_panels.inl, spec/fp32_lanes.inl) against the lane
// types of an instruction set (cpu/lanes_avx2.inl, cpu/lanes_avx512.inl) and compiled once per instruction set, as
// Highway does: cpu/isa_avx2.hpp and cpu/isa_avx512.hpp include the sources inside a namespace of their own
// (detail::avx2, detail::avx512) between COMPACT_DETAIL_BEGIN_<ISA> and COMPACT_DETAIL_END_TARGET, which give every
// function defined in between the target (g++: #pragma GCC target; clang++: #pragma clang attribute), so the library
// needs no -m flags; which instance runs is decided at run time.
#if COMPACT_DETAIL_HAS_X86_PATHS
#if !defined(COMPACT_DETAIL_AVX512_EMULATED)  // that test TU has SIMDe's native aliases instead (see below)
#include <immintrin.h>
#endif
/// Compiles one function for AVX instructions only (the SRHT's streaming gather, cpu/srht_row_transform.hpp).
#define COMPACT_DETAIL_TARGET_AVX __attribute__((target("avx")))
#if defined(__clang__)
#define COMPACT_DETAIL_BEGIN_AVX2 \
  _Pragma("clang attribute push(__attribute__((target(\"avx2,fma\"))), apply_to = function)")
#define COMPACT_DETAIL_BEGIN_AVX512 \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx2,fma\"))), apply_to = function)")
#define COMPACT_DETAIL_END_TARGET _Pragma("clang attribute pop")
#else
/// Every function defined from here to COMPACT_DETAIL_END_TARGET is compiled for CpuIsa::kAvx2 (AVX2 + FMA).
#define COMPACT_DETAIL_BEGIN_AVX2 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
/// Every function defined from here to COMPACT_DETAIL_END_TARGET is compiled for CpuIsa::kAvx512 (AVX-512 F).
#define COMPACT_DETAIL_BEGIN_AVX512 _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx2,fma\")")
/// Ends a COMPACT_DETAIL_BEGIN_<ISA> region.
#define COMPACT_DETAIL_END_TARGET _Pragma("GCC pop_options")
#endif
#endif

// The AVX-512 instance (cpu/isa_avx512.hpp) is compiled natively in a target region, or, in a test translation
// unit that defines COMPACT_DETAIL_AVX512_EMULATED after including SIMDe with native aliases, against SIMDe's
// portable intrinsics, without the target region and in another namespace (so that the two builds never share a
// symbol).
#if defined(COMPACT_DETAIL_AVX512_EMULATED)
#define COMPACT_DETAIL_AVX512_NAMESPACE avx512_emulated
#define COMPACT_DETAIL_AVX512_COMPILED 1
#elif COMPACT_DETAIL_HAS_X86_PATHS
#define COMPACT_DETAIL_AVX512_NAMESPACE avx512
#define COMPACT_DETAIL_AVX512_COMPILED 1
#else
#define COMPACT_DETAIL_AVX512_COMPILED 0
#endif

namespace compact {

/// Instruction set of a CPU kernel; ordered, each one a superset of the previous.
enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

/// "scalar", "avx2" or "avx512".
inline const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    default:
      return "scalar";
  }
}

namespace detail {

/// The best instruction set this build can run on this CPU (checked once per process).
inline CpuIsa best_cpu_isa() {
#if COMPACT_DETAIL_HAS_X86_PATHS
  static const CpuIsa best = [] {
    __builtin_cpu_init();
    // __builtin_cpu_supports also checks that the OS saves the vector state (XCR0) for AVX and AVX-512.
    if (__builtin_cpu_supports("avx512f")) return CpuIsa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::kAvx2;
    return CpuIsa::kScalar;
  }();
  return best;
#else
  return CpuIsa::kScalar;
#endif
}

/// The ISA named by COMPACT_CPU_ISA, or kAvx512 (no cap) when it is unset; throws on any other value.
inline CpuIsa cpu_isa_cap_from_environment() {
  const char* value = std::getenv("COMPACT_CPU_ISA");
  if (value == nullptr || *value == '\0') return CpuIsa::kAvx512;
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (std::strcmp(value, cpu_isa_name(isa)) == 0) return isa;
  }
  COMPACT_REQUIRE(false, "environment variable COMPACT_CPU_ISA = \"" << value << "\" must be scalar, avx2 or avx512");
  return CpuIsa::kScalar;
}

/// The process-wide cap (an int holding a CpuIsa; -1 until the environment has been read).
inline std::atomic<int> cpu_isa_cap_storage{-1};

inline CpuIsa cpu_isa_cap() {
  int cap = cpu_isa_cap_storage.load(std::memory_order_relaxed);
  if (cap < 0) {
    int unset = -1;
    cap = static_cast<int>(cpu_isa_cap_from_environment());
    if (!cpu_isa_cap_storage.compare_exchange_strong(unset, cap, std::memory_order_relaxed)) cap = unset;
  }
  return static_cast<CpuIsa>(cap);
}

}  // namespace detail

/// True when this build and this CPU can run `isa` (kScalar always), whatever the cap.
inline bool cpu_isa_supported(CpuIsa isa) { return static_cast<int>(isa) <= static_cast<int>(detail::best_cpu_isa()); }

/// The instruction set every CPU kernel uses now: the best one this CPU supports, capped (see the file comment).
inline CpuIsa active_cpu_isa() {
  const CpuIsa best = detail::best_cpu_isa(), cap = detail::cpu_isa_cap();
  return static_cast<int>(cap) < static_cast<int>(best) ? cap : best;
}

/// Caps the instruction set of every CPU kernel of this process (e.g. kAvx2 to compare paths on an AVX-512 CPU);
/// kAvx512 removes the cap. Returns the previous cap. Thread-safe; calls running at that moment keep their ISA.
inline CpuIsa set_cpu_isa_cap(CpuIsa cap) {
  const CpuIsa previous = detail::cpu_isa_cap();
  detail::cpu_isa_cap_storage.store(static_cast<int>(cap), std::memory_order_relaxed);
  return previous;
}

}  // namespace compact
