// SPDX-License-Identifier: MIT
#pragma once
/// The compressed optimizers' algorithm, written once for every backend over the backend's storage: the window change
/// (the next window's projector, the window policy, the moment transfer), the update applied to W, the checkpoint
/// record, the options, the accessors.
///
/// The layers: OptimizerCore (api/optimizer_core.hpp: shapes, schedule, counters, the record's identity);
/// OptimizerStorage<Backend, Dist, Scalar> (cpu/optimizer.hpp, cuda/optimizer.cuh: where Ĝ, the moments, the update N
/// and the projectors live, and the few operations that touch that memory; its hooks are listed and checked in
/// api/optimizer_storage.hpp); CompressedOptimizerBase,
/// OptimizerWithOptions, AdamWBase and SgdBase here, on top of the storage. The public CompressedAdamW<Backend, Dist,
/// Scalar> and CompressedSgd<Backend, Dist, Scalar> of each backend derive from AdamWBase / SgdBase and add only their
/// constructor, step() (the per-element update runs on the backend) and what the backend must add (per-call CUDA
/// streams, Eigen conveniences).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "compact/config.hpp"
#include "compact/spec/state.hpp"
#include "compact/api/optimizer_fwd.hpp"
#include "compact/api/optimizer_core.hpp"
#include "compact/api/optimizer_options.hpp"
#include "compact/api/optimizer_record.hpp"
#include "compact/api/optimizer_storage.hpp"
#include "compact/api/projector_core.hpp"
#include "compact/api/view.hpp"

namespace compact {
namespace detail {

/// What every compressed optimizer does the same way on every backend.
///
/// Class invariant (with the storage's): `projector_` is P of step `step_`; a moment whose counter is 0 is zero.
template <class Backend, class Dist, class Scalar>
class CompressedOptimizerBase : public OptimizerStorage<Backend, Dist, Scalar> {
  using Storage = OptimizerStorage<Backend, Dist, Scalar>;
  static_assert(check_optimizer_storage<Storage, Scalar>(), "compact: the backend's OptimizerStorage lacks hooks");

 public:
  using ProjectorType = typename Storage::ProjectorType;
  using Moment = typename Storage::Moment;
  using Context = typename Storage::Context;
  /// Rows of M per kTransferFirst panel: the transfer's scratch is kTransferRows x n, never m x n.
  static constexpr index_t kTransferRows = 64;

  /// P of the coming step: sketch every micro-batch of this step with it.
  const ProjectorType& projector() const { return *this->projector_; }
  /// Ĝ (m x r of Moment, the backend's memory): accumulate_grad adds to it, step() reads and zeroes it.
  MatrixView<Moment> grad() { return this->grad_view(); }
  MatrixView<const Moment> grad() const { return this->grad_view(); }
  /// The update N of the last step (m x r of W's type, the backend's memory): W <- (1 - lr·wd) W + gemm_alpha·N Pᵀ.
  /// AdamW's N; SGD's momentum buffer B (on the GPU with fp16 W the increment float(-lr·alpha)·B, applied with
  /// gemm_alpha = 1: kernels/optimizer_step.hpp, sgd_update_scales).
  MatrixView<const Scalar> update() const { return this->update_view(); }

 protected:
  using Storage::Storage;

  /// P of the next step when the window changes then (built before anything changes, in the free slot), else none.
  std::optional<ProjectorType> next_projector(Context c) const {
    std::optional<ProjectorType> p;
    if (this->schedule_.resamples_at(this->step_ + 1))  // step_ + 1 < 2^64: check_step_count
      p.emplace(this->build_projector(this->schedule_.at(this->sketch_stream_, this->step_ + 1), c));
    return p;
  }

  /// W <- (1 - lr·weight_decay) W + gemm_alpha·N Pᵀ, by unsketch_grad straight into W (no m x n temporary); beta is
  /// computed in double and rounded once to the compute type.
  void apply_update(MatrixView<Scalar> w, compute_t<Scalar> gemm_alpha, double lr, double weight_decay,
                    Context c) const {
    this->projector_->unsketch_grad(update(), w, gemm_alpha, static_cast<compute_t<Scalar>>(1.0 - lr * weight_decay),
                                    c);
  }

  /// Ends a step: counts it and, when the window changes (`next` holds P of the new window), moves to it and applies
  /// `policy` to the moments. `reset_second` says whether kTransferFirst zeroes the second moment; `wide` is the
  /// transfer's scratch (kTransferRows x n of Moment) when the policy is kTransferFirst.
  void finish_step(std::optional<ProjectorType>* next, WindowPolicy policy, bool reset_second, MatrixView<Moment> wide,
                   Context c) {
    ++this->step_;
    if (!*next) return;
    next->swap(this->projector_);  // projector_ is now P of the new window, *next P of the old one
    this->projector_swapped();
    switch (policy) {
      case WindowPolicy::kKeep:
        break;
      case WindowPolicy::kReset:
        for (int k = 0; k < this->moments_; ++k) reset_moment(k, c);
        break;
      case WindowPolicy::kTransferFirst:
        transfer(**next, *this->projector_, 0, wide, c);
        if (this->moments_ > 1 && reset_second) reset_moment(1, c);
        break;
    }
  }

  void reset_moment(int k, Context c) {
    this->zero_moment(k, c);
    this->updates_[k] = 0;
  }

  /// Moment k <- M P_oldᵀ P_new in row panels of kTransferRows: each panel is unsketched to `wide` (kTransferRows x n)
  /// and sketched back. Runs through projectors of the moments' type (every CPU optimizer; fp32 W on the GPU, which
  /// check_policy requires for kTransferFirst).
  void transfer(const ProjectorType& p_old, const ProjectorType& p_new, int k, MatrixView<Moment> wide, Context c) {
    if constexpr (std::is_same_v<Moment, Scalar>) {
      const MatrixView<Moment> moment = this->moment_view(k);
      for (index_t i0 = 0; i0 < this->m_; i0 += kTransferRows) {
        const index_t h = std::min(kTransferRows, this->m_ - i0);
        const MatrixView<Moment> rows_view(moment.data + i0 * this->r_, h, this->r_, this->r_);
        const MatrixView<Moment> wide_view(wide.data, h, this->n_, wide.row_stride);
        p_old.unsketch_grad(MatrixView<const Moment>(rows_view), wide_view, Moment(1), Moment(0), c);
        p_new.sketch(MatrixView<const Moment>(wide_view), rows_view, c);
      }
    } else {
      (void)p_old;
      (void)p_new;
      (void)k;
      (void)wide;
      (void)c;
    }
  }

  /// The checkpoint record (format version 2, docs/design.md): the header, then the moments' bits, copied from the
  /// backend's memory (on the GPU through a host buffer, synchronizing the context's stream).
  std::vector<std::uint8_t> save_record(const char* fn, Context c) const {
    std::vector<std::uint8_t> out = this->new_record(fn);
    std::vector<Moment> staging = this->host_staging(fn);
    const std::size_t entries = this->identity().moment_entries();
    std::uint8_t* p = out.data() + kOptimizerHeaderBytes;
    for (int k = 0; k < this->moments_; ++k) {
      const Moment* values = this->moment_on_host(k, &staging, c);
      for (std::size_t i = 0; i < entries; ++i, p += sizeof(Moment)) put_scalar(p, values[i]);
    }
    return out;
  }

  /// Restores a record written by an optimizer of the same identity (either backend: api/optimizer_record.hpp).
  /// Validates every header field and moment value first (validate_optimizer_record), allocates the host buffer and
  /// builds the restored step's projector before anything is replaced, so a bad record or a failed allocation leaves
  /// the optimizer as it was; then zeroes Ĝ and writes the moments (on the GPU: all of these writes are complete
  /// when this returns).
  void load_record(const char* fn, const std::uint8_t* bytes, std::size_t size, Context c) {
    const OptimizerIdentity id = this->identity();
    const OptimizerCounters counters = validate_optimizer_record<Moment>(fn, bytes, size, id);
    std::vector<Moment> staging = this->host_staging(fn);
    std::optional<ProjectorType> projector;
    projector.emplace(this->build_projector(this->schedule_.at(this->sketch_stream_, counters.step), c));
    // Ĝ first: on the GPU the synchronization after the last moment's copy covers it too.
    this->zero_grad_on(c);
    for (int k = 0; k < this->moments_; ++k) {
      const std::uint8_t* p = optimizer_moment_bytes(id, bytes, k);
      Moment* values = this->moment_host_target(k, &staging);
      for (std::size_t i = 0; i < id.moment_entries(); ++i, p += sizeof(Moment)) values[i] = get_scalar<Moment>(p);
      this->commit_moment(k, staging, c);
    }
    this->restore_counters(counters);
    this->projector_.swap(projector);
    this->projector_swapped();
  }
};

/// What each optimizer's options say about it: its name in messages, record kind and moments, and the check of its
/// hyperparameters for moments of type Moment.
template <class Options>
struct OptimizerTraits;
template <>
struct OptimizerTraits<AdamWOptions> {
  static constexpr const char* kName = "CompressedAdamW";
  static constexpr const char* kSetOptions = "CompressedAdamW::set_options";
  static constexpr const char* kSaveState = "CompressedAdamW::save_state";
  static constexpr const char* kLoadState = "CompressedAdamW::load_state";
  static constexpr std::uint32_t kKind = kOptimizerKindAdamW;
  static constexpr int kMoments = 2;
  static constexpr MomentInfo kFirst{"first moment M", false};
  static constexpr MomentInfo kSecond{"second moment V", true};
  template <class Moment>
  static void check(const char* fn, const AdamWOptions& o) {
    check_update_scales<Moment>(fn, o.lr, o.alpha, o.weight_decay);
    check_adamw_moment_options<Moment>(fn, o);
  }
};
template <>
struct OptimizerTraits<SgdOptions> {
  static constexpr const char* kName = "CompressedSgd";
  static constexpr const char* kSetOptions = "CompressedSgd::set_options";
  static constexpr const char* kSaveState = "CompressedSgd::save_state";
  static constexpr const char* kLoadState = "CompressedSgd::load_state";
  static constexpr std::uint32_t kKind = kOptimizerKindSgd;
  static constexpr int kMoments = 1;
  static constexpr MomentInfo kFirst{"momentum buffer B", false};
  static constexpr MomentInfo kSecond{"(unused)", false};
  template <class Moment>
  static void check(const char* fn, const SgdOptions& o) {
    check_update_scales<Moment>(fn, o.lr, o.alpha, o.weight_decay);
    check_sgd_momentum(fn, o);
  }
};

/// A compressed optimizer with its options, on any backend: the constructor's checks, the options, the learning rate,
/// the checkpoint and the step's skeleton, written once. AdamWBase and SgdBase add their moments' accessors;
/// CompressedAdamW<Backend, ...> and CompressedSgd<Backend, ...> add their constructor and step().
template <class Backend, class Dist, class Scalar, class Options>
class OptimizerWithOptions : public CompressedOptimizerBase<Backend, Dist, Scalar> {
  using Base = CompressedOptimizerBase<Backend, Dist, Scalar>;
  using Storage = OptimizerStorage<Backend, Dist, Scalar>;
  using Traits = OptimizerTraits<Options>;

 public:
  using typename Base::Context;
  using typename Base::Moment;
  using typename Base::ProjectorType;

  const Options& options() const { return options_; }
  /// Changes the hyperparameters (e.g. a learning-rate schedule); validated like the constructor's (on the GPU,
  /// kTransferFirst allocates its scratch here).
  void set_options(const Options& options) {
    check_options(options);
    this->prepare_policy(Traits::kSetOptions, options.window_policy);
    options_ = options;
  }
  void set_lr(double lr) {
    Options o = options_;
    o.lr = lr;
    set_options(o);
  }

  /// The state to checkpoint: shapes, schedule, sketch stream, step count, update counters and the moments (bit
  /// patterns, little-endian; format version 2, docs/design.md). With the weights, it is all a run needs to resume bit
  /// for bit. Synchronizes the backend's stream on the GPU.
  std::vector<std::uint8_t> save_state() const {
    return this->save_record(Traits::kSaveState, this->default_context());
  }
  /// Restores save_state() output of an optimizer with the same identity (kind, distribution, moment scalar, shapes,
  /// schedule, sketch stream), on either backend; zeroes Ĝ. Every field and moment value is validated first: a bad
  /// record throws compact::error naming the field and changes nothing.
  void load_state(const std::uint8_t* bytes, std::size_t size) {
    this->load_record(Traits::kLoadState, bytes, size, this->default_context());
  }
  void load_state(const std::vector<std::uint8_t>& bytes) { load_state(bytes.data(), bytes.size()); }
  /// save_state and load_state on a given stream, which they synchronize: on a backend whose calls run on streams
  /// (Context is the stream type: CUDA).
  template <class C = Context, std::enable_if_t<Storage::kContextIsStream && std::is_same_v<C, Context>, int> = 0>
  std::vector<std::uint8_t> save_state(C stream) const {
    return this->save_record(Traits::kSaveState, stream);
  }
  template <class C = Context, std::enable_if_t<Storage::kContextIsStream && std::is_same_v<C, Context>, int> = 0>
  void load_state(const std::uint8_t* bytes, std::size_t size, C stream) {
    this->load_record(Traits::kLoadState, bytes, size, stream);
  }

 protected:
  template <class... BackendArgs>
  OptimizerWithOptions(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t sketch_stream, Options options,
                       BackendArgs... backend_args)
      : Base((check_options(options), Traits::kName), m, n, r, schedule, sketch_stream, Traits::kKind, Traits::kMoments,
             Traits::kFirst, Traits::kSecond, backend_args...),
        options_(options) {
    this->prepare_policy(Traits::kName, options_.window_policy);
  }

  static void check_options(const Options& o) {
    Traits::template check<Moment>(Traits::kName, o);
    Base::check_policy(Traits::kName, o.window_policy);
  }

  /// One optimizer step on w, the same on every backend: checks w; allocates or prepares everything the step needs
  /// and builds the next window's projector (the backend's step_resources: on the CPU the projectors' workspace and
  /// the transfer scratch, on the GPU the device guard and `c`'s stream), so a bad argument or a failed allocation
  /// changes nothing; then `update(context)` runs the per-element update on the backend (Ĝ read and zeroed, the
  /// moments and N written, the update counters counted); then W <- (1 - lr·wd) W + gemm_alpha·N Pᵀ; then the window
  /// policy.
  template <class Update>
  void run_step(const char* fn, MatrixView<Scalar> w, Context c, bool reset_second, compute_t<Scalar> gemm_alpha,
                Update&& update) {
    this->check_weight(fn, w);
    const Options& o = options_;
    auto resources = this->step_resources(fn, o.window_policy, c);
    std::optional<ProjectorType> next = this->next_projector(resources.context());
    update(resources.context());
    this->apply_update(w, gemm_alpha, o.lr, o.weight_decay, resources.context());
    this->finish_step(&next, o.window_policy, reset_second, resources.wide(), resources.context());
  }

  Options options_;
};

/// AdamW whose moments live in the compressed space, on any backend (see AdamWOptions for the math).
template <class Backend, class Dist, class Scalar>
class AdamWBase : public OptimizerWithOptions<Backend, Dist, Scalar, AdamWOptions> {
  using Base = OptimizerWithOptions<Backend, Dist, Scalar, AdamWOptions>;

 public:
  using typename Base::Moment;

  /// First moment M and second moment V (m x r of Moment, the backend's memory).
  MatrixView<const Moment> first_moment() const { return this->moment_view(0); }
  MatrixView<const Moment> second_moment() const { return this->moment_view(1); }

 protected:
  using Base::Base;

  /// The scalars of the coming step, whose bias corrections count it as one more update of M and V.
  AdamWStepScalars<Moment> step_scalars() const {
    return adamw_step_scalars<Moment>(this->options_, this->updates_[0] + 1, this->updates_[1] + 1);
  }
  /// Counts the step in both moments' update counters (once its update has run).
  void count_update() {
    ++this->updates_[0];
    ++this->updates_[1];
  }
};

/// SGD with momentum in the compressed space, on any backend (see SgdOptions).
template <class Backend, class Dist, class Scalar>
class SgdBase : public OptimizerWithOptions<Backend, Dist, Scalar, SgdOptions> {
  using Base = OptimizerWithOptions<Backend, Dist, Scalar, SgdOptions>;

 public:
  using typename Base::Moment;

  /// Momentum buffer B (m x r of Moment, the backend's memory).
  MatrixView<const Moment> momentum_buffer() const { return this->moment_view(0); }

 protected:
  using Base::Base;
};

}  // namespace detail
}  // namespace compact
