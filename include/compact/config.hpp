// SPDX-License-Identifier: MIT
#pragma once
/// Configuration shared by every compact header: version, COMPACT_HOST_DEVICE, index_t, error, COMPACT_REQUIRE.

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

// The entry specification is bit-exact; -ffast-math lets the compiler reassociate, drop signed zeros and
// replace the library's own fp32 routines, so the same seed would no longer give the same matrix.
#if defined(__FAST_MATH__) || defined(__USE_FAST_MATH__)
#error \
    "compact: compiled with -ffast-math (or nvcc --use_fast_math); the bit-exact entry specification forbids it. Remove the flag for translation units that include compact."
#endif

/// The library's version, in this one place: CMakeLists.txt reads it for project(VERSION) and the package's
/// compactConfigVersion.cmake.
#define COMPACT_VERSION_MAJOR 0
#define COMPACT_VERSION_MINOR 1
#define COMPACT_VERSION_PATCH 0

#if defined(__CUDACC__) || defined(__HIPCC__)
#define COMPACT_HOST_DEVICE __host__ __device__
#else
#define COMPACT_HOST_DEVICE
#endif

namespace compact {

/// Signed 64-bit index for every size, stride and offset.
using index_t = std::int64_t;

/// The one exception type of the library: a violated precondition or a failed backend call.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
[[noreturn]] inline void throw_error(const std::string& message) { throw error(message); }
}  // namespace detail

}  // namespace compact

/// Throws compact::error with `message` (a stream expression, e.g. `"r=" << r`) when `cond` is false.
#define COMPACT_REQUIRE(cond, message)                               \
  do {                                                               \
    if (!(cond)) {                                                   \
      std::ostringstream compact_require_stream_;                    \
      compact_require_stream_ << "compact: " << message;             \
      ::compact::detail::throw_error(compact_require_stream_.str()); \
    }                                                                \
  } while (false)
