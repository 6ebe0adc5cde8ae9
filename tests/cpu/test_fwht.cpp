// SPDX-License-Identifier: MIT
/// compact::fwht: agreement with the dense Hadamard product, with itself (H H = n I), and bit for bit across paths.
#include <doctest/doctest.h>

#include <compact/cpu/fwht.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "support.hpp"

namespace {

using compact::CpuIsa;
using compact::index_t;
using compact_test::popcount;

/// The textbook in-place FWHT: stages h = 1, 2, 4, ... in order, the butterfly order compact::fwht promises.
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

template <class T>
std::vector<T> random_vector(index_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  std::vector<T> x(static_cast<std::size_t>(n));
  for (T& v : x) v = static_cast<T>(normal(gen));
  return x;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

int log2_of(index_t n) {
  int l = 0;
  while ((index_t{1} << l) < n) ++l;
  return l;
}

/// Every instruction set this build and CPU support (the scalar path always).
std::vector<CpuIsa> available_paths() {
  std::vector<CpuIsa> paths;
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (compact::cpu_isa_supported(isa)) paths.push_back(isa);
  }
  return paths;
}

}  // namespace

// The tests below run every path this CPU has; this one reports the 256-bit path skipped (doctest's summary counts
// it) where the CPU or build lacks it, instead of passing as if it had been tested.
TEST_CASE("the 256-bit path is among the tested paths" * doctest::skip(!compact::cpu_isa_supported(CpuIsa::kAvx2))) {
  const std::vector<CpuIsa> paths = available_paths();
  CHECK(std::find(paths.begin(), paths.end(), CpuIsa::kAvx2) != paths.end());
}

TEST_CASE_TEMPLATE("fwht matches the dense Sylvester Hadamard product for every length up to 512", T, float, double) {
  for (index_t n = 1; n <= 512; n *= 2) {
    const std::vector<T> x = random_vector<T>(n, static_cast<std::uint32_t>(n));
    // Reference in long double from the definition H[i][k] = (-1)^popcount(i & k).
    std::vector<long double> ref(static_cast<std::size_t>(n), 0.0L);
    long double abs_sum = 0.0L;
    for (index_t k = 0; k < n; ++k) abs_sum += std::fabs(static_cast<long double>(x[k]));
    for (index_t i = 0; i < n; ++i) {
      for (index_t k = 0; k < n; ++k) {
        const long double v = static_cast<long double>(x[k]);
        ref[i] += popcount(static_cast<std::uint64_t>(i & k)) % 2 ? -v : v;
      }
    }
    // Each output is a sum of n terms +-x_k through a tree of depth L = log2 n: |error| <= gamma_L sum |x_k|,
    // gamma_L = L u / (1 - L u), u the unit roundoff of T.
    const int levels = log2_of(n);
    const long double u = std::numeric_limits<T>::epsilon() / 2;
    const long double bound = levels * u / (1 - levels * u) * abs_sum;
    for (CpuIsa path : available_paths()) {
      std::vector<T> y = x;
      compact::fwht(y.data(), n, path);
      for (index_t i = 0; i < n; ++i) {
        CAPTURE(n);
        CAPTURE(i);
        CHECK(std::fabs(static_cast<long double>(y[i]) - ref[i]) <= bound);
      }
    }
  }
}

TEST_CASE_TEMPLATE("fwht of a unit vector is exactly a column of the Hadamard matrix", T, float, double) {
  for (index_t n : {index_t{1}, index_t{2}, index_t{8}, index_t{64}, index_t{4096}, index_t{1} << 15}) {
    for (index_t k : {index_t{0}, n / 3, n - 1}) {
      for (CpuIsa path : available_paths()) {
        std::vector<T> e(static_cast<std::size_t>(n), T(0));
        e[static_cast<std::size_t>(k)] = T(1);
        compact::fwht(e.data(), n, path);
        index_t wrong = 0;
        for (index_t i = 0; i < n; ++i) {
          const T want = popcount(static_cast<std::uint64_t>(i & k)) % 2 ? T(-1) : T(1);
          wrong += e[static_cast<std::size_t>(i)] != want;
        }
        CAPTURE(n);
        CAPTURE(k);
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE_TEMPLATE("every fwht path gives the bits of the textbook stage loop for every length 1 .. 2^20", T, float,
                   double) {
  for (index_t n = 1; n <= compact::kFwhtMaxLength; n *= 2) {
    const std::vector<T> x = random_vector<T>(n, 1000u + static_cast<std::uint32_t>(log2_of(n)));
    std::vector<T> want = x;
    textbook_fwht(want.data(), n);
    for (CpuIsa path : available_paths()) {
      std::vector<T> y = x;
      compact::fwht(y.data(), n, path);
      CAPTURE(n);
      CAPTURE(static_cast<int>(path));
      CHECK(same_bits(y, want));
    }
  }
}

TEST_CASE_TEMPLATE("fwht gives the same bits at any alignment of the array", T, float, double) {
  for (index_t n : {index_t{16}, index_t{4096}, index_t{1} << 16}) {
    const std::vector<T> x = random_vector<T>(n, 7u);
    std::vector<T> want = x;
    textbook_fwht(want.data(), n);
    for (index_t offset : {index_t{1}, index_t{3}}) {
      for (CpuIsa path : available_paths()) {
        std::vector<T> storage(static_cast<std::size_t>(n + offset));
        std::copy(x.begin(), x.end(), storage.begin() + offset);
        compact::fwht(storage.data() + offset, n, path);
        const std::vector<T> y(storage.begin() + offset, storage.end());
        CAPTURE(n);
        CAPTURE(offset);
        CHECK(same_bits(y, want));
      }
    }
  }
}

TEST_CASE_TEMPLATE("fwht applied twice multiplies by n (H H = n I) up to 2^20", T, float, double) {
  for (index_t n : {index_t{1} << 10, index_t{1} << 13, index_t{1} << 16, index_t{1} << 20}) {
    const std::vector<T> x = random_vector<T>(n, 99u);
    std::vector<T> y = x;
    compact::fwht(y.data(), n);
    compact::fwht(y.data(), n);
    // Each stage rounds every element (relative error u) and multiplies norms by sqrt 2, so one transform errs by at
    // most L u sqrt(n) |x| and two by 2 L u n |x| (first order; 1.01 covers the second-order terms).
    long double err2 = 0.0L, x2 = 0.0L;
    for (index_t i = 0; i < n; ++i) {
      const long double d = static_cast<long double>(y[i]) - static_cast<long double>(n) * x[i];
      err2 += d * d;
      x2 += static_cast<long double>(x[i]) * x[i];
    }
    const long double u = std::numeric_limits<T>::epsilon() / 2;
    CAPTURE(n);
    CHECK(std::sqrt(err2) <= 1.01L * 2 * log2_of(n) * u * static_cast<long double>(n) * std::sqrt(x2));
  }
}

TEST_CASE("fwht is exact on small integers and agrees between float and double") {
  // Entries in {-2..2} and n <= 2^20: every partial sum is an integer below 2^22, exact in float.
  const index_t n = index_t{1} << 20;
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<float> xf(static_cast<std::size_t>(n));
  std::vector<double> xd(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) xd[static_cast<std::size_t>(i)] = xf[static_cast<std::size_t>(i)] = float(small(gen));
  compact::fwht(xf.data(), n);
  compact::fwht(xd.data(), n);
  index_t wrong = 0;
  for (index_t i = 0; i < n; ++i) wrong += double(xf[static_cast<std::size_t>(i)]) != xd[static_cast<std::size_t>(i)];
  CHECK(wrong == 0);
}

TEST_CASE("fwht refuses lengths that are not powers of two in [1, 2^20] and a null array") {
  std::vector<float> x(3 * 1024);
  CHECK_THROWS_AS(compact::fwht(x.data(), 0), compact::error);
  CHECK_THROWS_AS(compact::fwht(x.data(), -4), compact::error);
  CHECK_THROWS_AS(compact::fwht(x.data(), 3), compact::error);
  CHECK_THROWS_AS(compact::fwht(x.data(), 3 * 1024), compact::error);
  CHECK_THROWS_AS(compact::fwht(x.data(), compact::kFwhtMaxLength * 2), compact::error);
  CHECK_THROWS_AS(compact::fwht(static_cast<float*>(nullptr), 8), compact::error);
  CHECK_THROWS_WITH_AS(compact::fwht(x.data(), 12), doctest::Contains("n = 12"), compact::error);
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!compact::cpu_isa_supported(isa)) {
      CHECK_THROWS_WITH_AS(compact::fwht(x.data(), 8, isa), doctest::Contains(compact::cpu_isa_name(isa)),
                           compact::error);
    } else {
      CHECK_NOTHROW(compact::fwht(x.data(), 8, isa));
    }
  }
  CHECK_NOTHROW(compact::fwht(x.data(), 1));
}
