// SPDX-License-Identifier: MIT
/// Fuzzes SketchState::deserialize: every input is refused with compact::error or accepted, and an accepted record
/// is byte for byte what serialize() writes for the state it gives (no two records mean one state).
#include "fuzz_support.hpp"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  compact::SketchState state;
  try {
    state = compact::SketchState::deserialize(data, size);
  } catch (const compact::error&) {
    return 0;
  }
  const auto again = state.serialize();
  COMPACT_FUZZ_REQUIRE(size == again.size() && std::memcmp(data, again.data(), size) == 0,
                       "deserialize accepted a record that serialize() does not write");
  COMPACT_FUZZ_REQUIRE(compact::SketchState::deserialize(again) == state, "serialize/deserialize round trip");
  return 0;
}
