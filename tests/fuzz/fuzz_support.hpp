// SPDX-License-Identifier: MIT
#pragma once
/// Helpers of the fuzz harnesses: reading typed fields from the fuzzer's bytes, seeded data, and failing loudly.
///
/// A harness defines LLVMFuzzerTestOneInput. Built with clang++ -fsanitize=fuzzer,address,undefined it is a libFuzzer
/// binary; built with replay_main.cpp (any compiler) it replays a corpus, which is how ctest runs it on every build.
/// A harness fails by aborting (COMPACT_FUZZ_REQUIRE) or by letting an exception other than compact::error escape.

#include <compact/compact.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace compact_fuzz {

/// Reads little-endian fields from the input; bytes past its end read as zero, so every input is complete.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::uint64_t take(int bytes) {
    std::uint64_t v = 0;
    for (int b = 0; b < bytes; ++b, ++pos_) {
      if (pos_ < size_) v |= std::uint64_t(data_[pos_]) << (8 * b);
    }
    return v;
  }
  std::uint8_t u8() { return static_cast<std::uint8_t>(take(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(take(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(take(4)); }
  std::uint64_t u64() { return take(8); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

/// splitmix64 stream: the harnesses' data comes from a seed in the input, so a few bytes reach full matrices.
class Stream {
 public:
  explicit Stream(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return compact::splitmix64(state_++); }
  /// Uniform in [-1, 1) (53 random bits).
  double uniform() { return double(next() >> 11) * 0x1p-52 - 1.0; }

 private:
  std::uint64_t state_;
};

/// Fills an Eigen matrix with uniform [-1, 1) values times `scale`.
template <class M>
void fill(M* m, Stream* s, double scale) {
  for (Eigen::Index i = 0; i < m->rows(); ++i) {
    for (Eigen::Index j = 0; j < m->cols(); ++j) (*m)(i, j) = static_cast<typename M::Scalar>(s->uniform() * scale);
  }
}

[[noreturn]] inline void fail(const char* file, int line, const char* what) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
  std::abort();
}

}  // namespace compact_fuzz

/// Aborts (a finding for libFuzzer, a failed test for the replay) when `cond` is false.
#define COMPACT_FUZZ_REQUIRE(cond, what)                           \
  do {                                                             \
    if (!(cond)) ::compact_fuzz::fail(__FILE__, __LINE__, (what)); \
  } while (false)
