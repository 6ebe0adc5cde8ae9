// SPDX-License-Identifier: MIT
#pragma once
/// The only include a user needs: every public header of compact, in dependency order.
///
/// The CPU (Eigen) backend is always included; in a translation unit compiled by nvcc the CUDA backend (and the kernel
/// bodies it launches) is too, so one .cu file can use both (e.g. check a GPU result against the CPU's bit for bit).
/// A CPU translation unit gets only what the CPU backend uses: no GPU kernel bodies.

// Configuration, and the one header where host and device code differ.
#include "compact/config.hpp"
#include "compact/portability.hpp"

// The entry specification: every entry of P as a pure function of (state, n, r, i, j), bit for bit everywhere; and
// the sr8 codec's, every bit a pure function of (state, element index, the element's block).
#include "compact/spec/philox.hpp"
#include "compact/spec/fp32_math.hpp"
#include "compact/spec/state.hpp"
#include "compact/spec/tags.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/srht.hpp"
#include "compact/spec/sr8.hpp"
#include "compact/spec/moment8.hpp"

// The backend-neutral API: sizes, views, workspaces, the distribution list, the projector and optimizer templates
// and what every backend's projectors and optimizers share.
#include "compact/api/checked_size.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/api/distributions.hpp"
#include "compact/api/projector_fwd.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/optimizer_fwd.hpp"
#include "compact/api/optimizer_options.hpp"
#include "compact/api/optimizer_record.hpp"
#include "compact/api/optimizer_core.hpp"
#include "compact/api/optimizer_bases.hpp"
#include "compact/api/sr8_checks.hpp"
#include "compact/api/moment8_checks.hpp"

// Kernel bodies: host/device functions of (block, thread). The CPU backend uses three (the panel split, the element
// conversions, the optimizers' per-element update); the rest are the CUDA backend's, below.
#include "compact/kernels/grid.hpp"
#include "compact/kernels/convert.hpp"
#include "compact/kernels/panel_schedule.hpp"
#include "compact/kernels/optimizer_step.hpp"

// CPU backend (Eigen), in every translation unit; its SIMD kernels are one source compiled per instruction set.
#include "compact/cpu/backend.hpp"
#include "compact/cpu/isa.hpp"
#include "compact/cpu/task_pool.hpp"
#include "compact/cpu/parallel.hpp"
#include "compact/cpu/scratch.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/projector.hpp"
#include "compact/cpu/gemm_engine.hpp"
#if defined(COMPACT_USE_BLAS)
// Registers the BLAS GEMM engine (set by compact::blas): adds definitions only, changes no function (see blas.hpp).
#include "compact/cpu/blas.hpp"
#endif
#include "compact/cpu/fwht_portable.hpp"
#include "compact/cpu/isa_avx2.hpp"
#include "compact/cpu/isa_avx512.hpp"
#include "compact/cpu/generate.hpp"
#include "compact/cpu/dense_projector.hpp"
#include "compact/cpu/fwht.hpp"
#include "compact/cpu/srht_row_transform.hpp"
#include "compact/cpu/srht_projector.hpp"
#include "compact/cpu/distributions.hpp"
#include "compact/cpu/compressed_grad.hpp"
#include "compact/cpu/optimizer.hpp"
#include "compact/cpu/sr8.hpp"
#include "compact/cpu/moment8.hpp"

#if defined(__CUDACC__)
// The kernel bodies only the CUDA backend launches (the CPU tests that drive them include them themselves).
#include "compact/kernels/block.hpp"
#include "compact/kernels/launch_limits.hpp"
#include "compact/kernels/vec16.hpp"
#include "compact/kernels/dense_panel.hpp"
#include "compact/kernels/gemm_plan.hpp"
#include "compact/kernels/fwht_block.hpp"
#include "compact/kernels/srht_row_kernels.hpp"
#include "compact/kernels/srht_select.hpp"
#include "compact/kernels/srht_workspace.hpp"
#include "compact/kernels/sr8.hpp"
#include "compact/kernels/moment8.hpp"

// CUDA backend (nvcc only): launchers, cuBLAS glue, projectors, Thrust conveniences.
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
#include "compact/cuda/distributions.cuh"
#include "compact/cuda/compressed_grad.cuh"
#include "compact/cuda/optimizer.cuh"
#include "compact/cuda/sr8.cuh"
#include "compact/cuda/moment8.cuh"
#include "compact/cuda/thrust.cuh"
#endif
