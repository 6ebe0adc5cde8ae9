// SPDX-License-Identifier: MIT
#pragma once
/// CpuDistributions: the distributions of compact::Distributions that the CPU backend implements, in list order.
///
/// The filter of the global list by supports_v<Cpu, Dist> (api/distributions.hpp), named here, after the CPU
/// projector files that say which distributions they implement. What runs for "every distribution of the CPU
/// backend" (the CPU tests, the fuzzers, the golden printer, compact_torch's CPU dispatch) iterates over this list.

#include "compact/api/distributions.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/dense_projector.hpp"
#include "compact/cpu/srht_projector.hpp"

namespace compact {

/// Every distribution the CPU backend implements (Gaussian, Rademacher, Srht, and the extra distributions that
/// specialize BackendSupports<Cpu, Dist>).
using CpuDistributions = DistributionsOf<Cpu>;

}  // namespace compact
