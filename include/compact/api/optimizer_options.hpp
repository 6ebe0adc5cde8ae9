// SPDX-License-Identifier: MIT
#pragma once
/// The compressed optimizers' options, shared by every backend: the window policy, the AdamW and SGD hyperparameters,
/// their checks, and the scalars of one AdamW step.

#include <cmath>
#include <cstdint>
#include <limits>

#include "compact/config.hpp"

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

/// Checks the hyperparameters every compressed optimizer shares: lr and weight_decay finite and >= 0, alpha finite,
/// and the two factors the update is applied with, -lr·alpha and 1 - lr·weight_decay, finite in Scalar (a double
/// converted to a float out of its range is undefined behaviour). Scalar is the type the factors are passed to
/// unsketch_grad in (the CUDA optimizers pass float whatever W's type).
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

/// The AdamW hyperparameter checks beyond check_update_scales, for moments kept in Moment (float or double).
template <class Moment>
void check_adamw_moment_options(const char* fn, const AdamWOptions& o) {
  COMPACT_REQUIRE(o.beta1 >= 0 && o.beta1 < 1, fn << ": options.beta1 = " << o.beta1 << " must be in [0, 1)");
  COMPACT_REQUIRE(o.beta2 >= 0 && o.beta2 < 1, fn << ": options.beta2 = " << o.beta2 << " must be in [0, 1)");
  COMPACT_REQUIRE(std::isfinite(o.eps) && o.eps > 0, fn << ": options.eps = " << o.eps << " must be finite and > 0");
  // In range before the conversion (out of range it is undefined), and not rounded to 0 (0/0 for a zero V).
  COMPACT_REQUIRE(o.eps <= double(std::numeric_limits<Moment>::max()) && static_cast<Moment>(o.eps) > Moment(0),
                  fn << ": options.eps = " << o.eps << " is not a positive finite value in the optimizer's "
                     << sizeof(Moment) * 8 << "-bit scalar");
}

/// The SGD hyperparameter check beyond check_update_scales.
inline void check_sgd_momentum(const char* fn, const SgdOptions& o) {
  COMPACT_REQUIRE(o.momentum >= 0 && o.momentum < 1,
                  fn << ": options.momentum = " << o.momentum << " must be in [0, 1)");
}

/// The scalars of one AdamW step in the moments' type T, each computed in double and rounded once:
/// b1, 1 - b1, b2, 1 - b2, 1 / (1 - b1^a), 1 / (1 - b2^b) and eps, with a, b the moments' update counts after the
/// step.
template <class T>
struct AdamWStepScalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bias1, inv_bias2, eps;
};

/// AdamWStepScalars of options `o` for a step after which M has had `updates1` and V `updates2` updates (>= 1).
template <class T>
AdamWStepScalars<T> adamw_step_scalars(const AdamWOptions& o, std::uint64_t updates1, std::uint64_t updates2) {
  AdamWStepScalars<T> s;
  s.beta1 = static_cast<T>(o.beta1);
  s.one_minus_beta1 = static_cast<T>(1.0 - o.beta1);
  s.beta2 = static_cast<T>(o.beta2);
  s.one_minus_beta2 = static_cast<T>(1.0 - o.beta2);
  s.inv_bias1 = static_cast<T>(1.0 / (1.0 - std::pow(o.beta1, double(updates1))));
  s.inv_bias2 = static_cast<T>(1.0 / (1.0 - std::pow(o.beta2, double(updates2))));
  s.eps = static_cast<T>(o.eps);
  return s;
}

}  // namespace detail
}  // namespace compact
