#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# device_check.sh when the budget is spent: run in its device mode with a budget of 5 s (under the 10 s a step needs)
# and stand-in .devdeps, it must start nothing (no `timeout 0`, which would lift the limit), report every step NOT RUN
# (not pass, not FAIL), exit non-zero, print the command that reruns the steps, and finish at once. Needs cuBLAS in
# the CUDA toolkit (device_check's first check); exits 77 (skipped) without it. No GPU needed.
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/deps/cmake" "$tmp/deps/lib"
: > "$tmp/deps/cmake/Eigen3Config.cmake"
: > "$tmp/deps/lib/libbenchmark.so"
start=$(date +%s)
COMPACT_DEVDEPS=$tmp/deps COMPACT_BUILD_DIR=$tmp/build COMPACT_CHECK_BUDGET=5 OUT= timeout 120 \
  bench/gpu/device_check.sh "$tmp/logs" > "$tmp/out" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
cat "$tmp/out"
if [ $rc = 2 ] && grep -q "cuBLAS not found" "$tmp/out"; then
  echo "skipped: no cuBLAS in the CUDA toolkit here"
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
[ $rc = 1 ] || fail "exit $rc, want 1 (NOT RUN steps fail the check)"
[ $took -lt 60 ] || fail "took ${took}s with a 5 s budget"
for step in "build (CUDA tests, benchmarks)" "gpu tests: test_cuda_backend" "gpu tests: test_cuda_optimizer" \
            "compact_torch CUDA tests" "benchmarks (bench_cuda)" "torch randn + matmul baseline" "compute-sanitizer"; do
  grep -q "^$step.*NOT RUN (no time left)" "$tmp/out" || fail "no NOT RUN row for: $step"
done
! grep -qE "^(gpu tests|compact_torch CUDA|benchmarks|compute-sanitizer|memcheck|racecheck).*(pass|FAIL)" "$tmp/out" ||
  fail "a step without time was reported pass or FAIL"
grep -qF 'run(command="COMPACT_CHECK_STEPS=tests,torch,bench,sanitize bench/gpu/device_check.sh"' "$tmp/out" ||
  fail "no rerun command for the steps not reached"
grep -q "^device_check: FAIL" "$tmp/out" || fail "no final FAIL line"
[ ! -d "$tmp/build" ] || [ -z "$(ls -A "$tmp/build")" ] || fail "something was built without time"
echo "device_check budget: ok (${took}s)"
