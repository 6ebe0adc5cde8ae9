// SPDX-License-Identifier: MIT
#pragma once
/// The device workspace of the GPU SRHT projector: a pure function of (n, r), so its size needs no device.
///
/// Persistent parts (read by every sketch and unsketch_grad): the sample S (r u32), the packed signs of d
/// (n'/32 u32) and the chunk boundaries of S (chunk_first, 2^kSrhtMaxHighBits + 1 u32). Then one transient region
/// used first by the constructor's selection of S (SelectState, the words' masks and offsets: n'/16 bytes + 1 KiB)
/// and afterwards by the two-pass FWHT as an fp32 scratch of whole padded rows (4 n' bytes each). Every part starts
/// at a multiple of kWorkspaceAlign.

#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/spec/srht.hpp"
#include "compact/api/workspace.hpp"
#include "compact/kernels/fwht_block.hpp"
#include "compact/kernels/srht_row_kernels.hpp"
#include "compact/kernels/srht_select.hpp"

namespace compact {
namespace detail {

/// fp32 scratch the recommended workspace holds for two-pass rows: 2^23 floats (32 MiB), as whole rows of n'.
inline constexpr index_t kSrhtScratchFloats = index_t{1} << 23;

/// Byte offsets of the SRHT workspace parts for (n, r).
struct SrhtLayout {
  index_t np;                                ///< n' = next_pow2(n)
  std::size_t sample, signs, chunk_first;    ///< persistent
  std::size_t transient;                     ///< start of the transient region
  std::size_t select_state, masks, offsets;  ///< the constructor's selection (inside the transient region)
  std::size_t select_end;                    ///< end of the selection's parts
};

/// The layout for (n, r), 1 <= r <= n, next_pow2(n) <= 2^kSrhtMaxPaddedLog2.
inline SrhtLayout srht_layout(index_t n, index_t r) {
  SrhtLayout l{};
  l.np = next_pow2(n);
  const std::size_t words = static_cast<std::size_t>((l.np + 31) / 32) * sizeof(std::uint32_t);
  std::size_t at = 0;
  const auto take = [&at](std::size_t bytes) {
    const std::size_t here = at;
    at += align_workspace(bytes);
    return here;
  };
  l.sample = take(static_cast<std::size_t>(r) * sizeof(std::uint32_t));
  l.signs = take(words);
  l.chunk_first = take(((std::size_t{1} << kSrhtMaxHighBits) + 1) * sizeof(std::uint32_t));
  l.transient = at;
  l.select_state = take(sizeof(SelectState));
  l.masks = take(words);
  l.offsets = take(words);
  l.select_end = at;
  return l;
}

/// Typed pointers to the parts of a workspace at `base` laid out by l (the scratch starts the transient region).
struct SrhtParts {
  std::uint32_t* sample;
  std::uint32_t* sign_words;
  std::uint32_t* chunk_first;
  SelectState* select;
  std::uint32_t* masks;
  std::uint32_t* offsets;
  float* scratch;
};

inline SrhtParts srht_parts(const SrhtLayout& l, void* base) {
  unsigned char* b = static_cast<unsigned char*>(base);
  return SrhtParts{reinterpret_cast<std::uint32_t*>(b + l.sample),
                   reinterpret_cast<std::uint32_t*>(b + l.signs),
                   reinterpret_cast<std::uint32_t*>(b + l.chunk_first),
                   reinterpret_cast<SelectState*>(b + l.select_state),
                   reinterpret_cast<std::uint32_t*>(b + l.masks),
                   reinterpret_cast<std::uint32_t*>(b + l.offsets),
                   reinterpret_cast<float*>(b + l.transient)};
}

/// Workspace bytes of layout l with `scratch_rows` rows of fp32 scratch (the scratch overlaps the selection).
inline std::size_t srht_workspace_bytes(const SrhtLayout& l, index_t scratch_rows) {
  const std::size_t scratch =
      l.transient + align_workspace(static_cast<std::size_t>(scratch_rows) * static_cast<std::size_t>(l.np) * 4);
  return scratch > l.select_end ? scratch : l.select_end;
}

/// Scratch rows a workspace of `bytes` holds under layout l.
inline index_t srht_scratch_rows(const SrhtLayout& l, std::size_t bytes) {
  return bytes > l.transient ? static_cast<index_t>((bytes - l.transient) / (static_cast<std::size_t>(l.np) * 4)) : 0;
}

/// Scratch rows the smallest workspace holds: one row when some supported GPU needs two passes for n' (n' above
/// 2^kSrhtPortableChunkBits), else none.
inline index_t srht_min_scratch_rows(index_t np) { return np > (index_t{1} << kSrhtPortableChunkBits) ? 1 : 0; }

/// Scratch rows the recommended workspace holds: kSrhtScratchFloats worth when every GPU needs two passes
/// (n' above 2^kFwhtSharedMaxLog2), else the minimum.
inline index_t srht_recommended_scratch_rows(index_t np) {
  if (np <= (index_t{1} << kFwhtSharedMaxLog2)) return srht_min_scratch_rows(np);
  return kSrhtScratchFloats / np > 1 ? kSrhtScratchFloats / np : 1;
}

}  // namespace detail
}  // namespace compact
