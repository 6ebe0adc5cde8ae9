// SPDX-License-Identifier: MIT
#pragma once
/// SketchState (seed, stream, window), its 32-byte record, the Philox key it defines, and the resampling Schedule.

#include <array>
#include <cstddef>
#include <cstdint>

#include "compact/config.hpp"
#include "compact/spec/philox.hpp"

namespace compact {

/// The whole persistent state of one projection: three integers, no matrices.
///
/// `seed` is the run seed, `stream` names a layer (or a group of sibling layers sharing one input), `window` is the
/// resampling window (optimizer step / period). P is a pure function of (state, n, r) under the entry spec v1.
struct SketchState {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t window = 0;

  /// Size of the serialized record in bytes.
  static constexpr std::size_t kRecordBytes = 32;
  /// First four record bytes: "CPCT".
  static constexpr std::uint8_t kMagic[4] = {'C', 'P', 'C', 'T'};
  /// Record format version; also the entry-specification version the state is meant for.
  static constexpr std::uint32_t kFormatVersion = 1;

  /// Fixed 32-byte little-endian record: magic "CPCT", u32 format version, u64 seed, u64 stream, u64 window.
  std::array<std::uint8_t, kRecordBytes> serialize() const;

  /// Parses a record written by serialize(). Throws compact::error naming the problem for a wrong size, a wrong
  /// magic or an unsupported version.
  static SketchState deserialize(const std::uint8_t* bytes, std::size_t size);
  /// Convenience overload for the array returned by serialize().
  static SketchState deserialize(const std::array<std::uint8_t, kRecordBytes>& record) {
    return deserialize(record.data(), record.size());
  }
};

COMPACT_HOST_DEVICE inline bool operator==(const SketchState& a, const SketchState& b) {
  return a.seed == b.seed && a.stream == b.stream && a.window == b.window;
}
COMPACT_HOST_DEVICE inline bool operator!=(const SketchState& a, const SketchState& b) { return !(a == b); }

namespace detail {
inline void put_u32(std::uint8_t* p, std::uint32_t v) {
  for (int b = 0; b < 4; ++b) p[b] = static_cast<std::uint8_t>(v >> (8 * b));
}
inline void put_u64(std::uint8_t* p, std::uint64_t v) {
  for (int b = 0; b < 8; ++b) p[b] = static_cast<std::uint8_t>(v >> (8 * b));
}
inline std::uint32_t get_u32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= static_cast<std::uint32_t>(p[b]) << (8 * b);
  return v;
}
inline std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int b = 0; b < 8; ++b) v |= static_cast<std::uint64_t>(p[b]) << (8 * b);
  return v;
}
}  // namespace detail

inline std::array<std::uint8_t, SketchState::kRecordBytes> SketchState::serialize() const {
  std::array<std::uint8_t, kRecordBytes> out{};
  for (int b = 0; b < 4; ++b) out[b] = kMagic[b];
  detail::put_u32(out.data() + 4, kFormatVersion);
  detail::put_u64(out.data() + 8, seed);
  detail::put_u64(out.data() + 16, stream);
  detail::put_u64(out.data() + 24, window);
  return out;
}

inline SketchState SketchState::deserialize(const std::uint8_t* bytes, std::size_t size) {
  COMPACT_REQUIRE(bytes != nullptr, "SketchState::deserialize: argument bytes is null");
  COMPACT_REQUIRE(size == kRecordBytes,
                  "SketchState::deserialize: argument size = " << size << ", a record is " << kRecordBytes << " bytes");
  for (int b = 0; b < 4; ++b) {
    COMPACT_REQUIRE(bytes[b] == kMagic[b], "SketchState::deserialize: bad magic byte "
                                               << b << " = 0x" << std::hex << int(bytes[b]) << ", expected 0x"
                                               << int(kMagic[b]) << " ('CPCT')");
  }
  const std::uint32_t version = detail::get_u32(bytes + 4);
  COMPACT_REQUIRE(version == kFormatVersion, "SketchState::deserialize: format version "
                                                 << version << " is not supported (this build reads version "
                                                 << kFormatVersion << ")");
  SketchState s;
  s.seed = detail::get_u64(bytes + 8);
  s.stream = detail::get_u64(bytes + 16);
  s.window = detail::get_u64(bytes + 24);
  return s;
}

/// The Philox key of a state: k = splitmix64(seed ^ splitmix64(stream)), words {lo32(k), hi32(k)}.
COMPACT_HOST_DEVICE inline Key2x32 philox_key(const SketchState& s) {
  const std::uint64_t k = splitmix64(s.seed ^ splitmix64(s.stream));
  return Key2x32{{static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32)}};
}

/// The Philox counter of one block: {block, row, lo32(window), hi32(window)}.
COMPACT_HOST_DEVICE inline Words4x32 philox_counter(std::uint32_t block, std::uint32_t row, std::uint64_t window) {
  return Words4x32{{block, row, static_cast<std::uint32_t>(window), static_cast<std::uint32_t>(window >> 32)}};
}

/// Derives the states of a run: every projection of stream s at optimizer step t uses window t / period.
///
/// `period` = 0 means never resample (window 0 forever). Micro-batches of one optimizer step share its state.
class Schedule {
 public:
  Schedule(std::uint64_t seed, std::uint64_t period) : seed_(seed), period_(period) {}

  std::uint64_t seed() const { return seed_; }
  std::uint64_t period() const { return period_; }

  /// State of `stream` at `optimizer_step`: {seed, stream, period ? optimizer_step / period : 0}.
  SketchState at(std::uint64_t stream, std::uint64_t optimizer_step) const {
    SketchState s;
    s.seed = seed_;
    s.stream = stream;
    s.window = period_ == 0 ? 0 : optimizer_step / period_;
    return s;
  }

  /// True when `optimizer_step` starts a new window (step 0 included), i.e. P changes before this step.
  bool resamples_at(std::uint64_t optimizer_step) const {
    return optimizer_step == 0 || (period_ != 0 && optimizer_step % period_ == 0);
  }

 private:
  std::uint64_t seed_;
  std::uint64_t period_;
};

}  // namespace compact
