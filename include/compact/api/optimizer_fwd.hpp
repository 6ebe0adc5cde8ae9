// SPDX-License-Identifier: MIT
#pragma once
/// The CompressedAdamW and CompressedSgd class templates: one Backend per partial specialization, like Projector.

#include "compact/spec/tags.hpp"

namespace compact {

/// AdamW with m x r moments in the compressed space, W updated through P (see AdamWOptions for the math).
///
/// Specializations: CompressedAdamW<Cpu, Gaussian|Rademacher|Srht, float|double> (compact/cpu/optimizer.hpp) and
/// CompressedAdamW<Cuda, Gaussian|Rademacher|Srht, float|__half|__nv_bfloat16> (compact/cuda/optimizer.cuh, under
/// nvcc), where Scalar is W's type; the CUDA moments are fp32 whatever W's type. Both read and write the same
/// checkpoint record (api/optimizer_record.hpp).
template <class Backend, class Dist, class Scalar = float>
class CompressedAdamW {
  static_assert(detail::is_distribution<Dist>,
                "compact::CompressedAdamW<Backend, Dist, Scalar>: Dist is not a distribution (no DistributionTraits "
                "specialization, see compact/spec/tags.hpp)");
  static_assert(!detail::is_distribution<Dist>,  // only one of the two messages fires
                "compact::CompressedAdamW<Backend, Dist, Scalar>: this combination has no implementation. Supported: "
                "Backend = compact::Cpu with Scalar = float|double (include <compact/compact.hpp>); Backend = "
                "compact::Cuda with Scalar = float|__half|__nv_bfloat16 (compile with nvcc).");
};

/// SGD with momentum, the m x r momentum buffer in the compressed space (see SgdOptions). Specializations as for
/// CompressedAdamW.
template <class Backend, class Dist, class Scalar = float>
class CompressedSgd {
  static_assert(detail::is_distribution<Dist>,
                "compact::CompressedSgd<Backend, Dist, Scalar>: Dist is not a distribution (no DistributionTraits "
                "specialization, see compact/spec/tags.hpp)");
  static_assert(!detail::is_distribution<Dist>,  // only one of the two messages fires
                "compact::CompressedSgd<Backend, Dist, Scalar>: this combination has no implementation. Supported: "
                "Backend = compact::Cpu with Scalar = float|double (include <compact/compact.hpp>); Backend = "
                "compact::Cuda with Scalar = float|__half|__nv_bfloat16 (compile with nvcc).");
};

}  // namespace compact
