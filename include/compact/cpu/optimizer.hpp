// SPDX-License-Identifier: MIT
#pragma once
/// Compressed-space optimizers on the CPU: the CPU's storage of the optimizer core (api/optimizer_bases.hpp), and
/// CompressedAdamW<Cpu, ...> and CompressedSgd<Cpu, ...>, which add their step.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "compact/config.hpp"
#include "compact/spec/state.hpp"
#include "compact/api/optimizer_bases.hpp"
#include "compact/api/optimizer_core.hpp"
#include "compact/api/optimizer_fwd.hpp"
#include "compact/api/optimizer_options.hpp"
#include "compact/api/optimizer_record.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/projector_fwd.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/kernels/optimizer_step.hpp"
#include "compact/cpu/backend.hpp"
#include "compact/cpu/compressed_grad.hpp"
#include "compact/cpu/dense_projector.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/scratch.hpp"
#include "compact/cpu/srht_projector.hpp"

namespace compact {

namespace detail {

/// The CPU's storage of a compressed optimizer (the hooks api/optimizer_storage.hpp lists and checks): Ĝ, the moments
/// and the update N are m x r host matrices of Scalar; a projector call runs with the workspace the step lent it
/// (Context = Workspace); P of the next window is built as a new projector.
///
/// Class invariant: 1 <= r <= n, m >= 1, m·r·sizeof(Scalar) fits in size_t; grad_, update_ and every moment are
/// m x r.
template <class Dist, class Scalar>
class OptimizerStorage<Cpu, Dist, Scalar> : public OptimizerCore<Dist, Scalar> {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact compressed optimizers (Cpu): Scalar must be float or double");
  using Core = OptimizerCore<Dist, Scalar>;

 public:
  using ProjectorType = Projector<Cpu, Dist, Scalar>;
  using Moment = Scalar;
  /// What a projector call of the optimizer runs with: the step's projector workspace (allocated before anything
  /// changes).
  using Context = Workspace;
  static constexpr bool kContextIsStream = false;

  /// Zeroes Ĝ.
  void zero_grad() { grad_.setZero(); }
  /// Ĝ += dyᵀ z for one micro-batch: dy is B x m (output gradient), z is B x r (= x P with projector()).
  void accumulate_grad(MatrixView<const Scalar> dy, MatrixView<const Scalar> z) {
    check_view("accumulate_grad", "dy", dy, -1, "", m_, "m");
    check_view("accumulate_grad", "z", z, dy.rows, "dy.rows", r_, "r");
    compressed_grad<Scalar>(Cpu{}, dy, z, grad_view(), Scalar(1));
  }

 protected:
  OptimizerStorage(const char* fn, index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t sketch_stream,
                   std::uint32_t kind, int moments, MomentInfo first, MomentInfo second)
      : Core(fn, m, n, r, schedule, sketch_stream, kind, moments, first, second) {
    projector_.emplace(n_, r_, this->state());
    grad_ = make_zero_matrix<Scalar>(fn, "the m x r gradient buffer", m_, r_);
    update_ = make_zero_matrix<Scalar>(fn, "the m x r update N", m_, r_);
    moment_[0] = make_zero_matrix<Scalar>(fn, first.name, m_, r_);
    moment_[1] = make_zero_matrix<Scalar>(fn, second.name, moments_ > 1 ? m_ : 0, moments_ > 1 ? r_ : 0);
  }

  // The hooks of api/optimizer_storage.hpp.
  static Context default_context() { return Workspace{}; }
  MatrixView<Scalar> grad_view() { return MatrixView<Scalar>(grad_.data(), m_, r_, r_); }
  MatrixView<const Scalar> grad_view() const { return MatrixView<const Scalar>(grad_.data(), m_, r_, r_); }
  MatrixView<Scalar> moment_view(int k) { return MatrixView<Scalar>(moment_[k].data(), m_, r_, r_); }
  MatrixView<const Scalar> moment_view(int k) const { return MatrixView<const Scalar>(moment_[k].data(), m_, r_, r_); }
  MatrixView<const Scalar> update_view() const { return MatrixView<const Scalar>(update_.data(), m_, r_, r_); }
  ProjectorType build_projector(SketchState s, Context) const { return ProjectorType(n_, r_, s); }
  void projector_swapped() {}
  void zero_grad_on(Context) { grad_.setZero(); }
  void zero_moment(int k, Context) { moment_[k].setZero(); }
  std::vector<Scalar> host_staging(const char*) const { return {}; }  // the moments are host memory
  const Scalar* moment_on_host(int k, std::vector<Scalar>*, Context) const { return moment_[k].data(); }
  Scalar* moment_host_target(int k, std::vector<Scalar>*) { return moment_[k].data(); }
  void commit_moment(int, const std::vector<Scalar>&, Context) {}
  static void check_policy(const char*, WindowPolicy) {}
  void prepare_policy(const char*, WindowPolicy) {}

  /// Checks the weight argument of step() before anything is written.
  void check_weight(const char* fn, const MatrixView<Scalar>& w) const {
    check_view(fn, "w", w, m_, "m", n_, "n");
    check_no_alias(fn, "grad", grad_view(), "w", w);
    this->check_step_count(fn);
  }

  /// Everything a step allocates besides the next window's projector, allocated before it changes anything: the
  /// projectors' workspace (the step's context) and, at a window change with kTransferFirst, the kTransferRows x n
  /// transfer scratch. An allocation failure therefore throws compact::error with the optimizer and W untouched.
  class StepResources {
   public:
    StepResources(const char* fn, std::size_t projector_bytes, index_t wide_rows, index_t n)
        : projector_(fn, "the projector scratch", projector_bytes),
          wide_(make_matrix<Scalar>(fn, "the transfer scratch", wide_rows, wide_rows > 0 ? n : 0)) {}
    Workspace context() const { return projector_.view(); }
    MatrixView<Scalar> wide() { return MatrixView<Scalar>(wide_.data(), wide_.rows(), wide_.cols(), wide_.cols()); }

   private:
    ScratchLease projector_;  // the calling thread's kept scratch: a step faults in no fresh pages
    RowMatrix<Scalar> wide_;
  };
  StepResources step_resources(const char* fn, WindowPolicy policy, Context) const {
    constexpr index_t kRows = CompressedOptimizerBase<Cpu, Dist, Scalar>::kTransferRows;
    const bool transfers = schedule_.resamples_at(step_ + 1) && policy == WindowPolicy::kTransferFirst;
    return StepResources(fn, step_scratch_bytes(transfers), transfers ? std::min(kRows, m_) : 0, n_);
  }

  /// Projector workspace of a step: the W update unsketches m rows; a transfer unsketches and sketches panels of up
  /// to kTransferRows rows.
  std::size_t step_scratch_bytes(bool transfers) const {
    constexpr index_t kRows = CompressedOptimizerBase<Cpu, Dist, Scalar>::kTransferRows;
    const std::size_t bytes = projector_->scratch_bytes(m_);
    return transfers ? std::max(bytes, projector_->scratch_bytes(std::min(kRows, m_))) : bytes;
  }

  using Core::m_;
  using Core::moments_;
  using Core::n_;
  using Core::r_;
  using Core::schedule_;
  using Core::step_;
  RowMatrix<Scalar> grad_;
  RowMatrix<Scalar> update_;
  RowMatrix<Scalar> moment_[2];
  std::optional<ProjectorType> projector_;
};

}  // namespace detail

/// AdamW whose moments live in the compressed space: M, V are m x r for a weight W of m x n, and W is updated
/// through P (regenerated from the schedule, never stored) without an m x n temporary. See AdamWOptions for the
/// math and detail::AdamWBase for what every backend shares (options, moments, checkpoint).
///
/// Use per optimizer step: for each micro-batch, sketch the layer input with projector() and call
/// accumulate_grad(dy, z) (or compressed_grad with beta = 1 into grad()); then step(w). The schedule counts
/// optimizer steps: P changes only between steps. Sibling layers sharing one input use one optimizer over their
/// stacked weights, or several optimizers with the same sketch stream. Works with every Projector<Cpu, Dist, Scalar>.
template <class Dist, class Scalar>
class CompressedAdamW<Cpu, Dist, Scalar> : public detail::AdamWBase<Cpu, Dist, Scalar> {
  using Base = detail::AdamWBase<Cpu, Dist, Scalar>;

 public:
  /// An optimizer for a weight of m x n compressed to rank r (1 <= r <= n), with P at step t from
  /// schedule.at(sketch_stream, t). Throws compact::error naming the argument on bad shapes or hyperparameters.
  CompressedAdamW(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t sketch_stream,
                  AdamWOptions options = {})
      : Base(m, n, r, schedule, sketch_stream, options) {}

  /// One AdamW step on w (m x n, row-major, any row stride) from the accumulated Ĝ; then Ĝ is zeroed, the step is
  /// counted and, if the window changes, the window policy is applied. Scratch: the projector's workspace and, at a
  /// window change, the next projector (and 64 x n for kTransferFirst), all allocated before anything changes: a bad
  /// argument or running out of memory throws compact::error and changes nothing.
  void step(MatrixView<Scalar> w) {
    const AdamWOptions& o = this->options_;
    this->run_step("CompressedAdamW::step", w, Workspace{}, o.reset_second_moment,
                   static_cast<compute_t<Scalar>>(-o.lr * o.alpha), [this](Workspace) {
                     // The per-element math of kernels/optimizer_step.hpp, which the CUDA fused kernel runs too.
                     const detail::AdamWStepScalars<Scalar> s = this->step_scalars();
                     Scalar* M = this->moment_[0].data();
                     Scalar* V = this->moment_[1].data();
                     const Scalar* G = this->grad_.data();
                     Scalar* N = this->update_.data();
                     const index_t count = this->m_ * this->r_;
                     for (index_t i = 0; i < count; ++i) N[i] = detail::adamw_element(G[i], &M[i], &V[i], s);
                     this->grad_.setZero();
                     this->count_update();
                   });
  }
  /// Eigen convenience for step().
  void step(Eigen::Ref<RowMatrix<Scalar>> w) { step(detail::as_mutable_view<Scalar>(w)); }
};

/// SGD with momentum in the compressed space: the momentum buffer B is m x r and W is updated through P with
/// unsketch_grad straight into W. See SgdOptions for the math and CompressedAdamW for the per-step protocol.
template <class Dist, class Scalar>
class CompressedSgd<Cpu, Dist, Scalar> : public detail::SgdBase<Cpu, Dist, Scalar> {
  using Base = detail::SgdBase<Cpu, Dist, Scalar>;

 public:
  CompressedSgd(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t sketch_stream,
                SgdOptions options = {})
      : Base(m, n, r, schedule, sketch_stream, options) {}

  /// One step on w (m x n) from the accumulated Ĝ; then Ĝ is zeroed, the step counted and the window policy
  /// applied if the window changes (kTransferFirst transfers B). Scratch as for CompressedAdamW::step.
  void step(MatrixView<Scalar> w) {
    const SgdOptions& o = this->options_;
    this->run_step("CompressedSgd::step", w, Workspace{}, false, static_cast<compute_t<Scalar>>(-o.lr * o.alpha),
                   [this, &o](Workspace) {
                     const bool first = this->updates_[0] == 0;
                     const Scalar momentum = static_cast<Scalar>(o.momentum);
                     Scalar* B = this->moment_[0].data();
                     const Scalar* G = this->grad_.data();
                     Scalar* N = this->update_.data();
                     const index_t count = this->m_ * this->r_;
                     for (index_t i = 0; i < count; ++i) N[i] = detail::sgd_element(G[i], &B[i], momentum, first);
                     this->grad_.setZero();
                     ++this->updates_[0];
                   });
  }
  void step(Eigen::Ref<RowMatrix<Scalar>> w) { step(detail::as_mutable_view<Scalar>(w)); }
};

}  // namespace compact
