// SPDX-License-Identifier: MIT
#pragma once
/// Grid-stride loops and 1-D launch shapes: the thread-index math every CUDA kernel of compact is written with.
///
/// A kernel body is a COMPACT_HOST_DEVICE function of its thread's position (Thread1d, or a Block for kernels whose
/// threads cooperate, see kernels/block.hpp); the __global__ wrapper in compact/cuda/ only reads blockIdx/threadIdx,
/// and the host tests in tests/kernels call the same body for every (block, thread) of a launch.

#include "compact/config.hpp"

namespace compact {
namespace detail {

/// First task of thread `thread` in block `block` (blockIdx.x, threadIdx.x) of a 1-D launch of `block_dim` threads
/// per block.
COMPACT_HOST_DEVICE inline index_t grid_stride_first(index_t block, index_t thread, index_t block_dim) {
  return block * block_dim + thread;
}

/// Distance between consecutive tasks of one thread: every thread of the grid.
COMPACT_HOST_DEVICE inline index_t grid_stride_step(index_t grid_dim, index_t block_dim) {
  return grid_dim * block_dim;
}

/// A 1-D launch configuration: `blocks` blocks of `threads` threads.
struct Launch1d {
  index_t blocks;
  index_t threads;
};

/// Blocks of `threads` threads covering `tasks` tasks, capped at `max_blocks` (the grid-stride loop does the rest).
inline Launch1d grid_stride_launch(index_t tasks, index_t threads = 256, index_t max_blocks = index_t{1} << 16) {
  index_t blocks = (tasks + threads - 1) / threads;
  if (blocks > max_blocks) blocks = max_blocks;
  if (blocks < 1) blocks = 1;
  return Launch1d{blocks, threads};
}

/// One thread of a 1-D grid-stride launch: its tasks are first(), first() + step(), ... below the task count.
struct Thread1d {
  index_t block;    ///< blockIdx.x
  index_t thread;   ///< threadIdx.x
  index_t blocks;   ///< gridDim.x
  index_t threads;  ///< blockDim.x

  COMPACT_HOST_DEVICE index_t first() const { return grid_stride_first(block, thread, threads); }
  COMPACT_HOST_DEVICE index_t step() const { return grid_stride_step(blocks, threads); }
};

}  // namespace detail
}  // namespace compact
