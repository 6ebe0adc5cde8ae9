// SPDX-License-Identifier: MIT
/// Prints the golden-value table of docs/spec.md (and tests/spec/golden.cpp) from the reference entry functions, the
/// sr8 codec's golden values, and every distribution of compact::Distributions with its record code and materialized
/// entries.
#include <compact/compact.hpp>

#include "../tests/spec/sr8_golden.hpp"

#include <cstdio>
#include <cstring>
#include <vector>

namespace {
struct Case {
  compact::SketchState state;
  compact::index_t n, r;
};
const Case kCases[] = {{{0, 0, 0}, 4096, 1024}, {{0x0123456789ABCDEFull, 0x100000007ull, 0x200000003ull}, 3000, 1000}};
const compact::index_t kAt[16][2] = {{0, 0},      {0, 1},      {0, 2},      {0, 3},    {0, 4},     {1, 0},
                                     {7, 5},      {100, 33},   {3, 130},    {17, 255}, {999, 127}, {999, 128},
                                     {2048, 511}, {2999, 999}, {1234, 567}, {42, 998}};

/// Indices k whose SRHT score and sign are printed: both halves of the first score block, both sides of a sign
/// block edge, and three more below n' = 4096 (3001 and 4095 are padding indices of the n = 3000 case).
const compact::index_t kSrhtK[7] = {0, 1, 127, 128, 2049, 3001, 4095};

/// The SRHT tables of tests/spec/golden.cpp: per state the sample summary, (k, s_k, d_k bit) and
/// (i, j, S_j, d_i bit, P[i][j] bits) at the same (i, j) as the dense table.
void print_srht() {
  for (const Case& c : kCases) {
    const compact::EntryParams p = compact::entry_params(c.state, c.r);
    const compact::index_t np = compact::next_pow2(c.n);
    const std::vector<compact::index_t> s = compact::srht_sample(c.state, c.n, c.r);
    unsigned long long sum = 0, sum_sq = 0;
    for (compact::index_t v : s) {
      sum += static_cast<unsigned long long>(v);
      sum_sq += static_cast<unsigned long long>(v) * static_cast<unsigned long long>(v);
    }
    std::printf("srht state seed=0x%016llx stream=0x%llx window=0x%llx n=%lld r=%lld n'=%lld\n",
                static_cast<unsigned long long>(c.state.seed), static_cast<unsigned long long>(c.state.stream),
                static_cast<unsigned long long>(c.state.window), static_cast<long long>(c.n),
                static_cast<long long>(c.r), static_cast<long long>(np));
    std::printf("  sample: S_0 = %lld, S_{r-1} = %lld, sum S_j = %llu, sum S_j^2 = %llu\n",
                static_cast<long long>(s.front()), static_cast<long long>(s.back()), sum, sum_sq);
    for (compact::index_t k : kSrhtK) {
      std::printf("  {%5lld, 0x%016llxull, %u},  // k, score s_k, sign bit of d_k\n", static_cast<long long>(k),
                  static_cast<unsigned long long>(compact::srht_score(p.key, p.window, k)),
                  compact::srht_sign_bit(p.key, p.window, k));
    }
    for (const auto& ij : kAt) {
      const compact::index_t sj = s[static_cast<std::size_t>(ij[1])];
      const float e = compact::srht_entry(p, ij[0], sj);
      std::printf("  {%5lld, %4lld, %5lld, %u, 0x%08x},  // i, j, S_j, sign bit of d_i, P[i][j] = %.9g\n",
                  static_cast<long long>(ij[0]), static_cast<long long>(ij[1]), static_cast<long long>(sj),
                  compact::srht_sign_bit(p.key, p.window, ij[0]), compact::fp32::bits_of(e), static_cast<double>(e));
    }
  }
}
/// The sr8 codec's golden values (docs/spec.md): per case of tests/spec/sr8_golden.hpp, the scales' bits and q as hex
/// bytes, one block (64 values) per line, as tests/spec/golden.cpp holds them; then the uniforms of case B's state.
void print_sr8() {
  for (const compact_test::Sr8GoldenCase& c : compact_test::sr8_golden_cases()) {
    const compact::index_t n = static_cast<compact::index_t>(c.x.size());
    std::vector<std::int8_t> q(c.x.size());
    std::vector<float> scales(static_cast<std::size_t>(compact::sr8_scale_count(n)));
    compact::detail::sr8_encode_scalar(compact::sr8_params(c.state), 0, c.x.data(), n, q.data(), scales.data());
    std::printf("sr8 case %s: %lld values, state seed=0x%016llx stream=0x%llx window=0x%llx\n  scales:", c.name,
                static_cast<long long>(n), static_cast<unsigned long long>(c.state.seed),
                static_cast<unsigned long long>(c.state.stream), static_cast<unsigned long long>(c.state.window));
    for (const float s : scales) std::printf(" 0x%08x", compact::fp32::bits_of(s));
    std::printf("\n  q:\n");
    for (std::size_t i = 0; i < q.size(); ++i) {
      std::printf("%s%02x%s", i % 64 == 0 ? "    \"" : "", static_cast<unsigned>(static_cast<std::uint8_t>(q[i])),
                  i % 64 == 63 || i + 1 == q.size() ? "\"\n" : "");
    }
  }
  const compact::Sr8Params p = compact::sr8_params(compact_test::sr8_golden_cases()[1].state);
  std::printf("sr8 uniforms of case B's state:");
  for (const std::int64_t i : compact_test::kSr8GoldenUniformAt)
    std::printf(" u(%lld)=0x%04x", static_cast<long long>(i), compact::sr8_uniform(p, i));
  std::printf("\n");
}

/// Every distribution of compact::Distributions: its record code (the checkpoint record's distribution field) and
/// P[i][j] at the same (i, j) as the tables above, from its CPU projector's materialize() (a new distribution added to
/// the list is printed here without an edit).
void print_distributions() {
  std::printf("distributions (compact::Distributions): name, record code\n");
  compact::detail::for_each_type(compact::Distributions{}, [](auto dist) {
    using Traits = compact::DistributionTraits<decltype(dist)>;
    std::printf("  %-12s %u\n", Traits::kName, Traits::kRecordCode);
  });
  for (const Case& c : kCases) {
    std::printf("P[i][j] bits, state seed=0x%016llx n=%lld r=%lld\n", static_cast<unsigned long long>(c.state.seed),
                static_cast<long long>(c.n), static_cast<long long>(c.r));
    compact::detail::for_each_type(compact::CpuDistributions{}, [&](auto dist) {
      using Dist = decltype(dist);
      const compact::RowMatrix<float> p =
          compact::Projector<compact::Cpu, Dist, float>(c.n, c.r, c.state).materialize();
      std::printf("  %-12s", compact::DistributionTraits<Dist>::kName);
      for (const auto& ij : kAt) std::printf(" %08x", compact::fp32::bits_of(p(ij[0], ij[1])));
      std::printf("\n");
    });
  }
}
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
  print_srht();
  print_sr8();
  print_distributions();
}
