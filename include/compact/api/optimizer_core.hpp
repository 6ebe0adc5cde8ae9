// SPDX-License-Identifier: MIT
#pragma once
/// OptimizerCore, the backend-neutral part of every compressed optimizer: shapes, schedule, step and moment-update
/// counters, and the identity of its checkpoint record. The layers above it are in api/optimizer_bases.hpp.

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "compact/config.hpp"
#include "compact/spec/state.hpp"
#include "compact/spec/tags.hpp"
#include "compact/api/checked_size.hpp"
#include "compact/api/optimizer_record.hpp"

namespace compact {
namespace detail {

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
