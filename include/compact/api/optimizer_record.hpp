// SPDX-License-Identifier: MIT
#pragma once
/// What the compressed optimizers of every backend share on the host: options, window policy, and the checkpoint
/// record (format v2): its constants, header encoding, and validation over host bytes.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <vector>

#include "compact/config.hpp"
#include "compact/spec/state.hpp"
#include "compact/spec/tags.hpp"
#include "compact/api/checked_size.hpp"
#include "compact/api/distributions.hpp"  // DistributionTraits of every distribution, distribution_name

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
/// Version 2 added the distribution (and the reserved words); version 1 records are refused (see
/// validate_optimizer_record).
inline constexpr std::uint32_t kOptimizerFormatVersion = 2;
inline constexpr std::uint32_t kOptimizerKindAdamW = 1;
inline constexpr std::uint32_t kOptimizerKindSgd = 2;
/// Header: magic, u32 version, kind, distribution, scalar bytes, moments, two reserved u32 (zero), then u64 m, n, r,
/// seed, period, stream, step, two update counters and one reserved u64 (zero): 112 bytes, the u64s 8-aligned.
inline constexpr std::size_t kOptimizerHeaderBytes = 4 + 7 * 4 + 10 * 8;
inline constexpr std::size_t kOptimizerU64Offset = 4 + 7 * 4;

/// The distribution code a record carries: DistributionTraits<Dist>::kRecordCode (1 Gaussian, 2 Rademacher, 3 Srht).
template <class Dist>
constexpr std::uint32_t distribution_code() {
  static_assert(is_distribution<Dist>, "compact::detail::distribution_code: Dist must be a distribution tag");
  return DistributionTraits<Dist>::kRecordCode;
}

/// Writes v (float or double) at p as its little-endian bit pattern.
template <class Scalar>
void put_scalar(std::uint8_t* p, Scalar v) {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>, "put_scalar: float or double");
  if constexpr (sizeof(Scalar) == 4) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put_u32(p, bits);
  } else {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put_u64(p, bits);
  }
}

/// The float or double whose little-endian bit pattern is at p.
template <class Scalar>
Scalar get_scalar(const std::uint8_t* p) {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, double>, "get_scalar: float or double");
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

/// What a record says about one moment: its name in messages and whether its entries must be >= 0.
struct MomentInfo {
  const char* name;
  bool nonnegative;
};

/// Everything a record must match to be loaded by an optimizer: kind, distribution, the bytes of one moment entry
/// (sizeof(Scalar) on the CPU, 4 on the GPU, whose moments are fp32), the moment count, shapes, schedule, sketch
/// stream.
/// A CPU float optimizer and a CUDA optimizer of any W type with equal identities read each other's records.
struct OptimizerIdentity {
  std::uint32_t kind;
  std::uint32_t distribution;
  std::uint32_t scalar_bytes;
  int moments;
  MomentInfo info[2];
  std::uint64_t m, n, r, seed, period, sketch_stream;

  /// Entries of one moment (m·r; the constructors check that the record's size fits in size_t).
  std::size_t moment_entries() const { return static_cast<std::size_t>(m * r); }
  /// Bytes of a whole record: the header, then every moment's entries.
  std::size_t record_bytes() const {
    return kOptimizerHeaderBytes + std::size_t(moments) * moment_entries() * scalar_bytes;
  }
};

/// The counters a record carries: optimizer steps, and the updates since each moment was last zeroed.
struct OptimizerCounters {
  std::uint64_t step = 0;
  std::uint64_t updates[2] = {0, 0};
};

/// Writes the kOptimizerHeaderBytes header of a record of `id` with `counters` at out.
inline void encode_optimizer_header(const OptimizerIdentity& id, const OptimizerCounters& counters, std::uint8_t* out) {
  for (int b = 0; b < 4; ++b) out[b] = kOptimizerMagic[b];
  const std::uint32_t words[7] = {
      kOptimizerFormatVersion, id.kind, id.distribution, id.scalar_bytes, static_cast<std::uint32_t>(id.moments), 0, 0};
  for (int f = 0; f < 7; ++f) put_u32(out + 4 + 4 * f, words[f]);
  const std::uint64_t fields[10] = {
      id.m, id.n, id.r, id.seed, id.period, id.sketch_stream, counters.step, counters.updates[0], counters.updates[1],
      0};
  for (int f = 0; f < 10; ++f) put_u64(out + kOptimizerU64Offset + 8 * f, fields[f]);
}

/// The bytes of moment k's entries in a record of `id` (valid once validate_optimizer_record has accepted it).
inline const std::uint8_t* optimizer_moment_bytes(const OptimizerIdentity& id, const std::uint8_t* record, int k) {
  return record + kOptimizerHeaderBytes + std::size_t(k) * id.moment_entries() * id.scalar_bytes;
}

/// Validates a record for an optimizer of identity `id` whose moments are Moment (float or double,
/// sizeof(Moment) == id.scalar_bytes) and returns its counters. Checks every header field (magic, version, identity,
/// reserved words zero, counters <= step < 2^64 - 1, unused counters zero), the size, and every moment value
/// (finite; >= 0 where the moment is non-negative; all zero while its counter is 0). Reads only `bytes`: a bad record
/// throws compact::error naming the field before the caller changes anything.
template <class Moment>
OptimizerCounters validate_optimizer_record(const char* fn, const std::uint8_t* bytes, std::size_t size,
                                            const OptimizerIdentity& id) {
  static_assert(std::is_same_v<Moment, float> || std::is_same_v<Moment, double>,
                "validate_optimizer_record: moments are float or double");
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
  expect_u32(1, id.kind, "optimizer kind");
  const std::uint32_t dist = u32_at(2);
  COMPACT_REQUIRE(dist == id.distribution, fn << ": record distribution = " << dist << " (" << distribution_name(dist)
                                              << "), this optimizer has " << id.distribution << " ("
                                              << distribution_name(id.distribution) << ")");
  expect_u32(3, id.scalar_bytes, "scalar bytes");
  expect_u32(4, static_cast<std::uint32_t>(id.moments), "moment count");
  expect_u32(5, 0, "reserved word 0");
  expect_u32(6, 0, "reserved word 1");
  const auto u64_at = [&](int f) { return get_u64(bytes + kOptimizerU64Offset + 8 * f); };
  const char* names[6] = {"m", "n", "r", "schedule seed", "schedule period", "stream"};
  const std::uint64_t want[6] = {id.m, id.n, id.r, id.seed, id.period, id.sketch_stream};
  for (int f = 0; f < 6; ++f) {
    COMPACT_REQUIRE(u64_at(f) == want[f],
                    fn << ": record " << names[f] << " = " << u64_at(f) << ", this optimizer has " << want[f]);
  }
  OptimizerCounters c;
  c.step = u64_at(6);
  c.updates[0] = u64_at(7);
  c.updates[1] = u64_at(8);
  COMPACT_REQUIRE(c.step < ~std::uint64_t{0}, fn << ": record step = " << c.step << " is out of range");
  for (int k = 0; k < 2; ++k) {
    if (k < id.moments) {
      COMPACT_REQUIRE(c.updates[k] <= c.step, fn << ": record update counter of the " << id.info[k].name << " = "
                                                 << c.updates[k] << " exceeds the step count " << c.step);
    } else {
      COMPACT_REQUIRE(c.updates[k] == 0, fn << ": record update counter " << k << " = " << c.updates[k]
                                            << " must be 0 for this optimizer kind (it has " << id.moments
                                            << " moment(s))");
    }
  }
  COMPACT_REQUIRE(u64_at(9) == 0, fn << ": record reserved field = " << u64_at(9) << " must be 0");
  COMPACT_REQUIRE(size == id.record_bytes(),
                  fn << ": argument size = " << size << ", expected " << id.record_bytes() << " for these shapes");
  const index_t r = static_cast<index_t>(id.r);
  const index_t entries = static_cast<index_t>(id.moment_entries());
  for (int k = 0; k < id.moments; ++k) {
    const std::uint8_t* p = optimizer_moment_bytes(id, bytes, k);
    const MomentInfo& info = id.info[k];
    for (index_t i = 0; i < entries; ++i, p += sizeof(Moment)) {
      const Moment v = get_scalar<Moment>(p);
      COMPACT_REQUIRE(std::isfinite(v), fn << ": record " << info.name << " entry (" << i / r << ", " << i % r
                                           << ") = " << v << " is not finite");
      COMPACT_REQUIRE(!info.nonnegative || v >= Moment(0), fn << ": record " << info.name << " entry (" << i / r << ", "
                                                              << i % r << ") = " << v << " is negative");
      COMPACT_REQUIRE(c.updates[k] != 0 || v == Moment(0), fn << ": record " << info.name << " entry (" << i / r << ", "
                                                              << i % r << ") = " << v
                                                              << " is not 0 although its update counter is 0");
    }
  }
  return c;
}

/// The backend-neutral part of every compressed optimizer: shapes, the schedule and sketch stream that define P at each
/// optimizer step, the step and moment-update counters, and the record's identity. Moment is the type the moments
/// are kept and recorded in (the CPU's Scalar; float on the GPU).
///
/// Class invariant: 1 <= r <= n, m >= 1, a record of `moments` m x r moments of Moment fits in size_t;
/// updates_[k] <= step_ < 2^64 - 1.
template <class Dist, class Moment>
class OptimizerCore {
  static_assert(std::is_same_v<Moment, float> || std::is_same_v<Moment, double>,
                "compact compressed optimizers: the moments are float or double");

 public:
  /// Rows m of W (output features).
  index_t rows() const { return m_; }
  /// Columns n of W (input features), the projector's input dimension.
  index_t in_dim() const { return n_; }
  /// Rank r of the compressed space.
  index_t rank() const { return r_; }
  /// Optimizer steps taken so far (micro-batches do not count).
  std::uint64_t step_count() const { return step_; }
  /// The schedule and the sketch stream (SketchState::stream: which layer, or group of sibling layers) that define P.
  const Schedule& schedule() const { return schedule_; }
  std::uint64_t sketch_stream() const { return sketch_stream_; }
  /// The sketch state of the coming step: every micro-batch until the next step() must sketch with it.
  SketchState state() const { return schedule_.at(sketch_stream_, step_); }

 protected:
  OptimizerCore(const char* fn, index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t sketch_stream,
                std::uint32_t kind, int moments, MomentInfo first, MomentInfo second)
      : m_(m), n_(n), r_(r), schedule_(schedule), sketch_stream_(sketch_stream), kind_(kind), moments_(moments) {
    COMPACT_REQUIRE(m >= 1, fn << ": argument m (rows of W) = " << m << " must be >= 1");
    COMPACT_REQUIRE(n >= 1, fn << ": argument n (columns of W) = " << n << " must be >= 1");
    COMPACT_REQUIRE(r >= 1 && r <= n, fn << ": argument r = " << r << " must satisfy 1 <= r <= n = " << n);
    // The record holds every moment: its size must be representable too.
    const index_t entries = checked_mul(fn, "m * r", m, r);
    const std::size_t moment_bytes = checked_bytes<Moment>(fn, "one m x r moment", entries);
    COMPACT_REQUIRE(moment_bytes <= (~std::size_t{0} - kOptimizerHeaderBytes) / std::size_t(moments),
                    fn << ": the checkpoint record of " << moments << " moments of m * r = " << entries
                       << " entries exceeds the address space");
    info_[0] = first;
    info_[1] = second;
  }

  /// Refuses a step when the step count cannot grow (the record keeps step < 2^64 - 1).
  void check_step_count(const char* fn) const {
    COMPACT_REQUIRE(step_ < ~std::uint64_t{0} - 1, fn << ": the step count " << step_ << " cannot grow further");
  }

  /// What a record of this optimizer must match.
  OptimizerIdentity identity() const {
    return OptimizerIdentity{kind_,
                             distribution_code<Dist>(),
                             static_cast<std::uint32_t>(sizeof(Moment)),
                             moments_,
                             {info_[0], info_[1]},
                             std::uint64_t(m_),
                             std::uint64_t(n_),
                             std::uint64_t(r_),
                             schedule_.seed(),
                             schedule_.period(),
                             sketch_stream_};
  }

  /// A record of this optimizer's size with its header written; the caller writes the moments
  /// (optimizer_moment_bytes).
  std::vector<std::uint8_t> new_record(const char* fn) const {
    const OptimizerIdentity id = identity();
    std::vector<std::uint8_t> out = allocating(fn, "the checkpoint record", id.record_bytes(),
                                               [&] { return std::vector<std::uint8_t>(id.record_bytes()); });
    OptimizerCounters counters;
    counters.step = step_;
    counters.updates[0] = updates_[0];
    counters.updates[1] = updates_[1];
    encode_optimizer_header(id, counters, out.data());
    return out;
  }

  /// Sets the counters of a validated record.
  void restore_counters(const OptimizerCounters& c) {
    step_ = c.step;
    updates_[0] = c.updates[0];
    updates_[1] = c.updates[1];
  }

  index_t m_;
  index_t n_;
  index_t r_;
  Schedule schedule_;
  std::uint64_t sketch_stream_;  // SketchState::stream of every P (not a CUDA stream)
  std::uint32_t kind_;
  int moments_;
  MomentInfo info_[2] = {};
  std::uint64_t step_ = 0;
  std::uint64_t updates_[2] = {0, 0};  // updates since moment k was last zeroed (bias correction)
};

}  // namespace detail
}  // namespace compact
