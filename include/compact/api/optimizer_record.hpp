// SPDX-License-Identifier: MIT
#pragma once
/// The compressed optimizers' checkpoint record (format v2), shared by every backend: its constants, the identity a
/// record must match, the header encoding, and validation over host bytes.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "compact/config.hpp"
#include "compact/spec/state.hpp"
#include "compact/spec/tags.hpp"
#include "compact/api/checked_size.hpp"
#include "compact/api/distributions.hpp"  // DistributionTraits of every distribution, distribution_name

namespace compact {
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

}  // namespace detail
}  // namespace compact
