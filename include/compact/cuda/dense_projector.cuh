// SPDX-License-Identifier: MIT
#pragma once
/// Projector<Cuda, Gaussian|Rademacher, float|__half|__nv_bfloat16>: P generated in panels into a caller workspace
/// by the dense panel kernel and fed to cublasGemmEx (fp32 compute).

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/core/dense_panel.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/gemm_plan.hpp"
#include "compact/core/projector_fwd.hpp"
#include "compact/core/state.hpp"
#include "compact/core/view.hpp"
#include "compact/core/workspace.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/device.cuh"
#include "compact/cuda/gemm.cuh"
#include "compact/cuda/panel.cuh"
#include "compact/cuda/projector_base.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

/// Dense projector on the GPU, shared by Gaussian and Rademacher.
///
/// Class invariant: that of CudaProjectorBase, with a workspace of at least min_workspace_bytes(n, r).
/// `sketch` generates column panels of P (n x w) and `unsketch_grad` row panels (h x r) into the workspace, each
/// followed by one GEMM on the same stream; w and h are as large as the workspace allows (multiples of kPanelAlign
/// unless the whole of P fits), so with workspace_bytes(n, r) a typical layer generates P once and runs one GEMM.
/// The panel in flight is the only copy of P, and it is bounded by the caller's workspace.
///
/// Every operation runs on the stream it is given, or backend().stream, on device() (made current around it);
/// all of them are asynchronous and none allocates. sketch and unsketch_grad generate P into the one workspace, so
/// operations of one projector on different streams must not overlap in time (order them with events).
template <class Dist, class Scalar>
class DenseCudaProjector : public CudaProjectorBase {
  static_assert(is_cuda_scalar<Scalar>,
                "compact::Projector<Cuda, Dist, Scalar>: Scalar must be float, __half or __nv_bfloat16");

 public:
  /// Panel widths are rounded down to a multiple of this (tensor-core friendly leading dimensions).
  static constexpr index_t kPanelAlign = 128;
  /// workspace_bytes() asks for at most this many entries of P beyond the minimum (32 MiB of bf16).
  static constexpr index_t kDefaultPanelEntries = index_t{1} << 24;

  /// Smallest workspace: one panel of kPanelAlign columns (sketch) or rows (unsketch_grad). Needs no device.
  static std::size_t min_workspace_bytes(index_t n, index_t r) {
    check_cuda_dims("Projector::min_workspace_bytes", n, r);
    return static_cast<std::size_t>(std::max(n * std::min(r, kPanelAlign), r * std::min(n, kPanelAlign))) *
           sizeof(Scalar);
  }

  /// Recommended workspace: all of P when it has at most kDefaultPanelEntries entries, else that many. Needs no
  /// device.
  static std::size_t workspace_bytes(index_t n, index_t r) {
    check_cuda_dims("Projector::workspace_bytes", n, r);
    const index_t entries = r > kDefaultPanelEntries / n ? kDefaultPanelEntries : n * r;  // no n r overflow
    return std::max(static_cast<std::size_t>(entries) * sizeof(Scalar), min_workspace_bytes(n, r));
  }

  /// P (n x r) of `state`, run on `backend` on the current device, with `workspace` (device memory, at least
  /// min_workspace_bytes(n, r), 256-byte aligned). Issues no device work; the arguments are checked before any
  /// CUDA call.
  DenseCudaProjector(index_t n, index_t r, SketchState state, Cuda backend, Workspace workspace)
      : CudaProjectorBase(n, r, state, backend, workspace) {
    check_cuda_dims("Projector", n, r);
    check_workspace("Projector", "workspace", workspace.data, workspace.bytes, min_workspace_bytes(n, r),
                    "min_workspace_bytes(n, r)");
    record_device("Projector: cudaGetDevice");
  }

  /// z = x P. x: B x n, z: B x r, device memory, row-major with any row strides; z must not overlap x.
  /// On backend().stream, or on `stream`.
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const { sketch(x, z, backend_.stream); }
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z, cudaStream_t stream) const {
    check_sketch_args(x, z, n_, r_);
    if (x.rows == 0) return;
    const Cuda on = backend_.on(stream);
    Scalar* panel = static_cast<Scalar*>(workspace_.data);
    const index_t w_max = panel_extent(capacity(), n_, r_, kPanelAlign);
    check_gemm_plan("Projector::sketch", on, sketch_panel_gemm(x.rows, n_, 0, w_max, x.row_stride, z.row_stride));
    const DeviceGuard guard(device_, "Projector::sketch: cudaSetDevice");
    for (index_t j0 = 0; j0 < r_; j0 += w_max) {
      const index_t w = std::min(w_max, r_ - j0);
      launch_dense_panel<Dist>(params_, PanelRect{0, n_, j0, j0 + w}, panel, w, stream);
      gemm_plan<Scalar, Scalar>("Projector::sketch", on,
                                sketch_panel_gemm(x.rows, n_, j0, w, x.row_stride, z.row_stride), 1.0f, panel, x.data,
                                0.0f, z.data);
    }
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
    Scalar* panel = static_cast<Scalar*>(workspace_.data);
    const index_t h_max = panel_extent(capacity(), r_, n_, kPanelAlign);
    check_gemm_plan("Projector::unsketch_grad", on,
                    unsketch_panel_gemm(g.rows, r_, 0, h_max, g.row_stride, out.row_stride));
    const DeviceGuard guard(device_, "Projector::unsketch_grad: cudaSetDevice");
    for (index_t i0 = 0; i0 < n_; i0 += h_max) {
      const index_t h = std::min(h_max, n_ - i0);
      launch_dense_panel<Dist>(params_, PanelRect{i0, i0 + h, 0, r_}, panel, r_, stream);
      gemm_plan<Scalar, Scalar>("Projector::unsketch_grad", on,
                                unsketch_panel_gemm(g.rows, r_, i0, h, g.row_stride, out.row_stride), alpha, panel,
                                g.data, beta, out.data);
    }
  }

  /// p = P (n x r, device memory, any row stride). Needs no workspace. On backend().stream, or on `stream`.
  void materialize(MatrixView<Scalar> p) const { materialize(p, backend_.stream); }
  void materialize(MatrixView<Scalar> p, cudaStream_t stream) const {
    check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    const DeviceGuard guard(device_, "Projector::materialize: cudaSetDevice");
    launch_dense_panel<Dist>(params_, PanelRect{0, n_, 0, r_}, p.data, p.row_stride, stream);
  }

 private:
  /// Entries of P the workspace holds (panel_extent in core/gemm_plan.hpp sizes the panels from it).
  index_t capacity() const { return static_cast<index_t>(workspace_.bytes / sizeof(Scalar)); }
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

}  // namespace compact
