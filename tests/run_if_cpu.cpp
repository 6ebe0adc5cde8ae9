// SPDX-License-Identifier: MIT
/// run_if_cpu LEVEL PROGRAM [ARGS...]: runs PROGRAM when this CPU supports the x86-64 micro-architecture level LEVEL
/// (x86-64-v2, x86-64-v3 or x86-64-v4), else exits 77 (ctest's "skipped"). A separate launcher, because a program
/// built for a level may execute its instructions in static initializers, before its own main could check.
#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace {

struct Feature {
  const char* name;
  bool present;
};

int check_level(const char* level) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const Feature v2[] = {{"sse4.2", __builtin_cpu_supports("sse4.2") != 0},
                        {"ssse3", __builtin_cpu_supports("ssse3") != 0},
                        {"popcnt", __builtin_cpu_supports("popcnt") != 0}};
  const Feature v3[] = {{"avx", __builtin_cpu_supports("avx") != 0},
                        {"avx2", __builtin_cpu_supports("avx2") != 0},
                        {"fma", __builtin_cpu_supports("fma") != 0},
                        {"bmi", __builtin_cpu_supports("bmi") != 0},
                        {"bmi2", __builtin_cpu_supports("bmi2") != 0}};
  const Feature v4[] = {{"avx512f", __builtin_cpu_supports("avx512f") != 0},
                        {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
                        {"avx512cd", __builtin_cpu_supports("avx512cd") != 0},
                        {"avx512dq", __builtin_cpu_supports("avx512dq") != 0},
                        {"avx512vl", __builtin_cpu_supports("avx512vl") != 0}};
  const int tier = std::strcmp(level, "x86-64-v2") == 0   ? 2
                   : std::strcmp(level, "x86-64-v3") == 0 ? 3
                   : std::strcmp(level, "x86-64-v4") == 0 ? 4
                                                          : 0;
  if (tier == 0) {
    std::fprintf(stderr, "run_if_cpu: unknown level '%s' (x86-64-v2, x86-64-v3, x86-64-v4)\n", level);
    return 2;
  }
  const auto missing = [level](const Feature* f, int count) {
    for (int k = 0; k < count; ++k) {
      if (!f[k].present) {
        std::fprintf(stderr, "run_if_cpu: skipped, this CPU lacks %s (needed by %s)\n", f[k].name, level);
        return true;
      }
    }
    return false;
  };
  if (missing(v2, 3) || (tier >= 3 && missing(v3, 5)) || (tier >= 4 && missing(v4, 5))) return 77;
  return 0;
#else
  std::fprintf(stderr, "run_if_cpu: skipped, %s is an x86-64 level and this is not an x86-64 build\n", level);
  return 77;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: run_if_cpu LEVEL PROGRAM [ARGS...]\n");
    return 2;
  }
  const int rc = check_level(argv[1]);
  if (rc != 0) return rc;
  execv(argv[2], argv + 2);
  std::perror("run_if_cpu: execv");
  return 2;
}
