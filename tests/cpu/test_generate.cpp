// SPDX-License-Identifier: MIT
/// Panel generation (cpu/generate.hpp), vectorized and scalar, is bit-identical to the entry functions of
/// spec/entries.hpp.
#include <doctest/doctest.h>

#include <compact/compact.hpp>
#include <compact/cpu/generate.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

using compact::index_t;

struct Panel {
  index_t i0, i1, j0, j1;
};

// Aligned and unaligned starts, widths below one Philox block, across block and batch boundaries, single rows and
// columns, wide rows, and rows / blocks next to the 32-bit limit of the counter words.
const Panel kPanels[] = {
    {0, 1, 0, 1},
    {0, 1, 0, 4},
    {0, 3, 0, 7},
    {0, 5, 1, 2},
    {2, 9, 3, 37},
    {0, 17, 0, 128},
    {5, 6, 0, 1000},
    {0, 64, 100, 228},
    {7, 40, 127, 129},
    {1, 12, 31, 97},
    {0, 2, 0, 4096},
    {3, 4, 4000, 4099},
    {10, 11, 255, 385},
    {0, 33, 64, 65},
    {100, 133, 1, 259},
    {0, 8, 0, 32},
    {0xFFFFFFF0, 0xFFFFFFFD, 0, 300},
    {0, 3, 0xFFFFF000, 0xFFFFF123},
    {6, 19, 513, 771},
    {0, 128, 0, 96},
};

const compact::SketchState kStates[] = {
    {0, 0, 0},
    {0x0123456789ABCDEFull, 0x100000007ull, 0x200000003ull},
    {0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFF00000000ull, 0xFFFFFFFFFFFFFFFFull},
    {42, 7, 0x100000000ull},
};

const index_t kRanks[] = {1, 7, 1024};

template <class Scalar>
std::vector<std::uint64_t> bits(const std::vector<Scalar>& v) {
  std::vector<std::uint64_t> out(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v[k], sizeof(Scalar));
    out[k] = b;
  }
  return out;
}

// Fills a panel with padding columns around it (ld > width) set to a sentinel, so that stray writes are caught.
template <class Dist, class Scalar>
std::vector<Scalar> fill(compact::CpuIsa isa, const compact::EntryParams& p, const Panel& q, bool reference) {
  const index_t width = q.j1 - q.j0, ld = width + 5;
  std::vector<Scalar> out(static_cast<std::size_t>((q.i1 - q.i0) * ld), Scalar(-777));
  if (reference) {
    // Entry by entry from the distribution's entry function (gaussian_entry / rademacher_entry, named by its
    // DistributionTraits): a definition independent of every panel loop (the block-wise reference loop
    // fill_dense_panel_scalar is itself the scalar path under test).
    for (index_t i = q.i0; i < q.i1; ++i) {
      for (index_t j = q.j0; j < q.j1; ++j) {
        const float v = compact::DistributionTraits<Dist>::entry(p, i, j);
        out[static_cast<std::size_t>((i - q.i0) * ld + (j - q.j0))] = static_cast<Scalar>(v);
      }
    }
  } else {
    compact::detail::fill_dense_panel_with<Dist>(isa, p, q.i0, q.i1, q.j0, q.j1, out.data(), ld);
  }
  return out;
}

template <class Dist, class Scalar>
void check_all_panels(compact::CpuIsa isa) {
  for (const compact::SketchState& state : kStates) {
    for (const index_t r : kRanks) {
      const compact::EntryParams p = compact::entry_params(state, r);
      for (const Panel& q : kPanels) {
        CAPTURE(q.i0);
        CAPTURE(q.i1);
        CAPTURE(q.j0);
        CAPTURE(q.j1);
        CAPTURE(r);
        CAPTURE(state.seed);
        const auto expect = bits(fill<Dist, Scalar>(isa, p, q, true));
        const auto got = bits(fill<Dist, Scalar>(isa, p, q, false));
        REQUIRE(got.size() == expect.size());
        std::size_t mismatches = 0;
        for (std::size_t k = 0; k < got.size(); ++k) mismatches += got[k] != expect[k];
        CHECK(mismatches == 0);
      }
    }
  }
}

}  // namespace

// Reported as skipped (doctest's summary counts them) on a CPU without AVX2 + FMA, never as passed.
TEST_CASE_TEMPLATE("the AVX2 Gaussian panel has the bits of the entry functions for every shape and offset" *
                       doctest::skip(!compact::cpu_isa_supported(compact::CpuIsa::kAvx2)),
                   Scalar, float, double) {
  check_all_panels<compact::Gaussian, Scalar>(compact::CpuIsa::kAvx2);
}

TEST_CASE_TEMPLATE("the AVX2 Rademacher panel has the bits of the entry functions for every shape and offset" *
                       doctest::skip(!compact::cpu_isa_supported(compact::CpuIsa::kAvx2)),
                   Scalar, float, double) {
  check_all_panels<compact::Rademacher, Scalar>(compact::CpuIsa::kAvx2);
}

TEST_CASE_TEMPLATE("the scalar fallback of fill_dense_panel has the bits of the entry functions", Scalar, float,
                   double) {
  check_all_panels<compact::Gaussian, Scalar>(compact::CpuIsa::kScalar);
  check_all_panels<compact::Rademacher, Scalar>(compact::CpuIsa::kScalar);
}

TEST_CASE("fill_dense_panel matches gaussian_entry and rademacher_entry element by element") {
  const compact::SketchState state{7, 3, 0x1234567890ull};
  const index_t n = 300, r = 77;
  const compact::EntryParams p = compact::entry_params(state, r);
  std::vector<float> g(static_cast<std::size_t>(n * r)), s(static_cast<std::size_t>(n * r));
  compact::detail::fill_dense_panel<compact::Gaussian>(p, 0, n, 0, r, g.data(), r);
  compact::detail::fill_dense_panel<compact::Rademacher>(p, 0, n, 0, r, s.data(), r);
  std::size_t mismatches = 0;
  for (index_t i = 0; i < n; ++i) {
    for (index_t j = 0; j < r; ++j) {
      const std::size_t k = static_cast<std::size_t>(i * r + j);
      mismatches += compact::fp32::bits_of(g[k]) != compact::fp32::bits_of(compact::gaussian_entry(p, i, j));
      mismatches += compact::fp32::bits_of(s[k]) != compact::fp32::bits_of(compact::rademacher_entry(p, i, j));
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("an empty panel writes nothing") {
  const compact::EntryParams p = compact::entry_params(compact::SketchState{1, 2, 3}, 4);
  float sentinel[4] = {5.0f, 5.0f, 5.0f, 5.0f};
  compact::detail::fill_dense_panel<compact::Gaussian>(p, 3, 3, 0, 4, sentinel, 4);
  compact::detail::fill_dense_panel<compact::Rademacher>(p, 0, 1, 2, 2, sentinel, 4);
  for (float v : sentinel) CHECK(v == 5.0f);
}
