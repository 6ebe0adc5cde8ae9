// SPDX-License-Identifier: MIT
#pragma once
/// The only include a user needs: every public header of compact, in dependency order.
///
/// The CPU (Eigen) backend is always included; in a translation unit compiled by nvcc the CUDA backend is too, so one
/// .cu file can use both (e.g. check a GPU result against the CPU's bit for bit).

// Configuration and host/device-neutral core.
#include "compact/config.hpp"
#include "compact/core/philox.hpp"
#include "compact/core/fp32_math.hpp"
#include "compact/core/state.hpp"
#include "compact/core/tags.hpp"
#include "compact/core/view.hpp"
#include "compact/core/workspace.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/srht.hpp"
#include "compact/core/distributions.hpp"
#include "compact/core/convert.hpp"
#include "compact/core/grid.hpp"
#include "compact/core/block.hpp"
#include "compact/core/panel_schedule.hpp"
#include "compact/core/vec16.hpp"
#include "compact/core/dense_panel.hpp"
#include "compact/core/gemm_plan.hpp"
#include "compact/core/fwht_block.hpp"
#include "compact/core/srht_rows.hpp"
#include "compact/core/srht_select.hpp"
#include "compact/core/srht_workspace.hpp"
#include "compact/core/projector_fwd.hpp"
#include "compact/core/projector_core.hpp"
#include "compact/core/optimizer_fwd.hpp"
#include "compact/core/optimizer_record.hpp"
#include "compact/core/optimizer_math.hpp"
#include "compact/core/memory.hpp"

// CPU backend (Eigen), in every translation unit.
#include "compact/cpu/backend.hpp"
#include "compact/cpu/isa.hpp"
#include "compact/cpu/task_pool.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/projector.hpp"
#include "compact/cpu/gemm_engine.hpp"
#if defined(COMPACT_USE_BLAS)
// Registers the BLAS GEMM engine (set by compact::blas): adds definitions only, changes no function (see blas.hpp).
#include "compact/cpu/blas.hpp"
#endif
#include "compact/cpu/kernels_avx2.hpp"
#include "compact/cpu/kernels_avx512.hpp"
#include "compact/cpu/generate.hpp"
#include "compact/cpu/dense_projector.hpp"
#include "compact/cpu/fwht.hpp"
#include "compact/cpu/srht_rows.hpp"
#include "compact/cpu/srht_projector.hpp"
#include "compact/cpu/compressed_grad.hpp"
#include "compact/cpu/optimizer.hpp"

#if defined(__CUDACC__)
// CUDA backend (nvcc only): kernels, cuBLAS glue, projectors, Thrust conveniences.
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/device.cuh"
#include "compact/cuda/overlap.cuh"
#include "compact/cuda/scalar.cuh"
#include "compact/cuda/block.cuh"
#include "compact/cuda/panel.cuh"
#include "compact/cuda/gemm.cuh"
#include "compact/cuda/projector_base.cuh"
#include "compact/cuda/dense_projector.cuh"
#include "compact/cuda/materialized_p.cuh"
#include "compact/cuda/srht_kernels.cuh"
#include "compact/cuda/srht_projector.cuh"
#include "compact/cuda/compressed_grad.cuh"
#include "compact/cuda/optimizer.cuh"
#include "compact/cuda/thrust.cuh"
#endif
