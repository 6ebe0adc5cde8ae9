// SPDX-License-Identifier: MIT
#pragma once
/// Scalar traits of the CUDA backend: float, __half, __nv_bfloat16 <-> fp32 and their cudaDataType_t.

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>

#include "compact/config.hpp"
#include "compact/kernels/convert.hpp"
#include "compact/kernels/vec16.hpp"

namespace compact {
namespace detail {

/// Scalar types of the CUDA backend.
template <class T>
inline constexpr bool is_cuda_scalar =
    std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// to_float (exact) and from_float (round to nearest even, through kernels/convert.hpp so host and device agree bit
/// for bit), plus the cuBLAS data type.
template <class T>
struct CudaScalar {
  static_assert(is_cuda_scalar<T>, "compact: the CUDA backend's Scalar must be float, __half or __nv_bfloat16");
};

template <>
struct CudaScalar<float> {
  static constexpr cudaDataType_t kType = CUDA_R_32F;
  static constexpr const char* kName = "float";
  COMPACT_HOST_DEVICE static float to_float(float x) { return x; }
  COMPACT_HOST_DEVICE static float from_float(float x) { return x; }
};

template <>
struct CudaScalar<__half> {
  static constexpr cudaDataType_t kType = CUDA_R_16F;
  static constexpr const char* kName = "__half";
  COMPACT_HOST_DEVICE static float to_float(__half x) {
#if defined(__CUDA_ARCH__)
    return __half2float(x);  // exact, hence equal to fp32_from_fp16_bits
#else
    return fp32_from_fp16_bits(static_cast<__half_raw>(x).x);
#endif
  }
  COMPACT_HOST_DEVICE static __half from_float(float x) {
    __half_raw raw;
    raw.x = fp16_bits_from_fp32(x);
    return __half(raw);
  }
  COMPACT_HOST_DEVICE static std::uint16_t bits(__half x) { return static_cast<__half_raw>(x).x; }
};

template <>
struct CudaScalar<__nv_bfloat16> {
  static constexpr cudaDataType_t kType = CUDA_R_16BF;
  static constexpr const char* kName = "__nv_bfloat16";
  COMPACT_HOST_DEVICE static float to_float(__nv_bfloat16 x) {
    return fp32_from_bf16_bits(static_cast<__nv_bfloat16_raw>(x).x);  // a shift: as cheap as the intrinsic
  }
  COMPACT_HOST_DEVICE static __nv_bfloat16 from_float(float x) {
    __nv_bfloat16_raw raw;
    raw.x = bf16_bits_from_fp32(x);
    return __nv_bfloat16(raw);
  }
  COMPACT_HOST_DEVICE static std::uint16_t bits(__nv_bfloat16 x) { return static_cast<__nv_bfloat16_raw>(x).x; }
};

/// fp32 -> T (round to nearest even): the `convert` / `from_float` of the kernel bodies in kernels/.
template <class T>
struct FromFloat {
  COMPACT_HOST_DEVICE T operator()(float v) const { return CudaScalar<T>::from_float(v); }
};

/// fp32 -> the raw bits of T (round to nearest even; std::uint16_t or std::uint32_t): the `encode` of the dense
/// panel kernel's body, which stores bits.
template <class T>
struct ToBits {
  COMPACT_HOST_DEVICE auto operator()(float v) const { return raw_bits(CudaScalar<T>::from_float(v)); }
};

/// T -> fp32 (exact): the `to_float` of the kernel bodies in kernels/.
template <class T>
struct ToFloat {
  COMPACT_HOST_DEVICE float operator()(T v) const { return CudaScalar<T>::to_float(v); }
};

}  // namespace detail
}  // namespace compact
