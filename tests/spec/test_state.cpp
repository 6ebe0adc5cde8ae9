// SPDX-License-Identifier: MIT
/// SketchState records, keys and the resampling Schedule.
#include <doctest/doctest.h>

#include <compact/spec/state.hpp>

#include <cstdint>
#include <string>

namespace {
const compact::SketchState kBig{0xFEDCBA9876543210ull, 0x100000007ull, 0x200000003ull};

/// The message of the compact::error thrown by deserializing `bytes`, or "" when nothing was thrown.
std::string deserialize_error(const std::uint8_t* bytes, std::size_t size) {
  try {
    (void)compact::SketchState::deserialize(bytes, size);
  } catch (const compact::error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a serialized state is a fixed little-endian record with magic and version") {
  const auto rec = kBig.serialize();
  REQUIRE(rec.size() == 32);
  CHECK(rec[0] == 'C');
  CHECK(rec[1] == 'P');
  CHECK(rec[2] == 'C');
  CHECK(rec[3] == 'T');
  CHECK(rec[4] == 1);  // format version 1, little-endian u32
  CHECK(rec[5] == 0);
  CHECK(rec[8] == 0x10);  // lowest byte of the seed first
  CHECK(rec[15] == 0xFE);
  CHECK(rec[16] == 0x07);  // stream 0x1'00000007
  CHECK(rec[20] == 0x01);
  CHECK(rec[24] == 0x03);  // window 0x2'00000003
  CHECK(rec[28] == 0x02);
}

TEST_CASE("deserialize inverts serialize for states above 2^32 and for the zero state") {
  CHECK(compact::SketchState::deserialize(kBig.serialize()) == kBig);
  const compact::SketchState zero{};
  CHECK(compact::SketchState::deserialize(zero.serialize()) == zero);
  CHECK(compact::SketchState::deserialize(zero.serialize()) != kBig);
}

TEST_CASE("deserialize refuses a wrong size, a wrong magic, an unsupported version and null bytes") {
  const auto rec = kBig.serialize();
  CHECK(deserialize_error(rec.data(), 31).find("size = 31") != std::string::npos);
  CHECK(deserialize_error(rec.data(), 33).find("size = 33") != std::string::npos);
  CHECK(deserialize_error(nullptr, 32).find("bytes is null") != std::string::npos);
  for (int b = 0; b < 4; ++b) {
    auto bad = rec;
    bad[b] ^= 0x20;
    CHECK(deserialize_error(bad.data(), bad.size()).find("magic byte " + std::to_string(b)) != std::string::npos);
  }
  auto future = rec;
  future[4] = 2;
  CHECK(deserialize_error(future.data(), future.size()).find("format version 2") != std::string::npos);
  auto high = rec;
  high[7] = 0x80;  // the version's top byte: version 0x80000001
  CHECK(deserialize_error(high.data(), high.size()).find("format version") != std::string::npos);
}

TEST_CASE("the Philox key is splitmix64(seed ^ splitmix64(stream)) split into lo, hi words") {
  const std::uint64_t k = compact::splitmix64(kBig.seed ^ compact::splitmix64(kBig.stream));
  const compact::Key2x32 key = compact::philox_key(kBig);
  CHECK(key.w[0] == static_cast<std::uint32_t>(k));
  CHECK(key.w[1] == static_cast<std::uint32_t>(k >> 32));
  // The window does not enter the key; it enters the counter's upper words.
  compact::SketchState other = kBig;
  other.window = 0;
  CHECK(compact::philox_key(other).w[0] == key.w[0]);
  const compact::Words4x32 ctr = compact::philox_counter(5, 9, kBig.window);
  CHECK(ctr.w[0] == 5);
  CHECK(ctr.w[1] == 9);
  CHECK(ctr.w[2] == 3);
  CHECK(ctr.w[3] == 2);
}

TEST_CASE("Schedule maps optimizer steps to windows of length period, and period 0 never resamples") {
  const compact::Schedule every50(7, 50);
  CHECK(every50.at(3, 0) == compact::SketchState{7, 3, 0});
  CHECK(every50.at(3, 49).window == 0);
  CHECK(every50.at(3, 50).window == 1);
  CHECK(every50.at(3, 149).window == 2);
  CHECK(every50.at(3, 0x10000000000ull).window == 0x10000000000ull / 50);
  CHECK(every50.resamples_at(0));
  CHECK(!every50.resamples_at(49));
  CHECK(every50.resamples_at(100));
  const compact::Schedule never(7, 0);
  CHECK(never.at(1, 123456789).window == 0);
  CHECK(never.resamples_at(0));
  CHECK(!never.resamples_at(50));
  CHECK(never.seed() == 7);
  CHECK(never.period() == 0);
}
