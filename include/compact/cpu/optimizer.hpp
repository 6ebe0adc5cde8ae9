// SPDX-License-Identifier: MIT
#pragma once
/// Compressed-space optimizers on the CPU: CompressedAdamW and CompressedSgd keep m x r moments and update W via P.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "compact/config.hpp"
#include "compact/core/optimizer_fwd.hpp"
#include "compact/core/optimizer_math.hpp"
#include "compact/core/optimizer_record.hpp"
#include "compact/core/projector_core.hpp"
#include "compact/core/projector_fwd.hpp"
#include "compact/core/state.hpp"
#include "compact/core/tags.hpp"
#include "compact/core/view.hpp"
#include "compact/cpu/compressed_grad.hpp"
#include "compact/cpu/dense_projector.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/srht_projector.hpp"

namespace compact {

namespace detail {

/// What every compressed optimizer shares: shapes, the schedule and stream that define P at each optimizer step,
/// the m x r compressed-gradient buffer, the window-change bookkeeping and the checkpoint record.
///
/// Class invariant: 1 <= r <= n, m >= 1, m·r·sizeof(Scalar) fits in size_t; grad_ and every moment are m x r;
/// `projector_` is P of step `step_`; updates_[k] <= step_ < 2^64 - 1; a moment whose counter is 0 is zero.
template <class Dist, class Scalar>
class CompressedOptimizerBase : public OptimizerCore<Dist, Scalar> {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact compressed optimizers (Cpu): Scalar must be float or double");
  using Core = OptimizerCore<Dist, Scalar>;

 public:
  using ProjectorType = Projector<Cpu, Dist, Scalar>;

  /// P of the coming step (n x r): use it for sketch() in the forward passes of this step's micro-batches.
  const ProjectorType& projector() const { return *projector_; }

  /// The m x r compressed-gradient buffer Ĝ; step() reads it and zeroes it.
  MatrixView<Scalar> grad() { return MatrixView<Scalar>(grad_.data(), m_, r_, r_); }
  MatrixView<const Scalar> grad() const { return MatrixView<const Scalar>(grad_.data(), m_, r_, r_); }
  /// Zeroes the compressed-gradient buffer.
  void zero_grad() { grad_.setZero(); }
  /// Ĝ += dyᵀ z for one micro-batch: dy is B x m (output gradient), z is B x r (= x P with projector()).
  void accumulate_grad(MatrixView<const Scalar> dy, MatrixView<const Scalar> z) {
    check_view("accumulate_grad", "dy", dy, -1, "", m_, "m");
    check_view("accumulate_grad", "z", z, dy.rows, "dy.rows", r_, "r");
    compressed_grad<Scalar>(Cpu{}, dy, z, grad(), Scalar(1));
  }

 protected:
  CompressedOptimizerBase(const char* fn, index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t stream,
                          std::uint32_t kind, int moments, MomentInfo first, MomentInfo second)
      : Core(fn, m, n, r, schedule, stream, kind, moments, first, second) {
    projector_.emplace(n_, r_, this->state());
    grad_ = make_zero_matrix<Scalar>(fn, "the m x r gradient buffer", m_, r_);
    moment_[0] = make_zero_matrix<Scalar>(fn, first.name, m_, r_);
    moment_[1] = make_zero_matrix<Scalar>(fn, second.name, moments_ > 1 ? m_ : 0, moments_ > 1 ? r_ : 0);
  }

  /// Checks the weight argument of step() before anything is written.
  void check_weight(const char* fn, const MatrixView<Scalar>& w) const {
    check_view(fn, "w", w, m_, "m", n_, "n");
    check_no_overlap(fn, "grad", grad(), "w", w);
    this->check_step_count(fn);
  }

  /// Rows of M per transfer panel.
  static constexpr index_t kTransferRows = 64;

  /// Everything a step allocates, allocated before it changes anything: the m x r update (`with_update`: AdamW's N;
  /// SGD updates W from its momentum buffer directly), the projectors' scratch and, at a window change, the next
  /// projector and (kTransferFirst) the 64 x n transfer scratch. An allocation failure therefore throws
  /// compact::error with the optimizer and W untouched, and nothing after it can fail.
  struct StepScratch {
    StepScratch(const CompressedOptimizerBase& opt, const char* fn, WindowPolicy policy, bool with_update)
        : next_state(opt.schedule_.at(opt.stream_, opt.step_ + 1)),
          changes(opt.schedule_.resamples_at(opt.step_ + 1)),  // step_ + 1 < 2^64: check_step_count
          transfers(changes && policy == WindowPolicy::kTransferFirst),
          projector(fn, "the projector scratch", opt.step_scratch_bytes(transfers)),
          update(with_update ? make_matrix<Scalar>(fn, "the m x r update", opt.m_, opt.r_) : RowMatrix<Scalar>()) {
      if (changes) next.emplace(opt.n_, opt.r_, next_state);
      if (transfers) wide = make_matrix<Scalar>(fn, "the transfer scratch", std::min(kTransferRows, opt.m_), opt.n_);
    }
    SketchState next_state;
    bool changes;
    bool transfers;
    ScratchBuffer projector;
    RowMatrix<Scalar> update;           // m x r with_update, else empty
    std::optional<ProjectorType> next;  // P of the next window, when the window changes
    RowMatrix<Scalar> wide;             // kTransferRows x n, when M is transferred
  };

  /// Projector scratch of a step: the W update unsketches m rows; a transfer unsketches and sketches panels of up
  /// to kTransferRows rows.
  std::size_t step_scratch_bytes(bool transfers) const {
    const std::size_t bytes = projector_->scratch_bytes(m_);
    return transfers ? std::max(bytes, projector_->scratch_bytes(std::min(kTransferRows, m_))) : bytes;
  }

  /// W <- (1 - lr·weight_decay) W - lr·alpha·N Pᵀ, accumulated by unsketch_grad straight into W.
  void apply_update(const RowMatrix<Scalar>& update, MatrixView<Scalar> w, double lr, double alpha, double weight_decay,
                    const StepScratch& scratch) const {
    projector_->unsketch_grad(MatrixView<const Scalar>(update.data(), m_, r_, r_), w,
                              static_cast<compute_t<Scalar>>(-lr * alpha),
                              static_cast<compute_t<Scalar>>(1.0 - lr * weight_decay), scratch.projector.view());
  }

  /// Ends a step: counts it, zeroes Ĝ and, when the window changes, applies `policy` to the moments.
  /// `reset_second` says whether kTransferFirst zeroes the second moment.
  void finish_step(StepScratch* scratch, WindowPolicy policy, bool reset_second) {
    ++step_;
    grad_.setZero();
    if (!scratch->next) return;
    std::optional<ProjectorType>& old_projector = scratch->next;
    old_projector.swap(projector_);  // projector_ is now P of the new window, old_projector P of the old one
    switch (policy) {
      case WindowPolicy::kKeep:
        break;
      case WindowPolicy::kReset:
        for (int k = 0; k < moments_; ++k) reset_moment(k);
        break;
      case WindowPolicy::kTransferFirst:
        transfer(*old_projector, *projector_, &moment_[0], &scratch->wide, scratch->projector.view());
        if (moments_ > 1 && reset_second) reset_moment(1);
        break;
    }
  }

  void reset_moment(int k) {
    moment_[k].setZero();
    updates_[k] = 0;
  }

  /// M <- M P_oldᵀ P_new in row panels of kTransferRows: each panel is unsketched to kTransferRows x n and sketched
  /// back, so the scratch (`wide`, kTransferRows x n) is never m x n.
  void transfer(const ProjectorType& p_old, const ProjectorType& p_new, RowMatrix<Scalar>* moment,
                RowMatrix<Scalar>* wide, CpuScratch scratch) const {
    for (index_t i0 = 0; i0 < m_; i0 += kTransferRows) {
      const index_t h = std::min(kTransferRows, m_ - i0);
      const MatrixView<Scalar> rows_view(moment->data() + i0 * r_, h, r_, r_);
      const MatrixView<Scalar> wide_view(wide->data(), h, n_, n_);
      p_old.unsketch_grad(MatrixView<const Scalar>(rows_view), wide_view, Scalar(1), Scalar(0), scratch);
      p_new.sketch(MatrixView<const Scalar>(wide_view), rows_view, scratch);
    }
  }

  /// The checkpoint record (format version 2, see docs/design.md): the header, then the moments' bits.
  std::vector<std::uint8_t> save_record(const char* fn) const {
    std::vector<std::uint8_t> out = this->new_record(fn);
    std::uint8_t* p = out.data() + kOptimizerHeaderBytes;
    for (int k = 0; k < moments_; ++k) {
      for (index_t i = 0; i < m_ * r_; ++i, p += sizeof(Scalar)) put_scalar(p, moment_[k].data()[i]);
    }
    return out;
  }

  /// Restores a record written by save_record() of an optimizer of the same kind, distribution, scalar, shapes,
  /// schedule and stream (or by a CUDA optimizer of the same identity: core/optimizer_record.hpp). Validates every
  /// header field and moment value first (validate_optimizer_record); the projector of the restored step is built
  /// before anything is replaced, so an allocation failure leaves the optimizer as it was too.
  void load_record(const char* fn, const std::uint8_t* bytes, std::size_t size) {
    const OptimizerIdentity id = this->identity();
    const OptimizerCounters counters = validate_optimizer_record<Scalar>(fn, bytes, size, id);
    std::optional<ProjectorType> projector;
    projector.emplace(n_, r_, schedule_.at(stream_, counters.step));
    // Nothing below can fail.
    this->restore_counters(counters);
    for (int k = 0; k < moments_; ++k) {
      const std::uint8_t* p = optimizer_moment_bytes(id, bytes, k);
      for (index_t i = 0; i < m_ * r_; ++i, p += sizeof(Scalar)) moment_[k].data()[i] = get_scalar<Scalar>(p);
    }
    grad_.setZero();
    projector_.swap(projector);
  }

  using Core::m_;
  using Core::moments_;
  using Core::n_;
  using Core::r_;
  using Core::schedule_;
  using Core::step_;
  using Core::stream_;
  using Core::updates_;
  RowMatrix<Scalar> grad_;
  RowMatrix<Scalar> moment_[2];
  std::optional<ProjectorType> projector_;
};

}  // namespace detail

/// AdamW whose moments live in the compressed space: M, V are m x r for a weight W of m x n, and W is updated
/// through P (regenerated from the schedule, never stored) without an m x n temporary. See AdamWOptions for the
/// math.
///
/// Use per optimizer step: for each micro-batch, sketch the layer input with projector() and call
/// accumulate_grad(dy, z) (or compressed_grad with beta = 1 into grad()); then step(w). The schedule counts
/// optimizer steps: P changes only between steps. Sibling layers sharing one input use one optimizer over their
/// stacked weights, or several optimizers with the same stream. Works with every Projector<Cpu, Dist, Scalar>.
template <class Dist, class Scalar>
class CompressedAdamW<Cpu, Dist, Scalar> : public detail::CompressedOptimizerBase<Dist, Scalar> {
  using Base = detail::CompressedOptimizerBase<Dist, Scalar>;

 public:
  /// An optimizer for a weight of m x n compressed to rank r (1 <= r <= n), with P at step t from
  /// schedule.at(stream, t). Throws compact::error naming the argument on bad shapes or hyperparameters.
  CompressedAdamW(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t stream, AdamWOptions options = {})
      : Base("CompressedAdamW", m, n, r, schedule, stream, detail::kOptimizerKindAdamW, 2, {"first moment M", false},
             {"second moment V", true}),
        options_(options) {
    check_options(options_);
  }

  const AdamWOptions& options() const { return options_; }
  /// Changes the hyperparameters (e.g. a learning-rate schedule); validated like the constructor's.
  void set_options(const AdamWOptions& options) {
    check_options(options);
    options_ = options;
  }
  void set_lr(double lr) {
    AdamWOptions o = options_;
    o.lr = lr;
    set_options(o);
  }

  /// First moment M (m x r) and second moment V (m x r).
  const RowMatrix<Scalar>& first_moment() const { return this->moment_[0]; }
  const RowMatrix<Scalar>& second_moment() const { return this->moment_[1]; }

  /// One AdamW step on w (m x n, row-major, any row stride) from the accumulated Ĝ; then Ĝ is zeroed, the step is
  /// counted and, if the window changes, the window policy is applied. Scratch: one m x r matrix, the projector's
  /// scratch and, at a window change, the next projector (and 64 x n for kTransferFirst), all allocated before
  /// anything changes: a bad argument or running out of memory throws compact::error and changes nothing.
  void step(MatrixView<Scalar> w) {
    constexpr const char* fn = "CompressedAdamW::step";
    this->check_weight(fn, w);
    const AdamWOptions& o = options_;
    typename Base::StepScratch scratch(*this, fn, o.window_policy, true);
    ++this->updates_[0];
    ++this->updates_[1];
    // The per-element math of core/optimizer_math.hpp, which the CUDA optimizer's fused kernel runs too.
    const detail::AdamWStepScalars<Scalar> s =
        detail::adamw_step_scalars<Scalar>(o, this->updates_[0], this->updates_[1]);
    Scalar* M = this->moment_[0].data();
    Scalar* V = this->moment_[1].data();
    const Scalar* G = this->grad_.data();
    RowMatrix<Scalar>& update = scratch.update;
    Scalar* N = update.data();
    const index_t count = this->m_ * this->r_;
    for (index_t i = 0; i < count; ++i) N[i] = detail::adamw_element(G[i], &M[i], &V[i], s);
    this->apply_update(update, w, o.lr, o.alpha, o.weight_decay, scratch);
    this->finish_step(&scratch, o.window_policy, o.reset_second_moment);
  }
  /// Eigen convenience for step().
  void step(Eigen::Ref<RowMatrix<Scalar>> w) { step(detail::as_mutable_view<Scalar>(w)); }

  /// The state to checkpoint: shapes, schedule, stream, step count, bias-correction counters and M, V (bit
  /// patterns, little-endian). With the weights, it is all a run needs to resume bit for bit.
  std::vector<std::uint8_t> save_state() const { return this->save_record("CompressedAdamW::save_state"); }
  /// Restores save_state() output of an optimizer with the same distribution, scalar, shapes, schedule and stream;
  /// zeroes Ĝ. Every field and moment value is validated first (see load_record): a bad record throws
  /// compact::error naming the field and changes nothing.
  void load_state(const std::uint8_t* bytes, std::size_t size) {
    this->load_record("CompressedAdamW::load_state", bytes, size);
  }
  void load_state(const std::vector<std::uint8_t>& bytes) { load_state(bytes.data(), bytes.size()); }

 private:
  static void check_options(const AdamWOptions& o) {
    constexpr const char* fn = "CompressedAdamW";
    detail::check_update_scales<Scalar>(fn, o.lr, o.alpha, o.weight_decay);
    detail::check_adamw_moment_options<Scalar>(fn, o);
  }

  AdamWOptions options_;
};

/// SGD with momentum in the compressed space: the momentum buffer B is m x r and W is updated through P with
/// unsketch_grad straight into W. See SgdOptions for the math and CompressedAdamW for the per-step protocol.
template <class Dist, class Scalar>
class CompressedSgd<Cpu, Dist, Scalar> : public detail::CompressedOptimizerBase<Dist, Scalar> {
  using Base = detail::CompressedOptimizerBase<Dist, Scalar>;

 public:
  CompressedSgd(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t stream, SgdOptions options = {})
      : Base("CompressedSgd", m, n, r, schedule, stream, detail::kOptimizerKindSgd, 1, {"momentum buffer B", false},
             {"(unused)", false}),
        options_(options) {
    check_options(options_);
  }

  const SgdOptions& options() const { return options_; }
  void set_options(const SgdOptions& options) {
    check_options(options);
    options_ = options;
  }
  void set_lr(double lr) {
    SgdOptions o = options_;
    o.lr = lr;
    set_options(o);
  }

  /// Momentum buffer B (m x r).
  const RowMatrix<Scalar>& momentum_buffer() const { return this->moment_[0]; }

  /// One step on w (m x n) from the accumulated Ĝ; then Ĝ is zeroed, the step counted and the window policy
  /// applied if the window changes (kTransferFirst transfers B). Scratch: the projector's and, at a window change,
  /// the next projector (and 64 x n for kTransferFirst), allocated before anything changes.
  void step(MatrixView<Scalar> w) {
    constexpr const char* fn = "CompressedSgd::step";
    this->check_weight(fn, w);
    typename Base::StepScratch scratch(*this, fn, options_.window_policy, false);
    RowMatrix<Scalar>& B = this->moment_[0];
    const bool first = this->updates_[0] == 0;
    const Scalar momentum = static_cast<Scalar>(options_.momentum);
    Scalar* b = B.data();
    const Scalar* G = this->grad_.data();
    for (index_t i = 0; i < this->m_ * this->r_; ++i) detail::sgd_element(G[i], &b[i], momentum, first);
    ++this->updates_[0];
    this->apply_update(B, w, options_.lr, options_.alpha, options_.weight_decay, scratch);
    this->finish_step(&scratch, options_.window_policy, false);
  }
  void step(Eigen::Ref<RowMatrix<Scalar>> w) { step(detail::as_mutable_view<Scalar>(w)); }

  std::vector<std::uint8_t> save_state() const { return this->save_record("CompressedSgd::save_state"); }
  void load_state(const std::uint8_t* bytes, std::size_t size) {
    this->load_record("CompressedSgd::load_state", bytes, size);
  }
  void load_state(const std::vector<std::uint8_t>& bytes) { load_state(bytes.data(), bytes.size()); }

 private:
  static void check_options(const SgdOptions& o) {
    constexpr const char* fn = "CompressedSgd";
    detail::check_update_scales<Scalar>(fn, o.lr, o.alpha, o.weight_decay);
    detail::check_sgd_momentum(fn, o);
  }

  SgdOptions options_;
};

}  // namespace compact
