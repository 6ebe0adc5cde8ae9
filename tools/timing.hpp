// SPDX-License-Identifier: MIT
#pragma once
/// Timing helpers of the tools programs (plain_calls, sketch_parts, cold_calls), which are built outside CMake as a
/// user's program would be: wall milliseconds of one call, and the median of a run of them.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace compact_tools {

/// Wall milliseconds of f().
template <class F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// The median of v without its first `skip` values (warm-up calls); v must hold more than `skip`.
inline double median(std::vector<double> v, std::size_t skip = 0) {
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(skip));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace compact_tools
