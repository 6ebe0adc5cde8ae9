// SPDX-License-Identifier: MIT
#pragma once
/// What the DNC study takes from the examples' one libtorch integration (examples/libtorch): the CompAct layer and
/// the counting CPU allocator, with the DNC's names for the allocation sites of a step.
///
/// A CompAct controller weight is compact_libtorch::CompressedLinear with a bias, the Gaussian distribution (the
/// paper's) and CompressedAdamW; it counts the z it saves under ByteSite::kLinearInput (make_compact_linear).

#include "../libtorch/byte_counter.hpp"
#include "../libtorch/compact_linear.hpp"

#include <torch/torch.h>

#include <compact/compact.hpp>

#include <cstdint>

namespace dnc {

using compact::index_t;

/// Where in a DNC step an allocation was made (dnc_model.hpp sets them); a site of the counting allocator.
enum class ByteSite : int {
  kOther = 0,    ///< outside any step: initial state, targets, the loss
  kLinearInput,  ///< what a controller layer saves of its input: x (full rank) or z = x P (CompAct)
  kController,   ///< the LSTM cell and the layers' outputs
  kMemory,       ///< the memory step: interface squashing, addressing, allocation, write, link, reads
  kCount
};
static_assert(static_cast<int>(ByteSite::kCount) <= compact_libtorch::kMaxSites, "the allocator keeps every site");

using compact_libtorch::install_byte_counter;
using compact_libtorch::live_bytes;
using compact_libtorch::peak_bytes;
using compact_libtorch::reset_peak_bytes;
using compact_libtorch::SiteScope;

/// A CompAct controller layer (y = x Wᵀ + b, W trained in the compressed space by CompressedAdamW).
using CompactLinear = compact_libtorch::CompressedLinear;

/// The DNC's CompAct layer: `weight` (out x in, copied) with a zero bias, rank r, projection `stream` of `schedule`,
/// Gaussian P; its saved z counts under ByteSite::kLinearInput.
inline CompactLinear make_compact_linear(const torch::Tensor& weight, index_t rank, compact::Schedule schedule,
                                         std::uint64_t stream, const compact::AdamWOptions& options) {
  compact_libtorch::CompressedConfig config;
  config.dist = "gaussian";
  config.optimizer = compact_libtorch::OptimizerKind::kAdamW;
  config.schedule = schedule;
  config.adamw = options;
  config.sketch_site = static_cast<int>(ByteSite::kLinearInput);
  return CompactLinear(weight, /*with_bias=*/true, rank, stream, config);
}

}  // namespace dnc
