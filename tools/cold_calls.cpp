// SPDX-License-Identifier: MIT
/// What a call costs when other calls have evicted its data (issue 20, the training call pattern): one SRHT projector,
/// 41 rounds, each timing a call with everything hot (the second of two back-to-back calls), a call after a 96 MiB
/// memset that evicts the caches, and a call after the eviction and a read of x; prints the medians and their ratios
/// to the hot call (docs/benchmarks.md, "Training call pattern"):
///   g++ -O3 -DNDEBUG -march=native -std=c++17 -fopenmp -Iinclude -isystem /usr/include/eigen3 tools/cold_calls.cpp
///   ./a.out 1024 512 128
#include <compact/compact.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "timing.hpp"

int main(int argc, char** argv) {
  using compact::index_t;
  const index_t b = argc > 3 ? std::atoi(argv[1]) : 0, n = argc > 3 ? std::atoi(argv[2]) : 0,
                r = argc > 3 ? std::atoi(argv[3]) : 0;
  if (b < 1 || r < 1 || r > n) {
    std::fprintf(stderr, "usage: cold_calls B n r (B >= 1, 1 <= r <= n), e.g. 1024 512 128\n");
    return 2;
  }
  const compact::RowMatrix<float> x = compact::RowMatrix<float>::Random(b, n);
  compact::RowMatrix<float> z(b, r);
  const compact::Projector<compact::Cpu, compact::Srht, float> p(n, r, compact::SketchState{1, 2, 3});
  std::vector<char> evict(std::size_t{96} << 20, 1);
  const auto call = [&] {
    return compact_tools::time_ms(
        [&] { p.sketch(compact::detail::as_view<float>(x), compact::detail::as_mutable_view<float>(z)); });
  };
  std::vector<double> hot, cold, cold_but_x;
  volatile float sink = 0;
  for (int k = 0; k < 41; ++k) {
    call();
    hot.push_back(call());
    std::memset(evict.data(), k, evict.size());
    cold.push_back(call());
    std::memset(evict.data(), k + 1, evict.size());
    float sum = 0;
    for (index_t i = 0; i < b * n; i += 16) sum += x.data()[i];  // one load per 64-byte line of x
    sink = sum;
    cold_but_x.push_back(call());
  }
  (void)sink;
  using compact_tools::median;
  const double h = median(hot), c = median(cold), cx = median(cold_but_x);
  std::printf(
      "SRHT B = %d, n = %d, r = %d (ms, medians of 41): hot %.3f, caches evicted %.3f (%.2fx), evicted and x "
      "read again %.3f (%.2fx)\n",
      int(b), int(n), int(r), h, c, c / h, cx, cx / h);
}
