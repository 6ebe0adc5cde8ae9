// SPDX-License-Identifier: MIT
/// A plain program that calls the allocating sketch a few times on one shape, as a user's program would (issue 20's
/// "call pattern" measurement): the median of calls 2..11 and the process's minor page faults per call. Built outside
/// CMake on purpose, so that the allocator's state is a fresh process's (docs/benchmarks.md, "Training call pattern"):
///   g++ -O3 -DNDEBUG -march=native -std=c++17 -fopenmp -Iinclude -isystem /usr/include/eigen3 tools/plain_calls.cpp
#include <compact/compact.hpp>

#include <sys/resource.h>

#include <cstdio>
#include <vector>

#include "timing.hpp"

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

template <class Dist>
void run(const char* name, int calls) {
  using compact::index_t;
  const index_t b = 256, n = 4096, r = 1024;
  const compact::RowMatrix<float> x = compact::RowMatrix<float>::Random(b, n);
  compact::RowMatrix<float> z(b, r);
  const compact::Projector<compact::Cpu, Dist, float> p(n, r, compact::SketchState{1, 2, 3});
  std::vector<double> ms;
  long faults = 0;
  for (int k = 0; k < calls; ++k) {
    const long f0 = minor_faults();
    const double t = compact_tools::time_ms(
        [&] { p.sketch(compact::detail::as_view<float>(x), compact::detail::as_mutable_view<float>(z)); });
    if (k == 0) continue;  // the thread's first call faults its scratch in whatever the allocator does
    ms.push_back(t);
    faults += minor_faults() - f0;
  }
  std::printf("%s B = %d, n = %d, r = %d: median of calls 2..%d %.2f ms, %.0f minor faults per call\n", name, int(b),
              int(n), int(r), calls, compact_tools::median(ms), double(faults) / double(ms.size()));
}

}  // namespace

int main() {
  run<compact::Gaussian>("Gaussian", 11);
  run<compact::Rademacher>("Rademacher", 11);
}
