// SPDX-License-Identifier: MIT
#pragma once
/// Functions of tests/cpu/blas_second_tu.cpp, a translation unit compiled without compact/cpu/blas.hpp.
#include <compact/compact.hpp>

namespace compact_test {

/// x P for a Gaussian projector (n = x.cols(), r, state) on `engine`, constructed and run in the second TU.
compact::RowMatrix<float> sketch_in_second_tu(compact::GemmEngine engine, const compact::RowMatrix<float>& x,
                                              compact::index_t r, compact::SketchState state);

/// default_gemm_engine() as the second TU sees it.
compact::GemmEngine default_engine_in_second_tu();

}  // namespace compact_test
