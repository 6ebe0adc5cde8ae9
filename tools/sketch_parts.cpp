// SPDX-License-Identifier: MIT
/// Where a dense sketch's time goes (issue 20, "report what bounds it"): the Gaussian sketch, the generation of its P
/// alone (materialize), Eigen's threaded GEMM with P stored, and the Rademacher sketch, called in turn in one process
/// 25 times on the Eigen engine; prints the medians of calls 4..25 and Gaussian ÷ stored P against its floor
/// (stored P + generation) ÷ stored P (docs/benchmarks.md, "Gaussian sketch at B = 256"):
///   g++ -O3 -DNDEBUG -march=native -std=c++17 -fopenmp -Iinclude -isystem /usr/include/eigen3 tools/sketch_parts.cpp
///   OMP_WAIT_POLICY=passive ./a.out 256
#include <compact/compact.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "timing.hpp"

int main(int argc, char** argv) {
  using compact::index_t;
  using compact_tools::time_ms;
  const index_t b = argc > 1 ? std::atoi(argv[1]) : 256, n = 4096, r = 1024;
  if (b < 1) {
    std::fprintf(stderr, "usage: sketch_parts [B >= 1] (got %s)\n", argv[1]);
    return 2;
  }
  const compact::RowMatrix<float> x = compact::RowMatrix<float>::Random(b, n);
  compact::RowMatrix<float> z(b, r), p(n, r);
  compact::Projector<compact::Cpu, compact::Gaussian, float> gaussian(n, r, compact::SketchState{1, 2, 3});
  compact::Projector<compact::Cpu, compact::Rademacher, float> rademacher(n, r, compact::SketchState{1, 2, 3});
  gaussian.set_gemm_engine(compact::GemmEngine::kEigen);
  rademacher.set_gemm_engine(compact::GemmEngine::kEigen);
  const auto xv = compact::detail::as_view<float>(x);
  const auto zv = compact::detail::as_mutable_view<float>(z);
  std::vector<double> sketch, generate, stored, rad;
  for (int k = 0; k < 25; ++k) {
    sketch.push_back(time_ms([&] { gaussian.sketch(xv, zv); }));
    generate.push_back(time_ms([&] { gaussian.materialize(compact::detail::as_mutable_view<float>(p)); }));
    stored.push_back(time_ms([&] { z.noalias() = x * p; }));
    rad.push_back(time_ms([&] { rademacher.sketch(xv, zv); }));
  }
  const auto median_after_warmup = [](const std::vector<double>& v) { return compact_tools::median(v, 3); };
  const double s = median_after_warmup(sketch), g = median_after_warmup(generate), st = median_after_warmup(stored),
               ra = median_after_warmup(rad);
  std::printf(
      "B = %d, n = %d, r = %d, Eigen threads %d (ms, medians): Gaussian sketch %.2f, generation %.2f, "
      "stored-P GEMM %.2f, Rademacher sketch %.2f; Gaussian / stored P %.3f, floor (stored P + generation) / "
      "stored P %.3f\n",
      int(b), int(n), int(r), Eigen::nbThreads(), s, g, st, ra, s / st, (st + g) / st);
}
