// SPDX-License-Identifier: MIT
/// Golden values of the entry specification v1 (docs/spec.md). Built three times: -O0, -O3 -march=native and
/// -O2 -ffp-contract=fast; every build must reproduce the same bits through every generation path.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include <cstdint>
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

template <class Dist>
std::uint32_t expected(const Golden& g) {
  return std::is_same_v<Dist, compact::Gaussian> ? g.gaussian : g.rademacher;
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
