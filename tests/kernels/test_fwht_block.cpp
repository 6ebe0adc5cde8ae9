// SPDX-License-Identifier: MIT
/// Host tests of kernels/fwht_block.hpp and kernels/block.hpp: the GPU's block FWHT (fwht_rows_forward and
/// fwht_rows_backward, the code the kernels run) driven by HostBlock over every thread, in forward and reverse
/// thread order, for every row length 2^0 .. 2^15 with several rows per block; its shapes; and its shared-memory
/// accesses, which must be free of bank conflicts in every stage.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "compact/spec/philox.hpp"
#include "compact/kernels/block.hpp"
#include "compact/kernels/fwht_block.hpp"

namespace {

using compact::index_t;
namespace detail = compact::detail;

/// Naive Walsh-Hadamard transform in double: y_i = sum_k (-1)^popcount(i & k) x_k (Sylvester ordering).
std::vector<double> naive_fwht(const std::vector<float>& x) {
  const std::size_t n = x.size();
  std::vector<double> y(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    if (x[k] == 0.0f) continue;
    for (std::size_t i = 0; i < n; ++i) y[i] += (__builtin_popcountll(i & k) & 1) ? -double(x[k]) : double(x[k]);
  }
  return y;
}

/// Rows of 2^log2_len small integers (every partial sum exact in fp32), dense for short rows, sparse for long ones.
std::vector<std::vector<float>> test_rows(int log2_len, int count, std::uint64_t seed) {
  const std::size_t len = std::size_t{1} << log2_len;
  std::vector<std::vector<float>> rows(static_cast<std::size_t>(count), std::vector<float>(len, 0.0f));
  for (auto& row : rows) {
    const std::size_t nonzero = log2_len <= 11 ? len : 7;
    for (std::size_t k = 0; k < nonzero; ++k) {
      seed = compact::splitmix64(seed);
      const std::size_t at = log2_len <= 11 ? k : static_cast<std::size_t>(seed >> 20) % len;
      row[at] = float(int(seed % 17) - 8);
    }
  }
  return rows;
}

/// Forward: one HostBlock of the kernel's shape loads registers in layout L_0 (thread t of row rho holds elements
/// [t E, t E + E)), runs fwht_rows_forward and returns the rows read from shared memory.
template <int kElems>
std::vector<std::vector<float>> block_forward(const std::vector<std::vector<float>>& rows, const detail::FwhtShape& s,
                                              bool reverse) {
  detail::HostBlock b(0, 1, detail::fwht_block_threads(s), detail::fwht_shared_bytes(s), reverse);
  auto regs = b.local<detail::Registers<kElems>>();
  const index_t per_row = index_t{1} << s.log2_threads;
  b.each([&](index_t t) {
    const auto& row = rows[static_cast<std::size_t>(t / per_row)];
    for (int q = 0; q < kElems; ++q) {  // zero past a row shorter than a thread's registers
      const std::size_t k = detail::fwht_layout_element(s, 0, std::uint32_t(t % per_row), q);
      regs[t].v[q] = k < row.size() ? row[k] : 0.0f;
    }
  });
  float* sm = b.shared<float>();
  detail::fwht_rows_forward<kElems>(b, regs, sm, s);
  std::vector<std::vector<float>> out(rows.size(), std::vector<float>(rows[0].size()));
  for (std::size_t rho = 0; rho < rows.size(); ++rho) {
    for (std::size_t k = 0; k < rows[0].size(); ++k) {
      out[rho][k] = sm[detail::fwht_shared_index(s, std::uint32_t(rho), std::uint32_t(k))];
    }
  }
  return out;
}

/// Backward: the rows written to shared memory, fwht_rows_backward, the result read from the registers (L_0).
template <int kElems>
std::vector<std::vector<float>> block_backward(const std::vector<std::vector<float>>& rows, const detail::FwhtShape& s,
                                               bool reverse) {
  detail::HostBlock b(0, 1, detail::fwht_block_threads(s), detail::fwht_shared_bytes(s), reverse);
  float* sm = b.shared<float>();
  for (std::size_t rho = 0; rho < rows.size(); ++rho) {
    for (std::size_t k = 0; k < rows[0].size(); ++k) {
      sm[detail::fwht_shared_index(s, std::uint32_t(rho), std::uint32_t(k))] = rows[rho][k];
    }
  }
  auto regs = b.local<detail::Registers<kElems>>();
  detail::fwht_rows_backward<kElems>(b, regs, sm, s);
  std::vector<std::vector<float>> out(rows.size(), std::vector<float>(rows[0].size()));
  const index_t per_row = index_t{1} << s.log2_threads;
  for (index_t t = 0; t < b.size(); ++t) {
    for (int q = 0; q < kElems; ++q) {
      const std::size_t k = detail::fwht_layout_element(s, 0, std::uint32_t(t % per_row), q);
      if (k < rows[0].size()) out[static_cast<std::size_t>(t / per_row)][k] = regs[t].v[q];
    }
  }
  return out;
}

template <int kElems>
void check_length(int log2_len) {
  const detail::FwhtShape s = detail::fwht_shape(log2_len);
  REQUIRE((1 << s.log2_elems) == kElems);
  const auto rows = test_rows(log2_len, 1 << s.log2_rows, 99 + static_cast<std::uint64_t>(log2_len));
  for (const bool reverse : {false, true}) {
    const auto fwd = block_forward<kElems>(rows, s, reverse);
    const auto bwd = block_backward<kElems>(rows, s, reverse);
    index_t wrong = 0;
    for (std::size_t rho = 0; rho < rows.size(); ++rho) {
      const std::vector<double> want = naive_fwht(rows[rho]);
      for (std::size_t k = 0; k < want.size(); ++k) {
        wrong += double(fwd[rho][k]) != want[k];
        wrong += double(bwd[rho][k]) != want[k];
      }
    }
    CHECK_MESSAGE(wrong == 0, "length 2^" << log2_len << ", " << rows.size() << " rows per block, reverse " << reverse);
  }
}

}  // namespace

TEST_CASE("the block FWHT computes the Hadamard transform of every row of a block, lengths 1 to 2^10") {
  for (int log2_len = 0; log2_len <= 10; ++log2_len) check_length<32>(log2_len);
}

TEST_CASE("the block FWHT computes the Hadamard transform for lengths 2^11 to 2^15 (64 registers per thread)") {
  for (int log2_len = 11; log2_len <= detail::kFwhtSharedMaxLog2; ++log2_len)
    check_length<detail::kFwhtMaxElems>(log2_len);
}

TEST_CASE(
    "FWHT shapes: 32 or 64 registers (short rows padded), at most 512 threads, at least 128 per block, few stages") {
  for (int log2_len = 0; log2_len <= detail::kFwhtSharedMaxLog2; ++log2_len) {
    const detail::FwhtShape s = detail::fwht_shape(log2_len);
    CHECK(s.log2_elems == (log2_len <= 10 ? 5 : 6));
    CHECK(s.log2_threads == (log2_len > s.log2_elems ? log2_len - s.log2_elems : 0));
    CHECK(detail::fwht_row_span(s) == (index_t{1} << std::max(log2_len, s.log2_elems)));
    CHECK(detail::fwht_block_threads(s) <= 512);
    CHECK(detail::fwht_block_threads(s) >= 128);
    CHECK(s.stages == (log2_len <= 5 ? 1 : (log2_len <= 12 ? 2 : 3)));
    // Every bit of the index is done by exactly one stage, as a register bit of that stage's layout.
    std::vector<int> done(static_cast<std::size_t>(log2_len), 0);
    for (int stage = 0; stage < s.stages; ++stage) {
      const int b = detail::fwht_stage_layout(s, stage);
      CHECK(b + s.log2_elems <= std::max(log2_len, s.log2_elems));
      for (int bit = stage * s.log2_elems; bit < (stage + 1) * s.log2_elems && bit < log2_len; ++bit) {
        CHECK(bit >= b);
        CHECK(bit < b + s.log2_elems);
        ++done[static_cast<std::size_t>(bit)];
      }
    }
    for (const int d : done) CHECK(d == 1);
    // Shared memory: the rows plus one pad word per E words; 130 KiB for 2^15, 65 KiB for 2^14, else at most 33 KiB.
    const std::size_t span = std::size_t{1} << std::max(log2_len, s.log2_elems);
    CHECK(detail::fwht_shared_bytes(s) == 4 * (span + (span >> s.log2_elems)) << s.log2_rows);
    const std::size_t most = log2_len == 15 ? 133120 : (log2_len == 14 ? 66560 : 33280);
    CHECK(detail::fwht_shared_bytes(s) <= most);
  }
}

TEST_CASE("every layout maps (thread, register) one to one onto the row's span, and the padding onto shared memory") {
  for (int log2_len = 0; log2_len <= detail::kFwhtSharedMaxLog2; ++log2_len) {
    const detail::FwhtShape s = detail::fwht_shape(log2_len);
    const index_t len = detail::fwht_row_span(s), rows = index_t{1} << s.log2_rows;
    for (int stage = 0; stage < s.stages; ++stage) {
      const int b = detail::fwht_stage_layout(s, stage);
      std::vector<int> hits(static_cast<std::size_t>(len), 0);
      for (index_t t = 0; t < (index_t{1} << s.log2_threads); ++t) {
        for (int q = 0; q < (1 << s.log2_elems); ++q)
          ++hits[std::size_t(detail::fwht_layout_element(s, b, std::uint32_t(t), q))];
      }
      for (const int h : hits) REQUIRE(h == 1);
    }
    std::vector<int> cells(static_cast<std::size_t>(detail::fwht_shared_bytes(s) / 4), 0);
    for (index_t rho = 0; rho < rows; ++rho) {
      for (index_t k = 0; k < len; ++k)
        ++cells[std::size_t(detail::fwht_shared_index(s, std::uint32_t(rho), std::uint32_t(k)))];
    }
    index_t used = 0;
    for (const int c : cells) {
      REQUIRE(c <= 1);
      used += c;
    }
    CHECK(used == rows * len);
  }
}

TEST_CASE("the register addresses of every layout are register 0's plus the linear (or narrow) offset") {
  for (int log2_len = 0; log2_len <= detail::kFwhtSharedMaxLog2; ++log2_len) {
    const detail::FwhtShape s = detail::fwht_shape(log2_len);
    const index_t threads = detail::fwht_block_threads(s), per_row = index_t{1} << s.log2_threads;
    index_t wrong = 0, linear = 0;
    for (int stage = 0; stage < s.stages; ++stage) {
      const int b = detail::fwht_stage_layout(s, stage);
      const std::uint32_t stride = detail::fwht_layout_stride(s, b);
      linear += stride != 0;
      for (index_t t = 0; t < threads; ++t) {
        const std::uint32_t base = detail::fwht_layout_base(s, b, t);
        for (int q = 0; q < (1 << s.log2_elems); ++q) {
          const std::uint32_t want = detail::fwht_shared_index(
              s, std::uint32_t(t / per_row), detail::fwht_layout_element(s, b, std::uint32_t(t % per_row), q));
          const std::uint32_t got =
              base + (stride != 0 ? std::uint32_t(q) * stride : detail::fwht_narrow_offset(s, b, q));
          wrong += got != want;
        }
      }
    }
    CHECK_MESSAGE(wrong == 0, "length 2^" << log2_len);
    // Rows of 2^12 (n = 4096) and longer, and of at most 2^5 or exactly 2^10: every layout linear in q.
    if (log2_len >= 12 || log2_len <= 5 || log2_len == 10) CHECK(linear == s.stages);
  }
}

TEST_CASE("every stage's shared-memory writes and reads are free of bank conflicts, for every row length") {
  // A warp is 32 consecutive threads of the block; for each register index q its 32 accesses (4-byte words) must
  // fall in 32 different banks (word address mod 32).
  for (int log2_len = 0; log2_len <= detail::kFwhtSharedMaxLog2; ++log2_len) {
    const detail::FwhtShape s = detail::fwht_shape(log2_len);
    const index_t threads = detail::fwht_block_threads(s), per_row = index_t{1} << s.log2_threads;
    index_t conflicted = 0;
    for (int stage = 0; stage < s.stages; ++stage) {
      const int b = detail::fwht_stage_layout(s, stage);
      for (index_t warp = 0; warp < threads / 32; ++warp) {
        for (int q = 0; q < (1 << s.log2_elems); ++q) {
          std::set<index_t> banks;
          for (index_t lane = 0; lane < 32; ++lane) {
            const index_t t = warp * 32 + lane;
            banks.insert(detail::fwht_shared_index(s, std::uint32_t(t / per_row),
                                                   detail::fwht_layout_element(s, b, std::uint32_t(t % per_row), q)) %
                         32);
          }
          conflicted += banks.size() != 32;
        }
      }
    }
    CHECK_MESSAGE(conflicted == 0, "length 2^" << log2_len);
  }
}

TEST_CASE("the register stage alone is the FWHT of a thread's 2^h values, h <= 5 (the SRHT's register pass)") {
  for (int h = 0; h <= 5; ++h) {
    std::vector<float> x(std::size_t{1} << h);
    for (std::size_t k = 0; k < x.size(); ++k) x[k] = float(int(k * 7 % 11) - 5);
    float v[32] = {};
    for (std::size_t k = 0; k < x.size(); ++k) v[k] = x[k];
    detail::fwht_register_levels(v, h);
    const std::vector<double> want = naive_fwht(x);
    index_t wrong = 0;
    for (std::size_t k = 0; k < x.size(); ++k) wrong += double(v[k]) != want[k];
    for (std::size_t k = x.size(); k < 32; ++k) wrong += v[k] != 0.0f;
    CHECK_MESSAGE(wrong == 0, "h = " << h);
  }
}

TEST_CASE("a stage's butterflies touch only its own register bits") {
  const detail::FwhtShape s = detail::fwht_shape(15);  // stages of bits [0, 6), [6, 12), [12, 15)
  float v[64];
  for (int q = 0; q < 64; ++q) v[q] = q == 0 ? 1.0f : 0.0f;
  detail::fwht_stage_butterflies(s, 2, v);  // layout 9: register bits [9, 15), transforms k bits [12, 15) = q [3, 6)
  for (int q = 0; q < 64; ++q) CHECK(v[q] == ((q & 7) == 0 ? 1.0f : 0.0f));
}
