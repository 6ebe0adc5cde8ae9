// SPDX-License-Identifier: MIT
#pragma once
/// The one place where host and device code differ: correctly rounded arithmetic, bit casts, 16-byte accesses,
/// unrolling and nvcc's host/device call check, each with its device intrinsic and its host equivalent.
///
/// Everything else in spec/, api/ and kernels/ is written once for both sides with COMPACT_HOST_DEVICE (config.hpp)
/// and calls these instead of testing __CUDA_ARCH__ itself. On the device the rounded operations are CUDA's `_rn`
/// intrinsics, which nvcc never contracts into an fma whatever --fmad says; on the host they are plain C++
/// operations, which the library's headers keep uncontracted where it matters by writing every product that feeds a
/// sum as an explicit fma or an exact product (see spec/fp32_lanes.inl).

#include <cmath>
#include <cstdint>
#include <cstring>

#include "compact/config.hpp"

#if defined(__CUDA_ARCH__)
/// Fully unrolls the loop that follows in device code (nvcc's #pragma unroll), so that register arrays indexed by
/// the loop variable stay in registers; nothing in host code. Kernel bodies put it on every loop over a register
/// array: nvcc's own heuristics leave long nested loops rolled, and the array then lives in local memory.
#define COMPACT_UNROLL _Pragma("unroll")
#else
#define COMPACT_UNROLL
#endif

#if defined(__CUDACC__)
/// Placed before a COMPACT_HOST_DEVICE template that may be instantiated with host-only callables (it is then only
/// called from the host): turns off nvcc's host/device call check for it. Nothing for other compilers.
#define COMPACT_NO_EXEC_CHECK _Pragma("nv_exec_check_disable")
#else
#define COMPACT_NO_EXEC_CHECK
#endif

namespace compact {
namespace detail {

/// Correctly rounded IEEE operations (T = float or double) that no compiler contracts on the device.
namespace rn {
template <class T>
COMPACT_HOST_DEVICE inline T mul(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4)
    return __fmul_rn(a, b);
  else
    return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
template <class T>
COMPACT_HOST_DEVICE inline T add(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4)
    return __fadd_rn(a, b);
  else
    return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
template <class T>
COMPACT_HOST_DEVICE inline T div(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4)
    return __fdiv_rn(a, b);
  else
    return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
template <class T>
COMPACT_HOST_DEVICE inline T sqrt(T a) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4)
    return __fsqrt_rn(a);
  else
    return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
/// a * b + c rounded once (IEEE 754 fusedMultiplyAdd), in float.
COMPACT_HOST_DEVICE inline float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
/// a * b rounded on its own, never fused with a following addition into an fma whatever the compiler's
/// -ffp-contract and target: on the device __fmul_rn (never contracted), on the host the product passed through a
/// volatile. For reference paths whose bits must not depend on the build (the moment8 step, spec/moment8.hpp); its
/// vector kernels use the lane files' rounded() instead.
template <class T>
COMPACT_HOST_DEVICE inline T mul_unfused(T a, T b) {
#if defined(__CUDA_ARCH__)
  return mul(a, b);
#else
  volatile T p = a * b;
  return p;
#endif
}
}  // namespace rn

/// The IEEE-754 binary32 bits of `x`.
COMPACT_HOST_DEVICE inline std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

/// The float whose IEEE-754 binary32 bits are `u`.
COMPACT_HOST_DEVICE inline float float_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/// The 16 bytes at p (16-byte aligned) as four words. On the device one ld.global.ca.v4.u32 through the __ldca
/// intrinsic on uint4, which nvcc declares in every translation unit: plain C++ accesses to an aligned 16-byte type
/// are not reliably kept as one 128-bit access (nvcc 13 splits the panel kernel's store into four 32-bit ones).
COMPACT_HOST_DEVICE inline void load16(const void* p, std::uint32_t w[4]) {
#if defined(__CUDA_ARCH__)
  const uint4 u = __ldca(static_cast<const uint4*>(p));
  w[0] = u.x;
  w[1] = u.y;
  w[2] = u.z;
  w[3] = u.w;
#else
  std::memcpy(w, p, 16);
#endif
}

/// Stores four words at p (16-byte aligned): on the device one st.global.wb.v4.u32 (__stwb, the default write-back
/// policy).
COMPACT_HOST_DEVICE inline void store16(void* p, const std::uint32_t w[4]) {
#if defined(__CUDA_ARCH__)
  __stwb(static_cast<uint4*>(p), make_uint4(w[0], w[1], w[2], w[3]));
#else
  std::memcpy(p, w, 16);
#endif
}

}  // namespace detail
}  // namespace compact
