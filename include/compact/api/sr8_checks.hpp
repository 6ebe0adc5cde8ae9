// SPDX-License-Identifier: MIT
#pragma once
/// The argument checks of the sr8 codec's encode and decode on every backend (spec/sr8.hpp): a count >= 0, non-null
/// pointers when count > 0, outputs that alias no input. Run before anything is written.

#include <cstdint>

#include "compact/config.hpp"
#include "compact/spec/sr8.hpp"
#include "compact/api/view.hpp"

namespace compact {
namespace detail {

/// `count` elements at p as a one-row view, for the aliasing check.
template <class T>
MatrixView<T> flat_view(T* p, index_t count) {
  return MatrixView<T>(p, count > 0 ? 1 : 0, count, count);
}

/// `p` (argument `name`) non-null when count > 0.
inline void check_sr8_pointer(const char* fn, const char* name, const void* p, index_t count) {
  COMPACT_REQUIRE(count == 0 || p != nullptr, fn << ": argument " << name << " is null with count = " << count);
}

/// encode(x[count]) -> q[count], scales[sr8_scale_count(count)]: count >= 0, x, q and scales non-null when
/// count > 0 and spanning real addresses, and neither output aliasing x or the other output.
template <class In>
void check_sr8_encode_args(const char* fn, const In* x, index_t count, const std::int8_t* q, const float* scales) {
  COMPACT_REQUIRE(count >= 0, fn << ": argument count = " << count << " must be >= 0");
  check_sr8_pointer(fn, "x", x, count);
  check_sr8_pointer(fn, "q", q, count);
  check_sr8_pointer(fn, "scales", scales, count);
  const index_t blocks = sr8_scale_count(count);
  check_view(fn, "x", flat_view(x, count), -1, "", -1, "");
  check_view(fn, "q", flat_view(q, count), -1, "", -1, "");
  check_view(fn, "scales", flat_view(scales, blocks), -1, "", -1, "");
  check_no_alias(fn, "x", flat_view(x, count), "q", flat_view(q, count));
  check_no_alias(fn, "x", flat_view(x, count), "scales", flat_view(scales, blocks));
  check_no_alias(fn, "q", flat_view(q, count), "scales", flat_view(scales, blocks));
}

/// decode(q[count], scales[sr8_scale_count(count)]) -> out[count]: count >= 0, every pointer non-null when
/// count > 0, out aliasing neither input.
template <class Out>
void check_sr8_decode_args(const char* fn, const std::int8_t* q, const float* scales, index_t count, const Out* out) {
  COMPACT_REQUIRE(count >= 0, fn << ": argument count = " << count << " must be >= 0");
  check_sr8_pointer(fn, "q", q, count);
  check_sr8_pointer(fn, "scales", scales, count);
  check_sr8_pointer(fn, "out", out, count);
  const index_t blocks = sr8_scale_count(count);
  check_view(fn, "q", flat_view(q, count), -1, "", -1, "");
  check_view(fn, "scales", flat_view(scales, blocks), -1, "", -1, "");
  check_view(fn, "out", flat_view(out, count), -1, "", -1, "");
  check_no_alias(fn, "q", flat_view(q, count), "out", flat_view(out, count));
  check_no_alias(fn, "scales", flat_view(scales, blocks), "out", flat_view(out, count));
}

}  // namespace detail
}  // namespace compact
