// SPDX-License-Identifier: MIT
/// A consumer of the installed (or add_subdirectory'd) package: sketches a batch and checks it against x P, on the GEMM
/// engine its target gives it (compact::compact: Eigen; compact::blas: the BLAS).
#include <compact/compact.hpp>

#include <cstdio>

int main() {
  const compact::Projector<compact::Cpu, compact::Gaussian> proj(64, 16, compact::SketchState{1, 2, 3});
#if defined(CONSUMER_EXPECT_BLAS)
  const compact::GemmEngine expected = compact::GemmEngine::kBlas;
#else
  const compact::GemmEngine expected = compact::GemmEngine::kEigen;
#endif
  if (proj.gemm_engine() != expected) {
    std::printf("consumer: GEMM engine %s, expected %s\n", compact::gemm_engine_name(proj.gemm_engine()),
                compact::gemm_engine_name(expected));
    return 1;
  }
  const compact::RowMatrix<float> x = compact::RowMatrix<float>::Random(8, 64);
  const compact::RowMatrix<float> z = proj.sketch(x);
  const compact::RowMatrix<float> ref = x * proj.materialize();
  const float err = (z - ref).cwiseAbs().maxCoeff();
  std::printf("consumer (%s): max |z - x P| = %g\n", compact::gemm_engine_name(expected), static_cast<double>(err));
  return err < 1e-4f ? 0 : 1;
}
