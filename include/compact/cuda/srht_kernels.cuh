// SPDX-License-Identifier: MIT
#pragma once
/// The GPU SRHT's kernels and their launchers: the selection of S and the packed signs (core/srht_select.hpp), and
/// the one- or two-pass row transforms (core/srht_rows.hpp). Each __global__ function only reads the CUDA built-in
/// indices and calls its body from core/, which the host tests run too.
///
/// Kernels without a natural template parameter are templates anyway (`template <int = 0>`): a non-template
/// __global__ function defined in a header would be defined once per translation unit.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/dense_panel.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/fwht_block.hpp"
#include "compact/core/grid.hpp"
#include "compact/core/srht_rows.hpp"
#include "compact/core/srht_select.hpp"
#include "compact/core/srht_workspace.hpp"
#include "compact/core/view.hpp"
#include "compact/cuda/block.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/device.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

// ---------------------------------------------------------------------------------------------------------------
// Setup: signs and the sample S.

template <int = 0>
__global__ void __launch_bounds__(kSelectThreads)
    srht_setup_kernel(Key2x32 key, std::uint64_t window, index_t np, index_t r, std::uint32_t* sign_words,
                      SelectState* st) {
  srht_sign_words_thread(this_thread_1d(), key, window, np, sign_words);
  srht_select_init_thread(this_thread_1d(), st, r);
}

template <class Scores>
__global__ void __launch_bounds__(kSelectThreads)
    srht_select_histogram_kernel(SelectState* st, Scores scores, index_t np, int pass) {
  DeviceBlock b;
  srht_select_histogram(b, st, scores, np, pass);
}

template <int = 0>
__global__ void __launch_bounds__(1) srht_select_choose_kernel(SelectState* st, int pass) {
  srht_select_choose(st, pass);
}

template <class Scores>
__global__ void __launch_bounds__(kSelectThreads)
    srht_select_mask_kernel(const SelectState* st, Scores scores, index_t np, std::uint32_t* masks) {
  srht_select_mask_thread(this_thread_1d(), st, scores, np, masks);
}

template <int = 0>
__global__ void __launch_bounds__(kSelectScanThreads)
    srht_select_scan_kernel(const std::uint32_t* masks, index_t words, std::uint32_t* offsets) {
  DeviceBlock b;
  srht_select_scan(b, masks, words, offsets);
}

template <int = 0>
__global__ void __launch_bounds__(kSelectThreads)
    srht_select_scatter_kernel(const std::uint32_t* masks, const std::uint32_t* offsets, index_t np, index_t r,
                               int chunk_bits, std::uint32_t* sample, std::uint32_t* chunk_first) {
  srht_select_scatter_thread(this_thread_1d(), masks, offsets, np, r, chunk_bits, sample, chunk_first);
}

/// Enqueues on `stream` the setup of an SRHT workspace: packed signs of d, then the sample S of the r smallest
/// (s_k, k) by radix select (2 kernels per digit), masks, scan and scatter, and chunk_first for chunks of
/// 2^chunk_bits. 4 + 2 kSelectDigits launches, all asynchronous.
inline void enqueue_srht_setup(const SrhtScores& scores, index_t np, index_t r, int chunk_bits, const SrhtParts& w,
                               cudaStream_t stream) {
  const index_t words = (np + 31) / 32;
  const Launch1d per_word = srht_select_word_launch(np);
  const unsigned word_blocks = static_cast<unsigned>(per_word.blocks),
                 word_threads = static_cast<unsigned>(per_word.threads);
  launch_kernel("srht_setup_kernel", [&] {
    srht_setup_kernel<>
        <<<word_blocks, word_threads, 0, stream>>>(scores.key, scores.window, np, r, w.sign_words, w.select);
  });
  const Launch1d hist = srht_select_histogram_launch(np);
  for (int pass = 0; pass < kSelectDigits; ++pass) {
    launch_kernel("srht_select_histogram_kernel", [&] {
      srht_select_histogram_kernel<<<static_cast<unsigned>(hist.blocks), static_cast<unsigned>(hist.threads),
                                     kSelectHistogramSharedBytes, stream>>>(w.select, scores, np, pass);
    });
    launch_kernel("srht_select_choose_kernel",
                  [&] { srht_select_choose_kernel<><<<1, 1, 0, stream>>>(w.select, pass); });
  }
  launch_kernel("srht_select_mask_kernel", [&] {
    srht_select_mask_kernel<<<word_blocks, word_threads, 0, stream>>>(w.select, scores, np, w.masks);
  });
  launch_kernel("srht_select_scan_kernel", [&] {
    srht_select_scan_kernel<>
        <<<1, static_cast<unsigned>(kSelectScanThreads), select_scan_shared_bytes(kSelectScanThreads), stream>>>(
            w.masks, words, w.offsets);
  });
  launch_kernel("srht_select_scatter_kernel", [&] {
    srht_select_scatter_kernel<>
        <<<word_blocks, word_threads, 0, stream>>>(w.masks, w.offsets, np, r, chunk_bits, w.sample, w.chunk_first);
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Row kernels.

template <class Scalar, int kElems, SrhtChunkIo kIo>
__global__ void __launch_bounds__(srht_chunk_max_threads(kElems))
    srht_sketch_chunks_kernel(SrhtRows d, const Scalar* x, index_t ldx, const float* scratch, Scalar* z, index_t ldz,
                              index_t rows) {
  DeviceBlock b;
  srht_sketch_chunks<kElems, kIo>(b, d, x, ldx, scratch, z, ldz, rows, ToFloat<Scalar>{}, FromFloat<Scalar>{});
}

template <class Scalar>
__global__ void __launch_bounds__(kSrhtRegisterThreads)
    srht_sketch_registers_kernel(SrhtRows d, const Scalar* x, index_t ldx, float* scratch, index_t rows) {
  srht_sketch_registers_thread(this_thread_1d(), d, x, ldx, scratch, rows, ToFloat<Scalar>{});
}

template <class Scalar, int kElems, SrhtChunkIo kIo>
__global__ void __launch_bounds__(srht_chunk_max_threads(kElems))
    srht_unsketch_chunks_kernel(SrhtRows d, const Scalar* g, index_t ldg, float* scratch, Scalar* out, index_t ldo,
                                float alpha, float beta, index_t rows) {
  DeviceBlock b;
  srht_unsketch_chunks<kElems, kIo>(b, d, g, ldg, scratch, out, ldo, alpha, beta, rows, ToFloat<Scalar>{},
                                    FromFloat<Scalar>{});
}

template <class Scalar>
__global__ void __launch_bounds__(kSrhtRegisterThreads)
    srht_unsketch_registers_kernel(SrhtRows d, const float* scratch, Scalar* out, index_t ldo, float alpha, float beta,
                                   index_t rows) {
  srht_unsketch_registers_thread(this_thread_1d(), d, scratch, out, ldo, alpha, beta, rows, ToFloat<Scalar>{},
                                 FromFloat<Scalar>{});
}

template <class Scalar>
__global__ void __launch_bounds__(kSrhtRegisterThreads)
    srht_materialize_kernel(EntryParams params, const std::uint32_t* sample, PanelRect rect, Scalar* p, index_t ld) {
  srht_materialize_thread(this_thread_1d(), params, sample, rect, p, ld, FromFloat<Scalar>{});
}

/// Calls f(std::integral_constant<int, E>{}) with E, the register array of plan p's chunk kernels (64 for chunks
/// longer than 2^10, else 32): the one place the run-time plan picks a kernel instantiation.
template <class F>
void with_chunk_elems(const SrhtPlan& p, F&& f) {
  if (srht_chunk_elems(p) == 64) {
    f(std::integral_constant<int, 64>{});
  } else {
    f(std::integral_constant<int, 32>{});
  }
}

/// Calls f(kernel) with each chunk kernel instantiation that rows of plan p use for Scalar (sketch and
/// unsketch_grad), e.g. to allow them their shared memory.
template <class Scalar, class F>
void for_each_srht_chunk_kernel(const SrhtPlan& p, F&& f) {
  with_chunk_elems(p, [&](auto elems) {
    constexpr int kElems = decltype(elems)::value;
    if (srht_two_pass(p)) {
      f(srht_sketch_chunks_kernel<Scalar, kElems, SrhtChunkIo::kScratch>);
      f(srht_unsketch_chunks_kernel<Scalar, kElems, SrhtChunkIo::kScratch>);
    } else {
      f(srht_sketch_chunks_kernel<Scalar, kElems, SrhtChunkIo::kDirect>);
      f(srht_unsketch_chunks_kernel<Scalar, kElems, SrhtChunkIo::kDirect>);
    }
  });
}

/// Enqueues z = x P on `stream`: one chunk kernel per row (one pass), or, per group of at most scratch_rows rows,
/// the register pass into `scratch` and the chunk kernel from it (two passes).
template <class Scalar>
void enqueue_srht_sketch(const SrhtRows& d, float* scratch, index_t scratch_rows, MatrixView<const Scalar> x,
                         MatrixView<Scalar> z, cudaStream_t stream) {
  const unsigned threads = static_cast<unsigned>(fwht_block_threads(d.plan.chunk));
  const std::size_t smem = fwht_shared_bytes(d.plan.chunk);
  with_chunk_elems(d.plan, [&](auto elems) {
    constexpr int kElems = decltype(elems)::value;
    if (!srht_two_pass(d.plan)) {
      launch_kernel("srht_sketch_chunks_kernel", [&] {
        srht_sketch_chunks_kernel<Scalar, kElems, SrhtChunkIo::kDirect>
            <<<static_cast<unsigned>(srht_chunk_blocks(d.plan, x.rows)), threads, smem, stream>>>(
                d, x.data, x.row_stride, nullptr, z.data, z.row_stride, x.rows);
      });
      return;
    }
    const index_t group = srht_group_rows(d.plan, x.rows, scratch_rows);
    for (index_t r0 = 0; r0 < x.rows; r0 += group) {
      const index_t rows = std::min(group, x.rows - r0);
      const Launch1d reg = srht_register_launch(d.plan, rows);
      launch_kernel("srht_sketch_registers_kernel", [&] {
        srht_sketch_registers_kernel<Scalar>
            <<<static_cast<unsigned>(reg.blocks), static_cast<unsigned>(reg.threads), 0, stream>>>(
                d, x.data + r0 * x.row_stride, x.row_stride, scratch, rows);
      });
      launch_kernel("srht_sketch_chunks_kernel", [&] {
        srht_sketch_chunks_kernel<Scalar, kElems, SrhtChunkIo::kScratch>
            <<<static_cast<unsigned>(srht_chunk_blocks(d.plan, rows)), threads, smem, stream>>>(
                d, nullptr, 0, scratch, z.data + r0 * z.row_stride, z.row_stride, rows);
      });
    }
  });
}

/// Enqueues out = alpha g P^T + beta out on `stream`: one chunk kernel per row (one pass), or, per group of at most
/// scratch_rows rows, the chunk kernel into `scratch` and the register pass from it into out (two passes).
template <class Scalar>
void enqueue_srht_unsketch(const SrhtRows& d, float* scratch, index_t scratch_rows, MatrixView<const Scalar> g,
                           MatrixView<Scalar> out, float alpha, float beta, cudaStream_t stream) {
  const unsigned threads = static_cast<unsigned>(fwht_block_threads(d.plan.chunk));
  const std::size_t smem = fwht_shared_bytes(d.plan.chunk);
  with_chunk_elems(d.plan, [&](auto elems) {
    constexpr int kElems = decltype(elems)::value;
    if (!srht_two_pass(d.plan)) {
      launch_kernel("srht_unsketch_chunks_kernel", [&] {
        srht_unsketch_chunks_kernel<Scalar, kElems, SrhtChunkIo::kDirect>
            <<<static_cast<unsigned>(srht_chunk_blocks(d.plan, g.rows)), threads, smem, stream>>>(
                d, g.data, g.row_stride, nullptr, out.data, out.row_stride, alpha, beta, g.rows);
      });
      return;
    }
    const index_t group = srht_group_rows(d.plan, g.rows, scratch_rows);
    for (index_t r0 = 0; r0 < g.rows; r0 += group) {
      const index_t rows = std::min(group, g.rows - r0);
      launch_kernel("srht_unsketch_chunks_kernel", [&] {
        srht_unsketch_chunks_kernel<Scalar, kElems, SrhtChunkIo::kScratch>
            <<<static_cast<unsigned>(srht_chunk_blocks(d.plan, rows)), threads, smem, stream>>>(
                d, g.data + r0 * g.row_stride, g.row_stride, scratch, nullptr, 0, alpha, beta, rows);
      });
      const Launch1d reg = srht_register_launch(d.plan, rows);
      launch_kernel("srht_unsketch_registers_kernel", [&] {
        srht_unsketch_registers_kernel<Scalar>
            <<<static_cast<unsigned>(reg.blocks), static_cast<unsigned>(reg.threads), 0, stream>>>(
                d, scratch, out.data + r0 * out.row_stride, out.row_stride, alpha, beta, rows);
      });
    }
  });
}

}  // namespace detail
}  // namespace compact
