// SPDX-License-Identifier: MIT
#pragma once
/// The 8-bit AdamW step's GPU kernel body (spec/moment8.hpp), a function of (block, thread) that the CUDA launcher
/// (cuda/moment8.cuh) runs and the host tests drive with kernels/block.hpp's loops: one CUDA block of 256 threads per
/// block of 256 values (grid-stride over the blocks), thread t owning value t. Each thread decodes its m and v,
/// steps them and writes N or the parameter; a tree reduction in shared memory gives the block's two amax; each thread
/// encodes its m and v. Every operation is the reference's (adamw8_moments, adamw8_update, adamw8_dense,
/// moment8_encode_m / _v), so the bits are the CPU's.

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/portability.hpp"
#include "compact/spec/moment8.hpp"
#include "compact/kernels/block.hpp"
#include "compact/kernels/grid.hpp"

namespace compact {
namespace detail {

/// Threads per CUDA block: one per value of a block.
inline constexpr int kMoment8Threads = static_cast<int>(kMoment8Block);
/// Most CUDA blocks of one launch; the grid strides over the rest.
inline constexpr index_t kMoment8MaxGridBlocks = index_t{1} << 16;

/// Dynamic shared memory: two amax words (m, v) per thread.
inline std::size_t moment8_shared_bytes(index_t threads) {
  return 2 * static_cast<std::size_t>(threads) * sizeof(std::uint32_t);
}

/// The launch of a step of `count` values: one CUDA block per block of 256 values, at most kMoment8MaxGridBlocks.
inline Launch1d adamw8_launch(index_t count) {
  const index_t blocks = (count + kMoment8Block - 1) / kMoment8Block;
  return Launch1d{blocks < 1 ? 1 : (blocks > kMoment8MaxGridBlocks ? kMoment8MaxGridBlocks : blocks), kMoment8Threads};
}

/// The step of `count` values by a Block of kMoment8Threads threads with moment8_shared_bytes of shared memory.
/// G, P: gradient and parameter types (to_float converts either exactly to fp32, from_float rounds fp32 to P); with
/// param null, N is written to out.
template <class Block, class G, class P, class GFloat, class PFloat, class FromFloat>
COMPACT_HOST_DEVICE inline void adamw8_blocks(Block& b, const Adamw8Consts& c, const G* grad, index_t count,
                                              std::int8_t* mq, float* ms, std::uint8_t* vq, float* vs, P* param,
                                              float* out, GFloat g_float, PFloat p_float, FromFloat from_float) {
  std::uint32_t* amax_m = b.template shared<std::uint32_t>();
  std::uint32_t* amax_v = amax_m + b.size();
  auto mv = b.template local<Moments>();
  const index_t blocks = (count + kMoment8Block - 1) / kMoment8Block;
  for (index_t blk = b.index(); blk < blocks; blk += b.count()) {
    const index_t base = blk * kMoment8Block;
    b.each([&](index_t t) {
      const index_t i = base + t;
      Moments& x = mv[t];
      x = Moments{0.0f, 0.0f};
      if (i < count) {
        x = adamw8_moments(c, moment8_decode_m(mq[i], ms[blk]), moment8_decode_v(vq[i], vs[blk]), g_float(grad[i]));
        if (param != nullptr) {
          const float p_decayed = p_float(from_float(rn::mul_unfused(p_float(param[i]), c.decay)));
          param[i] = from_float(adamw8_dense(c, p_decayed, x.m, x.v));
        } else {
          out[i] = adamw8_update(c, x.m, x.v);
        }
      }
      amax_m[t] = moment8_abs_bits(x.m);
      amax_v[t] = moment8_abs_bits(x.v);
    });
    b.sync();
    for (index_t half = b.size() / 2; half >= 1; half /= 2) {
      b.each([&](index_t t) {
        if (t < half) {
          amax_m[t] = amax_m[t + half] > amax_m[t] ? amax_m[t + half] : amax_m[t];
          amax_v[t] = amax_v[t + half] > amax_v[t] ? amax_v[t + half] : amax_v[t];
        }
      });
      b.sync();
    }
    b.each([&](index_t t) {
      const index_t i = base + t;
      const float sm = moment8_scale(amax_m[0]), sv = moment8_scale(amax_v[0]);
      if (i < count) {
        mq[i] = moment8_encode_m(mv[t].m, sm);
        vq[i] = moment8_encode_v(mv[t].v, sv);
      }
      if (t == 0) {
        ms[blk] = sm;
        vs[blk] = sv;
      }
    });
    b.sync();  // the next block rewrites the amax words (and thread 0 read the scales it overwrote above)
  }
}

}  // namespace detail
}  // namespace compact
