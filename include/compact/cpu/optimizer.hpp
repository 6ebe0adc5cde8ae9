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
#include "compact/core/projector_fwd.hpp"
#include "compact/core/state.hpp"
#include "compact/core/tags.hpp"
#include "compact/core/view.hpp"
#include "compact/cpu/compressed_grad.hpp"
#include "compact/cpu/dense_projector.hpp"
#include "compact/cpu/eigen.hpp"
#include "compact/cpu/srht_projector.hpp"

namespace compact {

/// What happens to the moments when the schedule moves to a new window (P_old -> P_new) after a step.
enum class WindowPolicy {
  kKeep,           ///< keep M and V as they are (the paper's default, as in GaLore)
  kReset,          ///< zero M and V and restart their bias corrections
  kTransferFirst,  ///< M <- M P_oldᵀ P_new (computed in row panels, no m x n temporary); V kept or reset
};

/// Hyperparameters of CompressedAdamW. The update of a step is
///   M <- b1 M + (1 - b1) Ĝ,   V <- b2 V + (1 - b2) Ĝ²,   N = (M / (1 - b1^a)) / (sqrt(V / (1 - b2^b)) + eps),
///   W <- W - lr (alpha N Pᵀ + weight_decay W),
/// with a, b the number of updates since M, V were last zeroed. `alpha` scales the decompressed update (the paper
/// uses 0.25 for pretraining). With kTransferFirst, `reset_second_moment` chooses between keeping V (false) and
/// zeroing it (true); V is never transferred (M P_oldᵀ P_new of a non-negative V can go negative).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double alpha = 0.25;
  WindowPolicy window_policy = WindowPolicy::kKeep;
  bool reset_second_moment = false;
};

/// Hyperparameters of CompressedSgd: B <- momentum B + Ĝ (B = Ĝ on the first update after a reset),
/// W <- W - lr (alpha B Pᵀ + weight_decay W). With momentum = 0 this is plain SGD on the compressed gradient.
struct SgdOptions {
  double lr = 1e-2;
  double momentum = 0.9;
  double weight_decay = 0.0;
  double alpha = 1.0;
  WindowPolicy window_policy = WindowPolicy::kKeep;
};

namespace detail {

inline constexpr std::uint8_t kOptimizerMagic[4] = {'C', 'P', 'O', 'S'};
/// Version 2 added the distribution (and the reserved words); version 1 records are refused (see load_record).
inline constexpr std::uint32_t kOptimizerFormatVersion = 2;
inline constexpr std::uint32_t kOptimizerKindAdamW = 1;
inline constexpr std::uint32_t kOptimizerKindSgd = 2;
/// Header: magic, u32 version, kind, distribution, scalar bytes, moments, two reserved u32 (zero), then u64 m, n, r,
/// seed, period, stream, step, two update counters and one reserved u64 (zero): 112 bytes, the u64s 8-aligned.
inline constexpr std::size_t kOptimizerHeaderBytes = 4 + 7 * 4 + 10 * 8;
inline constexpr std::size_t kOptimizerU64Offset = 4 + 7 * 4;

/// The distribution code a record carries: 1 Gaussian, 2 Rademacher, 3 Srht.
template <class Dist>
constexpr std::uint32_t distribution_code() {
  static_assert(is_distribution<Dist>, "compact::detail::distribution_code: Dist must be Gaussian, Rademacher or Srht");
  return std::is_same_v<Dist, Gaussian> ? 1u : std::is_same_v<Dist, Rademacher> ? 2u : 3u;
}
inline const char* distribution_name(std::uint32_t code) {
  return code == 1 ? "Gaussian" : code == 2 ? "Rademacher" : code == 3 ? "Srht" : "unknown";
}

/// Appends v (float or double) as its little-endian bit pattern.
template <class Scalar>
void put_scalar(std::vector<std::uint8_t>* out, Scalar v) {
  std::uint8_t bytes[sizeof(Scalar)];
  if constexpr (sizeof(Scalar) == 4) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put_u32(bytes, bits);
  } else {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put_u64(bytes, bits);
  }
  out->insert(out->end(), bytes, bytes + sizeof(Scalar));
}

template <class Scalar>
Scalar get_scalar(const std::uint8_t* p) {
  Scalar v;
  if constexpr (sizeof(Scalar) == 4) {
    const std::uint32_t bits = get_u32(p);
    std::memcpy(&v, &bits, 4);
  } else {
    const std::uint64_t bits = get_u64(p);
    std::memcpy(&v, &bits, 8);
  }
  return v;
}

/// Checks the hyperparameters every compressed optimizer shares: lr and weight_decay finite and >= 0, alpha finite,
/// and the two factors the update is applied with, -lr·alpha and 1 - lr·weight_decay, finite in Scalar (a double
/// converted to a float out of its range is undefined behaviour).
template <class Scalar>
void check_update_scales(const char* fn, double lr, double alpha, double weight_decay) {
  COMPACT_REQUIRE(std::isfinite(lr) && lr >= 0, fn << ": options.lr = " << lr << " must be finite and >= 0");
  COMPACT_REQUIRE(std::isfinite(weight_decay) && weight_decay >= 0,
                  fn << ": options.weight_decay = " << weight_decay << " must be finite and >= 0");
  COMPACT_REQUIRE(std::isfinite(alpha), fn << ": options.alpha = " << alpha << " must be finite");
  constexpr double kMax = static_cast<double>(std::numeric_limits<Scalar>::max());
  COMPACT_REQUIRE(std::abs(lr * alpha) <= kMax, fn << ": options.lr * options.alpha = " << lr << " * " << alpha << " = "
                                                   << lr * alpha << " is not finite in the optimizer's "
                                                   << sizeof(Scalar) * 8 << "-bit scalar");
  COMPACT_REQUIRE(std::abs(1.0 - lr * weight_decay) <= kMax,
                  fn << ": 1 - options.lr * options.weight_decay = 1 - " << lr << " * " << weight_decay
                     << " is not finite in the optimizer's " << sizeof(Scalar) * 8 << "-bit scalar");
}

/// What a record says about one moment: its name in messages and whether its entries must be >= 0.
struct MomentInfo {
  const char* name;
  bool nonnegative;
};

/// What every compressed optimizer shares: shapes, the schedule and stream that define P at each optimizer step,
/// the m x r compressed-gradient buffer, the window-change bookkeeping and the checkpoint record.
///
/// Class invariant: 1 <= r <= n, m >= 1, m·r·sizeof(Scalar) fits in size_t; grad_ and every moment are m x r;
/// `projector_` is P of step `step_`; updates_[k] <= step_ < 2^64 - 1; a moment whose counter is 0 is zero.
template <class Dist, class Scalar>
class CompressedOptimizerBase {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>,
                "compact compressed optimizers (Cpu): Scalar must be float or double");

 public:
  using ProjectorType = Projector<Cpu, Dist, Scalar>;

  /// Rows m of W (output features).
  index_t rows() const { return m_; }
  /// Columns n of W (input features), the projector's input dimension.
  index_t in_dim() const { return n_; }
  /// Rank r of the compressed space.
  index_t rank() const { return r_; }
  /// Optimizer steps taken so far (micro-batches do not count).
  std::uint64_t step_count() const { return step_; }
  /// The schedule and stream that define P.
  const Schedule& schedule() const { return schedule_; }
  std::uint64_t stream() const { return stream_; }
  /// The sketch state of the coming step: every micro-batch until the next step() must sketch with it.
  SketchState state() const { return schedule_.at(stream_, step_); }
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
      : m_(m), n_(n), r_(r), schedule_(schedule), stream_(stream), kind_(kind), moments_(moments) {
    COMPACT_REQUIRE(m >= 1, fn << ": argument m (rows of W) = " << m << " must be >= 1");
    COMPACT_REQUIRE(n >= 1, fn << ": argument n (columns of W) = " << n << " must be >= 1");
    COMPACT_REQUIRE(r >= 1 && r <= n, fn << ": argument r = " << r << " must satisfy 1 <= r <= n = " << n);
    // The record holds every moment: its size must be representable too.
    const index_t entries = checked_mul(fn, "m * r", m, r);
    const std::size_t moment_bytes = checked_bytes<Scalar>(fn, "one m x r moment", entries);
    COMPACT_REQUIRE(moment_bytes <= (~std::size_t{0} - kOptimizerHeaderBytes) / std::size_t(moments),
                    fn << ": the checkpoint record of " << moments << " moments of m * r = " << entries
                       << " entries exceeds the address space");
    info_[0] = first;
    info_[1] = second;
    projector_.emplace(n_, r_, state());
    grad_ = make_zero_matrix<Scalar>(fn, "the m x r gradient buffer", m_, r_);
    moment_[0] = make_zero_matrix<Scalar>(fn, first.name, m_, r_);
    moment_[1] = make_zero_matrix<Scalar>(fn, second.name, moments_ > 1 ? m_ : 0, moments_ > 1 ? r_ : 0);
  }

  /// Checks the weight argument of step() before anything is written.
  void check_weight(const char* fn, const MatrixView<Scalar>& w) const {
    check_view(fn, "w", w, m_, "m", n_, "n");
    check_no_overlap(fn, "grad", grad(), "w", w);
    COMPACT_REQUIRE(step_ < ~std::uint64_t{0} - 1, fn << ": the step count " << step_ << " cannot grow further");
  }

  /// Rows of M per transfer panel.
  static constexpr index_t kTransferRows = 64;

  /// Everything a step allocates, allocated before it changes anything: the m x r update, the projectors' scratch
  /// and, at a window change, the next projector and (kTransferFirst) the 64 x n transfer scratch. An allocation
  /// failure therefore throws compact::error with the optimizer and W untouched, and nothing after it can fail.
  struct StepScratch {
    StepScratch(const CompressedOptimizerBase& opt, const char* fn, WindowPolicy policy)
        : next_state(opt.schedule_.at(opt.stream_, opt.step_ + 1)),
          changes(next_state != opt.state()),
          transfers(changes && policy == WindowPolicy::kTransferFirst),
          projector(fn, "the projector scratch", opt.step_scratch_bytes(transfers)),
          update(make_matrix<Scalar>(fn, "the m x r update", opt.m_, opt.r_)) {
      if (changes) next.emplace(opt.n_, opt.r_, next_state);
      if (transfers) wide = make_matrix<Scalar>(fn, "the transfer scratch", std::min(kTransferRows, opt.m_), opt.n_);
    }
    SketchState next_state;
    bool changes;
    bool transfers;
    ScratchBuffer projector;
    RowMatrix<Scalar> update;
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
    projector_->unsketch_grad(MatrixView<const Scalar>(update.data(), m_, r_, r_), w, static_cast<Scalar>(-lr * alpha),
                              static_cast<Scalar>(1.0 - lr * weight_decay), scratch.projector.view());
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
    const std::size_t payload = std::size_t(moments_) * std::size_t(m_ * r_) * sizeof(Scalar);
    std::vector<std::uint8_t> out = allocating(fn, "the checkpoint record", kOptimizerHeaderBytes + payload, [&] {
      std::vector<std::uint8_t> v(kOptimizerHeaderBytes);
      v.reserve(kOptimizerHeaderBytes + payload);
      return v;
    });
    std::uint8_t* p = out.data();
    for (int b = 0; b < 4; ++b) p[b] = kOptimizerMagic[b];
    const std::uint32_t words[7] = {kOptimizerFormatVersion,
                                    kind_,
                                    distribution_code<Dist>(),
                                    static_cast<std::uint32_t>(sizeof(Scalar)),
                                    static_cast<std::uint32_t>(moments_),
                                    0,
                                    0};
    for (int f = 0; f < 7; ++f) put_u32(p + 4 + 4 * f, words[f]);
    const std::uint64_t fields[10] = {std::uint64_t(m_),
                                      std::uint64_t(n_),
                                      std::uint64_t(r_),
                                      schedule_.seed(),
                                      schedule_.period(),
                                      stream_,
                                      step_,
                                      updates_[0],
                                      updates_[1],
                                      0};
    for (int f = 0; f < 10; ++f) put_u64(p + kOptimizerU64Offset + 8 * f, fields[f]);
    for (int k = 0; k < moments_; ++k) {
      for (index_t i = 0; i < m_ * r_; ++i) put_scalar(&out, moment_[k].data()[i]);
    }
    return out;
  }

  /// Restores a record written by save_record() of an optimizer of the same kind, distribution, scalar, shapes,
  /// schedule and stream. Validates every header field (reserved words zero, counters <= step < 2^64 - 1, unused
  /// counters zero) and every moment value (finite; V >= 0; all zero while its counter is 0) before changing any
  /// state; the projector of the restored step is built before anything is replaced, so an allocation failure
  /// leaves the optimizer as it was too.
  void load_record(const char* fn, const std::uint8_t* bytes, std::size_t size) {
    COMPACT_REQUIRE(bytes != nullptr || size == 0, fn << ": argument bytes is null");
    COMPACT_REQUIRE(size >= 8, fn << ": argument size = " << size << " is too short for a record");
    for (int b = 0; b < 4; ++b) {
      COMPACT_REQUIRE(bytes[b] == kOptimizerMagic[b], fn << ": bad magic byte " << b << " (expected 'CPOS')");
    }
    const std::uint32_t version = get_u32(bytes + 4);
    COMPACT_REQUIRE(version != 1, fn << ": record format version 1 does not name its distribution and is no longer "
                                        "read (this build reads version "
                                     << kOptimizerFormatVersion << "); resume from a checkpoint saved by this version");
    COMPACT_REQUIRE(version == kOptimizerFormatVersion, fn << ": record format version " << version
                                                           << " is not supported (this build reads version "
                                                           << kOptimizerFormatVersion << ")");
    COMPACT_REQUIRE(size >= kOptimizerHeaderBytes, fn << ": argument size = " << size << " is shorter than the header ("
                                                      << kOptimizerHeaderBytes << " bytes)");
    const auto u32_at = [&](int f) { return get_u32(bytes + 4 + 4 * f); };
    const auto expect_u32 = [&](int f, std::uint32_t want, const char* what) {
      const std::uint32_t got = u32_at(f);
      COMPACT_REQUIRE(got == want, fn << ": record " << what << " = " << got << ", this optimizer has " << want);
    };
    expect_u32(1, kind_, "optimizer kind");
    const std::uint32_t dist = u32_at(2);
    COMPACT_REQUIRE(dist == distribution_code<Dist>(), fn << ": record distribution = " << dist << " ("
                                                          << distribution_name(dist) << "), this optimizer has "
                                                          << distribution_code<Dist>() << " ("
                                                          << distribution_name(distribution_code<Dist>()) << ")");
    expect_u32(3, static_cast<std::uint32_t>(sizeof(Scalar)), "scalar bytes");
    expect_u32(4, static_cast<std::uint32_t>(moments_), "moment count");
    expect_u32(5, 0, "reserved word 0");
    expect_u32(6, 0, "reserved word 1");
    const auto u64_at = [&](int f) { return get_u64(bytes + kOptimizerU64Offset + 8 * f); };
    const char* names[6] = {"m", "n", "r", "schedule seed", "schedule period", "stream"};
    const std::uint64_t want[6] = {std::uint64_t(m_), std::uint64_t(n_),  std::uint64_t(r_),
                                   schedule_.seed(),  schedule_.period(), stream_};
    for (int f = 0; f < 6; ++f) {
      COMPACT_REQUIRE(u64_at(f) == want[f],
                      fn << ": record " << names[f] << " = " << u64_at(f) << ", this optimizer has " << want[f]);
    }
    const std::uint64_t step = u64_at(6);
    const std::uint64_t updates[2] = {u64_at(7), u64_at(8)};
    COMPACT_REQUIRE(step < ~std::uint64_t{0}, fn << ": record step = " << step << " is out of range");
    for (int k = 0; k < 2; ++k) {
      if (k < moments_) {
        COMPACT_REQUIRE(updates[k] <= step, fn << ": record update counter of the " << info_[k].name << " = "
                                               << updates[k] << " exceeds the step count " << step);
      } else {
        COMPACT_REQUIRE(updates[k] == 0, fn << ": record update counter " << k << " = " << updates[k]
                                            << " must be 0 for this optimizer kind (it has " << moments_
                                            << " moment(s))");
      }
    }
    COMPACT_REQUIRE(u64_at(9) == 0, fn << ": record reserved field = " << u64_at(9) << " must be 0");
    const std::size_t payload = std::size_t(moments_) * std::size_t(m_ * r_) * sizeof(Scalar);
    COMPACT_REQUIRE(size == kOptimizerHeaderBytes + payload, fn << ": argument size = " << size << ", expected "
                                                                << kOptimizerHeaderBytes + payload
                                                                << " for these shapes");
    const std::uint8_t* moments_bytes = bytes + kOptimizerHeaderBytes;
    for (int k = 0; k < moments_; ++k) {
      const std::uint8_t* p = moments_bytes + std::size_t(k) * std::size_t(m_ * r_) * sizeof(Scalar);
      for (index_t i = 0; i < m_ * r_; ++i, p += sizeof(Scalar)) {
        const Scalar v = get_scalar<Scalar>(p);
        COMPACT_REQUIRE(std::isfinite(v), fn << ": record " << info_[k].name << " entry (" << i / r_ << ", " << i % r_
                                             << ") = " << v << " is not finite");
        COMPACT_REQUIRE(!info_[k].nonnegative || v >= Scalar(0), fn << ": record " << info_[k].name << " entry ("
                                                                    << i / r_ << ", " << i % r_ << ") = " << v
                                                                    << " is negative");
        COMPACT_REQUIRE(updates[k] != 0 || v == Scalar(0), fn << ": record " << info_[k].name << " entry (" << i / r_
                                                              << ", " << i % r_ << ") = " << v
                                                              << " is not 0 although its update counter is 0");
      }
    }
    std::optional<ProjectorType> projector;
    projector.emplace(n_, r_, schedule_.at(stream_, step));
    // Nothing below can fail.
    step_ = step;
    updates_[0] = updates[0];
    updates_[1] = updates[1];
    for (int k = 0; k < moments_; ++k) {
      const std::uint8_t* p = moments_bytes + std::size_t(k) * std::size_t(m_ * r_) * sizeof(Scalar);
      for (index_t i = 0; i < m_ * r_; ++i, p += sizeof(Scalar)) moment_[k].data()[i] = get_scalar<Scalar>(p);
    }
    grad_.setZero();
    projector_.swap(projector);
  }

  index_t m_;
  index_t n_;
  index_t r_;
  Schedule schedule_;
  std::uint64_t stream_;
  std::uint32_t kind_;
  int moments_;
  MomentInfo info_[2] = {};
  std::uint64_t step_ = 0;
  std::uint64_t updates_[2] = {0, 0};  // updates since moment k was last zeroed (bias correction)
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
template <class Dist, class Scalar = float>
class CompressedAdamW : public detail::CompressedOptimizerBase<Dist, Scalar> {
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
    typename Base::StepScratch scratch(*this, fn, o.window_policy);
    const Scalar b1 = static_cast<Scalar>(o.beta1), b2 = static_cast<Scalar>(o.beta2);
    const Scalar c1 = static_cast<Scalar>(1.0 - o.beta1), c2 = static_cast<Scalar>(1.0 - o.beta2);
    RowMatrix<Scalar>& M = this->moment_[0];
    RowMatrix<Scalar>& V = this->moment_[1];
    M = b1 * M + c1 * this->grad_;
    V = b2 * V + c2 * this->grad_.cwiseAbs2();
    ++this->updates_[0];
    ++this->updates_[1];
    const Scalar inv_bc1 = static_cast<Scalar>(1.0 / (1.0 - std::pow(o.beta1, double(this->updates_[0]))));
    const Scalar inv_bc2 = static_cast<Scalar>(1.0 / (1.0 - std::pow(o.beta2, double(this->updates_[1]))));
    const Scalar eps = static_cast<Scalar>(o.eps);
    RowMatrix<Scalar>& update = scratch.update;
    update = (M * inv_bc1).array() / ((V * inv_bc2).array().sqrt() + eps);
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
    COMPACT_REQUIRE(o.beta1 >= 0 && o.beta1 < 1, fn << ": options.beta1 = " << o.beta1 << " must be in [0, 1)");
    COMPACT_REQUIRE(o.beta2 >= 0 && o.beta2 < 1, fn << ": options.beta2 = " << o.beta2 << " must be in [0, 1)");
    COMPACT_REQUIRE(std::isfinite(o.eps) && o.eps > 0, fn << ": options.eps = " << o.eps << " must be finite and > 0");
    // In range before the conversion (out of range it is undefined), and not rounded to 0 (0/0 for a zero V).
    COMPACT_REQUIRE(o.eps <= double(std::numeric_limits<Scalar>::max()) && static_cast<Scalar>(o.eps) > Scalar(0),
                    fn << ": options.eps = " << o.eps << " is not a positive finite value in the optimizer's "
                       << sizeof(Scalar) * 8 << "-bit scalar");
  }

  AdamWOptions options_;
};

/// SGD with momentum in the compressed space: the momentum buffer B is m x r and W is updated through P with
/// unsketch_grad straight into W. See SgdOptions for the math and CompressedAdamW for the per-step protocol.
template <class Dist, class Scalar = float>
class CompressedSgd : public detail::CompressedOptimizerBase<Dist, Scalar> {
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
  /// applied if the window changes (kTransferFirst transfers B).
  void step(MatrixView<Scalar> w) {
    constexpr const char* fn = "CompressedSgd::step";
    this->check_weight(fn, w);
    typename Base::StepScratch scratch(*this, fn, options_.window_policy);
    RowMatrix<Scalar>& B = this->moment_[0];
    if (this->updates_[0] == 0) {
      B = this->grad_;
    } else {
      B = static_cast<Scalar>(options_.momentum) * B + this->grad_;
    }
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
    COMPACT_REQUIRE(o.momentum >= 0 && o.momentum < 1,
                    fn << ": options.momentum = " << o.momentum << " must be in [0, 1)");
  }

  SgdOptions options_;
};

}  // namespace compact
