// SPDX-License-Identifier: MIT
#pragma once
/// Projector<Cuda, Srht, float|__half|__nv_bfloat16>: one FWHT per padded row plus a gather (sketch) or a scatter
/// (unsketch_grad), with the signs and the column sample of spec/srht.hpp computed on the device.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/spec/srht.hpp"
#include "compact/spec/state.hpp"
#include "compact/api/distributions.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/projector_fwd.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/kernels/dense_panel.hpp"
#include "compact/kernels/fwht_block.hpp"
#include "compact/kernels/grid.hpp"
#include "compact/kernels/panel_schedule.hpp"
#include "compact/kernels/srht_row_kernels.hpp"
#include "compact/kernels/srht_select.hpp"
#include "compact/kernels/srht_workspace.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/device.cuh"
#include "compact/cuda/projector_base.cuh"
#include "compact/cuda/scalar.cuh"
#include "compact/cuda/srht_kernels.cuh"

namespace compact {

/// SRHT projector on the GPU: P = D H S / sqrt(r) of spec/srht.hpp, applied as one FWHT per padded row.
///
/// Class invariant: that of detail::CudaProjectorBase, with n' = next_pow2(n) <= kSrhtMaxPaddedDim and a workspace of
/// at least min_workspace_bytes(n, r) (kernels/srht_workspace.hpp: the sample S, the packed signs of d, the chunk
/// boundaries of S, and a transient region). The constructor enqueues on backend.stream the computation of d and
/// S (a radix select on the device, exactly spec/srht.hpp's srht_sample) and picks the row plan for its device:
/// one pass when n' fits the shared memory of one block (2^15 on sm_80 and sm_90), else two passes through an fp32
/// scratch of scratch_rows() rows in the transient region. No GEMM, so the cuBLAS handle is not used. sketch costs
/// O(B n' log n') flops and one read of x and write of z (plus a write and read of the scratch with two passes).
/// The constructor's work must precede every use of the projector, which it does on backend.stream; another
/// stream must be ordered after it (an event, or a synchronization) by the caller. Two-pass operations share the
/// scratch, so operations of one projector on different streams must not overlap in time (order them with events).
template <class Scalar>
class Projector<Cuda, Srht, Scalar> : public detail::CudaProjectorBase {
  static_assert(detail::is_cuda_scalar<Scalar>,
                "compact::Projector<Cuda, Srht, Scalar>: Scalar must be float, __half or __nv_bfloat16");

 public:
  /// The constructor enqueues device work (the sample S and the signs d, into the workspace): a caller that builds
  /// projectors per call pays it every time, and may keep the projector (with its workspace) across calls instead.
  static constexpr bool kSetupOnDevice = true;

  /// Smallest workspace for (n, r) on any supported GPU. A pure function of (n, r): needs no device. The panel
  /// schedule, taken as every CUDA projector takes it (one query for every distribution), does not apply: an SRHT
  /// generates no panels.
  static std::size_t min_workspace_bytes(index_t n, index_t r, PanelSchedule = PanelSchedule::kSerial) {
    detail::check_projector_shape<Srht>("Projector::min_workspace_bytes", n, r);
    const detail::SrhtLayout l = detail::srht_layout(n, r);
    return detail::srht_workspace_bytes(l, detail::srht_min_scratch_rows(l.np));
  }

  /// Recommended workspace for (n, r): the minimum, plus 32 MiB of scratch rows when n' > 2^15 (two passes on
  /// every GPU). A pure function of (n, r): needs no device. The panel schedule does not apply (as for
  /// min_workspace_bytes).
  static std::size_t workspace_bytes(index_t n, index_t r, PanelSchedule = PanelSchedule::kSerial) {
    detail::check_projector_shape<Srht>("Projector::workspace_bytes", n, r);
    const detail::SrhtLayout l = detail::srht_layout(n, r);
    return detail::srht_workspace_bytes(l, detail::srht_recommended_scratch_rows(l.np));
  }

  /// P (n x r) of `state` on the current device; enqueues the computation of S and d into `workspace` (device
  /// memory, at least min_workspace_bytes(n, r), 256-byte aligned) on backend.stream. The arguments are checked
  /// before any CUDA call; the device's shared memory per block is checked against the row plan here, not at the
  /// first sketch.
  Projector(index_t n, index_t r, SketchState state, Cuda backend, Workspace workspace)
      : detail::CudaProjectorBase(Srht{}, n, r, state, backend, workspace) {
    detail::check_workspace("Projector", "workspace", workspace.data, workspace.bytes, min_workspace_bytes(n, r),
                            "min_workspace_bytes(n, r)");
    record_device("Projector: cudaGetDevice");
    layout_ = detail::srht_layout(n, r);
    parts_ = detail::srht_parts(layout_, workspace.data);
    const std::size_t shared = detail::max_shared_bytes_per_block(device_, "Projector: cudaDeviceGetAttribute");
    plan_ = detail::srht_plan(log2_pow2(layout_.np), detail::srht_max_chunk_bits(shared));
    COMPACT_REQUIRE(plan_.high_bits <= detail::kSrhtMaxHighBits,
                    "Projector: n = " << n << " pads to n' = " << layout_.np << ", which needs blocks of 2^"
                                      << plan_.log2_len - detail::kSrhtMaxHighBits << " floats ("
                                      << (std::size_t{4} << (plan_.log2_len - detail::kSrhtMaxHighBits))
                                      << " bytes of shared memory), but device " << device_ << " gives a block at most "
                                      << shared << " bytes");
    scratch_rows_ = detail::srht_two_pass(plan_) ? detail::srht_scratch_rows(layout_, workspace.bytes) : 0;
    COMPACT_REQUIRE(!detail::srht_two_pass(plan_) || scratch_rows_ >= 1,
                    "Projector: argument workspace has "
                        << workspace.bytes << " bytes; device " << device_ << " transforms n' = " << layout_.np
                        << " in two passes, which need at least " << detail::srht_workspace_bytes(layout_, 1));
    const std::size_t smem = detail::fwht_shared_bytes(plan_.chunk);
    detail::for_each_srht_chunk_kernel<Scalar>(plan_, [smem](auto kernel) {
      detail::allow_shared_bytes(kernel, smem, "Projector: cudaFuncSetAttribute (SRHT shared memory)");
    });
    detail::enqueue_srht_setup(detail::SrhtScores{params_.key, params_.window}, layout_.np, r_, plan_.chunk_bits,
                               parts_, backend_.stream);
  }

  /// n' = next_pow2(n), the length of the transformed rows.
  index_t padded_dim() const { return layout_.np; }
  /// 1 when rows are transformed in one pass on this device, 2 when through the scratch.
  int passes() const { return detail::srht_two_pass(plan_) ? 2 : 1; }
  /// Rows transformed per group with two passes (0 with one).
  index_t scratch_rows() const { return scratch_rows_; }
  /// The sample S_0 < ... < S_{r-1} in device memory (valid once the constructor's work on the stream has run).
  const std::uint32_t* device_sample() const { return parts_.sample; }

  /// z = x P = scale FWHT(pad(x (.) d))[S]. x: B x n, z: B x r, device memory, z not overlapping x.
  /// On backend().stream, or on `stream`.
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const { sketch(x, z, backend_.stream); }
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z, cudaStream_t stream) const {
    detail::check_sketch_args(x, z, n_, r_);
    if (x.rows == 0) return;
    const detail::DeviceGuard guard(device_, "Projector::sketch: cudaSetDevice");
    detail::enqueue_srht_sketch<Scalar>(rows(), parts_.scratch, scratch_rows_, x, z, stream);
  }

  /// out = alpha g P^T + beta out. g: m x r, out: m x n, device memory; with beta = 0 out is not read. alpha and
  /// beta are fp32 whatever Scalar is. On backend().stream, or on `stream`.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, float alpha = 1.0f, float beta = 0.0f) const {
    unsketch_grad(g, out, alpha, beta, backend_.stream);
  }
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, float alpha, float beta,
                     cudaStream_t stream) const {
    detail::check_unsketch_args(g, out, n_, r_);
    if (g.rows == 0) return;
    const detail::DeviceGuard guard(device_, "Projector::unsketch_grad: cudaSetDevice");
    detail::enqueue_srht_unsketch<Scalar>(rows(), parts_.scratch, scratch_rows_, g, out, alpha, beta, stream);
  }

  /// p = P (n x r, device memory, any row stride), entry by entry from spec/srht.hpp's srht_entry.
  /// On backend().stream, or on `stream`.
  void materialize(MatrixView<Scalar> p) const { materialize(p, backend_.stream); }
  void materialize(MatrixView<Scalar> p, cudaStream_t stream) const {
    detail::check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    const detail::DeviceGuard guard(device_, "Projector::materialize: cudaSetDevice");
    const detail::PanelRect rect{0, n_, 0, r_};
    const detail::Launch1d launch =
        detail::grid_stride_launch(detail::panel_task_count(rect, 1), detail::kSrhtRegisterThreads);
    detail::launch_kernel("srht_materialize_kernel", [&] {
      detail::srht_materialize_kernel<Scalar>
          <<<static_cast<unsigned>(launch.blocks), static_cast<unsigned>(launch.threads), 0, stream>>>(
              params_, parts_.sample, rect, p.data, p.row_stride);
    });
  }

 private:
  detail::SrhtRows rows() const {
    return detail::SrhtRows{parts_.sample, parts_.sign_words, parts_.chunk_first, n_, r_, params_.scale, plan_};
  }

  detail::SrhtLayout layout_{};
  detail::SrhtParts parts_{};
  detail::SrhtPlan plan_{};
  index_t scratch_rows_ = 0;
};

/// The CUDA backend implements Srht.
template <>
struct BackendSupports<Cuda, Srht> : std::true_type {};

}  // namespace compact
