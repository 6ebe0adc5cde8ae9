// SPDX-License-Identifier: MIT
/// Host tests of kernels/srht_select.hpp and kernels/srht_workspace.hpp: the GPU's computation of the SRHT sample (the
/// kernel bodies, driven by host loops in the launcher's order) equals srht_sample, also on keys with many equal
/// scores; the workspace layout is a pure function of (n, r), aligned, non-overlapping, and checked on use.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "compact/spec/srht.hpp"
#include "compact/api/workspace.hpp"
#include "compact/kernels/block.hpp"
#include "compact/kernels/srht_row_kernels.hpp"
#include "compact/kernels/srht_select.hpp"
#include "compact/kernels/srht_workspace.hpp"
#include "error_of.hpp"

namespace {

using compact::index_t;
namespace detail = compact::detail;
using compact_test::error_of;

/// The output of the selection: the sample S and chunk_first for chunks of 2^chunk_bits.
struct Selection {
  std::vector<std::uint32_t> sample, chunk_first;
};

/// Runs the select kernels' bodies in the order enqueue_srht_setup launches them (init; per digit a histogram
/// grid and the choose thread; masks; one scan block; scatter), with the given grid sizes.
template <class Scores>
Selection host_select(Scores scores, index_t np, index_t r, int chunk_bits, index_t hist_blocks, index_t threads,
                      index_t scan_threads, bool reverse) {
  const index_t words = (np + 31) / 32;
  detail::SelectState st;
  std::vector<std::uint32_t> masks(static_cast<std::size_t>(words), 0xFFFFFFFFu);
  std::vector<std::uint32_t> offsets(masks.size(), 0xFFFFFFFFu);
  Selection out{std::vector<std::uint32_t>(static_cast<std::size_t>(r) + 1, 0xFFFFFFFFu),
                std::vector<std::uint32_t>((np >> chunk_bits) + 2, 0xFFFFFFFFu)};
  detail::host_launch_threads(detail::grid_stride_launch(words, threads, 2),
                              [&](const detail::Thread1d& th) { detail::srht_select_init_thread(th, &st, r); });
  for (int pass = 0; pass < detail::kSelectDigits; ++pass) {
    detail::host_launch_blocks(
        detail::Launch1d{hist_blocks, threads}, detail::kSelectHistogramSharedBytes,
        [&](detail::HostBlock& b) { detail::srht_select_histogram(b, &st, scores, np, pass); }, reverse);
    detail::srht_select_choose(&st, pass);
  }
  REQUIRE(st.decided >= 1);
  detail::host_launch_threads(detail::grid_stride_launch(words, threads, 3), [&](const detail::Thread1d& th) {
    detail::srht_select_mask_thread(th, &st, scores, np, masks.data());
  });
  detail::host_launch_blocks(
      detail::Launch1d{1, scan_threads}, detail::select_scan_shared_bytes(scan_threads),
      [&](detail::HostBlock& b) { detail::srht_select_scan(b, masks.data(), words, offsets.data()); }, reverse);
  detail::host_launch_threads(detail::grid_stride_launch(words, threads, 3), [&](const detail::Thread1d& th) {
    detail::srht_select_scatter_thread(th, masks.data(), offsets.data(), np, r, chunk_bits, out.sample.data(),
                                       out.chunk_first.data());
  });
  CHECK(out.sample.back() == 0xFFFFFFFFu);  // nothing written past r
  out.sample.pop_back();
  CHECK(out.chunk_first.back() == 0xFFFFFFFFu);
  out.chunk_first.pop_back();
  return out;
}

/// The r indices with the smallest (score, k), ascending: a sort, the definition the selection must meet.
template <class Scores>
std::vector<std::uint32_t> sorted_reference(Scores scores, index_t np, index_t r) {
  std::vector<std::uint32_t> k(static_cast<std::size_t>(np));
  std::iota(k.begin(), k.end(), 0u);
  std::stable_sort(k.begin(), k.end(), [&](std::uint32_t a, std::uint32_t b) { return scores(a) < scores(b); });
  k.resize(static_cast<std::size_t>(r));
  std::sort(k.begin(), k.end());
  return k;
}

void check_chunk_first(const Selection& s, index_t np, int chunk_bits) {
  for (index_t c = 0; c <= (np >> chunk_bits); ++c) {
    const auto first = std::lower_bound(s.sample.begin(), s.sample.end(), std::uint64_t(c) << chunk_bits);
    CHECK_MESSAGE(s.chunk_first[std::size_t(c)] == std::uint32_t(first - s.sample.begin()), "chunk " << c);
  }
}

/// Scores with many ties: few distinct values (and equal high digits), so the index digits decide.
struct TiedScores {
  std::uint64_t modulus;
  std::uint64_t operator()(index_t k) const {
    return 0xABCD000000000000ull | ((static_cast<std::uint64_t>(k) * 2654435761u) % modulus);
  }
};

}  // namespace

TEST_CASE("the device selection of S equals srht_sample for n' up to 2^20 and states above 2^32") {
  const compact::SketchState states[] = {{42, 7, 3}, {0x123456789ABCDEF0ull, (std::uint64_t{1} << 40) + 3, 1ull << 33}};
  const index_t shapes[][2] = {{1, 1},       {2, 2},    {3, 1},        {33, 17},     {1000, 999},
                               {4096, 1024}, {5000, 1}, {20000, 5000}, {70000, 300}, {(1 << 20) - 3, 4096}};
  for (const compact::SketchState& state : states) {
    const compact::EntryParams p = compact::entry_params(state, 1);
    for (const auto& sh : shapes) {
      const index_t np = compact::next_pow2(sh[0]);
      const int chunk_bits = detail::srht_plan(compact::log2_pow2(np), detail::kFwhtSharedMaxLog2).chunk_bits;
      const Selection s =
          host_select(detail::SrhtScores{p.key, p.window}, np, sh[1], chunk_bits, 256, 256, 1024, false);
      const std::vector<index_t> want = compact::srht_sample(state, sh[0], sh[1]);
      index_t wrong = 0;
      for (std::size_t j = 0; j < want.size(); ++j) wrong += index_t(s.sample[j]) != want[j];
      CHECK_MESSAGE(wrong == 0, "n = " << sh[0] << " r = " << sh[1]);
      check_chunk_first(s, np, chunk_bits);
    }
  }
}

TEST_CASE("the selection ranks ties by index, for any grid, block size and thread order") {
  for (const std::uint64_t modulus : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{256}, std::uint64_t{1000}}) {
    const TiedScores scores{modulus};
    for (const index_t np : {index_t{64}, index_t{1024}, index_t{1} << 14}) {
      for (const index_t r : {index_t{1}, np / 3, np - 1, np}) {
        const std::vector<std::uint32_t> want = sorted_reference(scores, np, r);
        const Selection a = host_select(scores, np, r, 6, 3, 64, 32, true);
        const Selection b = host_select(scores, np, r, 6, 1, 32, 1024, false);
        CHECK_MESSAGE(a.sample == want, "modulus " << modulus << " n' " << np << " r " << r);
        CHECK(b.sample == want);
        check_chunk_first(a, np, 6);
      }
    }
  }
}

TEST_CASE("select digits order keys as (score, index) and the choose step keeps the rank inside its bucket") {
  CHECK(detail::select_digit(0x0123456789ABCDEFull, 0, 0) == 0x01u);
  CHECK(detail::select_digit(0x0123456789ABCDEFull, 0, 7) == 0xEFu);
  CHECK(detail::select_digit(0, 0xABCDEF, 8) == 0xABu);
  CHECK(detail::select_digit(0, 0xABCDEF, 10) == 0xEFu);
  const std::uint32_t digits[3] = {0x01, 0x23, 0x45};
  CHECK(detail::select_compare(0x0123450000000000ull, 0, digits, 3) == 0);
  CHECK(detail::select_compare(0x0123440000000000ull, 0, digits, 3) == -1);
  CHECK(detail::select_compare(0x0124000000000000ull, 0, digits, 3) == 1);
  detail::SelectState st{};
  st.hist[3] = 5;
  st.hist[7] = 2;
  st.hist[9] = 4;
  st.remaining = 7;  // 5 in bucket 3, then the 2 of bucket 7: decided at digit 7
  detail::srht_select_choose(&st, 0);
  CHECK(st.digit[0] == 7);
  CHECK(st.remaining == 2);
  CHECK(st.decided == 1);
  CHECK(st.hist[3] == 0);
  detail::SelectState st2{};
  st2.hist[9] = 4;
  st2.remaining = 3;  // inside bucket 9: undecided, rank 3 of its 4 keys
  detail::srht_select_choose(&st2, 2);
  CHECK(st2.digit[2] == 9);
  CHECK(st2.remaining == 3);
  CHECK(st2.decided == 0);
  for (std::uint32_t x : {0u, 1u, 0xFFFFFFFFu, 0x80000001u, 0x12345678u}) {
    CHECK(detail::popcount32(x) == std::uint32_t(__builtin_popcount(x)));
  }
}

TEST_CASE("the SRHT workspace layout is aligned, non-overlapping and needs no device") {
  for (const index_t n : {index_t{1}, index_t{100}, index_t{4096}, index_t{20000}, index_t{40000}, index_t{1} << 20}) {
    for (const index_t r : {index_t{1}, (n + 1) / 2, n}) {
      const detail::SrhtLayout l = detail::srht_layout(n, r);
      const std::size_t words = std::size_t((l.np + 31) / 32) * 4;
      CHECK(l.np == compact::next_pow2(n));
      const std::size_t parts[] = {l.sample, l.signs, l.chunk_first, l.transient, l.select_state, l.masks, l.offsets};
      for (const std::size_t at : parts) CHECK(at % detail::kWorkspaceAlign == 0);
      CHECK(l.signs >= l.sample + std::size_t(r) * 4);
      CHECK(l.chunk_first >= l.signs + words);
      CHECK(l.transient >= l.chunk_first + 4 * ((std::size_t{1} << detail::kSrhtMaxHighBits) + 1));
      CHECK(l.select_state == l.transient);
      CHECK(l.masks >= l.select_state + sizeof(detail::SelectState));
      CHECK(l.offsets >= l.masks + words);
      CHECK(l.select_end >= l.offsets + words);
      const std::size_t min_bytes = detail::srht_workspace_bytes(l, detail::srht_min_scratch_rows(l.np));
      const std::size_t rec_bytes = detail::srht_workspace_bytes(l, detail::srht_recommended_scratch_rows(l.np));
      CHECK(min_bytes >= l.select_end);
      CHECK(rec_bytes >= min_bytes);
      CHECK(detail::srht_scratch_rows(l, min_bytes) >= detail::srht_min_scratch_rows(l.np));
      CHECK(detail::srht_scratch_rows(l, rec_bytes) >= detail::srht_recommended_scratch_rows(l.np));
      if (l.np > (index_t{1} << detail::kFwhtSharedMaxLog2)) {
        CHECK(detail::srht_scratch_rows(l, rec_bytes) * l.np >= detail::kSrhtScratchFloats);
      }
    }
  }
  CHECK(detail::srht_min_scratch_rows(1 << 13) == 0);  // a 2^13 chunk fits every supported GPU's block
  CHECK(detail::srht_min_scratch_rows(1 << 14) == 1);  // 2^14 takes 65 KiB: two passes on sm_75
  CHECK(detail::srht_min_scratch_rows(1 << 15) == 1);
  CHECK(detail::srht_recommended_scratch_rows(1 << 15) == 1);
  CHECK(detail::srht_recommended_scratch_rows(1 << 16) == 128);
  CHECK(detail::srht_recommended_scratch_rows(1 << 20) == 8);
  alignas(256) unsigned char base[4096];
  const detail::SrhtLayout l = detail::srht_layout(100, 10);
  const detail::SrhtParts w = detail::srht_parts(l, base);
  CHECK(reinterpret_cast<unsigned char*>(w.sign_words) == base + l.signs);
  CHECK(reinterpret_cast<unsigned char*>(w.select) == base + l.select_state);
  CHECK(reinterpret_cast<unsigned char*>(w.scratch) == base + l.transient);
}

TEST_CASE("check_workspace refuses a null, short or misaligned workspace, naming the argument and the values") {
  alignas(256) static unsigned char buffer[1024];
  CHECK(error_of([] { detail::check_workspace("Projector", "workspace", buffer, 1024, 1024, "min(n, r)"); }).empty());
  const std::string null =
      error_of([] { detail::check_workspace("Projector", "workspace", nullptr, 0, 512, "m(n, r)"); });
  CHECK(null.find("argument workspace is null (needs 512 bytes, m(n, r))") != std::string::npos);
  const std::string shortage =
      error_of([] { detail::check_workspace("Projector", "workspace", buffer, 100, 512, "min(n, r)"); });
  CHECK(shortage.find("argument workspace has 100 bytes, needs at least 512") != std::string::npos);
  const std::string misaligned =
      error_of([] { detail::check_workspace("Projector", "workspace", buffer + 8, 1000, 512, "min(n, r)"); });
  CHECK(misaligned.find("argument workspace at address 0x") != std::string::npos);
  CHECK(misaligned.find("is not 256-byte aligned (address % 256 = 8)") != std::string::npos);
  CHECK(detail::align_workspace(1) == 256);
  CHECK(detail::align_workspace(256) == 256);
  CHECK(detail::align_workspace(0) == 0);
}
