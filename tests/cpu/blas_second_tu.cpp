// SPDX-License-Identifier: MIT
/// A second translation unit of test_blas / test_blas_openblas, compiled without the BLAS header even where the
/// executable links compact::blas: the dense projector's code here is the same as in the TU that registers the BLAS
/// (no macro changes a function body), and a projector constructed here runs whichever engine the program has.
#undef COMPACT_USE_BLAS
#include <compact/compact.hpp>

#include "cpu/blas_second_tu.hpp"

namespace compact_test {

compact::RowMatrix<float> sketch_in_second_tu(compact::GemmEngine engine, const compact::RowMatrix<float>& x,
                                              compact::index_t r, compact::SketchState state) {
  compact::Projector<compact::Cpu, compact::Gaussian, float> proj(x.cols(), r, state);
  proj.set_gemm_engine(engine);
  return proj.sketch(x);
}

compact::GemmEngine default_engine_in_second_tu() { return compact::default_gemm_engine(); }

}  // namespace compact_test
