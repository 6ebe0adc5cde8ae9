// SPDX-License-Identifier: MIT
#pragma once
/// Caller-lent workspaces: the alignment every part of one keeps, and the check a projector makes of the one it is
/// given (present, large enough, aligned) before it uses it.

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"

namespace compact {
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
