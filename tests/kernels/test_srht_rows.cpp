// SPDX-License-Identifier: MIT
/// Host tests of kernels/srht_row_kernels.hpp: the GPU SRHT's row kernels (the bodies the kernels run, on HostBlock and
/// host thread loops) give x P and g P^T of srht_entry exactly on integer inputs, in one pass and in two, for every
/// row plan, grid size and scratch size; the packed signs and per-thread masks hold d_k.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "compact/spec/entries.hpp"
#include "compact/spec/srht.hpp"
#include "compact/kernels/block.hpp"
#include "compact/kernels/convert.hpp"
#include "compact/kernels/srht_row_kernels.hpp"

namespace {

using compact::index_t;
namespace detail = compact::detail;

struct Bf16ToFloat {
  float operator()(std::uint16_t b) const { return compact::fp32_from_bf16_bits(b); }
};
struct Bf16FromFloat {
  std::uint16_t operator()(float v) const { return compact::bf16_bits_from_fp32(v); }
};

/// One way to run the row kernels: the plan's largest chunk, the rows per scratch group, the chunk kernels' grid
/// (0: one block per task, as the launcher; else that many blocks striding over the tasks), the register pass's
/// block size and grid cap, and the thread order of HostBlock.
struct RunShape {
  int max_chunk_bits;
  index_t scratch_rows;
  index_t chunk_blocks;
  index_t reg_threads, reg_max_blocks;
  bool reverse;
};

/// What srht_rows.hpp's kernels read, for (state, n, r) and a plan: packed signs (from the setup kernel's body),
/// the host's srht_sample and chunk_first computed here from it.
struct Rows {
  std::vector<std::uint32_t> sample, sign_words, chunk_first;
  detail::SrhtRows d;
};

Rows make_rows(const compact::SketchState& state, index_t n, index_t r, int max_chunk_bits) {
  const compact::EntryParams params = compact::entry_params(state, r);
  const index_t np = compact::next_pow2(n);
  Rows rows;
  const detail::SrhtPlan plan = detail::srht_plan(compact::log2_pow2(np), max_chunk_bits);
  REQUIRE(plan.high_bits <= detail::kSrhtMaxHighBits);
  rows.sign_words.resize(static_cast<std::size_t>((np + 31) / 32));
  detail::host_launch_threads(detail::grid_stride_launch(np, 64, 3), [&](const detail::Thread1d& th) {
    detail::srht_sign_words_thread(th, params.key, params.window, np, rows.sign_words.data());
  });
  for (index_t s : compact::srht_sample(state, n, r)) rows.sample.push_back(static_cast<std::uint32_t>(s));
  for (index_t c = 0; c <= (index_t{1} << plan.high_bits); ++c) {
    const auto at = std::lower_bound(rows.sample.begin(), rows.sample.end(), std::uint64_t(c) << plan.chunk_bits);
    rows.chunk_first.push_back(static_cast<std::uint32_t>(at - rows.sample.begin()));
  }
  rows.d =
      detail::SrhtRows{rows.sample.data(), rows.sign_words.data(), rows.chunk_first.data(), n, r, params.scale, plan};
  return rows;
}

/// The chunk kernels' launch: one block per 2^chunk.log2_rows tasks, as the launcher (or run.chunk_blocks blocks
/// striding over them), of fwht_block_threads threads.
detail::Launch1d chunk_launch(const detail::SrhtPlan& p, index_t rows, const RunShape& run) {
  return detail::Launch1d{run.chunk_blocks > 0 ? run.chunk_blocks : detail::srht_chunk_blocks_needed(p, rows),
                          detail::fwht_block_threads(p.chunk)};
}

/// Calls f(std::integral_constant<int, E>{}) with the register array the launcher instantiates for plan p.
template <class F>
void with_elems(const detail::SrhtPlan& p, F&& f) {
  if (p.chunk.log2_elems > 5) {
    f(std::integral_constant<int, 64>{});
  } else {
    f(std::integral_constant<int, 32>{});
  }
}

/// z = x P by the row kernels, as enqueue_srht_sketch runs them (one pass, or register pass + chunk kernel per
/// group of scratch_rows rows), with kElems registers per chunk thread.
template <int kElems, class In, class Out, class ToFloat, class FromFloat>
void run_sketch_elems(const detail::SrhtRows& d, const RunShape& run, const In* x, index_t ldx, Out* z, index_t ldz,
                      index_t batch, ToFloat to_float, FromFloat from_float) {
  const std::size_t smem = detail::fwht_shared_bytes(d.plan.chunk);
  if (!detail::srht_two_pass(d.plan)) {
    detail::host_launch_blocks(
        chunk_launch(d.plan, batch, run), smem,
        [&](detail::HostBlock& b) {
          detail::srht_sketch_chunks<kElems, detail::SrhtChunkIo::kDirect>(b, d, x, ldx, nullptr, z, ldz, batch,
                                                                           to_float, from_float);
        },
        run.reverse);
    return;
  }
  std::vector<float> scratch(static_cast<std::size_t>(run.scratch_rows << d.plan.log2_len), -7.0f);
  for (index_t r0 = 0; r0 < batch; r0 += run.scratch_rows) {
    const index_t rows = std::min(run.scratch_rows, batch - r0);
    const detail::Launch1d reg =
        detail::grid_stride_launch(detail::srht_register_tasks(d.plan, rows), run.reg_threads, run.reg_max_blocks);
    detail::host_launch_threads(reg, [&](const detail::Thread1d& th) {
      detail::srht_sketch_registers_thread(th, d, x + r0 * ldx, ldx, scratch.data(), rows, to_float);
    });
    detail::host_launch_blocks(
        chunk_launch(d.plan, rows, run), smem,
        [&](detail::HostBlock& b) {
          detail::srht_sketch_chunks<kElems, detail::SrhtChunkIo::kScratch>(
              b, d, static_cast<const In*>(nullptr), 0, scratch.data(), z + r0 * ldz, ldz, rows, to_float, from_float);
        },
        run.reverse);
  }
}

/// out = alpha g P^T + beta out by the row kernels, as enqueue_srht_unsketch runs them.
template <int kElems, class In, class Out, class ToFloat, class FromFloat>
void run_unsketch_elems(const detail::SrhtRows& d, const RunShape& run, const In* g, index_t ldg, Out* out, index_t ldo,
                        float alpha, float beta, index_t batch, ToFloat to_float, FromFloat from_float) {
  const std::size_t smem = detail::fwht_shared_bytes(d.plan.chunk);
  if (!detail::srht_two_pass(d.plan)) {
    detail::host_launch_blocks(
        chunk_launch(d.plan, batch, run), smem,
        [&](detail::HostBlock& b) {
          detail::srht_unsketch_chunks<kElems, detail::SrhtChunkIo::kDirect>(b, d, g, ldg, nullptr, out, ldo, alpha,
                                                                             beta, batch, to_float, from_float);
        },
        run.reverse);
    return;
  }
  std::vector<float> scratch(static_cast<std::size_t>(run.scratch_rows << d.plan.log2_len), -7.0f);
  for (index_t r0 = 0; r0 < batch; r0 += run.scratch_rows) {
    const index_t rows = std::min(run.scratch_rows, batch - r0);
    detail::host_launch_blocks(
        chunk_launch(d.plan, rows, run), smem,
        [&](detail::HostBlock& b) {
          detail::srht_unsketch_chunks<kElems, detail::SrhtChunkIo::kScratch>(b, d, g + r0 * ldg, ldg, scratch.data(),
                                                                              static_cast<Out*>(nullptr), 0, alpha,
                                                                              beta, rows, to_float, from_float);
        },
        run.reverse);
    const detail::Launch1d reg =
        detail::grid_stride_launch(detail::srht_register_tasks(d.plan, rows), run.reg_threads, run.reg_max_blocks);
    detail::host_launch_threads(reg, [&](const detail::Thread1d& th) {
      detail::srht_unsketch_registers_thread(th, d, scratch.data(), out + r0 * ldo, ldo, alpha, beta, rows, to_float,
                                             from_float);
    });
  }
}

template <class In, class Out, class ToFloat, class FromFloat>
void run_sketch(const detail::SrhtRows& d, const RunShape& run, const In* x, index_t ldx, Out* z, index_t ldz,
                index_t batch, ToFloat to_float, FromFloat from_float) {
  with_elems(d.plan, [&](auto elems) {
    run_sketch_elems<decltype(elems)::value>(d, run, x, ldx, z, ldz, batch, to_float, from_float);
  });
}

template <class In, class Out, class ToFloat, class FromFloat>
void run_unsketch(const detail::SrhtRows& d, const RunShape& run, const In* g, index_t ldg, Out* out, index_t ldo,
                  float alpha, float beta, index_t batch, ToFloat to_float, FromFloat from_float) {
  with_elems(d.plan, [&](auto elems) {
    run_unsketch_elems<decltype(elems)::value>(d, run, g, ldg, out, ldo, alpha, beta, batch, to_float, from_float);
  });
}

std::vector<float> small_ints(std::size_t count, std::uint64_t seed, int range) {
  std::vector<float> v(count);
  for (float& x : v) {
    seed = compact::splitmix64(seed);
    x = float(int(seed % std::uint64_t(2 * range + 1)) - range);
  }
  return v;
}

/// Row strides of x and out: n plus these pads. {3, 1}: rows off 16-byte boundaries (single-element loads and
/// stores); kAligned: the pads that make the strides multiples of 4 floats (16-byte vectors, ragged at n).
struct Pads {
  index_t x, out;
};
constexpr Pads kUnaligned{3, 1};
constexpr Pads kAligned{-1, -1};

index_t padded(index_t n, index_t pad) { return pad >= 0 ? n + pad : (n + 3) / 4 * 4; }

/// x P and alpha g P^T + beta out by the row kernels, compared with sums of srht_entry. Inputs are small integers,
/// so every FWHT sum is exact and each result is one fp32 rounding of scale times an integer (then, for
/// unsketch_grad, exact scalings by alpha = 2 and an exact beta out): the comparison is exact.
void check_rows(index_t batch, index_t n, index_t r, const RunShape& run, Pads pads = kUnaligned) {
  const compact::SketchState state{21, 4, (std::uint64_t{1} << 35) + 2};
  const Rows rows = make_rows(state, n, r, run.max_chunk_bits);
  const detail::SrhtRows& d = rows.d;
  std::vector<std::uint32_t> sign(static_cast<std::size_t>(n));
  for (index_t k = 0; k < n; ++k)
    sign[std::size_t(k)] = compact::srht_sign_bit(compact::philox_key(state), state.window, k);
  const auto entry_sign = [&](index_t k, index_t j) {  // P[k][S_j] = (-1)^this * scale
    return sign[std::size_t(k)] ^ compact::parity64(std::uint64_t(k) & rows.sample[std::size_t(j)]);
  };
  const index_t ldx = padded(n, pads.x), ldz = r + 2, ldo = padded(n, pads.out);
  const std::vector<float> x = small_ints(std::size_t(batch * ldx), std::uint64_t(n * 131 + r), 4);
  std::vector<float> z(std::size_t(batch * ldz), 99.0f);
  run_sketch(d, run, x.data(), ldx, z.data(), ldz, batch, detail::Identity{}, detail::Identity{});
  index_t wrong = 0;
  for (index_t b = 0; b < batch; ++b) {
    for (index_t j = 0; j < ldz; ++j) {
      float want = 99.0f;  // the row-stride gap is never written
      if (j < r) {
        double sum = 0;
        for (index_t k = 0; k < n; ++k)
          sum += entry_sign(k, j) ? -x[std::size_t(b * ldx + k)] : x[std::size_t(b * ldx + k)];
        want = d.scale * float(sum);  // sum is an exact integer
      }
      wrong += z[std::size_t(b * ldz + j)] != want;
    }
  }
  CHECK_MESSAGE(wrong == 0, "sketch B = " << batch << " n = " << n << " r = " << r << " passes "
                                          << (detail::srht_two_pass(d.plan) ? 2 : 1) << " chunk 2^" << d.plan.chunk_bits
                                          << " scratch rows " << run.scratch_rows << " reverse " << run.reverse
                                          << " ldx " << ldx);

  const std::vector<float> g = small_ints(std::size_t(batch * r), std::uint64_t(n * 7 + r), 4);
  const std::vector<float> out0 = small_ints(std::size_t(batch * ldo), 5, 9);
  for (const float beta : {0.0f, -1.0f}) {
    std::vector<float> out = out0;
    const float alpha = beta == 0.0f ? 1.0f : 2.0f;
    run_unsketch(d, run, g.data(), r, out.data(), ldo, alpha, beta, batch, detail::Identity{}, detail::Identity{});
    wrong = 0;
    for (index_t b = 0; b < batch; ++b) {
      for (index_t k = 0; k < ldo; ++k) {
        float want = out0[std::size_t(b * ldo + k)];
        if (k < n) {
          double sum = 0;  // exact integer: (-1)^(d_k + <k, S_j>) summed over j, without d_k
          for (index_t j = 0; j < r; ++j) {
            const float gj = g[std::size_t(b * r + j)];
            sum += (compact::parity64(std::uint64_t(k) & rows.sample[std::size_t(j)])) ? -gj : gj;
          }
          const float y = d.scale * float(sum);
          want = alpha * (sign[std::size_t(k)] ? -y : y);
          if (beta != 0.0f) want += beta * out0[std::size_t(b * ldo + k)];
        }
        wrong += out[std::size_t(b * ldo + k)] != want;
      }
    }
    CHECK_MESSAGE(wrong == 0, "unsketch B = " << batch << " n = " << n << " r = " << r << " beta " << beta
                                              << " chunk 2^" << d.plan.chunk_bits << " scratch rows "
                                              << run.scratch_rows);
  }
}

}  // namespace

TEST_CASE("one-pass SRHT row kernels give x P and g P^T of srht_entry exactly, for n' from 1 to 2^15") {
  const RunShape launcher{detail::kFwhtSharedMaxLog2, 0, 0, 256, 1 << 16, false};
  const RunShape few_blocks{detail::kFwhtSharedMaxLog2, 0, 2, 256, 1 << 16, true};
  const index_t shapes[][2] = {{1, 1},    {2, 1},     {5, 3},      {16, 16},  {17, 9},
                               {100, 37}, {513, 100}, {1000, 300}, {5000, 64}};
  for (const auto& sh : shapes) {
    for (const Pads pads : {kUnaligned, kAligned}) {
      check_rows(3, sh[0], sh[1], launcher, pads);
      check_rows(3, sh[0], sh[1], few_blocks, pads);
    }
  }
  check_rows(2, 20000, 40, launcher, kAligned);  // n' = 2^15: 64 registers, 512 threads, three stages
}

TEST_CASE("several rows per block: every n' class from 1 to 2^15, with a ragged last block, aligned or not") {
  const RunShape launcher{detail::kFwhtSharedMaxLog2, 0, 0, 256, 1 << 16, false};
  const RunShape two_blocks{detail::kFwhtSharedMaxLog2, 0, 2, 256, 1 << 16, true};  // grid-stride over groups of rows
  for (int c = 0; c <= detail::kFwhtSharedMaxLog2; ++c) {
    const index_t rows_per_block = index_t{1} << detail::fwht_shape(c).log2_rows;
    const index_t np = index_t{1} << c;
    for (const index_t n : {np, np / 2 + 1}) {
      const index_t r = n < 7 ? n : 7;
      const index_t batch = c <= 12 ? rows_per_block + 1 : 2;
      check_rows(batch, n, r, launcher, c % 2 ? kAligned : kUnaligned);
      if (c <= 8) check_rows(2 * rows_per_block + 3, n, r, two_blocks, c % 2 ? kUnaligned : kAligned);
    }
  }
}

TEST_CASE("two-pass SRHT row kernels give the one-pass results for every chunk size, grid and scratch size") {
  // Small chunks force two passes at small n' (up to 5 high bits) and many chunks per block.
  check_rows(5, 1000, 300, {6, 2, 0, 256, 1 << 16, false});  // n' 2^10: chunks of 2^6, 4 high bits
  check_rows(5, 1000, 300, {5, 5, 3, 32, 2, true});          // 5 high bits, one-thread chunks, 128 per block
  check_rows(4, 513, 100, {9, 1, 0, 64, 1, false});          // 1 high bit, one row per group
  check_rows(3, 5000, 64, {10, 8, 2, 128, 3, true});         // 3 high bits, scratch larger than the batch
  check_rows(2, 20000, 40, {detail::kSrhtPortableChunkBits, 1, 0, 256, 1 << 16, false}, kAligned);  // 2^15 at 2^13
  for (int chunk_bits = 5; chunk_bits <= 9; ++chunk_bits) {
    check_rows(3, 1000, 50, {chunk_bits, 2, 0, 256, 1 << 16, chunk_bits % 2 == 1}, kAligned);
  }
}

TEST_CASE("two-pass SRHT row kernels give x P and g P^T exactly for n' from 2^16 to 2^20 (chunks of 2^15)") {
  const RunShape sm90{detail::kFwhtSharedMaxLog2, 1, 0, 256, 1 << 16, false};
  check_rows(1, (1 << 15) + 1, 9, sm90);        // n' = 2^16: 2 chunks
  check_rows(2, 70000, 50, sm90, kAligned);     // n' = 2^17: 4 chunks
  check_rows(1, (1 << 18) - 1, 8, sm90);        // n' = 2^18: 8 chunks
  check_rows(1, (1 << 19), 8, sm90, kAligned);  // n' = 2^19: 16 chunks
  check_rows(1, (1 << 20) - 5, 16, sm90);       // n' = 2^20: 32 chunks, 5 high bits
}

TEST_CASE("the row kernels convert through the caller's functors (bf16 bits in and out, 8 per 16-byte vector)") {
  // n = 512: every row 16-byte aligned (vectors of 8 bf16); n = 300: the second row is not (single elements).
  for (const index_t n : {index_t{512}, index_t{300}}) {
    const index_t batch = 2, r = 77;
    const Rows rows = make_rows(compact::SketchState{1, 2, 3}, n, r, detail::kFwhtSharedMaxLog2);
    std::vector<std::uint16_t> x(std::size_t(batch * n)), z(std::size_t(batch * r));
    std::vector<float> xf(x.size()), zf(z.size());
    const std::vector<float> v = small_ints(x.size(), 3, 100);
    for (std::size_t k = 0; k < x.size(); ++k) {
      x[k] = compact::bf16_bits_from_fp32(v[k]);  // integers up to 100 are exact in bf16
      xf[k] = v[k];
    }
    const RunShape run{detail::kFwhtSharedMaxLog2, 0, 0, 256, 1 << 16, false};
    run_sketch(rows.d, run, x.data(), n, z.data(), r, batch, Bf16ToFloat{}, Bf16FromFloat{});
    run_sketch(rows.d, run, xf.data(), n, zf.data(), r, batch, detail::Identity{}, detail::Identity{});
    index_t wrong = 0;
    for (std::size_t k = 0; k < z.size(); ++k) wrong += z[k] != compact::bf16_bits_from_fp32(zf[k]);
    CHECK_MESSAGE(wrong == 0, "sketch n = " << n);
    // unsketch_grad with beta != 0 reads out as bf16 vectors too: compare with the fp32 run rounded once.
    const std::vector<float> gv = small_ints(std::size_t(batch * r), 4, 3);
    std::vector<std::uint16_t> g(gv.size()), out(x.size());
    std::vector<float> outf(x.size());
    for (std::size_t k = 0; k < gv.size(); ++k) g[k] = compact::bf16_bits_from_fp32(gv[k]);
    for (std::size_t k = 0; k < out.size(); ++k) {
      out[k] = compact::bf16_bits_from_fp32(float(int(k % 9) - 4));
      outf[k] = float(int(k % 9) - 4);
    }
    run_unsketch(rows.d, run, g.data(), r, out.data(), n, 1.0f, 2.0f, batch, Bf16ToFloat{}, Bf16FromFloat{});
    run_unsketch(rows.d, run, gv.data(), r, outf.data(), n, 1.0f, 2.0f, batch, detail::Identity{}, detail::Identity{});
    wrong = 0;
    for (std::size_t k = 0; k < out.size(); ++k) wrong += out[k] != compact::bf16_bits_from_fp32(outf[k]);
    CHECK_MESSAGE(wrong == 0, "unsketch n = " << n);
  }
}

TEST_CASE("row plans: the largest chunk the shared memory holds, at most 5 high bits up to n' = 2^20 on sm_80+") {
  CHECK(detail::srht_max_chunk_bits(227 * 1024) == 15);  // sm_90
  CHECK(detail::srht_max_chunk_bits(163 * 1024) == 15);  // sm_80
  CHECK(detail::srht_max_chunk_bits(99 * 1024) == 14);   // sm_86, sm_89
  CHECK(detail::srht_max_chunk_bits(64 * 1024) == 13);   // sm_75: 2^14 takes 65 KiB with its pad words
  CHECK(detail::srht_max_chunk_bits(48 * 1024) == 13);
  for (int log2_len = 0; log2_len <= compact::kSrhtMaxPaddedLog2; ++log2_len) {
    const detail::SrhtPlan p = detail::srht_plan(log2_len, 15);
    CHECK(p.chunk_bits + p.high_bits == log2_len);
    CHECK(p.high_bits <= detail::kSrhtMaxHighBits);
    CHECK(detail::srht_two_pass(p) == (log2_len > 15));
    CHECK(p.chunk.log2_len == p.chunk_bits);
  }
  CHECK(detail::srht_plan(20, 14).high_bits == 6);  // refused by the projector on a 99 KiB device
}

TEST_CASE("packed SRHT sign words and each chunk thread's sign bits hold d_k of spec/srht.hpp for every element") {
  const compact::SketchState state{5, 6, (std::uint64_t{1} << 32) + 9};
  const compact::Key2x32 key = compact::philox_key(state);
  for (int log2_len = 0; log2_len <= detail::kFwhtSharedMaxLog2; ++log2_len) {
    const index_t np = index_t{1} << log2_len;
    std::vector<std::uint32_t> words(static_cast<std::size_t>((np + 31) / 32), 0xDEADBEEFu);
    detail::host_launch_threads(detail::grid_stride_launch(np, 32, 2), [&](const detail::Thread1d& th) {
      detail::srht_sign_words_thread(th, key, state.window, np, words.data());
    });
    const detail::FwhtShape s = detail::fwht_shape(log2_len);
    index_t wrong = 0;
    for (index_t k = 0; k < np; ++k) {
      wrong += detail::srht_packed_sign(words.data(), k) != compact::srht_sign_bit(key, state.window, k);
    }
    if (np < 32) wrong += (words[0] >> np) != 0;                    // no stray bits past n'
    for (index_t t = 0; t < (index_t{1} << s.log2_threads); ++t) {  // a chunk thread's elements in layout L_0
      const int count = 1 << s.log2_elems;
      const std::uint64_t bits = detail::srht_sign_bits(words.data(), t * count, count);
      for (int q = 0; q < count; ++q) {  // sign bits of d, and zeros past n' (a row shorter than the registers)
        const index_t k = t * count + q;
        wrong += ((bits >> q) & 1u) != (k < np ? compact::srht_sign_bit(key, state.window, k) : 0u);
      }
      if (count < 64) wrong += (bits >> count) != 0;
    }
    CHECK_MESSAGE(wrong == 0, "n' = 2^" << log2_len);
  }
}

TEST_CASE("the SRHT materialize body writes every entry once with srht_entry, for any grid") {
  const compact::SketchState state{3, 1, 4};
  const index_t n = 37, r = 11, ld = r + 2;
  const compact::EntryParams params = compact::entry_params(state, r);
  std::vector<std::uint32_t> sample;
  for (index_t s : compact::srht_sample(state, n, r)) sample.push_back(static_cast<std::uint32_t>(s));
  for (const index_t blocks : {index_t{1}, index_t{2}, index_t{64}}) {
    std::vector<float> p(std::size_t(n * ld), 5.0f);
    detail::host_launch_threads(detail::Launch1d{blocks, 32}, [&](const detail::Thread1d& th) {
      detail::srht_materialize_thread(th, params, sample.data(), detail::PanelRect{0, n, 0, r}, p.data(), ld,
                                      detail::Identity{});
    });
    index_t wrong = 0;
    for (index_t i = 0; i < n; ++i) {
      for (index_t j = 0; j < ld; ++j) {
        const float want = j < r ? compact::srht_entry(params, i, sample[std::size_t(j)]) : 5.0f;
        wrong += p[std::size_t(i * ld + j)] != want;
      }
    }
    CHECK_MESSAGE(wrong == 0, "blocks " << blocks);
  }
}
