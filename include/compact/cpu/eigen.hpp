// SPDX-License-Identifier: MIT
#pragma once
/// Eigen glue for the CPU backend: RowMatrix, Eigen maps of a MatrixView and views of an Eigen matrix, and checked
/// matrix allocation.

#include <cstddef>

// GCC 12 reports a false positive inside Eigen's AVX-512 kernels (`__Y may be used uninitialized` at -O3, `__Y is used
// uninitialized` at -O2, in avx512fintrin.h inlined from Eigen's GEMM packing; GCC bug 105593) whenever AVX-512 is
// enabled, e.g. by -march=native on an AVX-512 machine. The warning is silenced for the lines of Eigen's headers only:
// GCC applies a diagnostic pragma to every location of an inlining chain, so code outside this region (the library's
// and the user's) keeps the warning.
// Under nvcc (a .cu translation unit using both backends) the CPU backend is host code: Eigen's own CUDA support,
// which marks every Eigen function __host__ __device__ and makes nvcc warn about them, is turned off, unless the
// translation unit included Eigen before compact (then its configuration stands).
#if defined(__CUDACC__) && !defined(EIGEN_WORLD_VERSION) && !defined(EIGEN_NO_CUDA)
#define EIGEN_NO_CUDA
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "compact/config.hpp"
#include "compact/api/checked_size.hpp"
#include "compact/api/view.hpp"

namespace compact {

/// Row-major dynamic Eigen matrix: the layout every CPU convenience takes and returns.
template <class Scalar>
using RowMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
namespace detail {

template <class Scalar>
using RowMap = Eigen::Map<RowMatrix<Scalar>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class Scalar>
using ConstRowMap = Eigen::Map<const RowMatrix<Scalar>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class Scalar>
ConstRowMap<Scalar> as_eigen(const MatrixView<const Scalar>& v) {
  return ConstRowMap<Scalar>(v.data, v.rows, v.cols, Eigen::OuterStride<>(v.row_stride));
}
template <class Scalar>
RowMap<Scalar> as_eigen(const MatrixView<Scalar>& v) {
  return RowMap<Scalar>(v.data, v.rows, v.cols, Eigen::OuterStride<>(v.row_stride));
}

/// An uninitialized rows x cols RowMatrix, or compact::error naming `what` when rows * cols * sizeof(Scalar)
/// overflows or the allocation fails (Eigen would throw std::bad_alloc).
template <class Scalar>
RowMatrix<Scalar> make_matrix(const char* fn, const char* what, index_t rows, index_t cols) {
  const std::size_t bytes = checked_bytes<Scalar>(fn, what, checked_mul(fn, what, rows, cols));
  return allocating(fn, what, bytes, [&] { return RowMatrix<Scalar>(rows, cols); });
}

/// make_matrix filled with zeros.
template <class Scalar>
RowMatrix<Scalar> make_zero_matrix(const char* fn, const char* what, index_t rows, index_t cols) {
  RowMatrix<Scalar> m = make_matrix<Scalar>(fn, what, rows, cols);
  m.setZero();
  return m;
}

template <class Scalar>
MatrixView<const Scalar> as_view(const Eigen::Ref<const RowMatrix<Scalar>>& m) {
  return MatrixView<const Scalar>(m.data(), m.rows(), m.cols(), m.outerStride());
}
template <class Scalar>
MatrixView<Scalar> as_mutable_view(Eigen::Ref<RowMatrix<Scalar>> m) {
  return MatrixView<Scalar>(m.data(), m.rows(), m.cols(), m.outerStride());
}

}  // namespace detail
}  // namespace compact
