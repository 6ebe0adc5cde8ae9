// SPDX-License-Identifier: MIT
#pragma once
/// Projector<Cuda, Srht, float|__half|__nv_bfloat16>: one FWHT per row plus a gather (sketch) or a scatter
/// (unsketch_grad), with the signs and the column sample of core/srht.hpp computed on the device.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/launch_index.hpp"
#include "compact/core/projector_fwd.hpp"
#include "compact/core/srht.hpp"
#include "compact/core/state.hpp"
#include "compact/core/view.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/dense_projector.cuh"
#include "compact/cuda/fwht.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

/// What the SRHT row kernels read: the sample S (r indices, ascending) and the sign bits of d packed 32 per word
/// (bit k % 32 of word k / 32 set means d_k = -1), both in the projector's workspace.
struct SrhtDeviceData {
  const std::uint32_t* sample;
  const std::uint32_t* sign_words;
  index_t n;
  index_t r;
  float scale;
  FwhtShape shape;
};

/// Setup, part 1: scores[k] = s_k and indices[k] = k for k < n'; sign_words[w] = srht_sign_word(w) for w < n'/32.
/// Grid-stride over n' tasks; every value comes from core/srht.hpp. (A template only for its linkage: a
/// non-template __global__ function defined in a header would be defined once per translation unit.)
template <class Word = std::uint32_t>
__global__ void srht_setup_kernel(Key2x32 key, std::uint64_t window, index_t np, std::uint64_t* scores,
                                  std::uint32_t* indices, Word* sign_words) {
  const index_t words = (np + 31) / 32;
  const index_t step = grid_stride_step(gridDim.x, blockDim.x);
  for (index_t k = grid_stride_first(blockIdx.x, threadIdx.x, blockDim.x); k < np; k += step) {
    scores[k] = srht_score(key, window, k);
    indices[k] = static_cast<std::uint32_t>(k);
    if (k < words) sign_words[k] = srht_sign_word(key, window, k, np);
  }
}

/// z[row, j] = scale * FWHT(pad(x[row, :] (.) d))[S_j]: one block per row (grid-stride over rows), the padded row
/// in dynamic shared memory (4 n' bytes).
template <class Scalar, int kElems>
__global__ void __launch_bounds__(1024)
    srht_sketch_kernel(SrhtDeviceData d, const Scalar* x, index_t ldx, Scalar* z, index_t ldz, index_t rows) {
  extern __shared__ float sm[];
  // Element indices are below n' <= 2^15: int arithmetic keeps the 16 or 32 loads in flight within the register
  // budget of a 1024-thread block.
  const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const int elems = 1 << d.shape.log2_elems, n = static_cast<int>(d.n), r = static_cast<int>(d.r);
  const std::uint32_t negative = srht_thread_sign_mask(d.shape, d.sign_words, t);  // once per block
  for (index_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Scalar* xr = x + row * ldx;
    float v[kElems];
    for (int q = 0; q < kElems; ++q) {
      const int k = static_cast<int>(fwht_element(d.shape, t, q));
      v[q] = 0.0f;
      if (q < elems && k < n) {
        const float xk = CudaScalar<Scalar>::to_float(xr[k]);
        v[q] = ((negative >> q) & 1u) ? -xk : xk;
      }
    }
    fwht_block(v, sm, d.shape);
    Scalar* zr = z + row * ldz;
    for (int j = t; j < r; j += threads) zr[j] = CudaScalar<Scalar>::from_float(d.scale * sm[d.sample[j]]);
    __syncthreads();  // the next row overwrites sm
  }
}

/// out[row, k] = alpha * scale * d_k * FWHT(scatter_S(g[row, :]))[k] + beta * out[row, k] for k < n (out not read
/// when beta = 0): the adjoint of srht_sketch_kernel, one block per row.
template <class Scalar, int kElems>
__global__ void __launch_bounds__(1024)
    srht_unsketch_kernel(SrhtDeviceData d, const Scalar* g, index_t ldg, Scalar* out, index_t ldo, float alpha,
                         float beta, index_t rows) {
  extern __shared__ float sm[];
  const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const int elems = 1 << d.shape.log2_elems, n = static_cast<int>(d.n), r = static_cast<int>(d.r);
  const std::uint32_t negative = srht_thread_sign_mask(d.shape, d.sign_words, t);  // once per block
  for (index_t row = blockIdx.x; row < rows; row += gridDim.x) {
    for (int q = 0; q < elems; ++q) sm[static_cast<int>(fwht_element(d.shape, t, q))] = 0.0f;
    __syncthreads();
    const Scalar* gr = g + row * ldg;
    for (int j = t; j < r; j += threads) sm[d.sample[j]] = CudaScalar<Scalar>::to_float(gr[j]);
    __syncthreads();
    float v[kElems];
    for (int q = 0; q < kElems; ++q) v[q] = q < elems ? sm[static_cast<int>(fwht_element(d.shape, t, q))] : 0.0f;
    __syncthreads();  // every thread has read its elements before fwht_block writes sm
    fwht_block(v, sm, d.shape);
    Scalar* outr = out + row * ldo;
    for (int q = 0; q < elems; ++q) {
      const int k = static_cast<int>(fwht_element(d.shape, t, q));
      if (k < n) {
        const float y = d.scale * sm[k];
        float val = alpha * (((negative >> q) & 1u) ? -y : y);
        if (beta != 0.0f) val += beta * CudaScalar<Scalar>::to_float(outr[k]);
        outr[k] = CudaScalar<Scalar>::from_float(val);
      }
    }
    __syncthreads();
  }
}

/// p[i][j] = srht_entry(params, i, S_j) for the whole n x r matrix (grid-stride over entries, one per task).
template <class Scalar>
__global__ void srht_materialize_kernel(EntryParams params, const std::uint32_t* sample, PanelRect rect, Scalar* p,
                                        index_t ld) {
  const index_t tasks = panel_task_count(rect, 1);
  const index_t step = grid_stride_step(gridDim.x, blockDim.x);
  for (index_t t = grid_stride_first(blockIdx.x, threadIdx.x, blockDim.x); t < tasks; t += step) {
    const PanelTask e = panel_task(rect, 1, t);
    p[e.i * ld + e.j0] = CudaScalar<Scalar>::from_float(srht_entry(params, e.i, sample[e.j0]));
  }
}

/// Rounds a byte count up to the 256-byte alignment of every workspace part.
inline std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Byte offsets of the SRHT workspace parts. Persistent: sample (r u32), sign words (n'/32 u32). Setup scratch,
/// used only by the constructor's work: scores and indices (double buffers for the radix sort) and cub's scratch.
struct SrhtLayout {
  std::size_t sample, signs, scores, scores_alt, indices, indices_alt, sort_temp, sort_temp_bytes, total;
};

/// The layout for (n, r); queries cub for its scratch size (host computation, needs a CUDA device present).
inline SrhtLayout srht_layout(index_t n, index_t r) {
  const index_t np = next_pow2(n);
  std::size_t pairs_temp = 0, keys_temp = 0;
  check_cuda(
      cub::DeviceRadixSort::SortPairs(nullptr, pairs_temp, static_cast<const std::uint64_t*>(nullptr),
                                      static_cast<std::uint64_t*>(nullptr), static_cast<const std::uint32_t*>(nullptr),
                                      static_cast<std::uint32_t*>(nullptr), static_cast<int>(np)),
      "cub::DeviceRadixSort::SortPairs (scratch size query)");
  check_cuda(
      cub::DeviceRadixSort::SortKeys(nullptr, keys_temp, static_cast<const std::uint32_t*>(nullptr),
                                     static_cast<std::uint32_t*>(nullptr), static_cast<int>(r), 0, log2_pow2(np) + 1),
      "cub::DeviceRadixSort::SortKeys (scratch size query)");
  SrhtLayout l{};
  std::size_t at = 0;
  const auto take = [&at](std::size_t bytes) {
    const std::size_t here = at;
    at += align256(bytes);
    return here;
  };
  l.sample = take(static_cast<std::size_t>(r) * 4);
  l.signs = take(static_cast<std::size_t>((np + 31) / 32) * 4);
  l.scores = take(static_cast<std::size_t>(np) * 8);
  l.scores_alt = take(static_cast<std::size_t>(np) * 8);
  l.indices = take(static_cast<std::size_t>(np) * 4);
  l.indices_alt = take(static_cast<std::size_t>(np) * 4);
  l.sort_temp_bytes = std::max<std::size_t>(std::max(pairs_temp, keys_temp), 1);
  l.sort_temp = take(l.sort_temp_bytes);
  l.total = at;
  return l;
}

}  // namespace detail

/// SRHT projector on the GPU: P = D H S / sqrt(r) of core/srht.hpp, applied as one FWHT per row.
///
/// Class invariant: 1 <= r <= n, n' = next_pow2(n) <= 2^kFwhtMaxLog2 (the row is transformed in shared memory);
/// the workspace (workspace_bytes(n, r), device memory) holds the sample S and the packed signs of d, which the
/// constructor computes on backend.stream (Philox scores, a stable radix sort by score, a radix sort of the first r
/// indices): the sample is the r smallest (s_k, k), ascending, exactly core/srht.hpp's srht_sample. No GEMM, so
/// the cuBLAS handle is not used. sketch costs O(B n' log n') flops and one read of x and write of z.
template <class Scalar>
class Projector<Cuda, Srht, Scalar> {
  static_assert(detail::is_cuda_scalar<Scalar>,
                "compact::Projector<Cuda, Srht, Scalar>: Scalar must be float, __half or __nv_bfloat16");

 public:
  /// Longest padded row: n' = next_pow2(n) must not exceed this.
  static constexpr index_t kMaxPaddedDim = index_t{1} << detail::kFwhtMaxLog2;

  /// Workspace for (n, r): sample, signs and the constructor's sort scratch. Needs a CUDA device (cub query).
  static std::size_t workspace_bytes(index_t n, index_t r) {
    check_dims("Projector::workspace_bytes", n, r);
    return detail::srht_layout(n, r).total;
  }

  /// P (n x r) of `state` on `backend`; enqueues the computation of S and d into `workspace` on backend.stream.
  Projector(index_t n, index_t r, SketchState state, Cuda backend, Workspace workspace)
      : n_(n), r_(r), state_(state), backend_(backend), workspace_(workspace) {
    check_dims("Projector", n, r);
    COMPACT_REQUIRE(workspace.data != nullptr, "Projector: argument workspace is null");
    const detail::SrhtLayout l = detail::srht_layout(n, r);
    COMPACT_REQUIRE(workspace.bytes >= l.total, "Projector: argument workspace has "
                                                    << workspace.bytes << " bytes, needs " << l.total
                                                    << " (workspace_bytes(n = " << n << ", r = " << r << "))");
    params_ = entry_params(state_, r_);
    char* base = static_cast<char*>(workspace.data);
    sample_ = reinterpret_cast<std::uint32_t*>(base + l.sample);
    signs_ = reinterpret_cast<std::uint32_t*>(base + l.signs);
    const index_t np = next_pow2(n_);
    auto* scores = reinterpret_cast<std::uint64_t*>(base + l.scores);
    auto* scores_alt = reinterpret_cast<std::uint64_t*>(base + l.scores_alt);
    auto* indices = reinterpret_cast<std::uint32_t*>(base + l.indices);
    auto* indices_alt = reinterpret_cast<std::uint32_t*>(base + l.indices_alt);
    const detail::Launch1d launch = detail::grid_stride_launch(np, 256);
    detail::srht_setup_kernel<>
        <<<static_cast<unsigned>(launch.blocks), static_cast<unsigned>(launch.threads), 0, backend_.stream>>>(
            params_.key, params_.window, np, scores, indices, signs_);
    detail::check_launch("srht_setup_kernel");
    // Stable sort by score keeps equal scores in index order: the first r are the r smallest (s_k, k).
    std::size_t temp = l.sort_temp_bytes;
    detail::check_cuda(cub::DeviceRadixSort::SortPairs(base + l.sort_temp, temp, scores, scores_alt, indices,
                                                       indices_alt, static_cast<int>(np), 0, 64, backend_.stream),
                       "cub::DeviceRadixSort::SortPairs (SRHT scores)");
    temp = l.sort_temp_bytes;
    detail::check_cuda(cub::DeviceRadixSort::SortKeys(base + l.sort_temp, temp, indices_alt, sample_,
                                                      static_cast<int>(r_), 0, log2_pow2(np) + 1, backend_.stream),
                       "cub::DeviceRadixSort::SortKeys (SRHT sample)");
  }

  index_t in_dim() const { return n_; }
  index_t rank() const { return r_; }
  SketchState state() const { return state_; }
  const Cuda& backend() const { return backend_; }
  /// The sample S_0 < ... < S_{r-1} in device memory (valid once the constructor's work on the stream has run).
  const std::uint32_t* device_sample() const { return sample_; }

  /// z = x P = scale FWHT(pad(x (.) d))[S]. x: B x n, z: B x r, device memory, z not overlapping x.
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const {
    detail::check_sketch_args(x, z, n_, r_);
    if (x.rows == 0) return;
    const detail::SrhtDeviceData d = device_data();
    if (d.shape.log2_elems > 4) {
      launch_rows(detail::srht_sketch_kernel<Scalar, 32>, d, x.rows, x.data, x.row_stride, z.data, z.row_stride);
    } else {
      launch_rows(detail::srht_sketch_kernel<Scalar, 16>, d, x.rows, x.data, x.row_stride, z.data, z.row_stride);
    }
  }

  /// out = alpha g P^T + beta out. g: m x r, out: m x n, device memory; with beta = 0 out is not read.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, Scalar alpha = Scalar(1.0f),
                     Scalar beta = Scalar(0.0f)) const {
    detail::check_unsketch_args(g, out, n_, r_);
    if (g.rows == 0) return;
    const detail::SrhtDeviceData d = device_data();
    const float a = detail::CudaScalar<Scalar>::to_float(alpha), b = detail::CudaScalar<Scalar>::to_float(beta);
    if (d.shape.log2_elems > 4) {
      launch_rows(detail::srht_unsketch_kernel<Scalar, 32>, d, g.rows, g.data, g.row_stride, out.data, out.row_stride,
                  a, b);
    } else {
      launch_rows(detail::srht_unsketch_kernel<Scalar, 16>, d, g.rows, g.data, g.row_stride, out.data, out.row_stride,
                  a, b);
    }
  }

  /// p = P (n x r, device memory, any row stride), entry by entry from core/srht.hpp's srht_entry.
  void materialize(MatrixView<Scalar> p) const {
    detail::check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    const detail::PanelRect rect{0, n_, 0, r_};
    const detail::Launch1d launch = detail::grid_stride_launch(detail::panel_task_count(rect, 1), 256);
    detail::srht_materialize_kernel<Scalar>
        <<<static_cast<unsigned>(launch.blocks), static_cast<unsigned>(launch.threads), 0, backend_.stream>>>(
            params_, sample_, rect, p.data, p.row_stride);
    detail::check_launch("srht_materialize_kernel");
  }

 private:
  static void check_dims(const char* fn, index_t n, index_t r) {
    detail::check_cuda_dims(fn, n, r);
    COMPACT_REQUIRE(next_pow2(n) <= kMaxPaddedDim, fn << ": the CUDA SRHT transforms rows in shared memory: n = " << n
                                                      << " pads to " << next_pow2(n) << " > " << kMaxPaddedDim);
  }

  detail::SrhtDeviceData device_data() const {
    return detail::SrhtDeviceData{sample_, signs_, n_, r_, params_.scale, detail::fwht_shape(log2_pow2(next_pow2(n_)))};
  }

  /// One block of 2^log2_threads threads per row (grid-stride beyond 2^16 rows), 4 n' bytes of shared memory.
  template <class Kernel, class... Args>
  void launch_rows(Kernel kernel, const detail::SrhtDeviceData& d, index_t rows, Args... args) const {
    const std::size_t smem = sizeof(float) << d.shape.log2_len;
    if (smem > 48 * 1024) {
      detail::check_cuda(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "cudaFuncSetAttribute (SRHT shared memory)");
    }
    const unsigned blocks = static_cast<unsigned>(std::min<index_t>(rows, index_t{1} << 16));
    kernel<<<blocks, 1u << d.shape.log2_threads, smem, backend_.stream>>>(d, args..., rows);
    detail::check_launch("SRHT row kernel");
  }

  index_t n_;
  index_t r_;
  SketchState state_;
  Cuda backend_;
  Workspace workspace_;
  EntryParams params_;
  std::uint32_t* sample_ = nullptr;
  std::uint32_t* signs_ = nullptr;
};

}  // namespace compact
