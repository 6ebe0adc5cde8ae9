// SPDX-License-Identifier: MIT
#pragma once
/// The CompressedAdamW and CompressedSgd class templates: one Backend per partial specialization, like Projector.

#include "compact/api/projector_fwd.hpp"  // detail::NoImplementation
#include "compact/spec/tags.hpp"

namespace compact {

/// AdamW with m x r moments in the compressed space, W updated through P (see AdamWOptions for the math).
///
/// Specializations: CompressedAdamW<Cpu, Gaussian|Rademacher|Srht, float|double> (compact/cpu/optimizer.hpp) and
/// CompressedAdamW<Cuda, Gaussian|Rademacher|Srht, float|__half|__nv_bfloat16> (compact/cuda/optimizer.cuh, under
/// nvcc), where Scalar is W's type; the CUDA moments are fp32 whatever W's type. Both read and write the same
/// checkpoint record (api/optimizer_record.hpp).
template <class Backend, class Dist, class Scalar = float>
class CompressedAdamW : detail::NoImplementation<Backend, Dist, Scalar> {};

/// SGD with momentum, the m x r momentum buffer in the compressed space (see SgdOptions). Specializations as for
/// CompressedAdamW.
template <class Backend, class Dist, class Scalar = float>
class CompressedSgd : detail::NoImplementation<Backend, Dist, Scalar> {};

}  // namespace compact
