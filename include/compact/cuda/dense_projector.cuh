// SPDX-License-Identifier: MIT
#pragma once
/// Projector<Cuda, Gaussian|Rademacher, float|__half|__nv_bfloat16>: P generated in panels into a caller workspace
/// by the dense panel kernel and fed to cublasGemmEx (fp32 compute).

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/core/entries.hpp"
#include "compact/core/launch_index.hpp"
#include "compact/core/projector_fwd.hpp"
#include "compact/core/state.hpp"
#include "compact/core/view.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/gemm.cuh"
#include "compact/cuda/panel.cuh"
#include "compact/cuda/scalar.cuh"

namespace compact {
namespace detail {

/// Checks the constructor arguments shared by every CUDA projector (same rule and message as the CPU).
inline void check_cuda_dims(const char* fn, index_t n, index_t r) {
  COMPACT_REQUIRE(n >= 1 && n <= kMaxDim, fn << ": input dimension n = " << n << " must be in [1, " << kMaxDim << "]");
  COMPACT_REQUIRE(r >= 1 && r <= n, fn << ": rank r = " << r << " must satisfy 1 <= r <= n = " << n);
}

/// Dense projector on the GPU, shared by Gaussian and Rademacher.
///
/// Class invariant: 1 <= r <= n <= kMaxDim; the workspace holds at least min_workspace_bytes(n, r).
/// `sketch` generates column panels of P (n x w) and `unsketch_grad` row panels (h x r) into the workspace, each
/// followed by one GEMM on the same stream; w and h are as large as the workspace allows (multiples of kPanelAlign
/// unless the whole of P fits), so with workspace_bytes(n, r) a typical layer generates P once and runs one GEMM.
/// The panel in flight is the only copy of P, and it is bounded by the caller's workspace.
template <class Dist, class Scalar>
class DenseCudaProjector {
  static_assert(is_cuda_scalar<Scalar>,
                "compact::Projector<Cuda, Dist, Scalar>: Scalar must be float, __half or __nv_bfloat16");

 public:
  /// Panel widths are rounded down to a multiple of this (tensor-core friendly leading dimensions).
  static constexpr index_t kPanelAlign = 128;
  /// workspace_bytes() asks for at most this many entries of P beyond the minimum (32 MiB of bf16).
  static constexpr index_t kDefaultPanelEntries = index_t{1} << 24;

  /// Smallest workspace: one panel of kPanelAlign columns (sketch) or rows (unsketch_grad).
  static std::size_t min_workspace_bytes(index_t n, index_t r) {
    check_cuda_dims("Projector::min_workspace_bytes", n, r);
    return static_cast<std::size_t>(std::max(n * std::min(r, kPanelAlign), r * std::min(n, kPanelAlign))) *
           sizeof(Scalar);
  }

  /// Recommended workspace: all of P when it has at most kDefaultPanelEntries entries, else that many.
  static std::size_t workspace_bytes(index_t n, index_t r) {
    check_cuda_dims("Projector::workspace_bytes", n, r);
    const index_t entries = r > kDefaultPanelEntries / n ? kDefaultPanelEntries : n * r;  // no n r overflow
    return std::max(static_cast<std::size_t>(entries) * sizeof(Scalar), min_workspace_bytes(n, r));
  }

  /// P (n x r) of `state`, run on `backend`, with `workspace` (>= min_workspace_bytes(n, r), device memory).
  /// Issues no device work.
  DenseCudaProjector(index_t n, index_t r, SketchState state, Cuda backend, Workspace workspace)
      : n_(n), r_(r), state_(state), backend_(backend), workspace_(workspace) {
    check_cuda_dims("Projector", n, r);
    COMPACT_REQUIRE(workspace.data != nullptr,
                    "Projector: argument workspace is null (needs " << min_workspace_bytes(n, r) << " bytes)");
    COMPACT_REQUIRE(workspace.bytes >= min_workspace_bytes(n, r), "Projector: argument workspace has "
                                                                      << workspace.bytes << " bytes, needs at least "
                                                                      << min_workspace_bytes(n, r) << " for n = " << n
                                                                      << ", r = " << r);
    params_ = entry_params(state_, r_);
  }

  index_t in_dim() const { return n_; }
  index_t rank() const { return r_; }
  SketchState state() const { return state_; }
  const Cuda& backend() const { return backend_; }

  /// z = x P. x: B x n, z: B x r, device memory, row-major with any row strides; z must not overlap x.
  /// Asynchronous on backend().stream.
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const {
    check_sketch_args(x, z, n_, r_);
    if (x.rows == 0) return;
    Scalar* panel = static_cast<Scalar*>(workspace_.data);
    const index_t w_max = panel_extent(capacity(), n_, r_, kPanelAlign);
    check_gemm_plan("Projector::sketch", backend_, sketch_panel_gemm(x.rows, n_, 0, w_max, x.row_stride, z.row_stride));
    for (index_t j0 = 0; j0 < r_; j0 += w_max) {
      const index_t w = std::min(w_max, r_ - j0);
      launch_dense_panel<Dist>(params_, PanelRect{0, n_, j0, j0 + w}, panel, w, backend_.stream);
      gemm_plan<Scalar>("Projector::sketch", backend_, sketch_panel_gemm(x.rows, n_, j0, w, x.row_stride, z.row_stride),
                        1.0f, panel, x.data, 0.0f, z.data);
    }
  }

  /// out = alpha g P^T + beta out. g: m x r, out: m x n, device memory; with beta = 0 out is not read.
  /// Asynchronous on backend().stream.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, Scalar alpha = Scalar(1.0f),
                     Scalar beta = Scalar(0.0f)) const {
    check_unsketch_args(g, out, n_, r_);
    if (g.rows == 0) return;
    Scalar* panel = static_cast<Scalar*>(workspace_.data);
    const index_t h_max = panel_extent(capacity(), r_, n_, kPanelAlign);
    check_gemm_plan("Projector::unsketch_grad", backend_,
                    unsketch_panel_gemm(g.rows, r_, 0, h_max, g.row_stride, out.row_stride));
    const float a = CudaScalar<Scalar>::to_float(alpha), b = CudaScalar<Scalar>::to_float(beta);
    for (index_t i0 = 0; i0 < n_; i0 += h_max) {
      const index_t h = std::min(h_max, n_ - i0);
      launch_dense_panel<Dist>(params_, PanelRect{i0, i0 + h, 0, r_}, panel, r_, backend_.stream);
      gemm_plan<Scalar>("Projector::unsketch_grad", backend_,
                        unsketch_panel_gemm(g.rows, r_, i0, h, g.row_stride, out.row_stride), a, panel, g.data, b,
                        out.data);
    }
  }

  /// p = P (n x r, device memory, any row stride). Needs no workspace. Asynchronous on backend().stream.
  void materialize(MatrixView<Scalar> p) const {
    check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    launch_dense_panel<Dist>(params_, PanelRect{0, n_, 0, r_}, p.data, p.row_stride, backend_.stream);
  }

 private:
  /// Entries of P the workspace holds (panel_extent in core/launch_index.hpp sizes the panels from it).
  index_t capacity() const { return static_cast<index_t>(workspace_.bytes / sizeof(Scalar)); }

  index_t n_;
  index_t r_;
  SketchState state_;
  Cuda backend_;
  Workspace workspace_;
  EntryParams params_;
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
