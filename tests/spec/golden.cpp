// SPDX-License-Identifier: MIT
/// Golden values of the entry specification v1 and of the sr8 codec (docs/spec.md). Built three times: -O0,
/// -O3 -march=native and -O2 -ffp-contract=fast; every build must reproduce the same bits through every generation
/// path.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "spec/sr8_golden.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

namespace {

struct Golden {
  compact::index_t i, j;
  std::uint32_t gaussian, rademacher;
};

struct GoldenCase {
  compact::SketchState state;
  compact::index_t n, r;
  Golden entries[16];
};

// Regenerate with tools/print_golden.cpp; any change here is a change of the specification.
const GoldenCase kGolden[] = {
    {{0, 0, 0},
     4096,
     1024,
     {
         {0, 0, 0x3c2add6a, 0x3d000000},
         {0, 1, 0xbaf2094c, 0x3d000000},
         {0, 2, 0xbc91e568, 0x3d000000},
         {0, 3, 0x3c79ee76, 0xbd000000},
         {0, 4, 0x3c3ffa1b, 0xbd000000},
         {1, 0, 0xbd32cd64, 0xbd000000},
         {7, 5, 0x3c807a34, 0xbd000000},
         {100, 33, 0xbb792dd9, 0x3d000000},
         {3, 130, 0xbcf01522, 0x3d000000},
         {17, 255, 0x3d06b8fc, 0x3d000000},
         {999, 127, 0xbd9910c4, 0xbd000000},
         {999, 128, 0xbd568696, 0xbd000000},
         {2048, 511, 0xbd44e238, 0x3d000000},
         {2999, 999, 0x3cc58df7, 0x3d000000},
         {1234, 567, 0x3c04a8e4, 0x3d000000},
         {42, 998, 0x3bfff527, 0x3d000000},
     }},
    {{0x0123456789ABCDEFull, 0x100000007ull, 0x200000003ull},
     3000,
     1000,
     {
         {0, 0, 0xbd524b76, 0xbd0186e3},
         {0, 1, 0xbd22035d, 0x3d0186e3},
         {0, 2, 0xbbe0ba69, 0xbd0186e3},
         {0, 3, 0x3cc739d9, 0xbd0186e3},
         {0, 4, 0x3c918cd1, 0x3d0186e3},
         {1, 0, 0xbd14425f, 0x3d0186e3},
         {7, 5, 0x3ca1976e, 0x3d0186e3},
         {100, 33, 0xbcfd3cae, 0x3d0186e3},
         {3, 130, 0x3dbda97b, 0x3d0186e3},
         {17, 255, 0xbce30931, 0xbd0186e3},
         {999, 127, 0xbcaf20e8, 0xbd0186e3},
         {999, 128, 0xbdaf9f42, 0xbd0186e3},
         {2048, 511, 0xbd44740e, 0xbd0186e3},
         {2999, 999, 0x3c27f158, 0xbd0186e3},
         {1234, 567, 0xbd3c7556, 0x3d0186e3},
         {42, 998, 0x3c800be8, 0xbd0186e3},
     }},
};

/// The golden column of each dense distribution, by overload on its tag.
std::uint32_t expected_of(const Golden& g, compact::Gaussian) { return g.gaussian; }
std::uint32_t expected_of(const Golden& g, compact::Rademacher) { return g.rademacher; }

template <class Dist>
std::uint32_t expected(const Golden& g) {
  return expected_of(g, Dist{});
}

}  // namespace

TEST_CASE_TEMPLATE("entry functions reproduce the golden values bit for bit", Dist, compact::Gaussian,
                   compact::Rademacher) {
  for (const GoldenCase& c : kGolden) {
    const compact::EntryParams p = compact::entry_params(c.state, c.r);
    for (const Golden& g : c.entries) {
      CAPTURE(g.i);
      CAPTURE(g.j);
      CHECK(compact::fp32::bits_of(compact::dense_entry<Dist>(p, g.i, g.j)) == expected<Dist>(g));
    }
  }
}

TEST_CASE_TEMPLATE("the CPU projector's materialize and sketch reproduce the golden values", Dist, compact::Gaussian,
                   compact::Rademacher) {
  for (const GoldenCase& c : kGolden) {
    const compact::Projector<compact::Cpu, Dist, float> proj(c.n, c.r, c.state);
    const compact::RowMatrix<float> p = proj.materialize();
    // x = unit rows e_i, so z = x P copies rows of P exactly (every other product is an exact zero).
    compact::RowMatrix<float> x = compact::RowMatrix<float>::Zero(16, c.n);
    for (int k = 0; k < 16; ++k) x(k, c.entries[k].i) = 1.0f;
    const compact::RowMatrix<float> z = proj.sketch(x);
    for (int k = 0; k < 16; ++k) {
      const Golden& g = c.entries[k];
      CAPTURE(g.i);
      CAPTURE(g.j);
      CHECK(compact::fp32::bits_of(p(g.i, g.j)) == expected<Dist>(g));
      CHECK(compact::fp32::bits_of(z(k, g.j)) == expected<Dist>(g));
    }
    // double projectors hold the same fp32 entries, converted exactly.
    const compact::Projector<compact::Cpu, Dist, double> proj64(c.n, c.r, c.state);
    const compact::RowMatrix<double> p64 = proj64.materialize();
    CHECK((p64 - p.template cast<double>()).cwiseAbs().maxCoeff() == 0.0);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// SRHT (docs/srht.md): the same two states and (i, j) as above. Regenerate with tools/print_golden.cpp.

namespace {

struct SrhtScore {
  compact::index_t k;
  std::uint64_t score;
  std::uint32_t sign_bit;
};

struct SrhtGolden {
  compact::index_t i, j, s_j;
  std::uint32_t sign_bit_i, entry;
};

struct SrhtGoldenCase {
  compact::SketchState state;
  compact::index_t n, r;
  compact::index_t s_first, s_last;    // S_0, S_{r-1}
  std::uint64_t s_sum, s_sum_squares;  // sum of S_j, sum of S_j^2 over the whole sample
  SrhtScore scores[7];
  SrhtGolden entries[16];
};

const SrhtGoldenCase kSrhtGolden[] = {
    {{0, 0, 0},
     4096,
     1024,
     4,
     4093,
     2118394ull,
     5886669830ull,
     {
         {0, 0xda003c6e4ae968baull, 1},
         {1, 0xdd3dd839463b0b90ull, 0},
         {127, 0x3d6a2bb5550fef6aull, 0},
         {128, 0xca02e8b7935c7fb6ull, 0},
         {2049, 0xb961dd8d2acbeaaeull, 1},
         {3001, 0x6c21a0459bb3e3e8ull, 1},
         {4095, 0xa1175a4bc2075e2cull, 1},
     },
     {
         {0, 0, 4, 1, 0xbd000000},
         {0, 1, 8, 1, 0xbd000000},
         {0, 2, 10, 1, 0xbd000000},
         {0, 3, 12, 1, 0xbd000000},
         {0, 4, 15, 1, 0xbd000000},
         {1, 0, 4, 0, 0x3d000000},
         {7, 5, 18, 0, 0xbd000000},
         {100, 33, 116, 1, 0x3d000000},
         {3, 130, 478, 0, 0xbd000000},
         {17, 255, 1016, 0, 0xbd000000},
         {999, 127, 462, 1, 0x3d000000},
         {999, 128, 475, 1, 0x3d000000},
         {2048, 511, 2101, 1, 0x3d000000},
         {2999, 999, 4018, 0, 0xbd000000},
         {1234, 567, 2312, 1, 0xbd000000},
         {42, 998, 4016, 1, 0x3d000000},
     }},
    {{0x0123456789ABCDEFull, 0x100000007ull, 0x200000003ull},
     3000,
     1000,
     3,
     4093,
     2010084ull,
     5372821978ull,
     {
         {0, 0x4bb566679dc9ec5eull, 1},
         {1, 0x9d03d34091411af1ull, 0},
         {127, 0x08f5a40091f1b9c2ull, 0},
         {128, 0xebb3ca7828b2bb7aull, 1},
         {2049, 0xd12bc2287c3d6e7cull, 0},
         {3001, 0x0f6f99dafb274a7dull, 0},
         {4095, 0x6fa48d0168599375ull, 0},
     },
     {
         {0, 0, 3, 1, 0xbd0186e3},
         {0, 1, 4, 1, 0xbd0186e3},
         {0, 2, 17, 1, 0xbd0186e3},
         {0, 3, 18, 1, 0xbd0186e3},
         {0, 4, 21, 1, 0xbd0186e3},
         {1, 0, 3, 0, 0xbd0186e3},
         {7, 5, 23, 0, 0xbd0186e3},
         {100, 33, 138, 0, 0x3d0186e3},
         {3, 130, 524, 1, 0xbd0186e3},
         {17, 255, 1033, 1, 0x3d0186e3},
         {999, 127, 514, 1, 0xbd0186e3},
         {999, 128, 516, 1, 0xbd0186e3},
         {2048, 511, 2084, 0, 0xbd0186e3},
         {2999, 999, 4093, 1, 0xbd0186e3},
         {1234, 567, 2296, 1, 0x3d0186e3},
         {42, 998, 4091, 0, 0xbd0186e3},
     }},
};

}  // namespace

TEST_CASE("SRHT sign, score, sample and entry functions reproduce the golden values bit for bit") {
  for (const SrhtGoldenCase& c : kSrhtGolden) {
    const compact::EntryParams p = compact::entry_params(c.state, c.r);
    for (const SrhtScore& s : c.scores) {
      CAPTURE(s.k);
      CHECK(compact::srht_score(p.key, p.window, s.k) == s.score);
      CHECK(compact::srht_sign_bit(p.key, p.window, s.k) == s.sign_bit);
    }
    const std::vector<compact::index_t> sample = compact::srht_sample(c.state, c.n, c.r);
    REQUIRE(static_cast<compact::index_t>(sample.size()) == c.r);
    std::uint64_t sum = 0, sum_squares = 0;
    for (compact::index_t v : sample) {
      sum += static_cast<std::uint64_t>(v);
      sum_squares += static_cast<std::uint64_t>(v) * static_cast<std::uint64_t>(v);
    }
    CHECK(sample.front() == c.s_first);
    CHECK(sample.back() == c.s_last);
    CHECK(sum == c.s_sum);
    CHECK(sum_squares == c.s_sum_squares);
    for (const SrhtGolden& g : c.entries) {
      CAPTURE(g.i);
      CAPTURE(g.j);
      CHECK(sample[static_cast<std::size_t>(g.j)] == g.s_j);
      CHECK(compact::srht_sign_bit(p.key, p.window, g.i) == g.sign_bit_i);
      CHECK(compact::fp32::bits_of(compact::srht_entry(p, g.i, g.s_j)) == g.entry);
    }
  }
}

TEST_CASE("the CPU SRHT projector's materialize, sketch and unsketch_grad reproduce the golden values") {
  for (const SrhtGoldenCase& c : kSrhtGolden) {
    const compact::Projector<compact::Cpu, compact::Srht, float> proj(c.n, c.r, c.state);
    const compact::RowMatrix<float> p = proj.materialize();
    // Unit rows: x = e_i gives z = row i of P and g = e_j gives column j of P, exactly (every FWHT addition adds an
    // exact zero or flips a sign, and the one product with the scale is exact).
    compact::RowMatrix<float> x = compact::RowMatrix<float>::Zero(16, c.n);
    compact::RowMatrix<float> g = compact::RowMatrix<float>::Zero(16, c.r);
    for (int k = 0; k < 16; ++k) {
      x(k, c.entries[k].i) = 1.0f;
      g(k, c.entries[k].j) = 1.0f;
    }
    const compact::RowMatrix<float> z = proj.sketch(x);
    const compact::RowMatrix<float> u = proj.unsketch_grad(g);
    for (int k = 0; k < 16; ++k) {
      const SrhtGolden& e = c.entries[k];
      CAPTURE(e.i);
      CAPTURE(e.j);
      CHECK(proj.sample()[static_cast<std::size_t>(e.j)] == e.s_j);
      CHECK(compact::fp32::bits_of(p(e.i, e.j)) == e.entry);
      CHECK(compact::fp32::bits_of(z(k, e.j)) == e.entry);
      CHECK(compact::fp32::bits_of(u(k, e.i)) == e.entry);
    }
    const compact::Projector<compact::Cpu, compact::Srht, double> proj64(c.n, c.r, c.state);
    CHECK((proj64.materialize() - p.cast<double>()).cwiseAbs().maxCoeff() == 0.0);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The sr8 codec (docs/spec.md, "sr8 golden values"): the inputs of tests/spec/sr8_golden.hpp, every q byte and scale.
// Regenerate with tools/print_golden.cpp.

namespace {

struct Sr8Golden {
  std::uint32_t scales[5];
  const char* q[5];  // hex bytes, one block per string
};

const Sr8Golden kSr8Golden[] = {
    {{0x3bf9df7f, 0x3bfc0cfa, 0x3bfd0959, 0x3bffd2f0},
     {"6511189aeee23fe31f3085d01547ea08dd018f3db584496c2c234618113d2a5a"
      "6daa09cd6c496d50b58e3f3c7e7b3dfc819a3ddd7d4a3eed1eb5fe173dc0b00c",
      "58b6ab6783d2e7520f52c90b68e2d6073f128c8851ed5577bd52717a1e7d787d"
      "e2cf73c2a2539098c73da0a24f34117bf42fe7ce5ccaf3a981a79736534b34be",
      "2c16f30e33826a0ebce92eb268372c2be8d9b5bda2aa7b3375cc117d17f4bce5"
      "11199346417d4731dc6dce4bd883e83be8f318852fa800bba1b282011051937f",
      "77a837dc81441397"}},
    {{0x3479df7f, 0x7fc00000, 0x00000000, 0x3f810204, 0x45137b8a},
     {"6512189beee23ee31f3085cf1546ea07dd008f3db4844a6c2b234618103d2a59"
      "6eaa09cc6c496e50b58f3f3c7e7b3dfc819a3cdd7d4a3eee1db5fd173dc0b00d",
      "0000000000000000000000000000000000000000000000000000000000000000"
      "0000000000000000000000000000000000000000000000000000000000000000",
      "0000000000000000000000000000000000000000000000000000000000000000"
      "0000000000000000000000000000000000000000000000000000000000000000",
      "8185898d9195999da1a5a8adb1b4b8bdc0c4c9cdd1d4d8dce0e4e8ecf0f5f9fc"
      "0004080c1014181c1f23282c2f34383c4043484c4f53585b6063676b6f73777b",
      "e6f49e7f3e9a688c0d1752fdb3fa42ebf8156a229a6ca9f053657b5db74244fe"
      "fd14aa119736fc82d859d37d"}},
};

/// sr8_uniform at compact_test::kSr8GoldenUniformAt for case B's state.
const std::uint32_t kSr8GoldenUniforms[] = {0x6d2d, 0x1f57, 0xe07b, 0x4b32, 0xe54a, 0x466c, 0xf3fd, 0x7d18, 0x6691};

/// The golden q bytes of a case, concatenated.
std::vector<std::int8_t> golden_q(const Sr8Golden& g) {
  std::vector<std::int8_t> out;
  for (const char* block : g.q) {
    for (const char* p = block; p != nullptr && p[0] != '\0'; p += 2) {
      const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
      out.push_back(static_cast<std::int8_t>(static_cast<std::uint8_t>(nibble(p[0]) * 16 + nibble(p[1]))));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the sr8 codec reproduces the golden q bytes and scales on the reference and on every instruction set") {
  const std::vector<compact_test::Sr8GoldenCase> cases = compact_test::sr8_golden_cases();
  for (std::size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(cases[c].name);
    const std::vector<float>& x = cases[c].x;
    const compact::index_t n = static_cast<compact::index_t>(x.size());
    const std::vector<std::int8_t> want = golden_q(kSr8Golden[c]);
    REQUIRE(want.size() == x.size());
    const std::size_t blocks = static_cast<std::size_t>(compact::sr8_scale_count(n));
    const auto check = [&](const std::vector<std::int8_t>& q, const std::vector<float>& scales) {
      CHECK(q == want);
      for (std::size_t b = 0; b < blocks; ++b) CHECK(compact::fp32::bits_of(scales[b]) == kSr8Golden[c].scales[b]);
    };
    std::vector<std::int8_t> q(x.size());
    std::vector<float> scales(blocks);
    compact::detail::sr8_encode_scalar(compact::sr8_params(cases[c].state), 0, x.data(), n, q.data(), scales.data());
    check(q, scales);
    for (const compact::CpuIsa isa : {compact::CpuIsa::kScalar, compact::CpuIsa::kAvx2, compact::CpuIsa::kAvx512}) {
      if (!compact::cpu_isa_supported(isa)) continue;
      CAPTURE(compact::cpu_isa_name(isa));
      const compact::CpuIsa previous = compact::set_cpu_isa_cap(isa);
      std::fill(q.begin(), q.end(), std::int8_t{0x55});
      compact::sr8_encode(compact::Cpu{}, x.data(), n, cases[c].state, q.data(), scales.data());
      compact::set_cpu_isa_cap(previous);
      check(q, scales);
    }
  }
  const compact::Sr8Params p = compact::sr8_params(cases[1].state);
  for (std::size_t k = 0; k < std::size(compact_test::kSr8GoldenUniformAt); ++k) {
    CAPTURE(compact_test::kSr8GoldenUniformAt[k]);
    CHECK(compact::sr8_uniform(p, compact_test::kSr8GoldenUniformAt[k]) == kSr8GoldenUniforms[k]);
  }
}
