// SPDX-License-Identifier: MIT
#pragma once
/// error_of, for the CPU tests (support.hpp), the GPU tests (cuda/gpu_support.cuh) and the shared projector API checks
/// (projector_api.hpp) alike.

#include <compact/config.hpp>

#include <string>
#include <utility>

namespace compact_test {

/// The message of the compact::error that f throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const compact::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace compact_test
