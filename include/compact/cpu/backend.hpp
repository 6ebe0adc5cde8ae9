// SPDX-License-Identifier: MIT
#pragma once
/// The CPU backend tag (Cpu) and CpuScratch, the older name of the Workspace a CPU call borrows.

#include "compact/api/workspace.hpp"

namespace compact {

/// The Eigen backend: host memory, compact's task pool on OpenMP's thread count where OpenMP is enabled. Stateless:
/// the CPU projectors take no backend argument, compressed_grad takes Cpu{} first (a view does not say whose memory
/// it points to).
struct Cpu {};

/// Host scratch lent to one CPU sketch/unsketch_grad call: the Workspace of every backend (api/workspace.hpp), under
/// the name the CPU API had before the two backends' APIs were unified. Kept because callers (cpu/optimizer.hpp,
/// user code) spell it; new code writes Workspace.
using CpuScratch = Workspace;

}  // namespace compact
