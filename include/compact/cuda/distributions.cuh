// SPDX-License-Identifier: MIT
#pragma once
/// CudaDistributions: the distributions of compact::Distributions that the CUDA backend implements, in list order.
///
/// The filter of the global list by supports_v<Cuda, Dist> (api/distributions.hpp), named here, after the CUDA
/// projector files that say which distributions they implement. What runs for "every distribution of the CUDA
/// backend" (the CUDA tests, bench_cuda, compact_torch's CUDA dispatch) iterates over this list, so a CPU-only
/// distribution in compact::Distributions does not reach the CUDA templates.

#include "compact/api/distributions.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/dense_projector.cuh"
#include "compact/cuda/srht_projector.cuh"

namespace compact {

/// Every distribution the CUDA backend implements (Gaussian, Rademacher, Srht, and the extra distributions that
/// specialize BackendSupports<Cuda, Dist>).
using CudaDistributions = DistributionsOf<Cuda>;

}  // namespace compact
