// SPDX-License-Identifier: MIT
#pragma once
/// The dense panel kernel: writes a rectangle of a Gaussian or Rademacher P on the device, entry for entry the
/// values core/entries.hpp gives, with 16-byte stores. Its body is core/dense_panel.hpp's dense_panel_thread.

#include <cstdint>
#include <utility>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/dense_panel.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/vec16.hpp"
#include "compact/cuda/check.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

/// The raw-bits type the panel kernel stores for Scalar (std::uint16_t or std::uint32_t).
template <class Scalar>
using PanelBits = decltype(raw_bits(std::declval<Scalar>()));

/// P over geometry g into out (as raw bits): dense_panel_thread for this thread of the 2-D grid.
template <class Dist, class Scalar>
__global__ void __launch_bounds__(kPanelThreads) dense_panel_kernel(EntryParams params, PanelGeometry g, Scalar* out) {
  const PanelLaunch grid{gridDim.x, gridDim.y, blockDim.x, blockDim.y};
  const PanelStore<PanelBits<Scalar>> store{reinterpret_cast<PanelBits<Scalar>*>(out)};
  dense_panel_thread<Dist>(grid, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y, params, g, ToBits<Scalar>{}, store);
}

/// Enqueues dense_panel_kernel on `stream`: P[rect] of the state behind `params` into out (leading dimension
/// ld >= rect width; any address and ld: rows that are not 16-byte aligned get scalar stores at their head and
/// tail). Rectangles of kPanelMaxExtent rows or columns or more are cut into several launches. Asynchronous;
/// throws compact::error if a launch is refused.
template <class Dist, class Scalar>
void launch_dense_panel(const EntryParams& params, const PanelRect& rect, Scalar* out, index_t ld,
                        cudaStream_t stream) {
  constexpr index_t kVec = kVec16Elems<Scalar>;
  const index_t phase = static_cast<index_t>(reinterpret_cast<std::uintptr_t>(out) / sizeof(Scalar)) % kVec;
  for_each_panel_part(rect, ld, phase, kVec, [&](const PanelRect&, index_t offset, const PanelGeometry& g) {
    const PanelLaunch l = panel_launch(g);
    const dim3 blocks(l.blocks_x, l.blocks_y), threads(l.threads_x, l.threads_y);
    Scalar* at = out + offset;
    launch_kernel("dense_panel_kernel",
                  [&] { dense_panel_kernel<Dist, Scalar><<<blocks, threads, 0, stream>>>(params, g, at); });
  });
}

}  // namespace detail
}  // namespace compact
