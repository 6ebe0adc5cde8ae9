// SPDX-License-Identifier: MIT
#pragma once
/// MaterializedP: a dense CUDA projector's P generated once into caller memory and reused by every sketch and
/// unsketch_grad of a resampling window, each then one cublasGemmEx.

#include <cstddef>
#include <type_traits>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/spec/tags.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/view.hpp"
#include "compact/kernels/gemm_plan.hpp"
#include "compact/kernels/panel_schedule.hpp"
#include "compact/kernels/vec16.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/dense_projector.cuh"
#include "compact/cuda/device.cuh"
#include "compact/cuda/gemm.cuh"

namespace compact {

/// P (n x r) of a Gaussian or Rademacher CUDA projector, generated once into device memory the caller lends, then
/// used by sketch (z = x P) and unsketch_grad (out = alpha g P^T + beta out) as one cublasGemmEx each, with no
/// generation. Meant for one resampling window, where P does not change: the forward sketches of all micro-batches
/// and the optimizer's unsketch_grad share it. A small copyable value that borrows `p`.
///
/// Memory: n rows of p.row_stride >= r elements, held by the caller for the window; bytes(n, r) =
/// n * recommended_ld(r) * sizeof(Scalar) (8 MiB for n = 4096, r = 1024 in bf16; 32 MiB for n = 8192, r = 2048),
/// against the regenerating projector's workspace, which layers can share because it is transient.
///
/// Results: P's entries are those of the projector (spec/entries.hpp), so with row stride recommended_ld(r)
/// sketch and unsketch_grad issue exactly the GEMM that the projector's own sketch and unsketch_grad issue when its
/// workspace holds all of P in one panel (schedule kSerial and n * recommended_ld(r) entries, as
/// Projector::workspace_bytes(n, r) gives for layers of at most 2^24 entries): the results are then bit for bit
/// the same. With another split (a smaller workspace, or kOverlap) they agree within the fp32 accumulation bound.
///
/// Streams: the constructor enqueues the generation on `stream` (default: the projector's backend stream); use on
/// another stream must be ordered after it by the caller. Operations read p only, so several may run at once on
/// different streams (each on its own output). p must stay allocated and unchanged while they are in flight.
template <class Dist, class Scalar>
class MaterializedP {
  static_assert(is_dense_v<Dist>,
                "compact::MaterializedP<Dist, Scalar>: Dist must be a dense distribution (an SRHT sketch is an "
                "FWHT, cheaper than a GEMM with a stored P)");

 public:
  using ProjectorType = Projector<Cuda, Dist, Scalar>;

  /// Row stride of p with which the results equal the one-panel projector's bit for bit: r rounded up to 16 bytes.
  static index_t recommended_ld(index_t r) { return detail::panel_ld(r, detail::kVec16Elems<Scalar>); }

  /// Device memory P needs with row stride recommended_ld(r): n * recommended_ld(r) * sizeof(Scalar) bytes.
  static std::size_t bytes(index_t n, index_t r) {
    detail::check_projector_shape<Dist>("MaterializedP::bytes", n, r);
    return static_cast<std::size_t>(n) * static_cast<std::size_t>(recommended_ld(r)) * sizeof(Scalar);
  }

  /// Generates the projector's P into p (n x r, device memory, row stride >= r) on the projector's backend stream.
  MaterializedP(const ProjectorType& projector, MatrixView<Scalar> p)
      : MaterializedP(projector, p, projector.backend().stream) {}

  /// Generates the projector's P into p on `stream`. p is checked before any CUDA call.
  MaterializedP(const ProjectorType& projector, MatrixView<Scalar> p, cudaStream_t stream)
      : projector_(projector), p_(p) {
    projector_.materialize(p, stream);  // checks p: n x r, row stride >= r
  }

  const ProjectorType& projector() const { return projector_; }
  index_t in_dim() const { return projector_.in_dim(); }
  index_t rank() const { return projector_.rank(); }
  /// The stored P.
  MatrixView<const Scalar> p() const { return p_; }

  /// z = x P with the stored P: one GEMM. x: B x n, z: B x r, device memory; z overlaps neither x nor P. On the
  /// projector's backend stream, or on `stream`.
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z) const { sketch(x, z, projector_.backend().stream); }
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z, cudaStream_t stream) const {
    check_args("MaterializedP::sketch", "x", x, in_dim(), "n", "z", z, rank(), "r", "x.rows");
    if (x.rows == 0) return;
    gemm("MaterializedP::sketch",
         detail::sketch_panel_gemm(x.rows, in_dim(), 0, rank(), p_.row_stride, x.row_stride, z.row_stride), stream,
         1.0f, x.data, 0.0f, z.data);
  }

  /// out = alpha g P^T + beta out with the stored P: one GEMM. g: m x r, out: m x n, device memory; out overlaps
  /// neither g nor P; with beta = 0 out is not read. On the projector's backend stream, or on `stream`.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, float alpha = 1.0f, float beta = 0.0f) const {
    unsketch_grad(g, out, alpha, beta, projector_.backend().stream);
  }
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, float alpha, float beta,
                     cudaStream_t stream) const {
    check_args("MaterializedP::unsketch_grad", "g", g, rank(), "r", "out", out, in_dim(), "n", "g.rows");
    if (g.rows == 0) return;
    gemm("MaterializedP::unsketch_grad",
         detail::unsketch_panel_gemm(g.rows, rank(), 0, in_dim(), p_.row_stride, g.row_stride, out.row_stride), stream,
         alpha, g.data, beta, out.data);
  }

 private:
  /// The checks of an operation reading `in` (rows x in_cols) and writing `out` (as many rows, named rows_what, and
  /// out_cols), before any CUDA call: shapes, and out overlapping neither in nor P.
  void check_args(const char* fn, const char* in_name, const MatrixView<const Scalar>& in, index_t in_cols,
                  const char* in_cols_what, const char* out_name, const MatrixView<Scalar>& out, index_t out_cols,
                  const char* out_cols_what, const char* rows_what) const {
    detail::check_view(fn, in_name, in, -1, "", in_cols, in_cols_what);
    detail::check_view(fn, out_name, out, in.rows, rows_what, out_cols, out_cols_what);
    detail::check_no_alias(fn, in_name, in, out_name, out);
    detail::check_no_alias(fn, "p", p(), out_name, out);
  }

  /// The GEMM of `plan` with the stored P as A, on `stream`, on the projector's device.
  void gemm(const char* fn, const detail::GemmPlan& plan, cudaStream_t stream, float alpha, const Scalar* b, float beta,
            Scalar* c) const {
    const Cuda on = projector_.backend().on(stream);
    detail::check_gemm_plan(fn, on, plan);
    const detail::DeviceGuard guard(projector_.device(), fn);
    detail::gemm_plan<Scalar, Scalar>(fn, on, plan, alpha, p_.data, b, beta, c);
  }

  ProjectorType projector_;
  MatrixView<Scalar> p_;
};

}  // namespace compact
