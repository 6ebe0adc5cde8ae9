// SPDX-License-Identifier: MIT
#pragma once
/// The FWHT row transform of one thread block: registers -> warp shuffles -> shared memory, fp32 butterflies.

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/launch_index.hpp"

namespace compact {
namespace detail {

/// Walsh-Hadamard transform (Sylvester order, unnormalized) of the row held by this block, length 2^s.log2_len.
///
/// On entry register q of thread t (t = threadIdx.x < 2^s.log2_threads) holds element fwht_element(s, t, q) for
/// q < 2^s.log2_elems. On return the transformed row is in sm[0, 2^s.log2_len) and the block is synchronized.
/// The stages and their bits are described in core/launch_index.hpp; every butterfly is one fp32 add or subtract
/// (no fast-math, no contraction possible), so the result only depends on the level order, which is fixed.
template <int kElems>
__device__ inline void fwht_block(float (&v)[kElems], float* sm, const FwhtShape& s) {
  const index_t t = threadIdx.x;
  fwht_register_levels(v, s.log2_elems);
  const int warp_levels = fwht_warp_levels(s);
  const unsigned mask = s.log2_threads >= 5 ? 0xFFFFFFFFu : ((1u << (1 << s.log2_threads)) - 1u);
  const int elems = 1 << s.log2_elems;
  for (int b = 0; b < warp_levels; ++b) {
    const bool upper = (t >> b) & 1;
    for (int q = 0; q < kElems; ++q) {
      if (q < elems) v[q] = fwht_butterfly(v[q], __shfl_xor_sync(mask, v[q], 1 << b), upper);
    }
  }
  for (int q = 0; q < kElems; ++q) {
    if (q < elems) sm[static_cast<int>(fwht_element(s, t, q))] = v[q];
  }
  __syncthreads();
  const index_t threads = index_t{1} << s.log2_threads;
  const index_t pairs = fwht_shared_pairs_per_thread(s);
  for (int level = 5; level < s.log2_threads; ++level) {
    for (index_t k = 0; k < pairs; ++k) {
      const IndexPair p = fwht_pair(t + k * threads, level);
      const float a = sm[p.lo], b = sm[p.hi];
      sm[p.lo] = a + b;
      sm[p.hi] = a - b;
    }
    __syncthreads();
  }
}

}  // namespace detail
}  // namespace compact
