// SPDX-License-Identifier: MIT
/// Overflow-checked size arithmetic (api/checked_size.hpp) and the view spans built on it (api/view.hpp).
#include <doctest/doctest.h>

#include <compact/api/checked_size.hpp>
#include <compact/api/view.hpp>

#include <cstdint>
#include <string>

using compact::index_t;
using compact::MatrixView;

namespace {

constexpr index_t kMax = compact::detail::kIndexMax;
constexpr std::uint64_t kU64Max = compact::detail::kU64Max;

std::string error_of_view(const MatrixView<const float>& v) {
  try {
    compact::detail::check_view("f", "x", v, -1, "", -1, "");
  } catch (const compact::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("mul_fits and add_fits accept exactly the results that fit in int64 and refuse negative operands") {
  index_t out = -1;
  CHECK(compact::detail::mul_fits(0, kMax, &out));
  CHECK(out == 0);
  CHECK(compact::detail::mul_fits(kMax, 1, &out));
  CHECK(out == kMax);
  CHECK(compact::detail::mul_fits(index_t{1} << 31, index_t{1} << 31, &out));
  CHECK(out == index_t{1} << 62);
  CHECK(compact::detail::mul_fits(3037000499, 3037000499, &out));  // floor(sqrt(2^63 - 1))^2 fits
  out = -1;
  CHECK_FALSE(compact::detail::mul_fits(3037000500, 3037000500, &out));  // just above 2^63 - 1
  CHECK_FALSE(compact::detail::mul_fits(index_t{1} << 62, 2, &out));
  CHECK_FALSE(compact::detail::mul_fits(-1, 1, &out));
  CHECK_FALSE(compact::detail::mul_fits(1, -1, &out));
  CHECK(out == -1);  // untouched on failure
  CHECK(compact::detail::add_fits(kMax - 5, 5, &out));
  CHECK(out == kMax);
  CHECK_FALSE(compact::detail::add_fits(kMax - 5, 6, &out));
  CHECK_FALSE(compact::detail::add_fits(-1, 0, &out));
  std::uint64_t u = 0;
  CHECK(compact::detail::mul_fits_u64(std::uint64_t{1} << 32, (std::uint64_t{1} << 32) - 1, &u));
  CHECK_FALSE(compact::detail::mul_fits_u64(std::uint64_t{1} << 32, std::uint64_t{1} << 32, &u));
  CHECK(compact::detail::add_fits_u64(kU64Max - 1, 1, &u));
  CHECK(u == kU64Max);
  CHECK_FALSE(compact::detail::add_fits_u64(kU64Max, 1, &u));
}

TEST_CASE("the checked operations name the function, the quantity and its operands") {
  CHECK_THROWS_WITH_AS(compact::detail::checked_mul("f", "n * r", index_t{1} << 40, index_t{1} << 30),
                       doctest::Contains("f: n * r = 1099511627776 * 1073741824"), compact::error);
  CHECK_THROWS_WITH_AS(compact::detail::checked_add("f", "span", kMax, 1), doctest::Contains("f: span = "),
                       compact::error);
  CHECK_THROWS_WITH_AS(compact::detail::checked_mul_u64("g", "bytes", kU64Max, 2),
                       doctest::Contains("g: bytes = 18446744073709551615 * 2 overflows 64 bits"), compact::error);
  CHECK_THROWS_WITH_AS(compact::detail::checked_bytes<double>("h", "P", index_t{1} << 61),
                       doctest::Contains("h: P of 2305843009213693952 elements of 8 bytes exceeds the address space"),
                       compact::error);
  CHECK_THROWS_WITH_AS(compact::detail::checked_bytes<float>("h", "P", -3), doctest::Contains("negative"),
                       compact::error);
  CHECK(compact::detail::checked_mul("f", "x", 6, 7) == 42);
  CHECK(compact::detail::checked_bytes<double>("h", "P", 5) == 40u);
}

TEST_CASE("the public checked operations (what integrators use) return exact results and name bad operands") {
  CHECK(compact::checked_mul("f", "x", 6, 7) == 42);
  CHECK(compact::checked_add("f", "x", kMax - 1, 1) == kMax);
  CHECK(compact::checked_mul_u64("g", "x", std::uint64_t{1} << 32, (std::uint64_t{1} << 32) - 1) ==
        kU64Max - (std::uint64_t{1} << 32) + 1);
  CHECK(compact::checked_add_u64("g", "x", kU64Max - 1, 1) == kU64Max);
  CHECK_THROWS_WITH_AS(compact::checked_mul("f", "n * r", index_t{1} << 40, index_t{1} << 30),
                       doctest::Contains("f: n * r = 1099511627776 * 1073741824"), compact::error);
  CHECK_THROWS_WITH_AS(compact::checked_mul("f", "n * r", -2, 3), doctest::Contains("f: n * r = -2 * 3 is negative"),
                       compact::error);
  CHECK_THROWS_WITH_AS(compact::checked_add("f", "span", kMax, 1), doctest::Contains("f: span = "), compact::error);
  CHECK_THROWS_WITH_AS(compact::checked_mul_u64("g", "bytes", kU64Max, 2),
                       doctest::Contains("g: bytes = 18446744073709551615 * 2 overflows 64 bits"), compact::error);
  CHECK_THROWS_WITH_AS(compact::checked_add_u64("g", "total", kU64Max, 1),
                       doctest::Contains("g: total = 18446744073709551615 + 1 overflows 64 bits"), compact::error);
}

TEST_CASE("allocating turns std::bad_alloc into compact::error naming what was allocated") {
  CHECK_THROWS_WITH_AS(compact::detail::allocating("f", "the panel", 123, []() -> int { throw std::bad_alloc(); }),
                       doctest::Contains("f: cannot allocate the panel (123 bytes): out of memory"), compact::error);
  CHECK(compact::detail::allocating("f", "x", 4, [] { return 7; }) == 7);
  // (the allocations' own failure paths are exercised by test_allocation_failure.cpp, which fails every operator new
  // in turn: a real allocation beyond the address space would abort under AddressSanitizer instead of throwing.)
  // Sizes whose bytes do not fit size_t are refused before any allocation is attempted (checked_bytes, which every
  // allocation's size goes through: make_matrix, ScratchBuffer's callers).
  CHECK_THROWS_WITH_AS(compact::detail::checked_bytes<double>("f", "a huge panel", index_t{1} << 62),
                       doctest::Contains("f: a huge panel of 4611686018427387904 elements of 8 bytes exceeds"),
                       compact::error);
  CHECK_THROWS_WITH_AS(compact::detail::checked_bytes<float>("f", "a panel", -1), doctest::Contains("negative"),
                       compact::error);
}

TEST_CASE("a view's span is (rows - 1) * row_stride + cols, and a span beyond the address space is refused") {
  float buffer[64] = {};
  index_t span = -1;
  CHECK(compact::detail::view_span(MatrixView<const float>(buffer, 3, 5, 8), &span));
  CHECK(span == 2 * 8 + 5);
  CHECK(compact::detail::view_span(MatrixView<const float>(buffer, 0, 5, 8), &span));
  CHECK(span == 0);
  CHECK(compact::detail::view_span(MatrixView<const float>(nullptr, 7, 0, 0), &span));
  CHECK(span == 0);
  CHECK_FALSE(compact::detail::view_span(MatrixView<const float>(buffer, -1, 5, 8), &span));
  CHECK_FALSE(compact::detail::view_span(MatrixView<const float>(buffer, 2, 5, 4), &span));
  // rows = 2^62 of one float: the span fits in int64 but its bytes do not.
  CHECK(error_of_view(MatrixView<const float>(buffer, index_t{1} << 62, 1, 1)).find("beyond the address space") !=
        std::string::npos);
  // row_stride = 2^62 with 5 rows: (rows - 1) * row_stride wraps int64 (it used to alias rows silently).
  CHECK(error_of_view(MatrixView<const float>(buffer, 5, 1, index_t{1} << 62))
            .find("f: argument x with rows = 5, cols = 1, row_stride = 4611686018427387904 spans") !=
        std::string::npos);
  // Two rows 2^61 floats apart: 2^63 bytes, beyond int64.
  CHECK(error_of_view(MatrixView<const float>(buffer, 2, 1, index_t{1} << 61)) != "");
  // An address range that wraps past the top of the address space.
  const auto* top = reinterpret_cast<const float*>(~std::uintptr_t{0} - 63);
  CHECK(error_of_view(MatrixView<const float>(top, 1, 32, 32)).find("beyond the address space") != std::string::npos);
  CHECK(error_of_view(MatrixView<const float>(buffer, 8, 8, 8)) == "");
}

TEST_CASE("an output whose input's span would wrap around can no longer slip past the overlap check") {
  float buffer[64] = {};
  // x starts before z, but (rows - 1) * row_stride = 2^63 wraps, so x's computed end used to fall before z and the
  // overlap check saw disjoint ranges. A span that overflows now counts as reaching the end of the address space.
  const MatrixView<const float> x(buffer, 3, 1, index_t{1} << 62);
  const MatrixView<float> z(buffer + 32, 1, 4);
  CHECK_THROWS_WITH_AS(compact::detail::check_no_alias("f", "x", x, "z", z),
                       doctest::Contains("output z overlaps input x"), compact::error);
  CHECK_THROWS_AS(compact::detail::check_sketch_args(x, z, 1, 4), compact::error);
  CHECK(buffer[32] == 0.0f);
}
