// SPDX-License-Identifier: MIT
#pragma once
/// Cases shared by the tests of the vector kernels (native and SIMDe-emulated): panels, states, the textbook FWHT, the
/// sr8 codec's values and ranges.
///
/// Includes no intrinsics and no Eigen, so that the SIMDe translation unit (test_avx512_emulated.cpp) can use it.

#include <doctest/doctest.h>

#include <compact/spec/entries.hpp>
#include <compact/spec/sr8.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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
  // memcmp's pointers must not be null, even for zero bytes (an empty vector's data() may be).
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
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

// ---------------------------------------------------------------------------------------------------------------
// The sr8 codec (spec/sr8.hpp, cpu/sr8_blocks.inl).

/// Values that exercise every rule of the sr8 codec, block by block (kind = block % 8): normal samples times 2^e for
/// e in [-119, 100] (kinds 0-3); the same with one inf, -inf or NaN (4); magnitudes below the 2^-120 threshold,
/// subnormals included (scale 0), or with one value of exactly -2^-120, which gives a subnormal scale (5); multiples
/// of 127/8 with amax 127, so that s = 1, y = x, frac = 0 at the integers and q = +-127 at +-amax (6); zeros of both
/// signs (7).
inline std::vector<float> sr8_case_values(index_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-119, 100), tiny_exponent(-149, -121), position(0, 63), pick(0, 2);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (index_t b = 0; b * compact::kSr8Block < n; ++b) {
    const index_t e0 = b * compact::kSr8Block, e1 = std::min(n, e0 + compact::kSr8Block);
    const int kind = static_cast<int>(b % 8);
    const float scale = std::ldexp(1.0f, exponent(gen));
    for (index_t i = e0; i < e1; ++i) {
      float& v = x[static_cast<std::size_t>(i)];
      if (kind <= 4) {
        v = normal(gen) * scale;
      } else if (kind == 5) {
        v = (i % 2 ? -1.0f : 1.0f) * std::ldexp(1.0f + 0.25f * static_cast<float>(i % 3), tiny_exponent(gen));
      } else if (kind == 6) {
        v = static_cast<float>(static_cast<int>(i % 17) - 8) * 15.875f * (b % 16 == 6 ? 1.0f : -1.0f);
      } else {
        v = i % 2 ? -0.0f : 0.0f;
      }
    }
    const index_t at = std::min(e1 - 1, e0 + position(gen));
    if (kind == 4) {
      const float specials[3] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN()};
      x[static_cast<std::size_t>(at)] = specials[pick(gen)];
    }
    if (kind == 5 && b % 16 == 5) x[static_cast<std::size_t>(at)] = -std::ldexp(1.0f, -120);
    if (kind == 6) x[static_cast<std::size_t>(at)] = b % 16 == 6 ? 127.0f : -127.0f;  // amax 127: s = 1, y = x
  }
  return x;
}

/// Ranges of blocks (first block, values): single values, ragged and whole blocks, odd first blocks (a Philox batch
/// of two blocks entered in its middle), and blocks whose group counters cross the 32-bit limit of the low counter
/// word (8 b = 2^32 at b = 2^29) or have a large high word.
struct Sr8Range {
  index_t first_block, n;
};
inline const Sr8Range kSr8Ranges[] = {
    {0, 1},
    {0, 63},
    {0, 64},
    {0, 65},
    {0, 1000},
    {1, 64},
    {1, 300},
    {3, 64 * 7 + 5},
    {(index_t{1} << 29) - 3, 64 * 8 + 1},
    {(index_t{1} << 32) - 1, 200},
    {(index_t{1} << 40) + 1, 129},
};

/// Checks, for every range and state, that encode(params, first_block, x, n, q, scales) and decode(q, scales, n,
/// out) write the bits of the reference (detail::sr8_encode_scalar, sr8_decode_scalar) and nothing past n values
/// (a sentinel).
template <class Encode, class Decode>
void check_sr8_against_reference(Encode encode, Decode decode) {
  for (const compact::SketchState& state : kKernelStates) {
    const compact::Sr8Params p = compact::sr8_params(state);
    for (const Sr8Range& r : kSr8Ranges) {
      for (std::uint32_t seed = 1; seed <= 2; ++seed) {
        CAPTURE(r.first_block);
        CAPTURE(r.n);
        CAPTURE(seed);
        const std::vector<float> x = sr8_case_values(r.n, seed);
        const std::size_t nq = static_cast<std::size_t>(r.n),
                          ns = static_cast<std::size_t>(compact::sr8_scale_count(r.n));
        std::vector<std::int8_t> q_ref(nq), q(nq + 16, std::int8_t{0x55});
        std::vector<float> s_ref(ns), s(ns + 1, -3.0f), out_ref(nq), out(nq + 16, -3.0f);
        compact::detail::sr8_encode_scalar(p, r.first_block, x.data(), r.n, q_ref.data(), s_ref.data());
        compact::detail::sr8_decode_scalar(q_ref.data(), s_ref.data(), r.n, out_ref.data());
        encode(p, r.first_block, x.data(), r.n, q.data(), s.data());
        decode(q_ref.data(), s_ref.data(), r.n, out.data());
        CHECK((nq == 0 || std::memcmp(q.data(), q_ref.data(), nq) == 0));  // memcmp takes no null, even for 0 bytes
        CHECK((ns == 0 || std::memcmp(s.data(), s_ref.data(), ns * sizeof(float)) == 0));
        CHECK((nq == 0 || std::memcmp(out.data(), out_ref.data(), nq * sizeof(float)) == 0));
        CHECK(q[nq] == std::int8_t{0x55});
        CHECK(q[nq + 15] == std::int8_t{0x55});
        CHECK(s[ns] == -3.0f);
        CHECK(out[nq] == -3.0f);
        CHECK(out[nq + 15] == -3.0f);
      }
    }
  }
}

}  // namespace compact_test
