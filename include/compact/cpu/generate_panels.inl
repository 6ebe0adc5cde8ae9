// SPDX-License-Identifier: MIT
// No #pragma once: included once per instruction set (cpu/isa_avx2.hpp, cpu/isa_avx512.hpp, SIMDe's
// tests/cpu/test_avx512_emulated.cpp), inside that instance's namespace and target region, after its lane types
// (cpu/lanes_<isa>.inl) and spec/fp32_lanes.inl.
/// Dense panel generation written once for every vector instruction set: kLanes Philox4x32-10 blocks per step,
/// Box-Muller lane by lane, Rademacher words as sign lanes.
///
/// The instance's lane file provides, besides what spec/fp32_lanes.inl uses: kLanes; U64 (64-bit lanes, broadcast from
/// one std::uint64_t), mul_lo32, hi32, xor3, join_lo32; Counters {block_a, block_b, row_a, row_b}, CounterWord,
/// load_counters, run_counters; to_slot_order; RademacherValues, rademacher_values, signed_lanes; store(float* /
/// double*, F32), store_aligned(std::uint32_t*, U32).
///
/// The kernels perform the reference's IEEE operations (spec/entries.hpp, spec/fp32_lanes.inl) lane by lane, in the
/// same order and with the same fma's, so their results are the bits of `detail::fill_dense_panel_scalar`
/// (tests/cpu/test_generate.cpp, test_cpu_isa.cpp, test_avx512_native.cpp and test_avx512_emulated.cpp check this on
/// many panels).

/// The Philox round keys (spec/philox.hpp's schedule), each broadcast to every 64-bit lane.
struct PhiloxKeys {
  U64 k0[kPhiloxRounds];
  U64 k1[kPhiloxRounds];
};

inline PhiloxKeys philox_keys(Key2x32 key) {
  PhiloxKeys rk;
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) key = philox_next_key(key);
    rk.k0[round] = U64(std::uint64_t{key.w[0]});
    rk.k1[round] = U64(std::uint64_t{key.w[1]});
  }
  return rk;
}

/// kLanes Philox4x32-10 blocks, counters {block[s], row[s], lo32(window), hi32(window)}; out[w] = output word w of
/// every slot, lane s = slot s.
///
/// A block lives in a 64-bit lane so that mul_lo32 (vpmuludq) yields the full 32 x 32 -> 64-bit product: its high
/// half is the reference's hi, its low half the reference's lo (the high halves of c1, c3 then carry garbage that
/// mul_lo32 never reads).
inline void philox(const Counters& c, std::uint64_t window, const PhiloxKeys& rk, U32 out[4]) {
  const U64 m0(std::uint64_t{kPhiloxM0}), m1(std::uint64_t{kPhiloxM1});
  const U64 w0(std::uint64_t{static_cast<std::uint32_t>(window)});
  const U64 w1(std::uint64_t{static_cast<std::uint32_t>(window >> 32)});
  U64 a0 = c.block_a, a1 = c.row_a, a2 = w0, a3 = w1;
  U64 b0 = c.block_b, b1 = c.row_b, b2 = w0, b3 = w1;
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const U64 pa0 = mul_lo32(a0, m0), pa1 = mul_lo32(a2, m1);
    const U64 pb0 = mul_lo32(b0, m0), pb1 = mul_lo32(b2, m1);
    // c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0.
    a0 = xor3(hi32(pa1), a1, rk.k0[round]);
    a2 = xor3(hi32(pa0), a3, rk.k1[round]);
    a1 = pa1;
    a3 = pa0;
    b0 = xor3(hi32(pb1), b1, rk.k0[round]);
    b2 = xor3(hi32(pb0), b3, rk.k1[round]);
    b1 = pb1;
    b3 = pb0;
  }
  out[0] = join_lo32(a0, b0);
  out[1] = join_lo32(a1, b1);
  out[2] = join_lo32(a2, b2);
  out[3] = join_lo32(a3, b3);
}

/// The scaled Gaussian entries of kLanes blocks in slot order: out[q] holds slots q kLanes/4 .. (q + 1) kLanes/4 - 1,
/// four consecutive entries each (normal4 of spec/entries.hpp, times the scale).
inline void gaussian_blocks(const Counters& c, std::uint64_t window, const PhiloxKeys& rk, F32 scale, F32 out[4]) {
  U32 x[4];
  philox(c, window, rk, x);
  F32 l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f;
  box_muller(x[0], x[1], &l0, &l1);
  box_muller(x[2], x[3], &l2, &l3);
  to_slot_order(l0 * scale, l1 * scale, l2 * scale, l3 * scale, out);
}

/// Up to kLanes arbitrary (row, block) pairs of a panel, generated together and stored clipped to its columns.
struct PendingBlocks {
  int count = 0;
  alignas(64) CounterWord block[kLanes];
  alignas(64) CounterWord row[kLanes];

  /// Adds a pair; true when the batch is full.
  bool push(index_t i, index_t b) {
    block[count] = static_cast<std::uint32_t>(b);
    row[count] = static_cast<std::uint32_t>(i);
    return ++count == kLanes;
  }

  /// The counters of the batch, unused slots repeating slot 0 (computed, never stored).
  Counters counters() {
    for (int s = count; s < kLanes; ++s) {
      block[s] = block[0];
      row[s] = row[0];
    }
    return load_counters(block, row);
  }
};

/// Writes the values of one block, vals[0, cols), at panel column `col` of dst, skipping columns outside [0, width).
template <class Scalar>
inline void store_clipped(Scalar* dst, index_t col, index_t width, const float* vals, index_t cols) {
  for (index_t l = 0; l < cols; ++l) {
    if (col + l >= 0 && col + l < width) dst[col + l] = static_cast<Scalar>(vals[l]);
  }
}

template <class Scalar>
inline void flush_gaussian(PendingBlocks* q, std::uint64_t window, const PhiloxKeys& rk, F32 scale, index_t i0,
                           index_t j0, index_t width, Scalar* out, index_t ld) {
  F32 u[4];
  gaussian_blocks(q->counters(), window, rk, scale, u);
  alignas(64) float vals[4 * kLanes];
  for (int m = 0; m < 4; ++m) store(vals + kLanes * m, u[m]);
  for (int s = 0; s < q->count; ++s) {
    Scalar* dst = out + (static_cast<index_t>(q->row[s]) - i0) * ld;
    const index_t col = static_cast<index_t>(q->block[s]) * kGaussianBlockCols - j0;
    store_clipped(dst, col, width, vals + kGaussianBlockCols * s, kGaussianBlockCols);
  }
  q->count = 0;
}

/// Gaussian panel: P[i0:i1, j0:j1] into out (leading dimension ld); bit-identical to the reference loop.
///
/// Runs of kLanes whole blocks inside one row are generated and stored as 4 kLanes contiguous entries; the rest
/// (partial blocks at the panel's edges, short leftovers, narrow panels) is batched across rows kLanes at a time.
template <class Scalar>
inline void fill_gaussian_panel(const EntryParams& p, index_t i0, index_t i1, index_t j0, index_t j1, Scalar* out,
                                index_t ld) {
  const PhiloxKeys rk = philox_keys(p.key);
  const F32 scale = p.scale;
  const index_t width = j1 - j0;
  const index_t first_block = j0 / kGaussianBlockCols, end_block = (j1 - 1) / kGaussianBlockCols + 1;
  const index_t full_begin = (j0 + kGaussianBlockCols - 1) / kGaussianBlockCols, full_end = j1 / kGaussianBlockCols;
  PendingBlocks pending;
  for (index_t i = i0; i < i1; ++i) {
    Scalar* dst = out + (i - i0) * ld;
    index_t b = first_block;
    if (b < full_begin && pending.push(i, b++)) flush_gaussian(&pending, p.window, rk, scale, i0, j0, width, out, ld);
    for (; b + kLanes <= full_end; b += kLanes) {
      // Blocks b .. b + kLanes - 1 never wrap: b + kLanes - 1 < full_end <= 2^32 / 4.
      F32 u[4];
      gaussian_blocks(run_counters(static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(i)), p.window, rk, scale,
                      u);
      Scalar* d = dst + (b * kGaussianBlockCols - j0);
      for (int m = 0; m < 4; ++m) store(d + kLanes * m, u[m]);
    }
    for (; b < end_block; ++b) {
      if (pending.push(i, b)) flush_gaussian(&pending, p.window, rk, scale, i0, j0, width, out, ld);
    }
  }
  if (pending.count > 0) flush_gaussian(&pending, p.window, rk, scale, i0, j0, width, out, ld);
}

template <class Scalar>
inline void flush_rademacher(PendingBlocks* q, const EntryParams& p, const PhiloxKeys& rk, index_t i0, index_t j0,
                             index_t width, Scalar* out, index_t ld) {
  U32 x[4];
  philox(q->counters(), p.window, rk, x);
  alignas(64) std::uint32_t words[4][kLanes];
  for (int w = 0; w < 4; ++w) store_aligned(words[w], x[w]);
  const RademacherValues values = rademacher_values(p.scale);
  for (int s = 0; s < q->count; ++s) {
    Scalar* dst = out + (static_cast<index_t>(q->row[s]) - i0) * ld;
    for (int w = 0; w < 4; ++w) {
      const index_t col = static_cast<index_t>(q->block[s]) * kRademacherBlockCols + kRademacherWordCols * w - j0;
      const std::uint32_t word = words[w][s];
      // Whole words inside the panel are the rule, clipped ones happen at most twice per row: the hint keeps the
      // whole-word stores on the fall-through path (without it GCC 12 moves them out of line at 16 lanes, a jump
      // there and one back per word, part of a 5-10% loss on the 1024 x 4096 AVX-512 panel; docs/benchmarks.md).
      if (__builtin_expect(col >= 0 && col + kRademacherWordCols <= width, 1)) {
        for (int part = 0; part < kRademacherWordCols / kLanes; ++part)
          store(dst + col + kLanes * part, signed_lanes(word, part, values));
      } else if (col + kRademacherWordCols > 0 && col < width) {
        for (index_t k = 0; k < kRademacherWordCols; ++k) {
          if (col + k >= 0 && col + k < width)
            dst[col + k] = static_cast<Scalar>(rademacher_value((word >> k) & 1u, p.scale));
        }
      }
    }
  }
  q->count = 0;
}

/// Rademacher panel: P[i0:i1, j0:j1] into out (leading dimension ld); bit-identical to the reference loop.
template <class Scalar>
inline void fill_rademacher_panel(const EntryParams& p, index_t i0, index_t i1, index_t j0, index_t j1, Scalar* out,
                                  index_t ld) {
  const PhiloxKeys rk = philox_keys(p.key);
  const index_t width = j1 - j0;
  const index_t first_block = j0 / kRademacherBlockCols, end_block = (j1 - 1) / kRademacherBlockCols + 1;
  PendingBlocks pending;
  for (index_t i = i0; i < i1; ++i) {
    for (index_t b = first_block; b < end_block; ++b) {
      if (pending.push(i, b)) flush_rademacher(&pending, p, rk, i0, j0, width, out, ld);
    }
  }
  if (pending.count > 0) flush_rademacher(&pending, p, rk, i0, j0, width, out, ld);
}

/// The panel of each lane generator (spec/entries.hpp), chosen by overload at compile time: a dense distribution with a
/// lane generator of its own adds its overload here.
template <class Scalar>
inline void fill_lanes_panel(const GaussianLanes*, const EntryParams& p, index_t i0, index_t i1, index_t j0, index_t j1,
                             Scalar* out, index_t ld) {
  fill_gaussian_panel(p, i0, i1, j0, j1, out, ld);
}
template <class Scalar>
inline void fill_lanes_panel(const RademacherLanes*, const EntryParams& p, index_t i0, index_t i1, index_t j0,
                             index_t j1, Scalar* out, index_t ld) {
  fill_rademacher_panel(p, i0, i1, j0, j1, out, ld);
}

/// The panel of a dense distribution, through its lane generator: what cpu/generate.hpp dispatches to.
template <class Dist, class Scalar>
inline void fill_panel(const EntryParams& p, index_t i0, index_t i1, index_t j0, index_t j1, Scalar* out, index_t ld) {
  fill_lanes_panel(static_cast<const dense_lanes_t<Dist>*>(nullptr), p, i0, i1, j0, j1, out, ld);
}
