// SPDX-License-Identifier: MIT
#pragma once
/// The CPU backend tag (Cpu), the thread count its calls may use (cpu_max_threads) and CpuScratch, the older name
/// of the Workspace a CPU call borrows.

#include "compact/api/workspace.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace compact {

/// The Eigen backend: host memory, compact's task pool on OpenMP's thread count where OpenMP is enabled. Stateless:
/// the CPU projectors take no backend argument, compressed_grad takes Cpu{} first (a view does not say whose memory
/// it points to).
struct Cpu {};

/// The most threads one CPU call may run on: OpenMP's omp_get_max_threads() (so OMP_NUM_THREADS,
/// omp_set_num_threads and torch::set_num_threads apply), 1 without OpenMP. A call's per-thread scratch has at most
/// this many slots (a projector may cap its team lower); an integration that reports or lends per-thread memory
/// multiplies by it.
inline int cpu_max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// Host scratch lent to one CPU sketch/unsketch_grad call: the Workspace of every backend (api/workspace.hpp), under
/// the name the CPU API had before the two backends' APIs were unified. Kept because callers (cpu/optimizer.hpp,
/// user code) spell it; new code writes Workspace.
using CpuScratch = Workspace;

}  // namespace compact
