// SPDX-License-Identifier: MIT
/// A consumer of the installed (or add_subdirectory'd) package: sketches a batch and checks it against x P.
#include <compact/compact.hpp>

#include <cstdio>

int main() {
  const compact::Projector<compact::Cpu, compact::Gaussian> proj(64, 16, compact::SketchState{1, 2, 3});
  const compact::RowMatrix<float> x = compact::RowMatrix<float>::Random(8, 64);
  const compact::RowMatrix<float> z = proj.sketch(x);
  const compact::RowMatrix<float> ref = x * proj.materialize();
  const float err = (z - ref).cwiseAbs().maxCoeff();
  std::printf("consumer: max |z - x P| = %g\n", static_cast<double>(err));
  return err < 1e-4f ? 0 : 1;
}
