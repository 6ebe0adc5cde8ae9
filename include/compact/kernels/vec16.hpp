// SPDX-License-Identifier: MIT
#pragma once
/// 16-byte vectors: the unit of the kernels' vectorized global loads and stores (one ld/st.global.v4.u32), written
/// once for the device and for the host tests.
///
/// A Vec16 holds 16 / sizeof(T) elements of a 2- or 4-byte type T in memory order (element q at bytes
/// [q sizeof(T), (q + 1) sizeof(T)), little-endian as on every CUDA device and x86 host). On the device a load or
/// store is one 128-bit access to global memory (the address must be 16-byte aligned); on the host it is a memcpy,
/// so the host tests run the same packing code without aliasing questions.

#include <cstdint>
#include <cstring>

#include "compact/config.hpp"
#include "compact/portability.hpp"

namespace compact {
namespace detail {

/// Sixteen bytes, 16-byte aligned: four 32-bit words.
struct alignas(16) Vec16 {
  std::uint32_t w[4];
};

/// Elements of T in one Vec16 (8 for 16-bit types, 4 for 32-bit ones).
template <class T>
inline constexpr int kVec16Elems = static_cast<int>(16 / sizeof(T));

/// Whether `p` is 16-byte aligned, so that a Vec16 may be loaded or stored there.
COMPACT_HOST_DEVICE inline bool is_aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

/// The 16 bytes at p (16-byte aligned): one 128-bit load on the device (detail::load16, portability.hpp).
COMPACT_HOST_DEVICE inline Vec16 load_vec16(const void* p) {
  Vec16 v;
  load16(p, v.w);
  return v;
}

/// Stores v at p (16-byte aligned): one 128-bit store on the device (detail::store16, portability.hpp).
COMPACT_HOST_DEVICE inline void store_vec16(void* p, const Vec16& v) { store16(p, v.w); }

/// The raw bits of element q of v: a 16-bit or 32-bit pattern (q a constant after unrolling, so no memory is used).
template <int kBytes>
COMPACT_HOST_DEVICE inline std::uint32_t vec16_bits(const Vec16& v, int q) {
  static_assert(kBytes == 2 || kBytes == 4, "compact::detail::vec16_bits: elements of 2 or 4 bytes");
  if constexpr (kBytes == 4) {
    return v.w[q];
  } else {
    return (v.w[q / 2] >> (16 * (q % 2))) & 0xFFFFu;
  }
}

/// Element q of v as a T (a bit copy).
template <class T>
COMPACT_HOST_DEVICE inline T vec16_get(const Vec16& v, int q) {
  T out;
  if constexpr (sizeof(T) == 4) {
    const std::uint32_t b = vec16_bits<4>(v, q);
    std::memcpy(&out, &b, sizeof out);
  } else {
    const std::uint16_t b = static_cast<std::uint16_t>(vec16_bits<2>(v, q));
    std::memcpy(&out, &b, sizeof out);
  }
  return out;
}

/// A Vec16 of kVec16Elems<T> elements given as their raw bits (std::uint16_t for 2-byte types, std::uint32_t for
/// 4-byte ones), element q at bytes [q sizeof(T), ...).
template <class Bits>
COMPACT_HOST_DEVICE inline Vec16 pack_vec16(const Bits (&b)[kVec16Elems<Bits>]) {
  static_assert(sizeof(Bits) == 2 || sizeof(Bits) == 4, "compact::detail::pack_vec16: 16- or 32-bit elements");
  Vec16 v;
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(Bits) == 4) {
      v.w[k] = b[k];
    } else {
      v.w[k] = static_cast<std::uint32_t>(b[2 * k]) | (static_cast<std::uint32_t>(b[2 * k + 1]) << 16);
    }
  }
  return v;
}

/// The raw bits of a 2- or 4-byte value x (a bit copy): std::uint16_t or std::uint32_t.
template <class T>
COMPACT_HOST_DEVICE inline auto raw_bits(const T& x) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "compact::detail::raw_bits: 16- or 32-bit values");
  if constexpr (sizeof(T) == 4) {
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
  } else {
    std::uint16_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
  }
}

}  // namespace detail
}  // namespace compact
