// SPDX-License-Identifier: MIT
/// Prints the golden-value table of docs/spec.md (and tests/core/golden.cpp) from the reference entry functions.
#include <compact/compact.hpp>

#include <cstdio>
#include <cstring>

namespace {
struct Case {
  compact::SketchState state;
  compact::index_t n, r;
};
const Case kCases[] = {{{0, 0, 0}, 4096, 1024}, {{0x0123456789ABCDEFull, 0x100000007ull, 0x200000003ull}, 3000, 1000}};
const compact::index_t kAt[16][2] = {{0, 0},      {0, 1},      {0, 2},      {0, 3},    {0, 4},     {1, 0},
                                     {7, 5},      {100, 33},   {3, 130},    {17, 255}, {999, 127}, {999, 128},
                                     {2048, 511}, {2999, 999}, {1234, 567}, {42, 998}};
}  // namespace

int main() {
  for (const Case& c : kCases) {
    const compact::EntryParams p = compact::entry_params(c.state, c.r);
    std::printf("state seed=0x%016llx stream=0x%llx window=0x%llx n=%lld r=%lld\n",
                static_cast<unsigned long long>(c.state.seed), static_cast<unsigned long long>(c.state.stream),
                static_cast<unsigned long long>(c.state.window), static_cast<long long>(c.n),
                static_cast<long long>(c.r));
    for (const auto& ij : kAt) {
      const float g = compact::gaussian_entry(p, ij[0], ij[1]);
      const float rd = compact::rademacher_entry(p, ij[0], ij[1]);
      std::printf("  {%5lld, %4lld, 0x%08x, 0x%08x},  // gaussian %.9g, rademacher %.9g\n",
                  static_cast<long long>(ij[0]), static_cast<long long>(ij[1]), compact::fp32::bits_of(g),
                  compact::fp32::bits_of(rd), static_cast<double>(g), static_cast<double>(rd));
    }
  }
}
