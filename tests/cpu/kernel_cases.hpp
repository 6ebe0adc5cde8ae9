// SPDX-License-Identifier: MIT
#pragma once
/// Cases shared by the tests of the vector kernels (native and SIMDe-emulated): panels, states, the textbook FWHT.
///
/// Includes no intrinsics and no Eigen, so that the SIMDe translation unit (test_avx512_emulated.cpp) can use it.

#include <doctest/doctest.h>

#include <compact/spec/entries.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

namespace compact_test {

using compact::index_t;

struct Panel {
  index_t i0, i1, j0, j1;
};

/// Single entries, partial blocks at both edges, runs of exactly 16 and 8 blocks (64 and 32 Gaussian columns) and
/// longer, batches of leftovers spanning rows, panels narrower than one Rademacher word, rows and blocks next to the
/// 32-bit limit of the counter words.
inline const Panel kKernelPanels[] = {
    {0, 1, 0, 1},
    {0, 3, 0, 7},
    {2, 9, 3, 37},
    {0, 17, 0, 128},
    {5, 6, 0, 1000},
    {0, 4, 64, 128},
    {1, 5, 61, 131},
    {0, 2, 0, 4096},
    {3, 4, 4000, 4099},
    {10, 11, 255, 385},
    {0, 33, 64, 65},
    {100, 133, 1, 259},
    {7, 40, 127, 129},
    {0, 20, 0, 96},
    {6, 19, 513, 771},
    {0xFFFFFFF0, 0xFFFFFFFD, 0, 300},
    {0, 3, 0xFFFFF000, 0xFFFFF123},
    {0, 2, 0xFFFFFF00, 0xFFFFFFFD},
};

inline const compact::SketchState kKernelStates[] = {
    {0, 0, 0},
    {0x0123456789ABCDEFull, 0x100000007ull, 0x200000003ull},
    {0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFF00000000ull, 0xFFFFFFFFFFFFFFFFull},
};

inline const index_t kKernelRanks[] = {1, 7, 1024};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Checks, for every case above, that `fill(params, i0, i1, j0, j1, out, ld)` writes the bits of the reference loop
/// and nothing outside the panel (the padding columns of ld > width keep a sentinel).
template <class Dist, class Scalar, class Fill>
void check_panels_against_reference(Fill fill) {
  for (const compact::SketchState& state : kKernelStates) {
    for (const index_t r : kKernelRanks) {
      const compact::EntryParams p = compact::entry_params(state, r);
      for (const Panel& q : kKernelPanels) {
        const index_t width = q.j1 - q.j0, ld = width + 5;
        std::vector<Scalar> expect(static_cast<std::size_t>((q.i1 - q.i0) * ld), Scalar(-777));
        std::vector<Scalar> got = expect;
        compact::detail::fill_dense_panel_scalar<Dist>(p, q.i0, q.i1, q.j0, q.j1, expect.data(), ld,
                                                       [](float v) { return static_cast<Scalar>(v); });
        fill(p, q.i0, q.i1, q.j0, q.j1, got.data(), ld);
        CAPTURE(q.i0);
        CAPTURE(q.j0);
        CAPTURE(q.j1);
        CAPTURE(r);
        CAPTURE(state.seed);
        CHECK(same_bits(got, expect));
      }
    }
  }
}

/// The textbook in-place FWHT (stages h = 1, 2, 4, ... in order): the butterfly order every path reproduces.
template <class T>
void textbook_fwht(T* x, index_t n) {
  for (index_t h = 1; h < n; h *= 2) {
    for (index_t i = 0; i < n; i += 2 * h) {
      for (index_t j = i; j < i + h; ++j) {
        const T a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

/// Checks that `transform(x, log_n)` gives the textbook loop's bits for log_n in [min_log, max_log], on random
/// normal rows at two alignments.
template <class T, class Transform>
void check_fwht_against_textbook(int min_log, int max_log, Transform transform) {
  std::mt19937 gen(7);
  std::normal_distribution<double> normal;
  for (int log_n = min_log; log_n <= max_log; ++log_n) {
    for (const index_t offset : {index_t{0}, index_t{3}}) {
      const index_t n = index_t{1} << log_n;
      std::vector<T> storage(static_cast<std::size_t>(n + offset));
      for (T& v : storage) v = static_cast<T>(normal(gen));
      std::vector<T> expect(storage.begin() + offset, storage.end());
      textbook_fwht(expect.data(), n);
      transform(storage.data() + offset, log_n);
      CAPTURE(log_n);
      CAPTURE(offset);
      CHECK(std::memcmp(storage.data() + offset, expect.data(), static_cast<std::size_t>(n) * sizeof(T)) == 0);
    }
  }
}

/// Checks that `transform(x, d, n, buf, log_n)` writes buf = H pad(x . d) with the bits of the unfused sequence
/// (buf_k = x_k d_k, zeros up to 2^log_n, textbook transform) for log_n in [min_log, max_log] and several n per
/// length: full, one short, just above half, and a ragged 17 short.
template <class T, class Transform>
void check_signed_transform_against_reference(int min_log, int max_log, Transform transform) {
  std::mt19937 gen(11);
  std::normal_distribution<double> normal;
  for (int log_n = min_log; log_n <= max_log; ++log_n) {
    const index_t np = index_t{1} << log_n;
    for (const index_t n : {np, np - 1, np / 2 + 1, np - 17}) {
      if (n < 1 || n > np || (n <= np / 2 && np > 1)) continue;
      std::vector<T> x(static_cast<std::size_t>(n)), d(static_cast<std::size_t>(n));
      for (T& v : x) v = static_cast<T>(normal(gen));
      for (T& v : d) v = gen() & 1u ? T(-1) : T(1);
      std::vector<T> expect(static_cast<std::size_t>(np), T(0));
      for (index_t k = 0; k < n; ++k) expect[static_cast<std::size_t>(k)] = x[k] * d[k];
      textbook_fwht(expect.data(), np);
      std::vector<T> got(static_cast<std::size_t>(np), T(-777));
      transform(x.data(), d.data(), n, got.data(), log_n);
      CAPTURE(log_n);
      CAPTURE(n);
      CHECK(same_bits(got, expect));
    }
  }
}

}  // namespace compact_test
