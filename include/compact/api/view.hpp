// SPDX-License-Identifier: MIT
#pragma once
/// MatrixView (pointer + rows + cols + row stride, row-major) and the argument checks shared by every backend.

#include <cstdint>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/api/checked_size.hpp"

namespace compact {

/// Non-owning row-major matrix: element (i, j) lives at data[i * row_stride + j]. Host or device memory.
template <class T>
struct MatrixView {
  T* data = nullptr;
  index_t rows = 0;
  index_t cols = 0;
  index_t row_stride = 0;

  MatrixView() = default;
  /// A view of `rows` x `cols` elements with the given row stride (in elements).
  COMPACT_HOST_DEVICE MatrixView(T* d, index_t r, index_t c, index_t stride)
      : data(d), rows(r), cols(c), row_stride(stride) {}
  /// A contiguous view (row_stride = cols).
  COMPACT_HOST_DEVICE MatrixView(T* d, index_t r, index_t c) : data(d), rows(r), cols(c), row_stride(c) {}
  /// A view of mutable data converts to a view of const data.
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  COMPACT_HOST_DEVICE MatrixView(const MatrixView<U>& v)  // NOLINT(google-explicit-constructor)
      : data(v.data), rows(v.rows), cols(v.cols), row_stride(v.row_stride) {}

  COMPACT_HOST_DEVICE T& operator()(index_t i, index_t j) const { return data[i * row_stride + j]; }
  COMPACT_HOST_DEVICE bool empty() const { return rows == 0 || cols == 0; }
};

/// Contiguous row-major view helper.
template <class T>
MatrixView<T> make_view(T* data, index_t rows, index_t cols) {
  return MatrixView<T>(data, rows, cols, cols);
}

namespace detail {

/// The elements a view spans, from data to one past its last element: (rows - 1) * row_stride + cols, 0 for an empty
/// view. Returns false when that count, its byte count or the address range data + bytes overflows (then the view
/// cannot describe real memory) or the shape is malformed (negative sizes, row_stride < cols).
template <class T>
inline bool view_span(const MatrixView<T>& v, index_t* elements) {
  if (v.rows < 0 || v.cols < 0 || v.row_stride < v.cols) return false;
  if (v.empty()) {
    *elements = 0;
    return true;
  }
  index_t span = 0;
  if (!mul_fits(v.rows - 1, v.row_stride, &span) || !add_fits(span, v.cols, &span)) return false;
  constexpr index_t kMaxElements = kIndexMax / index_t{sizeof(T)};
  if (span > kMaxElements) return false;
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(v.data);
  const std::uintptr_t bytes = static_cast<std::uintptr_t>(span) * sizeof(T);
  if (first > ~std::uintptr_t{0} - bytes) return false;
  *elements = span;
  return true;
}

/// Checks that `v` is a well-formed view named `name` in function `fn`: non-negative sizes, row_stride >= cols,
/// data non-null when it holds elements, and a span (rows - 1) * row_stride + cols whose bytes fit in the address
/// space from data on (so rows never alias through wrap-around). `rows`/`cols` < 0 mean "any"; otherwise they must
/// match exactly and `rows_name`/`cols_name` say which quantity they are (e.g. "n").
template <class T>
inline void check_view(const char* fn, const char* name, const MatrixView<T>& v, index_t rows, const char* rows_what,
                       index_t cols, const char* cols_what) {
  COMPACT_REQUIRE(v.rows >= 0 && v.cols >= 0,
                  fn << ": argument " << name << " has negative shape " << v.rows << " x " << v.cols);
  COMPACT_REQUIRE(v.row_stride >= v.cols,
                  fn << ": argument " << name << " has row_stride = " << v.row_stride << " < cols = " << v.cols);
  COMPACT_REQUIRE(v.data != nullptr || v.rows == 0 || v.cols == 0,
                  fn << ": argument " << name << " is null with shape " << v.rows << " x " << v.cols);
  index_t span = 0;
  COMPACT_REQUIRE(view_span(v, &span), fn << ": argument " << name << " with rows = " << v.rows << ", cols = " << v.cols
                                          << ", row_stride = " << v.row_stride
                                          << " spans (rows - 1) * row_stride + cols elements of " << sizeof(T)
                                          << " bytes beyond the address space");
  COMPACT_REQUIRE(rows < 0 || v.rows == rows,
                  fn << ": argument " << name << " has " << v.rows << " rows, expected " << rows_what << " = " << rows);
  COMPACT_REQUIRE(cols < 0 || v.cols == cols, fn << ": argument " << name << " has " << v.cols << " columns, expected "
                                                 << cols_what << " = " << cols);
}

/// Byte range [first, last) that a view touches (empty views touch nothing). A view whose span overflows (refused by
/// check_view) is taken to touch everything from data on, so it can never pass the aliasing check.
template <class T>
inline void view_extent(const MatrixView<T>& v, std::uintptr_t* first, std::uintptr_t* last) {
  if (v.empty()) {
    *first = *last = 0;
    return;
  }
  *first = reinterpret_cast<std::uintptr_t>(v.data);
  index_t span = 0;
  *last = view_span(v, &span) ? *first + static_cast<std::uintptr_t>(span) * sizeof(T) : ~std::uintptr_t{0};
}

/// Refuses an output view that aliases an input view, i.e. whose memory range intersects the input's (the result
/// would depend on evaluation order). ("Overlap" in compact names the CUDA panel schedule that overlaps generation
/// with the GEMM, kernels/panel_schedule.hpp; memory that two views share is aliasing.)
template <class T, class U>
inline void check_no_alias(const char* fn, const char* in_name, const MatrixView<T>& in, const char* out_name,
                           const MatrixView<U>& out) {
  std::uintptr_t a0, a1, b0, b1;
  view_extent(in, &a0, &a1);
  view_extent(out, &b0, &b1);
  COMPACT_REQUIRE(a0 == a1 || b0 == b1 || a1 <= b0 || b1 <= a0,
                  fn << ": output " << out_name << " overlaps input " << in_name << " in memory");
}

/// The argument checks of a block materialize(p, row0, col0) of an n x r P: p is a valid view and the block
/// [row0, row0 + p.rows) x [col0, col0 + p.cols) lies inside P.
template <class Scalar>
inline void check_block(const char* fn, const MatrixView<Scalar>& p, index_t row0, index_t col0, index_t n, index_t r) {
  check_view(fn, "p", p, -1, "", -1, "");
  COMPACT_REQUIRE(row0 >= 0 && row0 <= n && p.rows <= n - row0, fn << ": rows [" << row0 << ", " << row0 << " + "
                                                                   << p.rows << ") of the block are not inside the "
                                                                   << "n = " << n << " rows of P");
  COMPACT_REQUIRE(col0 >= 0 && col0 <= r && p.cols <= r - col0, fn << ": columns [" << col0 << ", " << col0 << " + "
                                                                   << p.cols << ") of the block are not inside "
                                                                   << "the r = " << r << " columns of P");
}

/// The argument checks of Projector::sketch on every backend: x is B x n, z is B x r, z does not overlap x.
template <class Scalar>
inline void check_sketch_args(const MatrixView<const Scalar>& x, const MatrixView<Scalar>& z, index_t n, index_t r) {
  check_view("Projector::sketch", "x", x, -1, "", n, "n");
  check_view("Projector::sketch", "z", z, x.rows, "x.rows", r, "r");
  check_no_alias("Projector::sketch", "x", x, "z", z);
}

/// The argument checks of Projector::unsketch_grad on every backend: g is m x r, out is m x n, out does not
/// overlap g.
template <class Scalar>
inline void check_unsketch_args(const MatrixView<const Scalar>& g, const MatrixView<Scalar>& out, index_t n,
                                index_t r) {
  check_view("Projector::unsketch_grad", "g", g, -1, "", r, "r");
  check_view("Projector::unsketch_grad", "out", out, g.rows, "g.rows", n, "n");
  check_no_alias("Projector::unsketch_grad", "g", g, "out", out);
}

}  // namespace detail

/// The argument checks of compressed_grad (Ghat = dy^T z + beta g) on every backend, public for integrations that
/// form Ghat with an engine of their own (compact_torch hands the CPU product to torch's GEMM): dy is B x m, z is
/// B x r, g is m x r, and g overlaps neither input. g has its own type Accum (Scalar, or float for an fp32
/// accumulation of 16-bit activations). Throws compact::error naming the argument and its shape ("compressed_grad:
/// argument z has 4 rows, expected dy.rows = 5"); reads no element of any view and writes nothing.
template <class Scalar, class Accum>
inline void check_compressed_grad_args(const MatrixView<const Scalar>& dy, const MatrixView<const Scalar>& z,
                                       const MatrixView<Accum>& g) {
  detail::check_view("compressed_grad", "dy", dy, -1, "", -1, "");
  detail::check_view("compressed_grad", "z", z, dy.rows, "dy.rows", -1, "");
  detail::check_view("compressed_grad", "g", g, dy.cols, "dy.cols", z.cols, "z.cols");
  detail::check_no_alias("compressed_grad", "dy", dy, "g", g);
  detail::check_no_alias("compressed_grad", "z", z, "g", g);
}

}  // namespace compact
