// SPDX-License-Identifier: MIT
/// The sr8 codec on the CPU backend (cpu/sr8.hpp): every instruction set and the public sr8_encode / sr8_decode give
/// the reference's bits (spec/sr8.hpp) for every count, thread count and instruction-set cap; bad arguments are
/// refused before anything is written.
#include <doctest/doctest.h>

#include <compact/compact.hpp>

#include "cpu/kernel_cases.hpp"
#include "support.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using compact::CpuIsa;
using compact::index_t;

using compact_test::CapGuard;
using compact_test::kAllIsas;
using compact_test::with_threads;

/// The encode and decode of x by the public CPU API.
struct Encoded {
  std::vector<std::int8_t> q;
  std::vector<float> scales;
  std::vector<float> decoded;
};

Encoded cpu_codec(const std::vector<float>& x, const compact::SketchState& state) {
  const index_t n = static_cast<index_t>(x.size());
  Encoded e{std::vector<std::int8_t>(x.size()), std::vector<float>(std::size_t(compact::sr8_scale_count(n))),
            std::vector<float>(x.size())};
  compact::sr8_encode(compact::Cpu{}, x.data(), n, state, e.q.data(), e.scales.data());
  compact::sr8_decode(compact::Cpu{}, e.q.data(), e.scales.data(), n, e.decoded.data());
  return e;
}

Encoded reference_codec(const std::vector<float>& x, const compact::SketchState& state) {
  const index_t n = static_cast<index_t>(x.size());
  Encoded e{std::vector<std::int8_t>(x.size()), std::vector<float>(std::size_t(compact::sr8_scale_count(n))),
            std::vector<float>(x.size())};
  compact::detail::sr8_encode_scalar(compact::sr8_params(state), 0, x.data(), n, e.q.data(), e.scales.data());
  compact::detail::sr8_decode_scalar(e.q.data(), e.scales.data(), n, e.decoded.data());
  return e;
}

bool same(const Encoded& a, const Encoded& b) {
  return compact_test::same_bits(a.q, b.q) && compact_test::same_bits(a.scales, b.scales) &&
         compact_test::same_bits(a.decoded, b.decoded);
}

}  // namespace

TEST_CASE("every instruction set this CPU runs encodes and decodes with the reference's bits") {
  for (const CpuIsa isa : kAllIsas) {
    CAPTURE(compact::cpu_isa_name(isa));
    if (!compact::cpu_isa_supported(isa)) {
      MESSAGE("skipped: this CPU (or build) has no " << compact::cpu_isa_name(isa) << " (see test_avx512_emulated)");
      continue;
    }
    compact_test::check_sr8_against_reference(
        [isa](const compact::Sr8Params& p, index_t first_block, const float* x, index_t n, std::int8_t* q,
              float* scales) { compact::detail::sr8_encode_range_with(isa, p, first_block, x, n, q, scales); },
        [isa](const std::int8_t* q, const float* scales, index_t n, float* out) {
          compact::detail::sr8_decode_range_with(isa, q, scales, n, out);
        });
  }
}

TEST_CASE("sr8_encode and sr8_decode have the reference's bits for every count, thread count and ISA cap") {
  const compact::SketchState state{0x5EED, 42, 0x100000001ull};
  for (const index_t count : {index_t{0}, index_t{1}, index_t{63}, index_t{64}, index_t{65}, index_t{1000},
                              index_t{256 * 64 + 1}, (index_t{1} << 20) + 3}) {
    CAPTURE(count);
    const std::vector<float> x = compact_test::sr8_case_values(count, static_cast<std::uint32_t>(count % 1000) + 7);
    const Encoded want = reference_codec(x, state);
    for (const CpuIsa cap : kAllIsas) {
      if (!compact::cpu_isa_supported(cap)) continue;
      const CapGuard guard(cap);
      for (const int threads : {1, 2, 3}) {
        CAPTURE(compact::cpu_isa_name(cap));
        CAPTURE(threads);
        with_threads(threads, [&] { CHECK(same(cpu_codec(x, state), want)); });
      }
    }
  }
}

TEST_CASE("the state decides the bits: a new seed, stream or window changes q, the same state repeats it") {
  const std::vector<float> x = compact_test::sr8_case_values(4096, 3);
  const Encoded a = cpu_codec(x, {1, 2, 3});
  CHECK(same(cpu_codec(x, {1, 2, 3}), a));
  for (const compact::SketchState other :
       {compact::SketchState{2, 2, 3}, compact::SketchState{1, 3, 3}, compact::SketchState{1, 2, 4}}) {
    const Encoded b = cpu_codec(x, other);
    CHECK(compact_test::same_bits(b.scales, a.scales));  // the scales depend on the values only
    CHECK_FALSE(compact_test::same_bits(b.q, a.q));
  }
}

TEST_CASE("bad arguments are refused with the argument's name and value, before anything is written") {
  const std::vector<float> x(130, 1.0f);
  std::vector<std::int8_t> q(130, std::int8_t{0x55});
  std::vector<float> scales(3, -7.0f), out(130, -7.0f);
  const compact::SketchState s{1, 2, 3};
  const compact::Cpu cpu;
  const auto untouched = [&] {
    for (const std::int8_t v : q) CHECK(v == std::int8_t{0x55});
    for (const float v : scales) CHECK(v == -7.0f);
    for (const float v : out) CHECK(v == -7.0f);
  };
  using compact_test::error_of;
  const auto contains = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  CHECK(contains(error_of([&] { compact::sr8_encode(cpu, x.data(), -5, s, q.data(), scales.data()); }),
                 "sr8_encode: argument count = -5 must be >= 0"));
  CHECK(contains(error_of([&] { compact::sr8_encode(cpu, nullptr, 130, s, q.data(), scales.data()); }),
                 "sr8_encode: argument x is null with count = 130"));
  CHECK(contains(error_of([&] { compact::sr8_encode(cpu, x.data(), 130, s, nullptr, scales.data()); }),
                 "sr8_encode: argument q is null with count = 130"));
  CHECK(contains(error_of([&] { compact::sr8_encode(cpu, x.data(), 130, s, q.data(), nullptr); }),
                 "sr8_encode: argument scales is null with count = 130"));
  // q over the scales' bytes, scales inside x: aliasing outputs are refused.
  CHECK(contains(
      error_of([&] { compact::sr8_encode(cpu, x.data(), 8, s, q.data(), reinterpret_cast<float*>(q.data() + 4)); }),
      "sr8_encode: output scales overlaps input q"));
  CHECK(contains(error_of([&] { compact::sr8_encode(cpu, scales.data(), 1, s, q.data(), scales.data()); }),
                 "sr8_encode: output scales overlaps input x"));
  CHECK(contains(error_of([&] { compact::sr8_decode(cpu, q.data(), scales.data(), -1, out.data()); }),
                 "sr8_decode: argument count = -1 must be >= 0"));
  CHECK(contains(error_of([&] { compact::sr8_decode(cpu, nullptr, scales.data(), 130, out.data()); }),
                 "sr8_decode: argument q is null with count = 130"));
  CHECK(contains(error_of([&] { compact::sr8_decode(cpu, q.data(), nullptr, 130, out.data()); }),
                 "sr8_decode: argument scales is null with count = 130"));
  CHECK(contains(error_of([&] { compact::sr8_decode(cpu, q.data(), scales.data(), 130, nullptr); }),
                 "sr8_decode: argument out is null with count = 130"));
  CHECK(contains(error_of([&] { compact::sr8_decode(cpu, q.data(), out.data(), 130, out.data() + 1); }),
                 "sr8_decode: output out overlaps input scales"));
  CHECK(contains(error_of([] { compact::sr8_scale_count(-2); }), "sr8_scale_count: argument count = -2 must be >= 0"));
  untouched();
  // count 0 takes null pointers and writes nothing.
  CHECK_NOTHROW(compact::sr8_encode(cpu, nullptr, 0, s, nullptr, nullptr));
  CHECK_NOTHROW(compact::sr8_decode(cpu, nullptr, nullptr, 0, nullptr));
  CHECK(compact::sr8_scale_count(0) == 0);
  CHECK(compact::sr8_scale_count(64) == 1);
  CHECK(compact::sr8_scale_count(65) == 2);
}
