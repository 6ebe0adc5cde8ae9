// SPDX-License-Identifier: MIT
#pragma once
/// What a kernel launch may ask of a device, checked on the host: grid and block dimensions, threads against the
/// kernel's launch bounds (which bound its registers), dynamic shared memory against the opt-in maximum. And the one
/// rule for a kernel's dynamic shared-memory limit: raise it, never lower it.

#include <cstddef>
#include <mutex>
#include <sstream>
#include <string>

#include "compact/config.hpp"
#include "compact/core/grid.hpp"

namespace compact {
namespace detail {

/// One kernel launch as the CUDA backend issues it: grid and block dimensions, dynamic shared memory, and the
/// kernel's __launch_bounds__ (the most threads per block it is compiled for: ptxas then keeps its registers within
/// what that many threads may have, so a block of at most that many threads always fits the register file, and a
/// launch of more threads is refused with cudaErrorInvalidValue/cudaErrorLaunchOutOfResources).
struct LaunchShape {
  const char* kernel;
  index_t grid_x, grid_y, grid_z;
  index_t block_x, block_y, block_z;
  std::size_t shared_bytes;
  index_t launch_bound;
};

/// A 1-D launch (grid_stride_launch) of `kernel` as a LaunchShape.
inline LaunchShape launch_shape_1d(const char* kernel, const Launch1d& l, std::size_t shared_bytes,
                                   index_t launch_bound) {
  return LaunchShape{kernel, l.blocks, 1, 1, l.threads, 1, 1, shared_bytes, launch_bound};
}

/// The per-launch limits of a compute capability (CUDA programming guide, "Technical Specifications per Compute
/// Capability"): grid and block dimensions, threads per block, the opt-in dynamic shared memory per block
/// (cudaDevAttrMaxSharedMemoryPerBlockOptin) and the 32-bit registers of a block.
struct DeviceLimits {
  const char* name;
  index_t max_grid_x, max_grid_y, max_grid_z;
  index_t max_block_x, max_block_y, max_block_z;
  index_t max_threads_per_block;
  std::size_t max_shared_optin;
  index_t registers_per_block;
  index_t max_registers_per_thread;
};

/// A100 (sm_80): 163 KiB of shared memory per block with opt-in.
inline constexpr DeviceLimits kSm80Limits{
    "sm_80", (index_t{1} << 31) - 1, 65535, 65535, 1024, 1024, 64, 1024, 163 * 1024, 65536, 255};
/// H100/H200 (sm_90): 227 KiB of shared memory per block with opt-in.
inline constexpr DeviceLimits kSm90Limits{
    "sm_90", (index_t{1} << 31) - 1, 65535, 65535, 1024, 1024, 64, 1024, 227 * 1024, 65536, 255};

/// Registers per thread that ptxas may give a kernel compiled with __launch_bounds__(bound) (and no minimum of blocks
/// per SM): the register file of a block split over `bound` threads, in the allocation unit of 8 registers per thread
/// (256 per warp), at most max_registers_per_thread.
inline index_t register_budget(const DeviceLimits& d, index_t bound) {
  const index_t warps = (bound + 31) / 32;
  const index_t per_thread = d.registers_per_block / (warps * 32) / 8 * 8;
  return per_thread < d.max_registers_per_thread ? per_thread : d.max_registers_per_thread;
}

/// "" when launch `l` fits device `d`, else what it exceeds, with the values.
inline std::string launch_violation(const LaunchShape& l, const DeviceLimits& d) {
  std::ostringstream o;
  const auto over = [&](const char* what, index_t v, index_t lo, index_t hi) {
    if (v < lo || v > hi)
      o << l.kernel << ": " << what << " = " << v << " outside [" << lo << ", " << hi << "] on " << d.name << "; ";
  };
  over("gridDim.x", l.grid_x, 1, d.max_grid_x);
  over("gridDim.y", l.grid_y, 1, d.max_grid_y);
  over("gridDim.z", l.grid_z, 1, d.max_grid_z);
  over("blockDim.x", l.block_x, 1, d.max_block_x);
  over("blockDim.y", l.block_y, 1, d.max_block_y);
  over("blockDim.z", l.block_z, 1, d.max_block_z);
  const index_t threads = l.block_x * l.block_y * l.block_z;
  over("threads per block", threads, 1, d.max_threads_per_block);
  over("threads per block (the kernel's __launch_bounds__)", threads, 1, l.launch_bound);
  over("__launch_bounds__", l.launch_bound, 1, d.max_threads_per_block);
  // With at most launch_bound threads, ptxas keeps the registers within the block's register file (the budget is
  // computed for the bound; the ptxas -v numbers in docs/cuda.md are below it).
  const index_t warps = (threads + 31) / 32;
  over("registers of the block at the kernel's register budget", warps * 32 * register_budget(d, l.launch_bound), 0,
       d.registers_per_block);
  if (l.shared_bytes > d.max_shared_optin) {
    o << l.kernel << ": dynamic shared memory " << l.shared_bytes << " bytes > " << d.max_shared_optin << " on "
      << d.name << "; ";
  }
  return o.str();
}

/// The process-wide lock under which kernels' dynamic shared-memory limits are read and raised.
inline std::mutex& shared_memory_limit_mutex() {
  static std::mutex m;
  return m;
}

/// Makes sure a kernel may use `bytes` of dynamic shared memory: under one process-wide lock, reads the limit in force
/// (get(), e.g. cudaFuncGetAttributes' maxDynamicSharedSizeBytes on the current device) and calls set(bytes) only
/// when `bytes` exceeds it. Never lowers a limit: cudaFuncAttributeMaxDynamicSharedMemorySize keeps the last value
/// set, and several plans share one kernel instantiation (SRHT rows of 2^14 and 2^15 both run the 64-register chunk
/// kernel, needing 66,560 and 133,120 bytes), so a projector built later with a smaller need must not take away what
/// an earlier one launches with. The lock makes the read and the raise one step for concurrent constructors. Returns
/// the limit in force afterwards.
template <class Get, class Set>
std::size_t raise_shared_memory_limit(std::size_t bytes, Get&& get, Set&& set) {
  const std::lock_guard<std::mutex> lock(shared_memory_limit_mutex());
  const std::size_t current = get();
  if (bytes <= current) return current;
  set(bytes);
  return bytes;
}

}  // namespace detail
}  // namespace compact
