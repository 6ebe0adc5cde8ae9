// SPDX-License-Identifier: MIT
/// The sr8 codec's specification (spec/sr8.hpp) on hand-computed cases, its uniforms against Philox itself, its
/// statistics (unbiased stochastic rounding, the error bound), and the GPU kernel bodies (kernels/sr8.hpp) driven by
/// host loops over CUDA-like grids, against the reference, for fp32, bf16 and fp16 inputs, ragged counts and
/// misaligned pointers.
#include <doctest/doctest.h>

#include <compact/compact.hpp>
#include <compact/kernels/block.hpp>  // the GPU kernel bodies, driven on the host
#include <compact/kernels/sr8.hpp>

#include "cpu/kernel_cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using compact::index_t;
using compact::Sr8Params;

const compact::SketchState kSr8State{0x0123456789ABCDEFull, 0x100000007ull, 0x200000003ull};

/// Encodes x (all of it, flat indices from 0) with the reference.
struct Reference {
  std::vector<std::int8_t> q;
  std::vector<float> scales;
};
Reference reference(const std::vector<float>& x, const compact::SketchState& state = kSr8State) {
  const index_t n = static_cast<index_t>(x.size());
  Reference r{std::vector<std::int8_t>(x.size()), std::vector<float>(std::size_t(compact::sr8_scale_count(n)))};
  compact::detail::sr8_encode_scalar(compact::sr8_params(state), 0, x.data(), n, r.q.data(), r.scales.data());
  return r;
}

}  // namespace

TEST_CASE("the uniform of element i is half i % 2 of word (i % 8) / 2 of Philox at counter {lo32(i/8), hi32(i/8), w}") {
  const Sr8Params p = compact::sr8_params(kSr8State);
  const compact::Key2x32 key = compact::philox_key(kSr8State);
  for (const index_t i : {index_t{0}, index_t{1}, index_t{7}, index_t{8}, index_t{63}, index_t{64},
                          (index_t{1} << 35) - 1, index_t{1} << 35, (index_t{1} << 40) + 5}) {
    CAPTURE(i);
    const std::uint64_t g = static_cast<std::uint64_t>(i) / 8;
    const compact::Words4x32 ctr{{static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32),
                                  static_cast<std::uint32_t>(kSr8State.window),
                                  static_cast<std::uint32_t>(kSr8State.window >> 32)}};
    const compact::Words4x32 w = compact::philox4x32_10(ctr, key);
    const std::uint32_t word = w.w[(i % 8) / 2];
    CHECK(compact::sr8_uniform(p, i) == ((i % 2) ? word >> 16 : word & 0xFFFFu));
  }
}

TEST_CASE("a block of zeros, or below 2^-120, has scale 0 and q = 0; amax = 2^-120 exactly does not") {
  std::vector<float> x(64, 0.0f);
  x[3] = -0.0f;
  Reference r = reference(x);
  CHECK(compact::fp32::bits_of(r.scales[0]) == 0u);
  for (const std::int8_t v : r.q) CHECK(v == 0);
  CHECK(compact::fp32::bits_of(compact::sr8_decode_value(0, r.scales[0])) == 0u);  // +0.0

  x[10] = std::ldexp(1.0f, -121);
  x[11] = -std::ldexp(1.9f, -121);
  x[12] = std::numeric_limits<float>::denorm_min();
  r = reference(x);
  CHECK(compact::fp32::bits_of(r.scales[0]) == 0u);
  for (const std::int8_t v : r.q) CHECK(v == 0);

  x[13] = -std::ldexp(1.0f, -120);  // amax = 2^-120: s = 2^-120 / 127 (a subnormal), x[13] -> -127
  r = reference(x);
  CHECK(r.scales[0] == std::ldexp(1.0f, -120) / 127.0f);
  CHECK(r.scales[0] > 0.0f);
  CHECK(r.q[13] == -127);
}

TEST_CASE("a block holding inf, -inf or NaN has the quiet-NaN scale and q = 0, and decodes to NaN throughout") {
  for (const float special : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x(130, 1.5f);
    x[64 + 17] = special;  // block 1 only
    const Reference r = reference(x);
    CHECK(compact::fp32::bits_of(r.scales[1]) == compact::kSr8NanScaleBits);
    for (index_t i = 64; i < 128; ++i) {
      CHECK(r.q[std::size_t(i)] == 0);
      CHECK(std::isnan(compact::sr8_decode_value(r.q[std::size_t(i)], r.scales[1])));
    }
    CHECK(r.scales[0] == 1.5f / 127.0f);  // the other blocks keep their values
    CHECK(r.q[0] == 127);
    CHECK(r.q[129] == 127);
  }
}

TEST_CASE("the last block is ragged: its scale comes from its own values only") {
  std::vector<float> x(70, 100.0f);
  for (index_t i = 64; i < 70; ++i) x[std::size_t(i)] = -0.5f * static_cast<float>(i - 63);  // amax 3 at i = 69
  const Reference r = reference(x);
  REQUIRE(r.scales.size() == 2);
  CHECK(r.scales[0] == 100.0f / 127.0f);
  CHECK(r.scales[1] == 3.0f / 127.0f);
  CHECK(r.q[69] == -127);
}

TEST_CASE("values at +-amax give +-127 for every state; y just beyond 127 is clamped") {
  // amax = 3: s = RN(3 / 127) and y = RN(3 / s) may exceed 127 by an ulp; the clamp keeps q = 127.
  std::vector<float> x(64, 0.25f);
  x[5] = 3.0f;
  x[6] = -3.0f;
  bool beyond = false;
  for (const float a : {3.0f, 0.1f, 1e-3f, 7.0f, 1e30f}) beyond |= std::fabs(a / (a / 127.0f)) > 127.0f;
  CHECK(beyond);  // at least one of these amax gives |y| > 127, so the clamp is exercised below
  for (const float a : {3.0f, 0.1f, 1e-3f, 7.0f, 1e30f}) {
    std::fill(x.begin(), x.end(), a / 12.0f);
    x[5] = a;
    x[6] = -a;
    for (std::uint64_t seed = 0; seed < 64; ++seed) {
      const Reference r = reference(x, {seed, 1, 2});
      CHECK(r.q[5] == 127);
      CHECK(r.q[6] == -127);
    }
  }
}

TEST_CASE("negative values round down or up by their uniform; frac = 0 is exact for every state") {
  // amax = 127: s = 1 exactly, so y = x.
  std::vector<float> x(64);
  for (index_t i = 0; i < 64; ++i) x[std::size_t(i)] = static_cast<float>(i) - 40.5f;  // y = -40.5 .. 22.5
  x[63] = 127.0f;
  x[62] = -17.0f;  // frac = 0
  x[61] = -0.0f;
  x[60] = -127.0f + 0x1p-17f;
  const Sr8Params p = compact::sr8_params(kSr8State);
  const Reference r = reference(x);
  REQUIRE(r.scales[0] == 1.0f);
  for (index_t i = 0; i < 60; ++i) {
    const float y = x[std::size_t(i)];
    const float f = std::floor(y);
    const std::uint32_t u16 = compact::sr8_uniform(p, i);
    const int want = static_cast<int>(f) + ((y - f) * 65536.0f > static_cast<float>(u16) ? 1 : 0);
    CHECK(r.q[std::size_t(i)] == want);
  }
  for (std::uint64_t seed = 0; seed < 64; ++seed) {
    const Reference s = reference(x, {seed, 3, 4});
    CHECK(s.q[62] == -17);
    CHECK(s.q[61] == 0);
    CHECK(s.q[63] == 127);
    // y = -127 + 2^-17: f = -127, frac * 2^16 = 1/2 > u16 only for u16 = 0.
    const bool up = compact::sr8_uniform(compact::sr8_params({seed, 3, 4}), 60) == 0;
    CHECK(s.q[60] == (up ? -126 : -127));
  }
}

TEST_CASE("sr8_quantize on hand-computed elements") {
  // s = 0.5: y = 2x.
  CHECK(compact::sr8_quantize(1.25f, 0.5f, 0) == 3);        // y = 2.5, frac 0.5 > 0
  CHECK(compact::sr8_quantize(1.25f, 0.5f, 32767) == 3);    // 32768 > 32767
  CHECK(compact::sr8_quantize(1.25f, 0.5f, 32768) == 2);    // 32768 > 32768 is false
  CHECK(compact::sr8_quantize(-1.25f, 0.5f, 32767) == -2);  // y = -2.5: f = -3, frac 0.5
  CHECK(compact::sr8_quantize(-1.25f, 0.5f, 32768) == -3);
  CHECK(compact::sr8_quantize(-1.0f, 0.5f, 0) == -2);  // frac = 0: never up
  CHECK(compact::sr8_quantize(0.0f, 0.5f, 0) == 0);
  CHECK(compact::sr8_quantize(-0.0f, 0.5f, 0) == 0);
  CHECK(compact::sr8_quantize(64.0f, 0.5f, 65535) == 127);  // y = 128: clamped
  CHECK(compact::sr8_quantize(-64.0f, 0.5f, 0) == -127);    // y = -128: clamped
  CHECK(compact::sr8_floor(-0.5f) == -1.0f);
  CHECK(compact::sr8_floor(2.0f) == 2.0f);
  CHECK(compact::sr8_floor(-2.0f) == -2.0f);
  CHECK(compact::sr8_decode_value(-127, 0.5f) == -63.5f);
}

namespace {

/// The largest |mean over states of (decoded - x)| / bound over the elements, for decoded values `sum` (summed over
/// `states` encodes) of x with block scales s: the statistical test passes when it is <= 1.
///
/// Per element and state, decoded = RN(q s) with q = f + B, B ~ Bernoulli(p), p = ceil(frac 2^16) / 2^16 (the share
/// of u16 below frac 2^16), so E[q] - y = p - frac is in [0, 2^-16) (docs/spec.md; frac itself is within 2^-25 of
/// y - floor(y)). With y = RN(x / s) (|y - x / s| <= 127 2^-24) and the final rounding (<= 127 2^-24 s):
///   |E[decoded] - x| <= s (2^-16 + 2^-25 + 254 2^-24) = bias.
/// decoded - E[decoded] = s (B - p) lies in an interval of width s and has variance s^2 p (1 - p) <= s^2 / 4, so the
/// mean of K independent states has standard deviation <= s / (2 sqrt(K)); Hoeffding bounds the chance that it
/// strays by 6 of those, s 3 / sqrt(K), by 2 exp(-2 K (3 / sqrt(K))^2) = 2 e^-18 = 3e-8 per element, which is the
/// tolerance: bound = 3 s / sqrt(K) + bias.
double worst_mean_error(const std::vector<float>& x, const std::vector<double>& sum, const std::vector<float>& scales,
                        int states) {
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double s = scales[i / 64];
    const double bias = s * (0x1p-16 + 0x1p-25 + 254.0 * 0x1p-24);
    const double bound = 3.0 * s / std::sqrt(double(states)) + bias;
    worst = std::max(worst, std::fabs(sum[i] / states - double(x[i])) / bound);
  }
  return worst;
}

/// Round to nearest with the codec's scale and clamp: the biased rounding the statistical test must catch.
std::int8_t round_to_nearest(float x, float s) {
  const float y = x / s;
  return static_cast<std::int8_t>(std::max(-127.0f, std::min(127.0f, std::nearbyint(y))));
}

}  // namespace

TEST_CASE("stochastic rounding is unbiased: the mean decoded value over 4096 states is x within 6 sigma + bias") {
  constexpr int kStates = 4096;
  // Random values (normal, per-block magnitudes 2^-20 .. 2^20) and a deliberately biased set: amax 127 (s = 1) and
  // every other value k + 1/4, whose round-to-nearest error is -1/4 s every time.
  std::vector<float> random(512);
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (index_t i = 0; i < 512; ++i) random[std::size_t(i)] = std::ldexp(normal(gen), static_cast<int>(i / 64) * 5 - 20);
  std::vector<float> biased(256);
  for (index_t i = 0; i < 256; ++i) biased[std::size_t(i)] = static_cast<float>(i % 200 - 100) + 0.25f;
  biased[0] = 127.0f;
  for (const std::vector<float>* x : {&random, &biased}) {
    const index_t n = static_cast<index_t>(x->size());
    std::vector<std::int8_t> q(x->size());
    std::vector<float> scales(std::size_t(compact::sr8_scale_count(n))), decoded(x->size());
    std::vector<double> sum(x->size(), 0.0), rtn(x->size(), 0.0);
    double worst_error = 0.0;  // |decoded - x| / s, per element and state
    for (int k = 0; k < kStates; ++k) {
      compact::sr8_encode(compact::Cpu{}, x->data(), n, {std::uint64_t(k) * 7919u, 5, std::uint64_t(k)}, q.data(),
                          scales.data());
      compact::sr8_decode(compact::Cpu{}, q.data(), scales.data(), n, decoded.data());
      for (std::size_t i = 0; i < x->size(); ++i) {
        sum[i] += decoded[i];
        worst_error = std::max(worst_error, std::fabs(double(decoded[i]) - double((*x)[i])) / scales[i / 64]);
      }
    }
    for (std::size_t i = 0; i < x->size(); ++i)
      rtn[i] = kStates * double(compact::sr8_decode_value(round_to_nearest((*x)[i], scales[i / 64]), scales[i / 64]));
    CAPTURE(n);
    CHECK(worst_mean_error(*x, sum, scales, kStates) <= 1.0);
    // The test can fail: round to nearest, on the same values and scales, is far outside the bound (its error is
    // deterministic, up to s / 2, against a tolerance of about 0.047 s at K = 4096).
    CHECK(worst_mean_error(*x, rtn, scales, kStates) > 4.0);
    // Per element, |decoded - x| < |q - y| s + |y s - x| + the decode's rounding < s + 254 2^-24 s <= s (1 + 2^-16).
    CHECK(worst_error <= 1.0 + 0x1p-16);
  }
  // On the biased set every element's round-to-nearest error is exactly -1/4 (s = 1): its mean is biased by 1/4.
  for (index_t i = 1; i < 256; ++i)
    CHECK(double(compact::sr8_decode_value(round_to_nearest(biased[std::size_t(i)], 1.0f), 1.0f)) -
              double(biased[std::size_t(i)]) ==
          -0.25);
}

// ---------------------------------------------------------------------------------------------------------------
// The GPU kernel bodies, on the host.

namespace {

/// bf16 or fp16 raw bits, as the host tests hold 16-bit inputs.
struct Bf16Bits {
  float operator()(std::uint16_t b) const { return compact::fp32_from_bf16_bits(b); }
  std::uint16_t operator()(float v) const { return compact::bf16_bits_from_fp32(v); }
};
struct Fp16Bits {
  float operator()(std::uint16_t b) const { return compact::fp32_from_fp16_bits(b); }
  std::uint16_t operator()(float v) const { return compact::fp16_bits_from_fp32(v); }
};
struct Fp32 {
  float operator()(float v) const { return v; }
};

/// The case values of compact_test::sr8_case_values in T (through `convert`, rounding to nearest even).
template <class T, class Convert>
std::vector<T> values_as(index_t n, std::uint32_t seed, Convert convert) {
  const std::vector<float> f = compact_test::sr8_case_values(n, seed);
  std::vector<T> out(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) out[i] = convert(f[i]);
  return out;
}

/// Runs the encode and decode bodies over a host grid (`threads` per block, at most `max_blocks` blocks: grid-stride
/// beyond) on x + x_phase, q + q_phase, out + out_phase, and checks the bits against the reference on the values
/// converted to fp32. Sentinels around q, scales and out catch writes outside.
template <class T, class Codec>
void check_kernels(const std::vector<T>& storage, index_t x_phase, index_t q_phase, index_t out_phase, index_t threads,
                   index_t max_blocks, bool reverse, Codec codec) {
  const T* x = storage.data() + x_phase;
  const index_t count = static_cast<index_t>(storage.size()) - x_phase;
  std::vector<float> xf(static_cast<std::size_t>(count));
  for (index_t i = 0; i < count; ++i) xf[std::size_t(i)] = codec(x[i]);
  const Reference want = reference(xf);
  const index_t ns = compact::sr8_scale_count(count);
  std::vector<std::int8_t> q(std::size_t(count + q_phase + 20), std::int8_t{0x55});
  std::vector<float> scales(std::size_t(ns + 1), -3.0f);
  compact::detail::Launch1d launch = compact::detail::sr8_encode_launch(count, threads);
  launch.blocks = std::min(launch.blocks, max_blocks);
  const Sr8Params p = compact::sr8_params(kSr8State);
  compact::detail::host_launch_blocks(
      launch, compact::detail::sr8_encode_shared_bytes(launch.threads),
      [&](compact::detail::HostBlock& b) {
        compact::detail::sr8_encode_tiles(b, p, x, count, q.data() + q_phase, scales.data(), codec);
      },
      reverse);
  CHECK(std::memcmp(q.data() + q_phase, want.q.data(), std::size_t(count)) == 0);
  CHECK(std::memcmp(scales.data(), want.scales.data(), std::size_t(ns) * sizeof(float)) == 0);
  for (index_t k = 0; k < q_phase; ++k) CHECK(q[std::size_t(k)] == std::int8_t{0x55});
  CHECK(q[std::size_t(count + q_phase)] == std::int8_t{0x55});
  CHECK(scales[std::size_t(ns)] == -3.0f);

  using Out = T;
  std::vector<Out> out(std::size_t(count + out_phase + 20), Out(7));
  compact::detail::Launch1d decode = compact::detail::sr8_decode_launch<Out>(count);
  decode.blocks = std::min(decode.blocks, max_blocks);
  decode.threads = threads;  // fewer threads than the launcher's: the grid-stride loop covers the rest
  compact::detail::host_launch_threads(decode, [&](const compact::detail::Thread1d& th) {
    compact::detail::sr8_decode_thread(th, q.data() + q_phase, scales.data(), count, out.data() + out_phase, codec);
  });
  index_t mismatches = 0;
  for (index_t i = 0; i < count; ++i) {
    const Out v = codec(compact::sr8_decode_value(want.q[std::size_t(i)], want.scales[std::size_t(i / 64)]));
    mismatches += std::memcmp(&v, &out[std::size_t(out_phase + i)], sizeof(Out)) != 0;
  }
  CHECK(mismatches == 0);
  CHECK(out[std::size_t(count + out_phase)] == Out(7));
  for (index_t k = 0; k < out_phase; ++k) CHECK(out[std::size_t(k)] == Out(7));
}

/// fp32 in, fp32 out: the codec is the identity both ways.
struct Fp32Codec {
  float operator()(float v) const { return v; }
};

}  // namespace

TEST_CASE_TEMPLATE("the kernel bodies on a host grid give the reference's bits (ragged counts, any alignment)", Codec,
                   Fp32Codec, Bf16Bits, Fp16Bits) {
  using T = std::conditional_t<std::is_same_v<Codec, Fp32Codec>, float, std::uint16_t>;
  const Codec codec;
  for (const index_t count : {index_t{1}, index_t{15}, index_t{16}, index_t{17}, index_t{63}, index_t{64}, index_t{65},
                              index_t{1000}, index_t{4096}, index_t{4097}, index_t{10000}}) {
    const std::vector<T> storage = values_as<T>(count + 3, static_cast<std::uint32_t>(count), codec);
    for (const index_t phase : {index_t{0}, index_t{1}, index_t{3}}) {
      CAPTURE(count);
      CAPTURE(phase);
      // phase 0: x, q and out 16-byte aligned (std::vector's storage), the vector loads and stores; otherwise the
      // element paths. Threads per block 256 (the launchers'), 4 (one block of values) and 64; at most 2 blocks
      // leaves the grid-stride loop over tiles several turns; reverse runs the threads of a phase backwards.
      check_kernels(storage, phase, phase == 0 ? 0 : phase + 2, phase, 256, 1 << 16, false, codec);
      check_kernels(storage, phase, phase, 0, 4, 2, true, codec);
      check_kernels(storage, phase, 0, phase, 64, 3, phase == 1, codec);
    }
  }
}
