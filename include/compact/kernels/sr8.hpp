// SPDX-License-Identifier: MIT
#pragma once
/// The sr8 codec's GPU kernel bodies (spec/sr8.hpp), functions of (block, thread) that the CUDA launchers
/// (cuda/sr8.cuh) run and the host tests drive with kernels/block.hpp's loops: the encode, cooperative (the four
/// threads of a 64-value block share its amax through shared memory), and the decode, one 16-byte vector of output
/// per thread.
///
/// An encode thread owns 16 consecutive values: two Philox calls give their uniforms, its q is one 16-byte store, its
/// inputs one to four 16-byte loads (where the pointers are 16-byte aligned and the 16 values exist; element by
/// element otherwise). Every value is converted to fp32 exactly first (bf16, fp16) and goes through the reference's
/// sr8_quantize / sr8_decode_value, so the bits are the CPU's.

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/portability.hpp"
#include "compact/spec/sr8.hpp"
#include "compact/kernels/block.hpp"
#include "compact/kernels/grid.hpp"
#include "compact/kernels/vec16.hpp"

namespace compact {
namespace detail {

/// Values per thread: two Philox calls, one 16-byte store of q.
inline constexpr int kSr8ThreadValues = 16;
/// Threads that share one block of 64 values.
inline constexpr int kSr8ThreadsPerBlock = static_cast<int>(kSr8Block) / kSr8ThreadValues;
/// Threads per CUDA block of the encode and decode kernels (a multiple of kSr8ThreadsPerBlock).
inline constexpr int kSr8Threads = 256;
/// Most CUDA blocks of one launch; a grid-stride loop does the rest.
inline constexpr index_t kSr8MaxGridBlocks = index_t{1} << 16;

/// Dynamic shared memory of the encode: one amax word per thread.
inline std::size_t sr8_encode_shared_bytes(index_t threads) {
  return static_cast<std::size_t>(threads) * sizeof(std::uint32_t);
}

/// The launch of an encode of `count` values: `threads` threads (a multiple of kSr8ThreadsPerBlock) per CUDA block, one
/// CUDA block per tile of threads * 16 values, at most kSr8MaxGridBlocks (grid-stride beyond).
inline Launch1d sr8_encode_launch(index_t count, index_t threads = kSr8Threads) {
  Launch1d l = grid_stride_launch(count, threads * kSr8ThreadValues, kSr8MaxGridBlocks);
  l.threads = threads;
  return l;
}

/// Values i0 .. i0 + 15 of x converted to fp32 (exactly), zeros for those at or beyond count: 16-byte loads when the
/// 16 values exist and x + i0 is 16-byte aligned.
template <class In, class ToFloat>
COMPACT_HOST_DEVICE inline void sr8_load_values(const In* x, index_t i0, index_t count,
                                                Registers<kSr8ThreadValues>& out, ToFloat to_float) {
  if (i0 + kSr8ThreadValues <= count && is_aligned16(x + i0)) {
    constexpr int kVec = kVec16Elems<In>;
    COMPACT_UNROLL
    for (int v0 = 0; v0 < kSr8ThreadValues; v0 += kVec) {
      const Vec16 w = load_vec16(x + i0 + v0);
      COMPACT_UNROLL
      for (int l = 0; l < kVec; ++l) out.v[v0 + l] = to_float(vec16_get<In>(w, l));
    }
  } else {
    COMPACT_UNROLL
    for (int k = 0; k < kSr8ThreadValues; ++k) out.v[k] = i0 + k < count ? to_float(x[i0 + k]) : 0.0f;
  }
}

/// Quantizes a thread's 16 values (flat indices i0 ..) of a block with scale s and stores those below count: q = 0
/// throughout unless s > 0 (sr8_encode_block), else sr8_quantize with the uniforms of groups i0 / 8 and i0 / 8 + 1.
COMPACT_HOST_DEVICE inline void sr8_quantize_store(const Registers<kSr8ThreadValues>& v, float s, const Sr8Params& p,
                                                   index_t i0, index_t count, std::int8_t* q) {
  std::uint32_t packed[4] = {0u, 0u, 0u, 0u};  // byte e of the 16 in memory order (little-endian)
  if (s > 0.0f) {
    COMPACT_UNROLL
    for (int g = 0; g < kSr8ThreadValues / kSr8PhiloxValues; ++g) {
      const Words4x32 w = sr8_group_words(p, static_cast<std::uint64_t>(i0) / kSr8PhiloxValues + g);
      COMPACT_UNROLL
      for (int k = 0; k < kSr8PhiloxValues; ++k) {
        const int e = kSr8PhiloxValues * g + k;
        const std::int8_t qe = sr8_quantize(v.v[e], s, sr8_uniform_of(w, k));
        packed[e / 4] |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(qe)) << (8 * (e % 4));
      }
    }
  }
  if (i0 + kSr8ThreadValues <= count && is_aligned16(q + i0)) {
    store16(q + i0, packed);
  } else {
    for (int e = 0; e < kSr8ThreadValues && i0 + e < count; ++e)
      q[i0 + e] = static_cast<std::int8_t>(static_cast<std::uint8_t>(packed[e / 4] >> (8 * (e % 4))));
  }
}

/// The encode of `count` values x (In: float, or a 16-bit type that to_float converts exactly) into q[count] and
/// scales[ceil(count / 64)], by a Block of a multiple of kSr8ThreadsPerBlock threads with sr8_encode_shared_bytes of
/// shared memory: tiles of size() * 16 values, grid-stride over the blocks. Thread t of a tile owns values
/// 16 t .. 16 t + 15 of it; threads 4 j .. 4 j + 3 hold block j of the tile and meet in shared memory for its amax.
template <class Block, class In, class ToFloat>
COMPACT_HOST_DEVICE inline void sr8_encode_tiles(Block& b, const Sr8Params& p, const In* x, index_t count,
                                                 std::int8_t* q, float* scales, ToFloat to_float) {
  std::uint32_t* partial = b.template shared<std::uint32_t>();
  auto values = b.template local<Registers<kSr8ThreadValues>>();
  const index_t tile_values = b.size() * kSr8ThreadValues;
  const index_t tiles = (count + tile_values - 1) / tile_values;
  for (index_t tile = b.index(); tile < tiles; tile += b.count()) {
    const index_t base = tile * tile_values;
    b.each([&](index_t t) {
      Registers<kSr8ThreadValues>& v = values[t];
      sr8_load_values(x, base + t * kSr8ThreadValues, count, v, to_float);
      std::uint32_t amax = 0;
      COMPACT_UNROLL
      for (int k = 0; k < kSr8ThreadValues; ++k) {
        const std::uint32_t a = sr8_abs_bits(v.v[k]);
        amax = a > amax ? a : amax;
      }
      partial[t] = amax;
    });
    b.sync();
    b.each([&](index_t t) {
      const index_t i0 = base + t * kSr8ThreadValues;
      if (i0 >= count) return;
      const index_t lead = t - t % kSr8ThreadsPerBlock;
      std::uint32_t amax = 0;
      COMPACT_UNROLL
      for (int j = 0; j < kSr8ThreadsPerBlock; ++j) {
        const std::uint32_t a = partial[lead + j];
        amax = a > amax ? a : amax;
      }
      const float s = sr8_scale(amax);
      if (t == lead) scales[i0 / kSr8Block] = s;
      sr8_quantize_store(values[t], s, p, i0, count, q);
    });
    b.sync();  // the next tile rewrites partial
  }
}

/// Values per task of the decode into Out: one 16-byte vector of Out (4 floats, 8 16-bit values), so that the threads
/// of a warp store consecutive vectors.
template <class Out>
inline constexpr int kSr8DecodeValues = kVec16Elems<Out>;

/// The launch of a decode of `count` values into Out: kSr8Threads threads per CUDA block, one task of
/// kSr8DecodeValues<Out> values per thread, at most kSr8MaxGridBlocks blocks (grid-stride beyond).
template <class Out>
inline Launch1d sr8_decode_launch(index_t count) {
  return grid_stride_launch((count + kSr8DecodeValues<Out> - 1) / kSr8DecodeValues<Out>, kSr8Threads,
                            kSr8MaxGridBlocks);
}

/// The decode of `count` values, one task of kSr8DecodeValues<Out> values per thread (grid-stride): out[i] =
/// from_float(float(q[i]) * scales[i / 64]) (sr8_decode_value, then from_float's rounding to Out). A task's values
/// share one block (its size divides 64); its output is one 16-byte store where out + i0 is aligned and the task
/// whole, element stores otherwise; q is read byte by byte (consecutive threads read consecutive bytes).
template <class Out, class FromFloat>
COMPACT_HOST_DEVICE inline void sr8_decode_thread(const Thread1d& th, const std::int8_t* q, const float* scales,
                                                  index_t count, Out* out, FromFloat from_float) {
  constexpr int kValues = kSr8DecodeValues<Out>;
  static_assert(kSr8Block % kValues == 0, "sr8 decode: a task lies inside one block");
  using Bits = decltype(raw_bits(from_float(0.0f)));
  const index_t tasks = (count + kValues - 1) / kValues;
  for (index_t task = th.first(); task < tasks; task += th.step()) {
    const index_t i0 = task * kValues;
    const float s = scales[i0 / kSr8Block];
    if (i0 + kValues <= count && is_aligned16(out + i0)) {
      Bits bits[kValues];
      COMPACT_UNROLL
      for (int e = 0; e < kValues; ++e) bits[e] = raw_bits(from_float(sr8_decode_value(q[i0 + e], s)));
      store_vec16(out + i0, pack_vec16(bits));
    } else {
      for (int e = 0; e < kValues && i0 + e < count; ++e) out[i0 + e] = from_float(sr8_decode_value(q[i0 + e], s));
    }
  }
}

}  // namespace detail
}  // namespace compact
