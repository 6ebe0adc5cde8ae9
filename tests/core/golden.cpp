// SPDX-License-Identifier: MIT
/// Golden values of the entry specification v1 (docs/spec.md). Built three times: -O0, -O3 -march=native and
/// -O2 -ffp-contract=fast; every build must reproduce the same bits through every generation path.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include <cstdint>

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
