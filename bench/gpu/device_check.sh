#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One command for a machine with an NVIDIA GPU (written for an H200): builds the CUDA targets for sm_90, runs the
# GPU tests (ctest -L gpu), the GPU benchmarks and, when python3 has torch with CUDA, the torch.randn + matmul
# baseline; writes full logs to the folder given as $1 (else $OUT, else ./device_check_out) and prints a short
# table last. Budget: about 3 minutes of builds and 2 of runs on an H200 (limit 8).
#
#   bench/gpu/device_check.sh [LOG_DIR]
#   bench/gpu/device_check.sh --stage-deps      # on a CPU machine: copy doctest + Google Benchmark into .devdeps/
#
# Builds with CMake when the project configures there (Eigen3, doctest and benchmark found); otherwise calls nvcc
# directly (the .cu files need no Eigen), taking doctest and Google Benchmark from .devdeps/ (made by --stage-deps
# on a machine that has them, ignored by git, carried along) or from the system.
# Environment: COMPACT_BUILD_DIR (default build-device), JOBS (16), COMPACT_FORCE_NVCC=1 (skip CMake).
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
deps="$root/.devdeps"

if [ "${1:-}" = "--stage-deps" ]; then
  mkdir -p "$deps/include" "$deps/lib"
  cp -r /usr/include/doctest /usr/include/benchmark "$deps/include/"
  cp -P /usr/lib/x86_64-linux-gnu/libbenchmark.so* "$deps/lib/"
  grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
  echo "staged into $deps ($(du -sh "$deps" | cut -f1)); carry .devdeps with the tree"
  exit 0
fi

logs=${1:-${OUT:-$root/device_check_out}}
mkdir -p "$logs"
build=${COMPACT_BUILD_DIR:-$root/build-device}  # overrides for trying the script elsewhere
jobs=${JOBS:-16}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
start=$(date +%s)
status_build=fail status_test=fail status_bench=skipped status_torch=skipped

# Seven files at most go to $logs (a device lease brings back eight): build.log (environment, configure, build),
# test.log, bench.log, bench.json, torch.log, torch.json, summary.txt.
{ nvidia-smi || true; "$nvcc" --version || true; } > "$logs/build.log" 2>&1

# --- build: CMake if the project configures here, else nvcc directly ---------------------------------------
cmake_ok=0
if [ -z "${COMPACT_FORCE_NVCC:-}" ] && command -v cmake > /dev/null; then
  gen=""; command -v ninja > /dev/null && gen="-G Ninja"
  if cmake -S "$root" -B "$build" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
       -DCMAKE_CUDA_COMPILER="$nvcc" -DCOMPACT_BUILD_EXAMPLES=OFF -DCOMPACT_INSTALL=OFF \
       -DCMAKE_PREFIX_PATH="$deps" >> "$logs/build.log" 2>&1; then
    cmake_ok=1
  fi
fi
mkdir -p "$build"
if [ $cmake_ok = 1 ]; then
  cmake --build "$build" --target test_cuda_backend bench_cuda -j "$jobs" >> "$logs/build.log" 2>&1 && status_build=cmake
  test_bin="$build/tests/test_cuda_backend"
  bench_bin="$build/bench/gpu/bench_cuda"
else
  inc="-I$root/include"
  [ -d "$deps/include" ] && inc="$inc -I$deps/include"
  flags="-std=c++17 -O3 -arch=sm_90 $inc"
  test_bin="$build/test_cuda_backend"
  bench_bin="$build/bench_cuda"
  {
    echo "CMake configure failed or absent (see above): building with $nvcc directly"
    "$nvcc" $flags tests/cuda/test_cuda_backend.cu -o "$test_bin" -lcublas &
    pid_test=$!
    "$nvcc" $flags bench/gpu/bench_cuda.cu -o "$bench_bin" -L"$deps/lib" -Xlinker -rpath="$deps/lib" -lbenchmark \
      -lpthread -lcublas &
    pid_bench=$!
    wait $pid_test && status_build=nvcc
    wait $pid_bench || { echo "bench_cuda did not build (Google Benchmark missing?)"; rm -f "$bench_bin"; }
  } >> "$logs/build.log" 2>&1
fi
build_s=$(( $(date +%s) - start ))

# --- GPU tests ----------------------------------------------------------------------------------------------
if [ -x "$test_bin" ]; then
  if [ $cmake_ok = 1 ]; then
    (cd "$build" && ctest -L gpu --output-on-failure --timeout 300) > "$logs/test.log" 2>&1
  else
    timeout 300 "$test_bin" > "$logs/test.log" 2>&1
  fi
  case $? in 0) status_test=pass ;; 77) status_test="skipped (no device)" ;; *) status_test=FAIL ;; esac
  # ctest exits 0 when its tests were skipped (exit 77): say so rather than "pass".
  if [ "$status_test" = pass ] && grep -q "(Skipped)" "$logs/test.log"; then status_test="skipped (no device)"; fi
fi

# --- GPU benchmarks -----------------------------------------------------------------------------------------
if [ -x "$bench_bin" ]; then
  timeout 240 "$bench_bin" --benchmark_out="$logs/bench.json" --benchmark_out_format=json \
    > "$logs/bench.log" 2>&1
  case $? in 0) status_bench=ran ;; 77) status_bench="skipped (no device)" ;; *) status_bench=FAIL ;; esac
fi

# --- torch.randn + matmul baseline --------------------------------------------------------------------------
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1; then
  timeout 120 python3 bench/gpu/torch_baseline.py "$logs/torch.json" > "$logs/torch.log" 2>&1 && status_torch=ran \
    || status_torch=FAIL
fi

total_s=$(( $(date +%s) - start ))
{
  echo "device_check: build $status_build (${build_s}s), gpu tests $status_test, benchmarks $status_bench," \
       "torch $status_torch, total ${total_s}s; logs in $logs"
  if command -v python3 > /dev/null; then python3 bench/gpu/summarize.py "$logs"; fi
  grep -E "test cases|assertions|Status" "$logs/test.log" 2>/dev/null | tail -3
} | tee "$logs/summary.txt"
[ "$status_test" = FAIL ] || [ "$status_build" = fail ] && exit 1
exit 0
