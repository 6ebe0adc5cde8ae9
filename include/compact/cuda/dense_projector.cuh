// SPDX-License-Identifier: MIT
#pragma once
/// Projector<Cuda, Gaussian|Rademacher, float|__half|__nv_bfloat16>: P generated in panels into a caller workspace
/// by the dense panel kernel and fed to cublasGemmEx (fp32 compute), serially or with the next panel's generation
/// overlapping the current GEMM on a second stream.

#include <cstddef>
#include <type_traits>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/state.hpp"
#include "compact/api/distributions.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/projector_fwd.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/kernels/dense_panel.hpp"
#include "compact/kernels/gemm_plan.hpp"
#include "compact/kernels/panel_schedule.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/device.cuh"
#include "compact/cuda/gemm.cuh"
#include "compact/cuda/overlap.cuh"
#include "compact/cuda/panel.cuh"
#include "compact/cuda/projector_base.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

/// Issues the steps of `split`'s panels in `schedule` (kernels/panel_schedule.hpp): generate(k, buffer, stream)
/// enqueues panel k's generation into `buffer` on `stream`, gemm(k, buffer) enqueues panel k's GEMM on `main`.
/// Records and waits go to overlap's events; with kSerial every step runs on `main`.
template <class Scalar, class Generate, class Gemm>
void issue_panels(const PanelSplit& split, PanelSchedule schedule, Scalar* workspace, cudaStream_t main,
                  const PanelOverlap& overlap, Generate&& generate, Gemm&& gemm) {
  const auto stream_of = [&](PanelLane lane) { return lane == PanelLane::kMain ? main : overlap.side; };
  const auto event_of = [&](PanelEvent e) {
    return e == PanelEvent::kGenerated ? overlap.generated : overlap.consumed;
  };
  for_each_panel_step(split.count, schedule, [&](const PanelStep& s) {
    // Only generate and GEMM steps have a buffer (record and wait steps carry buffer = -1): the pointer is formed
    // for them alone.
    const auto buffer = [&] { return workspace + panel_buffer_offset(split, s); };
    switch (s.op) {
      case PanelOp::kRecord:
        check_cuda(cudaEventRecord(event_of(s.event), stream_of(s.lane)), "cudaEventRecord (panel overlap)");
        break;
      case PanelOp::kWait:
        check_cuda(cudaStreamWaitEvent(stream_of(s.lane), event_of(s.event), 0), "cudaStreamWaitEvent (panel overlap)");
        break;
      case PanelOp::kGenerate:
        generate(s.panel, buffer(), stream_of(s.lane));
        break;
      case PanelOp::kGemm:
        gemm(s.panel, buffer());
        break;
    }
  });
}

/// Dense projector on the GPU, shared by Gaussian and Rademacher.
///
/// Class invariant: that of CudaProjectorBase, with a workspace of at least min_workspace_bytes(n, r, schedule()).
/// `sketch` generates column panels of P (n x w) and `unsketch_grad` row panels (h x r) into the workspace, each
/// multiplied by one GEMM on the operation's stream; kernels/panel_schedule.hpp sizes them (sketch_split,
/// unsketch_split): as large as the workspace allows (multiples of kPanelAlign unless the whole of P fits), so
/// with workspace_bytes(n, r) a typical layer generates P once and runs one GEMM. Panel rows are 16-byte aligned
/// (leading dimension r rounded up to 16 bytes), so the panel kernel stores whole vectors. The panels in flight are
/// the only copies of P, and they are bounded by the caller's workspace.
///
/// With backend.overlap set (schedule() == kOverlap), the workspace holds two buffers and P at least two panels:
/// panel k + 1 is generated on backend.overlap.side while panel k's GEMM runs on the operation's stream, ordered
/// by backend.overlap's events (for_each_panel_step documents the order); nothing waits on the host, and later work
/// on the operation's stream is ordered after all of the operation's work.
///
/// Every operation runs on the stream it is given, or backend().stream, on device() (made current around it);
/// all of them are asynchronous and none allocates. sketch and unsketch_grad generate P into the one workspace, so
/// operations of one projector on different streams must not overlap in time (order them with events).
template <class Dist, class Scalar>
class DenseCudaProjector : public CudaProjectorBase {
  static_assert(is_cuda_scalar<Scalar>,
                "compact::Projector<Cuda, Dist, Scalar>: Scalar must be float, __half or __nv_bfloat16");

 public:
  /// Entries of Scalar in 16 bytes: panel rows are padded to a multiple of this.
  static constexpr index_t kVec = kVec16Elems<Scalar>;
  /// The constructor issues no device work (panels of P are generated inside each operation): nothing to keep.
  static constexpr bool kSetupOnDevice = false;

  /// Smallest workspace for schedule s: one panel (two with kOverlap) of kPanelAlign columns (sketch) or rows
  /// (unsketch_grad). Needs no device.
  static std::size_t min_workspace_bytes(index_t n, index_t r, PanelSchedule s = PanelSchedule::kSerial) {
    check_projector_shape<Dist>("Projector::min_workspace_bytes", n, r);
    return static_cast<std::size_t>(min_panel_entries(n, r, kVec, s)) * sizeof(Scalar);
  }

  /// Recommended workspace for schedule s. kSerial: all of P (n x r, rows padded to 16 bytes) when it has at most
  /// kDefaultPanelEntries (2^24) entries, else that many. kOverlap: two buffers of half of P each (at most 2^23
  /// entries each). Needs no device.
  static std::size_t workspace_bytes(index_t n, index_t r, PanelSchedule s = PanelSchedule::kSerial) {
    check_projector_shape<Dist>("Projector::workspace_bytes", n, r);
    return static_cast<std::size_t>(recommended_panel_entries(n, r, kVec, s)) * sizeof(Scalar);
  }

  /// P (n x r) of `state`, run on `backend` on the current device, with `workspace` (device memory, at least
  /// min_workspace_bytes(n, r, schedule), 256-byte aligned), schedule kOverlap when backend.overlap is set. Issues
  /// no device work; the arguments are checked before any CUDA call.
  DenseCudaProjector(index_t n, index_t r, SketchState state, Cuda backend, Workspace workspace)
      : CudaProjectorBase(Dist{}, n, r, state, backend, workspace),
        schedule_(backend.overlap.enabled() ? PanelSchedule::kOverlap : PanelSchedule::kSerial) {
    COMPACT_REQUIRE(
        !backend.overlap.enabled() || (backend.overlap.generated != nullptr && backend.overlap.consumed != nullptr),
        "Projector: argument backend.overlap has a side stream but no events (generated = "
            << backend.overlap.generated << ", consumed = " << backend.overlap.consumed
            << "); take all three from a CudaOverlap");
    check_workspace("Projector", "workspace", workspace.data, workspace.bytes, min_workspace_bytes(n, r, schedule_),
                    schedule_ == PanelSchedule::kOverlap ? "min_workspace_bytes(n, r, PanelSchedule::kOverlap)"
                                                         : "min_workspace_bytes(n, r)");
    record_device("Projector: cudaGetDevice");
  }

  /// kOverlap when the backend lends a side stream and events, else kSerial.
  PanelSchedule schedule() const { return schedule_; }

  /// z = x P. x: B x n, z: B x r, device memory, row-major with any row strides; z must not overlap x.
  /// On backend().stream, or on `stream`.
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const { sketch(x, z, backend_.stream); }
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z, cudaStream_t stream) const {
    check_sketch_args(x, z, n_, r_);
    if (x.rows == 0) return;
    const Cuda on = backend_.on(stream);
    const PanelSplit split = sketch_split(capacity(), n_, r_, kVec, schedule_);
    const auto plan = [&](index_t k) {  // columns [j0, j0 + w) of P and of z
      const PanelSpan c = panel_span(split, k, r_);
      return sketch_panel_gemm(x.rows, n_, c.start, c.size, split.ld, x.row_stride, z.row_stride);
    };
    check_gemm_plan("Projector::sketch", on, plan(0));  // panel 0 is the widest
    const DeviceGuard guard(device_, "Projector::sketch: cudaSetDevice");
    issue_panels(
        split, schedule_, static_cast<Scalar*>(workspace_.data), stream, backend_.overlap,
        [&](index_t k, Scalar* panel, cudaStream_t on_stream) {
          const PanelSpan c = panel_span(split, k, r_);
          launch_dense_panel<Dist>(params_, PanelRect{0, n_, c.start, c.start + c.size}, panel, split.ld, on_stream);
        },
        [&](index_t k, const Scalar* panel) {
          gemm_plan<Scalar, Scalar>("Projector::sketch", on, plan(k), 1.0f, panel, x.data, 0.0f, z.data);
        });
  }

  /// out = alpha g P^T + beta out. g: m x r, out: m x n, device memory; with beta = 0 out is not read. alpha and
  /// beta are fp32 whatever Scalar is (in bf16, 1 - 1e-4 would round to 1). On backend().stream, or on `stream`.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, float alpha = 1.0f, float beta = 0.0f) const {
    unsketch_grad(g, out, alpha, beta, backend_.stream);
  }
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, float alpha, float beta,
                     cudaStream_t stream) const {
    check_unsketch_args(g, out, n_, r_);
    if (g.rows == 0) return;
    const Cuda on = backend_.on(stream);
    const PanelSplit split = unsketch_split(capacity(), n_, r_, kVec, schedule_);
    const auto plan = [&](index_t k) {  // rows [i0, i0 + h) of P, columns of out
      const PanelSpan c = panel_span(split, k, n_);
      return unsketch_panel_gemm(g.rows, r_, c.start, c.size, split.ld, g.row_stride, out.row_stride);
    };
    check_gemm_plan("Projector::unsketch_grad", on, plan(0));
    const DeviceGuard guard(device_, "Projector::unsketch_grad: cudaSetDevice");
    issue_panels(
        split, schedule_, static_cast<Scalar*>(workspace_.data), stream, backend_.overlap,
        [&](index_t k, Scalar* panel, cudaStream_t on_stream) {
          const PanelSpan c = panel_span(split, k, n_);
          launch_dense_panel<Dist>(params_, PanelRect{c.start, c.start + c.size, 0, r_}, panel, split.ld, on_stream);
        },
        [&](index_t k, const Scalar* panel) {
          gemm_plan<Scalar, Scalar>("Projector::unsketch_grad", on, plan(k), alpha, panel, g.data, beta, out.data);
        });
  }

  /// p = P (n x r, device memory, any row stride and address; rows that start 16-byte aligned are written with
  /// vector stores). Needs no workspace. On backend().stream, or on `stream`.
  void materialize(MatrixView<Scalar> p) const { materialize(p, backend_.stream); }
  void materialize(MatrixView<Scalar> p, cudaStream_t stream) const {
    check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    const DeviceGuard guard(device_, "Projector::materialize: cudaSetDevice");
    launch_dense_panel<Dist>(params_, PanelRect{0, n_, 0, r_}, p.data, p.row_stride, stream);
  }

 private:
  /// Entries of P the workspace holds (kernels/panel_schedule.hpp sizes the panels from it).
  index_t capacity() const { return static_cast<index_t>(workspace_.bytes / sizeof(Scalar)); }

  PanelSchedule schedule_;
};

}  // namespace detail

/// Gaussian projector on the GPU: P has i.i.d. N(0, 1/r) entries, bit for bit those of Projector<Cpu, Gaussian>
/// (converted to Scalar by round to nearest even). Constructor: (n, r, state, Cuda backend, Workspace workspace);
/// see detail::DenseCudaProjector.
template <class Scalar>
class Projector<Cuda, Gaussian, Scalar> : public detail::DenseCudaProjector<Gaussian, Scalar> {
 public:
  using detail::DenseCudaProjector<Gaussian, Scalar>::DenseCudaProjector;
};

/// Rademacher projector on the GPU: P has i.i.d. +-1/sqrt(r) entries, bit for bit those of
/// Projector<Cpu, Rademacher>. See detail::DenseCudaProjector.
template <class Scalar>
class Projector<Cuda, Rademacher, Scalar> : public detail::DenseCudaProjector<Rademacher, Scalar> {
 public:
  using detail::DenseCudaProjector<Rademacher, Scalar>::DenseCudaProjector;
};

/// The CUDA backend implements Gaussian and Rademacher (the dense family).
template <>
struct BackendSupports<Cuda, Gaussian> : std::true_type {};
template <>
struct BackendSupports<Cuda, Rademacher> : std::true_type {};

}  // namespace compact
