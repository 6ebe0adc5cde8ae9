// SPDX-License-Identifier: MIT
#pragma once
/// Projector<Cpu, Srht, float|double>: z = (1/sqrt(r)) FWHT(pad(x . d))[S], one length-n' transform per row.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "compact/config.hpp"
#include "compact/spec/entries.hpp"
#include "compact/spec/srht.hpp"
#include "compact/spec/state.hpp"
#include "compact/api/distributions.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/projector_fwd.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/parallel.hpp"
#include "compact/cpu/scratch.hpp"
#include "compact/cpu/fwht.hpp"
#include "compact/cpu/projector.hpp"
#include "compact/cpu/srht_row_transform.hpp"

namespace compact {
namespace detail {

/// The implementation of the SRHT projector on the CPU (entry spec v1): P = D H S / sqrt(r), P[i][j] = d_i
/// (-1)^popcount(i & S_j) / sqrt(r).
///
/// n' = next_pow2(n); d (signs), S (the column sample, r ascending indices below n') and the fp32 scale
/// 1/sqrt(r) are computed once by the constructor (O(n') time and memory). `sketch` applies P to each row of x in
/// O(n' log n'): x . d zero-padded to n' and transformed in a length-n' buffer (the product formed by the FWHT's
/// first pass, cpu/srht_row_transform.hpp), then S gathered and scaled. `unsketch_grad` is
/// the exact adjoint: scatter g into S of a zeroed buffer, fwht, multiply by d and the scale, drop the padding.
/// Rows run in parallel (detail::parallel_tasks, a fixed partition into tasks of kRowsPerTask rows, on at most
/// kMaxTeam threads); each thread uses one buffer of n' Scalars (scratch_bytes_per_thread()), taken from the calling
/// thread's kept scratch (detail::ScratchLease) before the team starts or lent by the caller (the overloads that take a
/// Workspace of scratch_bytes(rows) or workspace_bytes(n, r)), and nothing else is allocated per row. Each row's result
/// is a fixed sequence of IEEE operations, so results are bitwise identical for every thread count.
///
/// Class invariant: 1 <= r <= n, n' = next_pow2(n) <= kSrhtMaxPaddedDim (2^20).
template <class Scalar>
class SrhtCpuProjector : public ProjectorCore {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact::Projector<Cpu, Srht, Scalar>: Scalar must be float or double on the CPU");

 public:
  using scalar_type = Scalar;

  /// Rows of x (sketch) or g (unsketch_grad) per parallel task.
  static constexpr index_t kRowsPerTask = 8;
  /// Most threads one call runs on: each needs its own transform buffer, and workspace_bytes(n, r), a pure function of
  /// (n, r), holds this many (on a machine with more threads a call leaves the others idle).
  static constexpr int kMaxTeam = 64;
  /// sketch writes z with streaming stores from this size of z up (larger than the L2 caches of two cores).
  static constexpr std::size_t kStreamBytes = std::size_t{4} << 20;

  /// Requires 1 <= r <= n and next_pow2(n) <= kSrhtMaxPaddedDim.
  SrhtCpuProjector(index_t n, index_t r, SketchState state) : ProjectorCore(Srht{}, "Projector", n, r, state) {
    padded_ = next_pow2(n_);
    log_padded_ = log2_pow2(padded_);
    // O(n') memory (at most a few MiB): an allocation failure is reported as compact::error like every other.
    const std::size_t bytes =
        static_cast<std::size_t>(padded_) * (sizeof(index_t) + sizeof(std::int32_t) + sizeof(std::uint64_t)) +
        static_cast<std::size_t>(n_) * sizeof(Scalar);
    detail::allocating("Projector<Cpu, Srht>", "the column sample and signs", bytes, [&] {
      sample_ = srht_sample(state_, n_, r_);
      sample32_.assign(sample_.begin(), sample_.end());
      signs_.resize(static_cast<std::size_t>(n_));
    });
    for (index_t b = 0; b * kSrhtSignBlockCols < n_; ++b) {
      const Words4x32 x = srht_sign_block(params_.key, params_.window, b);
      const index_t k1 = (b + 1) * kSrhtSignBlockCols < n_ ? (b + 1) * kSrhtSignBlockCols : n_;
      for (index_t k = b * kSrhtSignBlockCols; k < k1; ++k) {
        signs_[static_cast<std::size_t>(k)] = srht_sign_bit_in(x, k) ? Scalar(-1) : Scalar(1);
      }
    }
  }

  /// n' = next_pow2(n), the length of the transform.
  index_t padded_dim() const { return padded_; }
  /// S_0 < ... < S_{r-1}, the sampled columns of the padded Hadamard matrix (all below n').
  const std::vector<index_t>& sample() const { return sample_; }
  /// d_0 .. d_{n-1} as +-1 (padding rows k >= n never reach the output, so their signs are not kept).
  const std::vector<Scalar>& signs() const { return signs_; }
  /// The fp32 scale 1/sqrt(r) (rank_scale), converted to Scalar.
  Scalar scale() const { return static_cast<Scalar>(params_.scale); }
  /// Scratch each thread uses during sketch/unsketch_grad: one buffer of n' Scalars. The transform family's extra
  /// (reached under `if constexpr (is_transform_v<Dist>)`); every projector answers scratch_bytes(rows).
  std::size_t scratch_bytes_per_thread() const { return static_cast<std::size_t>(padded_) * sizeof(Scalar); }

  /// Bytes of the Workspace every sketch and unsketch_grad of a projector of shape (n, r) can take, whatever the
  /// thread count: one transform buffer of n' Scalars (rounded up to 64 bytes) for each of at most kMaxTeam threads
  /// (1 MiB at n' = 4096 in float). A pure function of (n, r): needs no projector and no device, as on every backend.
  static std::size_t workspace_bytes(index_t n, index_t r) {
    check_projector_shape<Srht>("Projector::workspace_bytes", n, r);
    return static_cast<std::size_t>(kMaxTeam) * buffer_stride(next_pow2(n));
  }

  /// Bytes of Workspace one sketch or unsketch_grad of `rows` rows takes: one transform buffer per thread the call
  /// runs on (at most kMaxTeam, so at most workspace_bytes(n, r)). The per-call query the optimizers use.
  std::size_t scratch_bytes(index_t rows) const {
    const index_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
    return static_cast<std::size_t>(detail::team_size(tasks, transform_flops(rows), kMaxTeam)) * buffer_stride(padded_);
  }

  /// z = x P. x: B x n, z: B x r (row-major, any row strides, z must not overlap x), with the caller's workspace (at
  /// least scratch_bytes(x.rows) bytes): allocates nothing. (CpuProjector adds the allocating overload.)
  void sketch(MatrixView<const Scalar> x, MatrixView<Scalar> z, Workspace scratch) const {
    detail::check_sketch_args(x, z, n_, r_);
    detail::check_scratch<Scalar>("Projector::sketch", scratch, scratch_bytes(x.rows));
    if (x.rows == 0) return;
    sketch_unchecked(x, z, scratch);
  }

  /// out = alpha g P^T + beta out. g: m x r, out: m x n; with beta = 0, out is written without being read. With the
  /// caller's workspace (at least scratch_bytes(g.rows) bytes): allocates nothing.
  void unsketch_grad(MatrixView<const Scalar> g, MatrixView<Scalar> out, compute_t<Scalar> alpha,
                     compute_t<Scalar> beta, Workspace scratch) const {
    detail::check_unsketch_args(g, out, n_, r_);
    detail::check_scratch<Scalar>("Projector::unsketch_grad", scratch, scratch_bytes(g.rows));
    if (g.rows == 0) return;
    unsketch_unchecked(g, out, alpha, beta, scratch);
  }

  /// p = P (n x r), entry by entry from the formula (fp32, converted exactly to Scalar).
  void materialize(MatrixView<Scalar> p) const {
    detail::check_view("Projector::materialize", "p", p, n_, "n", r_, "r");
    materialize_block(p, 0, 0);
  }
  /// p = P[row0 : row0 + p.rows, col0 : col0 + p.cols], a block of P (the same entries as materialize's). Requires
  /// the block inside P.
  void materialize(MatrixView<Scalar> p, index_t row0, index_t col0) const {
    detail::check_block("Projector::materialize", p, row0, col0, n_, r_);
    materialize_block(p, row0, col0);
  }

 private:
  /// Bytes between two threads' transform buffers: n' = `padded` Scalars rounded up to a cache line.
  static std::size_t buffer_stride(index_t padded) {
    constexpr std::size_t kLine = detail::ScratchBuffer::kAlign;
    return (static_cast<std::size_t>(padded) * sizeof(Scalar) + kLine - 1) / kLine * kLine;
  }
  /// Thread t's transform buffer in `scratch` (checked to hold one per thread of the team).
  Scalar* thread_buffer(const Workspace& scratch, int thread) const {
    return reinterpret_cast<Scalar*>(static_cast<unsigned char*>(scratch.data) +
                                     static_cast<std::size_t>(thread) * buffer_stride(padded_));
  }

  /// Runs row_fn(row, buffer, isa) for every row in [0, rows) on the thread team (fixed tasks of kRowsPerTask
  /// rows), each thread with its own transform buffer from `scratch`.
  template <class RowFn>
  void for_each_row(index_t rows, const Workspace& scratch, RowFn&& row_fn) const {
    const CpuIsa isa = active_cpu_isa();
    const index_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
    detail::parallel_tasks(
        tasks, transform_flops(rows),
        [&](index_t t, int thread) {
          Scalar* buf = thread_buffer(scratch, thread);
          const index_t end = (t + 1) * kRowsPerTask < rows ? (t + 1) * kRowsPerTask : rows;
          for (index_t row = t * kRowsPerTask; row < end; ++row) row_fn(row, buf, isa);
        },
        kMaxTeam);
  }

  void sketch_unchecked(const MatrixView<const Scalar>& x, const MatrixView<Scalar>& z,
                        const Workspace& scratch) const {
    // A sketch larger than the caches is written with streaming stores (see detail::srht_gather_row).
    const bool stream = double(x.rows) * double(r_) * sizeof(Scalar) >= double(kStreamBytes);
    for_each_row(x.rows, scratch, [&](index_t b, Scalar* buf, CpuIsa isa) {
      // The next row of the same task (the thread's next row) is prefetched while this one is read.
      const Scalar* next = (b + 1) % kRowsPerTask != 0 && b + 1 < x.rows ? x.data + (b + 1) * x.row_stride : nullptr;
      sketch_row(x.data + b * x.row_stride, z.data + b * z.row_stride, buf, stream, isa, next);
    });
  }

  void unsketch_unchecked(const MatrixView<const Scalar>& g, const MatrixView<Scalar>& out, Scalar alpha, Scalar beta,
                          const Workspace& scratch) const {
    for_each_row(g.rows, scratch, [&](index_t m, Scalar* buf, CpuIsa isa) {
      unsketch_row(g.data + m * g.row_stride, out.data + m * out.row_stride, alpha, beta, buf, isa);
    });
  }

  void materialize_block(const MatrixView<Scalar>& p, index_t row0, index_t col0) const {
    constexpr index_t kPanel = 128;
    const index_t tasks = (p.rows + kPanel - 1) / kPanel;
    detail::parallel_tasks(tasks, 20.0 * double(p.rows) * double(p.cols), [&](index_t t, int) {
      const index_t i1 = (t + 1) * kPanel < p.rows ? (t + 1) * kPanel : p.rows;
      for (index_t i = t * kPanel; i < i1; ++i) {
        Scalar* row = p.data + i * p.row_stride;
        const index_t pi = row0 + i;
        const std::uint32_t d = signs_[static_cast<std::size_t>(pi)] < Scalar(0) ? 1u : 0u;
        for (index_t j = 0; j < p.cols; ++j) {
          row[j] = static_cast<Scalar>(
              srht_entry_from_sign(d, pi, sample_[static_cast<std::size_t>(col0 + j)], params_.scale));
        }
      }
    });
  }

  /// Additions and subtractions of `rows` transforms, to decide whether a thread team pays off.
  double transform_flops(index_t rows) const { return double(rows) * double(padded_) * double(log_padded_ + 1); }

  /// z_row[j] = scale * (H pad(x_row . d))[S_j], using buf (n' Scalars); `next` (or null) is the row after, prefetched.
  void sketch_row(const Scalar* x_row, Scalar* z_row, Scalar* buf, bool stream, CpuIsa isa, const Scalar* next) const {
    detail::srht_transform_row(x_row, signs_.data(), n_, buf, log_padded_, isa, next);
    detail::srht_gather_row(buf, sample32_.data(), r_, scale(), z_row, stream, isa);
  }

  /// out_row[i] = alpha * (d_i * scale * (H scatter_S(g_row))[i]) (+ beta * out_row[i]), i < n.
  void unsketch_row(const Scalar* g_row, Scalar* out_row, Scalar alpha, Scalar beta, Scalar* buf, CpuIsa isa) const {
    std::memset(static_cast<void*>(buf), 0, static_cast<std::size_t>(padded_) * sizeof(Scalar));
    const index_t* s = sample_.data();
    for (index_t j = 0; j < r_; ++j) buf[s[j]] = g_row[j];
    detail::fwht_unchecked(buf, log_padded_, isa);
    const Scalar* d = signs_.data();
    const Scalar sc = scale();
    if (beta == Scalar(0)) {
      for (index_t i = 0; i < n_; ++i) out_row[i] = alpha * (buf[i] * d[i] * sc);
    } else {
      for (index_t i = 0; i < n_; ++i) out_row[i] = alpha * (buf[i] * d[i] * sc) + beta * out_row[i];
    }
  }

  index_t padded_ = 1;
  int log_padded_ = 0;
  std::vector<index_t> sample_;
  std::vector<std::int32_t> sample32_;  // S as 32-bit indices (n' <= 2^20): half the gather's index traffic
  std::vector<Scalar> signs_;
};

}  // namespace detail

/// SRHT projector on the CPU: P = D H S / sqrt(r) (entry spec v1). See detail::SrhtCpuProjector.
template <class Scalar>
class Projector<Cpu, Srht, Scalar> : public detail::CpuProjector<detail::SrhtCpuProjector<Scalar>> {
 public:
  using detail::CpuProjector<detail::SrhtCpuProjector<Scalar>>::CpuProjector;
};

/// The CPU backend implements Srht.
template <>
struct BackendSupports<Cpu, Srht> : std::true_type {};

}  // namespace compact
