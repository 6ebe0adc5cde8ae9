#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One command for a machine with an NVIDIA GPU (written for an H200): builds the CUDA targets for sm_90, runs the
# GPU tests (ctest -L gpu: test_cuda_backend and test_cuda_optimizer), compute-sanitizer racecheck and synccheck on the test's "sanitize" suite, the GPU
# benchmarks and, when python3 has torch with CUDA, the torch.randn + matmul baseline; writes logs to the folder
# given as $1 (else $OUT, else ./device_check_out) and prints a short table last, ending with the issue-12 targets
# (dense sketch / cuBLAS with a stored P <= 1.10, SRHT / copy bandwidth >= 0.60, both measured in this run).
#
#   bench/gpu/device_check.sh [LOG_DIR]
#   bench/gpu/device_check.sh --stage-deps      # on a CPU machine: copy doctest, Google Benchmark and Eigen's
#                                               # headers (test_cuda_optimizer's CPU side) into .devdeps/
#
# Every step runs under `timeout`; the limits add up to 350 s, inside a 6-minute device slot with the build:
#   environment 10 (nvidia-smi, nvcc --version: 5 each)   configure 30   build 140   tests 60 (both programs)
#   racecheck 30   synccheck 20   benchmarks 45   torch baseline 15 (import included)
# A step that runs out of time is reported as "timeout" and the script goes on to the next.
#
# Builds with CMake when the project configures there (Eigen3, doctest and benchmark found); otherwise calls nvcc
# directly (the .cu files need no Eigen; test_cuda_optimizer's host-compiled CPU reference does), taking doctest,
# Google Benchmark and Eigen from .devdeps/ (made by --stage-deps
# on a machine that has them, ignored by git, carried along) or from the system. Stops before building when
# cuBLAS (cublas_v2.h and libcublas) is not in the CUDA toolkit.
# Environment: COMPACT_BUILD_DIR (default build-device), JOBS (16), COMPACT_FORCE_NVCC=1 (skip CMake).
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
deps="$root/.devdeps"

if [ "${1:-}" = "--stage-deps" ]; then
  set -e
  mkdir -p "$deps/include" "$deps/lib"
  cp -r /usr/include/doctest /usr/include/benchmark /usr/include/eigen3 "$deps/include/"
  cp -P /usr/lib/x86_64-linux-gnu/libbenchmark.so* "$deps/lib/"
  grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
  echo "staged into $deps ($(du -sh "$deps" | cut -f1)); carry .devdeps with the tree"
  exit 0
fi

logs=${1:-${OUT:-$root/device_check_out}}
mkdir -p "$logs"
build=${COMPACT_BUILD_DIR:-$root/build-device}
jobs=${JOBS:-16}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
start=$(date +%s)
status_build=fail status_test=fail status_race=skipped status_sync=skipped status_bench=skipped status_torch=skipped

# Seven files at most go to $logs (a device lease brings back eight): build.log (environment, configure, build),
# test.log, sanitize.log, bench.log (benchmarks and the torch baseline), bench.json, torch.json, summary.txt.
{ timeout 5 nvidia-smi || true; timeout 5 "$nvcc" --version || true; } > "$logs/build.log" 2>&1

# status_of RC: the word for a step's exit code (0 pass, 77 skipped, 124/137 timeout, else FAIL).
status_of() {
  case $1 in 0) echo pass ;; 77) echo "skipped (no device)" ;; 124 | 137) echo timeout ;; *) echo FAIL ;; esac
}

# --- pre-check: cuBLAS in the toolkit ----------------------------------------------------------------------
cublas_header=$(ls "$cuda_root"/include/cublas_v2.h "$cuda_root"/targets/*/include/cublas_v2.h 2>/dev/null | head -1)
cublas_lib=$(ls "$cuda_root"/lib64/libcublas.so* "$cuda_root"/targets/*/lib/libcublas.so* 2>/dev/null | head -1)
if [ -z "$cublas_header" ] || [ -z "$cublas_lib" ]; then
  echo "device_check: cuBLAS not found under $cuda_root (cublas_v2.h: ${cublas_header:-missing}," \
       "libcublas.so: ${cublas_lib:-missing}); the CUDA backend needs it. Nothing built." | tee "$logs/summary.txt"
  exit 2
fi
echo "cuBLAS: $cublas_header, $cublas_lib" >> "$logs/build.log"

# --- build: CMake if the project configures here, else nvcc directly ---------------------------------------
cmake_ok=0
if [ -z "${COMPACT_FORCE_NVCC:-}" ] && command -v cmake > /dev/null; then
  gen=""; command -v ninja > /dev/null && gen="-G Ninja"
  if timeout 30 cmake -S "$root" -B "$build" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
       -DCMAKE_CUDA_COMPILER="$nvcc" -DCOMPACT_BUILD_EXAMPLES=OFF -DCOMPACT_INSTALL=OFF \
       -DCMAKE_PREFIX_PATH="$deps" >> "$logs/build.log" 2>&1; then
    cmake_ok=1
  fi
fi
mkdir -p "$build"
if [ $cmake_ok = 1 ]; then
  timeout 140 cmake --build "$build" --target test_cuda_backend test_cuda_optimizer bench_cuda -j "$jobs" \
    >> "$logs/build.log" 2>&1 && status_build=cmake
  test_bin="$build/tests/test_cuda_backend"
  bench_bin="$build/bench/gpu/bench_cuda"
else
  inc="-I$root/include"
  [ -d "$deps/include" ] && inc="$inc -I$deps/include"
  eigen=$(ls -d "$deps/include/eigen3" /usr/include/eigen3 2>/dev/null | head -1)
  flags="-std=c++17 -O3 -arch=sm_90 $inc"
  test_bin="$build/test_cuda_backend"
  optimizer_bin="$build/test_cuda_optimizer"
  bench_bin="$build/bench_cuda"
  {
    echo "CMake configure failed or absent (see above): building with $nvcc directly"
    timeout 140 "$nvcc" $flags tests/cuda/test_cuda_backend.cu -o "$test_bin" -lcublas &
    pid_test=$!
    if [ -n "$eigen" ]; then
      timeout 140 "$nvcc" $flags -I"$eigen" tests/cuda/test_cuda_optimizer.cu tests/cuda/optimizer_reference.cpp \
        -o "$optimizer_bin" -lcublas &
      pid_optimizer=$!
    else
      echo "test_cuda_optimizer not built: no Eigen headers (stage them with --stage-deps)"; pid_optimizer=""
    fi
    timeout 140 "$nvcc" $flags bench/gpu/bench_cuda.cu -o "$bench_bin" -L"$deps/lib" -Xlinker -rpath="$deps/lib" \
      -lbenchmark -lpthread -lcublas &
    pid_bench=$!
    wait $pid_test && status_build=nvcc
    [ -n "$pid_optimizer" ] && { wait $pid_optimizer || { echo "test_cuda_optimizer did not build"; status_build=fail; }; }
    wait $pid_bench || { echo "bench_cuda did not build (Google Benchmark missing?)"; rm -f "$bench_bin"; }
  } >> "$logs/build.log" 2>&1
fi
build_s=$(( $(date +%s) - start ))

# --- GPU tests, then compute-sanitizer on the small "sanitize" suite -----------------------------------------
if [ -x "$test_bin" ]; then
  if [ $cmake_ok = 1 ]; then
    (cd "$build" && timeout 60 ctest -L gpu --output-on-failure --timeout 55) > "$logs/test.log" 2>&1
  else
    (
      timeout 40 "$test_bin"; rc=$?
      if [ -x "$optimizer_bin" ]; then timeout 20 "$optimizer_bin"; rc2=$?; [ $rc = 0 ] && rc=$rc2; fi
      exit $rc
    ) > "$logs/test.log" 2>&1
  fi
  status_test=$(status_of $?)
  # ctest exits 0 when its tests were skipped (exit 77): say so rather than "pass".
  if [ "$status_test" = pass ] && grep -q "(Skipped)" "$logs/test.log"; then status_test="skipped (no device)"; fi

  sanitizer=$(command -v compute-sanitizer || echo "$cuda_root/bin/compute-sanitizer")
  if [ -x "$sanitizer" ] && [ "$status_test" != "skipped (no device)" ]; then
    : > "$logs/sanitize.log"
    echo "=== racecheck" >> "$logs/sanitize.log"
    timeout 30 "$sanitizer" --tool racecheck --error-exitcode 1 "$test_bin" --test-suite=sanitize \
      >> "$logs/sanitize.log" 2>&1
    status_race=$(status_of $?)
    echo "=== synccheck" >> "$logs/sanitize.log"
    timeout 20 "$sanitizer" --tool synccheck --error-exitcode 1 "$test_bin" --test-suite=sanitize \
      >> "$logs/sanitize.log" 2>&1
    status_sync=$(status_of $?)
  elif [ ! -x "$sanitizer" ]; then
    status_race="skipped (no compute-sanitizer)" status_sync="skipped (no compute-sanitizer)"
  fi
fi

# --- GPU benchmarks -----------------------------------------------------------------------------------------
if [ -x "$bench_bin" ]; then
  timeout 45 "$bench_bin" --benchmark_out="$logs/bench.json" --benchmark_out_format=json > "$logs/bench.log" 2>&1
  status_bench=$(status_of $?)
  [ "$status_bench" = pass ] && status_bench=ran
fi

# --- torch.randn + matmul baseline --------------------------------------------------------------------------
if command -v python3 > /dev/null; then
  echo "=== torch baseline" >> "$logs/bench.log"
  timeout 15 python3 bench/gpu/torch_baseline.py "$logs/torch.json" >> "$logs/bench.log" 2>&1
  rc=$?
  status_torch=$(status_of $rc)
  [ $rc = 0 ] && status_torch=ran
  [ $rc = 1 ] && grep -q "No module named 'torch'" "$logs/bench.log" && status_torch="skipped (no torch)"
fi

total_s=$(( $(date +%s) - start ))
{
  echo "device_check: build $status_build (${build_s}s), gpu tests $status_test, racecheck $status_race," \
       "synccheck $status_sync, benchmarks $status_bench, torch $status_torch, total ${total_s}s; logs in $logs"
  if command -v python3 > /dev/null; then python3 bench/gpu/summarize.py "$logs"; fi
  grep -E "test cases|assertions|Status" "$logs/test.log" 2>/dev/null | tail -3
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$logs/sanitize.log" 2>/dev/null
} | tee "$logs/summary.txt"
for s in "$status_test" "$status_race" "$status_sync"; do
  case $s in FAIL | timeout) exit 1 ;; esac
done
[ "$status_build" = fail ] && exit 1
exit 0
