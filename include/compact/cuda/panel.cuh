// SPDX-License-Identifier: MIT
#pragma once
/// The dense panel kernel: writes a rectangle of a Gaussian or Rademacher P on the device, entry for entry the
/// values core/entries.hpp gives. Its body is core/dense_panel.hpp's dense_panel_thread.

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/dense_panel.hpp"
#include "compact/core/entries.hpp"
#include "compact/cuda/check.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

/// P[rect] into out (row-major, leading dimension ld): dense_panel_thread for this thread of the 2-D grid.
template <class Dist, class Scalar>
__global__ void dense_panel_kernel(EntryParams params, PanelRect rect, Scalar* out, index_t ld) {
  const PanelLaunch grid{gridDim.x, gridDim.y, blockDim.x, blockDim.y};
  dense_panel_thread<Dist>(grid, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, params, rect, out, ld,
                           FromFloat<Scalar>{});
}

/// Enqueues dense_panel_kernel on `stream`: P[rect] of the state behind `params` into out (leading dimension ld).
/// Asynchronous; throws compact::error if the launch is refused.
template <class Dist, class Scalar>
void launch_dense_panel(const EntryParams& params, const PanelRect& rect, Scalar* out, index_t ld,
                        cudaStream_t stream) {
  if (panel_task_count(rect, kPanelChunkCols<Dist>) == 0) return;
  const PanelLaunch l = panel_launch(rect, kPanelChunkCols<Dist>);
  const dim3 grid(static_cast<unsigned>(l.blocks_x), static_cast<unsigned>(l.blocks_y));
  const dim3 block(static_cast<unsigned>(l.threads_x), static_cast<unsigned>(l.threads_y));
  launch_kernel("dense_panel_kernel",
                [&] { dense_panel_kernel<Dist, Scalar><<<grid, block, 0, stream>>>(params, rect, out, ld); });
}

}  // namespace detail
}  // namespace compact
