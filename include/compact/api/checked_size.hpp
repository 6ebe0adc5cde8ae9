// SPDX-License-Identifier: MIT
#pragma once
/// Overflow-checked size arithmetic and allocation: every product or sum of sizes, strides and byte counts that the
/// library forms from user input goes through here.
///
/// The predicates (`mul_fits`, `add_fits`) are host/device functions that report overflow; the `checked_*`
/// functions throw compact::error naming the function, the quantity and its operands; `allocating` turns an
/// allocation failure (std::bad_alloc) into compact::error naming what was being allocated.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <string>

#include "compact/config.hpp"

namespace compact {
namespace detail {

/// Largest index_t and uint64 (literals rather than std::numeric_limits, which nvcc's device code cannot call).
inline constexpr index_t kIndexMax = index_t{0x7FFFFFFFFFFFFFFF};
inline constexpr std::uint64_t kU64Max = ~std::uint64_t{0};

/// *out = a * b when a, b >= 0 and the product fits in index_t; otherwise returns false and leaves *out alone.
COMPACT_HOST_DEVICE inline bool mul_fits(index_t a, index_t b, index_t* out) {
  if (a < 0 || b < 0) return false;
  if (a != 0 && b > kIndexMax / a) return false;
  *out = a * b;
  return true;
}

/// *out = a + b when a, b >= 0 and the sum fits in index_t; otherwise returns false and leaves *out alone.
COMPACT_HOST_DEVICE inline bool add_fits(index_t a, index_t b, index_t* out) {
  if (a < 0 || b < 0 || a > kIndexMax - b) return false;
  *out = a + b;
  return true;
}

/// *out = a * b in uint64 when it does not wrap; otherwise returns false and leaves *out alone.
COMPACT_HOST_DEVICE inline bool mul_fits_u64(std::uint64_t a, std::uint64_t b, std::uint64_t* out) {
  if (a != 0 && b > kU64Max / a) return false;
  *out = a * b;
  return true;
}

/// *out = a + b in uint64 when it does not wrap; otherwise returns false and leaves *out alone.
COMPACT_HOST_DEVICE inline bool add_fits_u64(std::uint64_t a, std::uint64_t b, std::uint64_t* out) {
  if (a > kU64Max - b) return false;
  *out = a + b;
  return true;
}

/// a * b (a, b >= 0), or compact::error "fn: what = a * b overflows ...".
inline index_t checked_mul(const char* fn, const char* what, index_t a, index_t b) {
  index_t out = 0;
  COMPACT_REQUIRE(mul_fits(a, b, &out),
                  fn << ": " << what << " = " << a << " * " << b << " is negative or overflows the 64-bit index type");
  return out;
}

/// a + b (a, b >= 0), or compact::error "fn: what = a + b overflows ...".
inline index_t checked_add(const char* fn, const char* what, index_t a, index_t b) {
  index_t out = 0;
  COMPACT_REQUIRE(add_fits(a, b, &out),
                  fn << ": " << what << " = " << a << " + " << b << " is negative or overflows the 64-bit index type");
  return out;
}

/// a * b in uint64, or compact::error naming `what`.
inline std::uint64_t checked_mul_u64(const char* fn, const char* what, std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  COMPACT_REQUIRE(mul_fits_u64(a, b, &out), fn << ": " << what << " = " << a << " * " << b << " overflows 64 bits");
  return out;
}

/// a + b in uint64, or compact::error naming `what`.
inline std::uint64_t checked_add_u64(const char* fn, const char* what, std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  COMPACT_REQUIRE(add_fits_u64(a, b, &out), fn << ": " << what << " = " << a << " + " << b << " overflows 64 bits");
  return out;
}

/// Bytes of `count` objects of T as std::size_t, or compact::error when count < 0 or the byte count does not fit.
template <class T>
std::size_t checked_bytes(const char* fn, const char* what, index_t count) {
  COMPACT_REQUIRE(count >= 0, fn << ": " << what << " has a negative element count " << count);
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max() / sizeof(T);
  COMPACT_REQUIRE(static_cast<std::uint64_t>(count) <= kMax, fn << ": " << what << " of " << count << " elements of "
                                                                << sizeof(T) << " bytes exceeds the address space");
  return static_cast<std::size_t>(count) * sizeof(T);
}

/// Runs `allocate()` and turns std::bad_alloc into compact::error "fn: cannot allocate what (bytes bytes)".
template <class F>
auto allocating(const char* fn, const char* what, std::size_t bytes, F&& allocate) -> decltype(allocate()) {
  try {
    return allocate();
  } catch (const std::bad_alloc&) {
    throw_error(std::string("compact: ") + fn + ": cannot allocate " + what + " (" + std::to_string(bytes) +
                " bytes): out of memory");
  }
}

}  // namespace detail

/// Overflow-checked size arithmetic for integrators (a binding's or an example's memory estimate, a buffer size from
/// user input): the library's own checks, public. Each returns the exact result or throws compact::error
/// "fn: what = a op b ..." naming the caller `fn`, the quantity `what` and both operands.

/// a * b for a, b >= 0 in index_t; throws when an operand is negative or the product overflows.
inline index_t checked_mul(const char* fn, const char* what, index_t a, index_t b) {
  return detail::checked_mul(fn, what, a, b);
}
/// a + b for a, b >= 0 in index_t; throws when an operand is negative or the sum overflows.
inline index_t checked_add(const char* fn, const char* what, index_t a, index_t b) {
  return detail::checked_add(fn, what, a, b);
}
/// a * b in uint64; throws when the product does not fit in 64 bits.
inline std::uint64_t checked_mul_u64(const char* fn, const char* what, std::uint64_t a, std::uint64_t b) {
  return detail::checked_mul_u64(fn, what, a, b);
}
/// a + b in uint64; throws when the sum does not fit in 64 bits.
inline std::uint64_t checked_add_u64(const char* fn, const char* what, std::uint64_t a, std::uint64_t b) {
  return detail::checked_add_u64(fn, what, a, b);
}

}  // namespace compact
