// SPDX-License-Identifier: MIT
#pragma once
/// Caller-lent workspaces (Workspace, on every backend): the alignment every part of a CUDA one keeps, and the check
/// a CUDA projector makes of the one it is given (present, large enough, aligned) before it uses it.

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"

namespace compact {

/// Memory a caller lends to compact: `bytes` bytes at `data`, non-owning, contents overwritten. Every projector has
/// the static query workspace_bytes(n, r), which needs no device, for its size.
/// - CUDA: device memory lent to a projector's constructor for its lifetime, kWorkspaceAlign (256)-byte aligned (as
///   cudaMalloc gives; checked), used by nobody else while the projector's work is in flight.
/// - CPU: host memory lent to one sketch/unsketch_grad call (the overloads that take one; the call then allocates
///   nothing), aligned for the scalar type (64 bytes is best); CpuScratch is its older name.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

namespace detail {

/// Alignment of a workspace and of every part inside it: what cudaMalloc returns, and what cuBLAS asks of its own
/// workspace.
inline constexpr std::size_t kWorkspaceAlign = 256;

/// `bytes` rounded up to a multiple of kWorkspaceAlign.
inline constexpr std::size_t align_workspace(std::size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

/// Checks the workspace argument `name` of `fn`: non-null, at least `needed` bytes, kWorkspaceAlign-aligned. The
/// messages name the argument, the values and what the size is computed from (`needed_from`).
inline void check_workspace(const char* fn, const char* name, const void* data, std::size_t bytes, std::size_t needed,
                            const char* needed_from) {
  COMPACT_REQUIRE(data != nullptr,
                  fn << ": argument " << name << " is null (needs " << needed << " bytes, " << needed_from << ")");
  COMPACT_REQUIRE(bytes >= needed, fn << ": argument " << name << " has " << bytes << " bytes, needs at least "
                                      << needed << " (" << needed_from << ")");
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(data);
  COMPACT_REQUIRE(address % kWorkspaceAlign == 0,
                  fn << ": argument " << name << " at address 0x" << std::hex << address << std::dec << " is not "
                     << kWorkspaceAlign << "-byte aligned (address % " << kWorkspaceAlign << " = "
                     << address % kWorkspaceAlign << "); cudaMalloc returns aligned memory");
}

}  // namespace detail
}  // namespace compact
