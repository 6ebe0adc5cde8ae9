// SPDX-License-Identifier: MIT
/// Host tests of core/fwht_block.hpp and core/block.hpp: the GPU's block FWHT (fwht_block_transform, the code the
/// kernels run) driven by HostBlock over every thread, in forward and reverse thread order.

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "compact/core/block.hpp"
#include "compact/core/fwht_block.hpp"
#include "compact/core/philox.hpp"
#include "compact/core/srht.hpp"

namespace {

using compact::index_t;
namespace detail = compact::detail;

/// Naive Walsh-Hadamard transform in double: y_i = sum_k (-1)^popcount(i & k) x_k (Sylvester ordering).
std::vector<double> naive_fwht(const std::vector<float>& x) {
  const std::size_t n = x.size();
  std::vector<double> y(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    if (x[k] == 0.0f) continue;
    for (std::size_t i = 0; i < n; ++i) y[i] += (__builtin_popcountll(i & k) & 1) ? -double(x[k]) : double(x[k]);
  }
  return y;
}

/// fwht_block_transform on x (length 2^log2_len) by one HostBlock of the kernel's shape: loads register q of thread
/// t with element fwht_element(t, q), as the row kernels do, and returns the shared-memory row.
template <int kElems>
std::vector<float> block_fwht(const std::vector<float>& x, bool reverse) {
  const detail::FwhtShape s = detail::fwht_shape(compact::log2_pow2(static_cast<index_t>(x.size())));
  REQUIRE((1 << s.log2_elems) <= kElems);
  detail::HostBlock b(0, 1, index_t{1} << s.log2_threads, detail::fwht_shared_bytes(s), reverse);
  auto regs = b.local<detail::Registers<kElems>>();
  b.each([&](index_t t) {
    for (int q = 0; q < kElems; ++q) {
      regs[t].v[q] = q < (1 << s.log2_elems) ? x[static_cast<std::size_t>(detail::fwht_element(s, t, q))] : 0.0f;
    }
  });
  float* sm = b.shared<float>();
  detail::fwht_block_transform<kElems>(b, regs, sm, s);
  return std::vector<float>(sm, sm + x.size());
}

index_t count_wrong(const std::vector<float>& got, const std::vector<double>& want) {
  index_t wrong = 0;
  for (std::size_t i = 0; i < want.size(); ++i) wrong += double(got[i]) != want[i];
  return wrong;
}

}  // namespace

TEST_CASE("the block FWHT computes the Hadamard transform for lengths 1 to 2^12, in either thread order") {
  std::uint64_t seed = 99;
  for (int log2_len = 0; log2_len <= 12; ++log2_len) {
    const std::size_t len = std::size_t{1} << log2_len;
    std::vector<float> x(len);
    for (float& v : x) {
      seed = compact::splitmix64(seed);
      v = float(int(seed % 17) - 8);  // small integers: every partial sum is exact in fp32
    }
    const std::vector<double> want = naive_fwht(x);
    CHECK_MESSAGE(count_wrong(block_fwht<16>(x, false), want) == 0, "length 2^" << log2_len);
    CHECK_MESSAGE(count_wrong(block_fwht<16>(x, true), want) == 0, "length 2^" << log2_len << ", reverse order");
  }
}

TEST_CASE("the block FWHT computes the Hadamard transform for lengths 2^13 to 2^15 (sparse inputs)") {
  for (int log2_len = 13; log2_len <= detail::kFwhtMaxLog2; ++log2_len) {
    const std::size_t len = std::size_t{1} << log2_len;
    std::vector<float> x(len, 0.0f);
    x[0] = 3.0f;
    x[len / 3] = -2.0f;
    x[len - 1] = 5.0f;
    x[12345 % len] = 1.0f;
    const std::vector<double> want = naive_fwht(x);
    CHECK_MESSAGE(count_wrong(block_fwht<detail::kFwhtMaxElems>(x, false), want) == 0, "length 2^" << log2_len);
    CHECK_MESSAGE(count_wrong(block_fwht<detail::kFwhtMaxElems>(x, true), want) == 0, "length 2^" << log2_len);
  }
}

TEST_CASE("the register stage alone is the FWHT of a thread's 2^h values, h <= 5 (the SRHT's register pass)") {
  for (int h = 0; h <= 5; ++h) {
    std::vector<float> x(std::size_t{1} << h);
    for (std::size_t k = 0; k < x.size(); ++k) x[k] = float(int(k * 7 % 11) - 5);
    float v[detail::kFwhtMaxElems] = {};
    for (std::size_t k = 0; k < x.size(); ++k) v[k] = x[k];
    detail::fwht_register_levels(v, h);
    const std::vector<double> want = naive_fwht(x);
    index_t wrong = 0;
    for (std::size_t k = 0; k < x.size(); ++k) wrong += double(v[k]) != want[k];
    for (std::size_t k = x.size(); k < std::size_t(detail::kFwhtMaxElems); ++k) wrong += v[k] != 0.0f;
    CHECK_MESSAGE(wrong == 0, "h = " << h);
  }
}

TEST_CASE("FWHT launch shapes use at most 1024 threads and 32 registers, and whole warps from length 512 on") {
  for (int log2_len = 0; log2_len <= detail::kFwhtMaxLog2; ++log2_len) {
    const detail::FwhtShape s = detail::fwht_shape(log2_len);
    CHECK(s.log2_elems + s.log2_threads == log2_len);
    CHECK(s.log2_threads <= 10);
    CHECK((1 << s.log2_elems) <= detail::kFwhtMaxElems);
    CHECK(detail::fwht_shared_bytes(s) == (std::size_t{4} << log2_len));
    if (log2_len >= 9) CHECK(s.log2_threads >= 5);
  }
}

TEST_CASE("fwht_pair lists each element once per level, and a shared level touches each element once") {
  for (int log2_len = 1; log2_len <= 10; ++log2_len) {
    const index_t len = index_t{1} << log2_len;
    for (int level = 0; level < log2_len; ++level) {
      std::vector<int> hits(static_cast<std::size_t>(len), 0);
      for (index_t p = 0; p < len / 2; ++p) {
        const detail::IndexPair pr = detail::fwht_pair(p, level);
        REQUIRE(pr.hi - pr.lo == (index_t{1} << level));
        REQUIRE(pr.hi < len);
        ++hits[std::size_t(pr.lo)];
        ++hits[std::size_t(pr.hi)];
      }
      for (int c : hits) REQUIRE(c == 1);
    }
  }
  // The pairs of all threads of one shared level (fwht_shared_level) cover the row: a row of ones becomes
  // (2, 0) at every pair.
  const detail::FwhtShape s = detail::fwht_shape(12);
  for (int level = 5; level < s.log2_threads; ++level) {
    std::vector<float> row(std::size_t{1} << 12, 1.0f);
    for (index_t t = 0; t < (index_t{1} << s.log2_threads); ++t) detail::fwht_shared_level(row.data(), s, t, level);
    index_t wrong = 0;
    for (std::size_t k = 0; k < row.size(); ++k) wrong += row[k] != (((k >> level) & 1) ? 0.0f : 2.0f);
    CHECK_MESSAGE(wrong == 0, "level " << level);
  }
}

TEST_CASE("HostBlock::exchange_xor refuses a partner outside the block, as a warp shuffle would be") {
  detail::HostBlock b(0, 1, 8, 0);
  auto regs = b.local<detail::Registers<1>>();
  CHECK_THROWS_AS(b.exchange_xor(regs, 8, 1, [](index_t, int, float own, float) { return own; }), compact::error);
  b.exchange_xor(regs, 4, 1, [](index_t t, int, float, float) { return float(t); });
  CHECK(regs[5].v[0] == 5.0f);
}
