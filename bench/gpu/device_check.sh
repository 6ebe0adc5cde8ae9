#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The device check: one command for a machine with an NVIDIA GPU (written for this workplace's H200 image: nvcc 13.0,
# CMake, ninja, python3 with a CUDA torch; no Debian dev packages, no network). It builds from the toolkit, CMake/ninja
# and .devdeps/ alone, then runs, ordered by value, each step under `timeout` with a cap of its own inside one
# wall-clock budget (COMPACT_CHECK_BUDGET, 400 s; the caps sum to it):
#   1. the GPU tests (test_cuda_backend, test_cuda_optimizer);
#   2. the compact_torch CUDA tests (examples/pytorch/tests/test_cuda.py) against compact_torch built with this
#      machine's python3 and torch;
#   3. the GPU benchmarks and the torch.randn + matmul baseline (the issue-12 ratios);
#   4. compute-sanitizer memcheck on both programs' "sanitize" suites, racecheck + synccheck on the backend's (on
#      compact's own kernels only), where the runtime lets the sanitizer reach the device (gVisor does not: a probe
#      detects that and the summary says so instead of failing);
#   5. examples/pytorch/gpu_memory.sh at the paper's shapes, with the time the other steps left.
# A skipped GPU test (exit 77, or a pytest skip) is a failure here: this script is for a machine with a GPU. A step
# the budget did not reach is NOT RUN, neither pass nor fail: the check still exits non-zero, and the summary prints
# the command that reruns just those steps (COMPACT_CHECK_STEPS). The summary table is printed last; at most eight
# files go to the log folder ($1, else $OUT, else ./device_check_out).
#
#   bench/gpu/device_check.sh [LOG_DIR]       # on the device (with .devdeps/ carried along)
#   bench/gpu/device_check.sh --stage-deps    # on a Debian machine with the packages: fill .devdeps/ (about 11 MB)
#   bench/gpu/device_check.sh --build-only    # build what the run needs (host code at -O1), run nothing (CI)
#
# With this workplace's device tool, from the repository root: once `bench/gpu/device_check.sh --stage-deps`, then
#   run(command="bench/gpu/device_check.sh", carry=[".devdeps"], timeout_s=480)
#
# .devdeps/ (git-ignored): include/ (doctest, Google Benchmark, Eigen 3.4 headers), lib/ (libbenchmark.so and its
# links), cmake/ (minimal package configs for Eigen3, doctest and benchmark pointing into .devdeps, used through
# Eigen3_DIR, doctest_DIR and benchmark_DIR so that nothing of the system's is picked up). The CMake build is the
# main path; where CMake is missing or does not configure, the .cu files are compiled with nvcc directly from the same
# headers (COMPACT_FORCE_NVCC=1 forces that path).
#
# Environment: COMPACT_DEVDEPS (.devdeps), COMPACT_BUILD_DIR (build-device), JOBS (nproc), COMPACT_DEVICE_PYTHON
# (python3: the interpreter whose torch builds and runs compact_torch), COMPACT_CHECK_BUDGET (400: seconds of wall
# time for everything),
# COMPACT_CHECK_STEPS (tests,torch,bench,sanitize,memory: the steps to run, the build always; compact_torch is built
# only for torch and memory), CUDACXX (nvcc), COMPACT_CUDA_ARCH (90), COMPACT_WERROR (OFF; CI's build-only check
# sets ON).
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
deps=${COMPACT_DEVDEPS:-$root/.devdeps}
mode=run
case "${1:-}" in
  --stage-deps) mode=stage ;;
  --build-only) mode=build ;;
  --help | -h) sed -n '2,38p' "$0"; exit 0 ;;
esac

# --- staging (a CPU machine with Debian's libeigen3-dev, doctest-dev, libbenchmark-dev) ---------------------------
if [ $mode = stage ]; then
  set -e
  eigen_src=/usr/include/eigen3 doctest_src=/usr/include/doctest bench_src=/usr/include/benchmark
  lib_src=$(ls -d /usr/lib/*-linux-gnu 2>/dev/null | head -1)
  for p in "$eigen_src/Eigen/Core" "$doctest_src/doctest.h" "$bench_src/benchmark.h" "$lib_src/libbenchmark.so"; do
    [ -e "$p" ] || { echo "device_check --stage-deps: $p not found (apt-get install libeigen3-dev doctest-dev libbenchmark-dev)"; exit 1; }
  done
  rm -rf "$deps"
  mkdir -p "$deps/include" "$deps/lib" "$deps/cmake"
  cp -r "$doctest_src" "$bench_src" "$deps/include/"
  mkdir -p "$deps/include/eigen3"
  cp -r "$eigen_src/Eigen" "$eigen_src/signature_of_eigen3_matrix_library" "$deps/include/eigen3/"
  cp -P "$lib_src"/libbenchmark.so* "$deps/lib/"
  real_lib=$(basename "$(readlink -f "$lib_src/libbenchmark.so")")
  soname=$(objdump -p "$lib_src/$real_lib" 2>/dev/null | awk '/SONAME/ {print $2}')
  version_of() { sed -n "s/^#define $2 \([0-9]*\).*/\1/p" "$1" | head -1; }
  m=$deps/include/eigen3/Eigen/src/Core/util/Macros.h
  eigen_version="$(version_of "$m" EIGEN_WORLD_VERSION).$(version_of "$m" EIGEN_MAJOR_VERSION).$(version_of "$m" EIGEN_MINOR_VERSION)"
  d=$deps/include/doctest/doctest.h
  doctest_version="$(version_of "$d" DOCTEST_VERSION_MAJOR).$(version_of "$d" DOCTEST_VERSION_MINOR).$(version_of "$d" DOCTEST_VERSION_PATCH)"
  bench_version=$(echo "$real_lib" | sed -n 's/^libbenchmark\.so\.\([0-9.]*\)$/\1/p')
  # A version file: compatible with any requested version up to the staged one (same major), as CMake's
  # SameMajorVersion does.
  version_file() {
    cat > "$deps/cmake/$1ConfigVersion.cmake" <<EOF
# Generated by bench/gpu/device_check.sh --stage-deps: $1 $2 staged from this machine's Debian package.
set(PACKAGE_VERSION "$2")
string(REGEX MATCH "^[0-9]+" _major "\${PACKAGE_VERSION}")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION OR (PACKAGE_FIND_VERSION AND NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL _major))
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
EOF
  }
  version_file Eigen3 "$eigen_version"
  version_file doctest "$doctest_version"
  version_file benchmark "${bench_version:-0}"
  # A header-only package: an INTERFACE IMPORTED target whose include directory is .devdeps/include/$3.
  header_config() {
    cat > "$deps/cmake/$1Config.cmake" <<EOF
# Generated by bench/gpu/device_check.sh --stage-deps: $2's headers in .devdeps/include/$3.
if(NOT TARGET $2)
  add_library($2 INTERFACE IMPORTED)
  set_target_properties($2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${CMAKE_CURRENT_LIST_DIR}/../include/$3")
endif()
EOF
  }
  header_config Eigen3 Eigen3::Eigen eigen3
  header_config doctest doctest::doctest ""
  cat > "$deps/cmake/benchmarkConfig.cmake" <<EOF
# Generated by bench/gpu/device_check.sh --stage-deps: Google Benchmark, headers in .devdeps/include/benchmark,
# the shared library in .devdeps/lib (found at run time through the build tree's RPATH).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
if(NOT TARGET benchmark::benchmark)
  add_library(benchmark::benchmark SHARED IMPORTED)
  set_target_properties(benchmark::benchmark PROPERTIES
    IMPORTED_LOCATION "\${CMAKE_CURRENT_LIST_DIR}/../lib/$real_lib"
    IMPORTED_SONAME "$soname"
    INTERFACE_INCLUDE_DIRECTORIES "\${CMAKE_CURRENT_LIST_DIR}/../include"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
EOF
  # Keep .devdeps out of `git status` where this is a git work tree; a clone without info/ (no git templates) or a
  # tree without .git (an export) is fine either way.
  if exclude=$(git rev-parse --git-path info/exclude 2>/dev/null); then
    mkdir -p "$(dirname "$exclude")" 2>/dev/null &&
      { grep -qx '/.devdeps/' "$exclude" 2>/dev/null || echo '/.devdeps/' >> "$exclude"; } 2>/dev/null || true
  fi
  echo "staged Eigen $eigen_version, doctest $doctest_version, Google Benchmark ${bench_version:-?} into $deps" \
       "($(du -sh "$deps" | cut -f1)); carry .devdeps with the tree"
  exit 0
fi

# --- common: paths, the wall-clock budget, helpers ---------------------------------------------------------------
if [ $mode = run ]; then logs=${1:-${OUT:-$root/device_check_out}}; else logs=${COMPACT_BUILD_LOGS:-$root/build-device-logs}; fi
mkdir -p "$logs"
build=${COMPACT_BUILD_DIR:-$root/build-device}
torch_build=$root/build-gpu  # the folders examples/pytorch/gpu_memory.sh builds into: its own build is then a no-op
jobs=${JOBS:-$(nproc 2>/dev/null || echo 8)}
py=${COMPACT_DEVICE_PYTHON:-python3}
arch=${COMPACT_CUDA_ARCH:-90}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
start=$(date +%s)
budget=${COMPACT_CHECK_BUDGET:-400}
steps=",${COMPACT_CHECK_STEPS:-tests,torch,bench,sanitize,memory},"
wants() { case $steps in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
now() { echo $(( $(date +%s) - start )); }
# Each step's cap in seconds, in the order the steps run; they sum to the default budget of 400 s and are scaled to
# COMPACT_CHECK_BUDGET. What a step leaves unused goes to the memory step (uncapped, last: "with the time left").
declare -A caps=([build]=140 [backend]=45 [optimizer]=20 [torch]=45 [bench]=45 [baseline]=15 [probe]=10 [memcheck]=10
                 [racecheck]=50 [synccheck]=10 [memcheck_opt]=10)
# cap NAME: the step's cap scaled to the budget.
cap() { echo $(( caps[$1] * budget / 400 )); }
# limit CAP: seconds a step may take, at most CAP and what is left of the budget (0: no time left).
limit() {
  local left=$(( budget - $(now) ))
  if [ "$left" -lt 10 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
# verdict RC: a step's word (0 pass; 77 is a failure here: a skip on a device machine; 124/137 timeout).
verdict() {
  case $1 in 0) echo pass ;; 77) echo "FAIL (skipped: exit 77)" ;; 124 | 137) echo "FAIL (timeout)" ;; *) echo "FAIL (exit $1)" ;; esac
}
declare -a rows
row() { rows+=("$(printf '%-34s %s' "$1" "$2")"); }
failed=0
note_fail() { case $1 in FAIL*) failed=1 ;; esac; }
# A step the budget did not reach: NOT RUN (neither pass nor fail); the check still fails, and the summary says how
# to rerun the steps named here.
not_run=()
note_not_run() {
  row "$2" "NOT RUN (no time left)"
  failed=1
  case " ${not_run[*]:-} " in *" $1 "*) ;; *) not_run+=("$1") ;; esac
}

# Logs (eight files at most): build.log, test.log (GPU tests and sanitizers), torch.log (compact_torch build and
# tests), bench.log, bench.json, torch.json (the randn + matmul baseline), memory.log, summary.txt.
: > "$logs/build.log"
{
  echo "=== environment"
  date -u
  uname -a
  timeout 5 nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  timeout 5 "$nvcc" --version 2>&1 || echo "nvcc: not found at $nvcc"
  command -v cmake > /dev/null && cmake --version | head -1
  command -v ninja > /dev/null && echo "ninja $(ninja --version)"
} >> "$logs/build.log" 2>&1

# The runtime: gVisor reports kernel 4.4.0 and names itself in dmesg; compute-sanitizer cannot reach the device
# there (seen 2026-11: "Device not supported", then error 999 at the first allocation).
runtime="kernel $(uname -r)"
if [ "$(uname -r)" = 4.4.0 ] || dmesg 2>/dev/null | grep -qi gvisor; then runtime="gVisor ($runtime)"; fi

# --- pre-check: cuBLAS in the toolkit ---------------------------------------------------------------------------
cublas_header=$(ls "$cuda_root"/include/cublas_v2.h "$cuda_root"/targets/*/include/cublas_v2.h 2>/dev/null | head -1)
cublas_lib=$(ls "$cuda_root"/lib64/libcublas.so* "$cuda_root"/targets/*/lib/libcublas.so* 2>/dev/null | head -1)
if [ -z "$cublas_header" ] || [ -z "$cublas_lib" ]; then
  echo "device_check: cuBLAS not found under $cuda_root (cublas_v2.h: ${cublas_header:-missing}," \
       "libcublas.so: ${cublas_lib:-missing}); the CUDA backend needs it. Nothing built." | tee "$logs/summary.txt"
  exit 2
fi
if [ ! -f "$deps/cmake/Eigen3Config.cmake" ] || [ ! -f "$deps/lib/libbenchmark.so" ]; then
  echo "device_check: $deps is missing or incomplete: run bench/gpu/device_check.sh --stage-deps on a machine with" \
       "Debian's libeigen3-dev, doctest-dev and libbenchmark-dev, and carry .devdeps along" | tee "$logs/summary.txt"
  exit 2
fi

# --- build: the CUDA programs (CMake, else nvcc) and compact_torch, in parallel ----------------------------------
test_bin="" optimizer_bin="" bench_bin=""
build_cuda() {
  local cap=$1
  if [ -z "${COMPACT_FORCE_NVCC:-}" ] && command -v cmake > /dev/null; then
    local gen="" launcher=""
    command -v ninja > /dev/null && gen="-G Ninja"
    command -v ccache > /dev/null && launcher="-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    # The host code: -O3 for the run; -O1 where nothing runs on a GPU (--build-only: CI runs only the host suites),
    # which keeps GCC's flow-based warnings (test_cuda_backend's host compile: 22 CPU s instead of 36).
    local host_opt="-O3 -DNDEBUG"
    [ $mode != build ] || host_opt="-O1 -DNDEBUG"
    echo "=== configure (CMake, dependencies from $deps only; host code $host_opt)"
    # shellcheck disable=SC2086
    if timeout 60 cmake -S "$root" -B "$build" $gen $launcher -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_CXX_FLAGS_RELEASE="$host_opt" -DCMAKE_CUDA_FLAGS_RELEASE="$host_opt" \
         -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="$nvcc" -DCOMPACT_BUILD_EXAMPLES=OFF \
         -DCOMPACT_INSTALL=OFF -DCOMPACT_WERROR="${COMPACT_WERROR:-OFF}" -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON \
         -DEigen3_DIR="$deps/cmake" -Ddoctest_DIR="$deps/cmake" -Dbenchmark_DIR="$deps/cmake"; then
      echo "=== build (CMake)"
      # What the run needs; CI's build-only proof also compiles the device-free CUDA test and every .cuh on its own
      # (its README build leaves CUDA to this one, and runs the GPU tests' host suites from here).
      local targets=(test_cuda_backend test_cuda_optimizer bench_cuda)
      [ $mode != build ] || targets+=(test_cuda_check compact_cuda_header_check)
      if timeout "$cap" cmake --build "$build" --target "${targets[@]}" -j "$jobs"; then
        echo "build: cmake"
        return 0
      fi
      return 1
    fi
    echo "CMake did not configure: building with $nvcc directly"
  fi
  echo "=== build (nvcc)"
  mkdir -p "$build/nvcc"
  local flags=(-std=c++17 -O3 "-arch=sm_$arch" -I"$root/include" -I"$root/tests" -isystem "$deps/include"
               -isystem "$deps/include/eigen3")
  # nvcc OUT SOURCES... [LIBS...]: compiles unless OUT is newer than every header and test source (a rerun on a
  # machine still warm), in the background.
  local pids=()
  compile() {
    local out=$1
    shift
    if [ -x "$out" ] && [ -z "$(find include tests bench/gpu/bench_cuda.cu -newer "$out" -print -quit)" ]; then
      echo "$out: up to date"
      return
    fi
    timeout "$cap" "$nvcc" "${flags[@]}" "$@" -o "$out" &
    pids+=($!)
  }
  compile "$build/nvcc/test_cuda_backend" tests/cuda/test_cuda_backend.cu -lcublas
  compile "$build/nvcc/test_cuda_optimizer" tests/cuda/test_cuda_optimizer.cu tests/cuda/optimizer_reference.cpp -lcublas
  compile "$build/nvcc/bench_cuda" bench/gpu/bench_cuda.cu -L"$deps/lib" -Xlinker "-rpath=$deps/lib" -lbenchmark \
    -lpthread -lcublas
  local rc=0 pid
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  [ $rc = 0 ] && echo "build: nvcc"
  return $rc
}

# Which python builds compact_torch: one whose torch has CUDA (torch.version.cuda) and whose headers are there.
torch_python() {
  "$py" - <<'PY' 2>&1
import os, sys, sysconfig
try:
    import torch, torch.utils.cpp_extension as ext
except Exception as e:
    sys.exit(f"no torch ({type(e).__name__}: {e})")
if torch.version.cuda is None:
    sys.exit(f"torch {torch.__version__} has no CUDA")
if not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    sys.exit(f"Python.h not found in {sysconfig.get_paths()['include']} (the python3-dev headers)")
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {sys.executable}")
PY
}

build_torch() {
  local cap=$1
  echo "=== compact_torch with CUDA: $py, TORCH_CUDA_ARCH_LIST=${arch:0:1}.${arch:1}, Eigen from $deps"
  (cd examples/pytorch && COMPACT_TORCH_CUDA=1 TORCH_CUDA_ARCH_LIST="${arch:0:1}.${arch:1}" MAX_JOBS="$jobs" \
     EIGEN3_INCLUDE_DIR="$deps/include/eigen3" PYTHONDONTWRITEBYTECODE=1 timeout "$cap" "$py" setup.py -q \
     build_py --build-lib "$torch_build/lib" build_ext --build-lib "$torch_build/lib" --build-temp "$torch_build/temp")
}

status_build=FAIL status_torch_build="not run"
# On the device the build shares the budget (its cap); a CI machine with 2 cores builds only, so it gets
# COMPACT_BUILD_TIMEOUT (900 s) instead. compact_torch is built only for the steps that use it.
if [ $mode = build ]; then cap=${COMPACT_BUILD_TIMEOUT:-900}; else cap=$(limit "$(cap build)"); fi
torch_info=$(torch_python)
torch_ok=$?
if [ "$cap" = 0 ]; then
  torch_ok=skip  # no time for the build (`timeout 0` would lift the limit): every step below is NOT RUN
  status_torch_build="not run"
elif [ $mode = run ] && ! wants torch && ! wants memory; then
  torch_ok=skip
  status_torch_build="not needed (COMPACT_CHECK_STEPS=${COMPACT_CHECK_STEPS:-})"
elif [ $torch_ok = 0 ]; then
  build_torch "$cap" > "$logs/torch.log" 2>&1 &
  torch_pid=$!
elif [ $mode = build ]; then
  status_torch_build="skipped: $py: $torch_info"  # a CPU machine (CI): the device builds it
  echo "compact_torch: not built, $py: $torch_info" > "$logs/torch.log"
else
  status_torch_build="FAIL ($py: $torch_info)"  # on the device its CUDA tests must run
  echo "compact_torch: not built, $py: $torch_info" > "$logs/torch.log"
fi
if [ "$cap" = 0 ]; then
  status_build="NOT RUN"
elif build_cuda "$cap" >> "$logs/build.log" 2>&1; then
  status_build=pass
fi
if grep -q "^build: nvcc" "$logs/build.log"; then
  test_bin=$build/nvcc/test_cuda_backend optimizer_bin=$build/nvcc/test_cuda_optimizer bench_bin=$build/nvcc/bench_cuda
else
  test_bin=$build/tests/test_cuda_backend optimizer_bin=$build/tests/test_cuda_optimizer bench_bin=$build/bench/gpu/bench_cuda
fi
if [ $torch_ok = 0 ]; then
  if wait "$torch_pid"; then status_torch_build=pass; else status_torch_build="FAIL (see torch.log)"; fi
fi
build_s=$(now)
if [ "$status_build" = "NOT RUN" ]; then
  note_not_run build "build (CUDA tests, benchmarks)"
else
  row "build (CUDA tests, benchmarks)" "$status_build ($(grep -o '^build: [a-z]*' "$logs/build.log" | cut -c8-), ${build_s}s; sm_$arch)"
fi
row "build compact_torch (CUDA)" "$status_torch_build"
note_fail "$status_build"

if [ $mode = build ]; then
  # CI: compile only. A python without a CUDA torch is the normal case on a CPU machine: the device builds it.
  case $status_torch_build in FAIL*) failed=1 ;; esac
  [ $status_build = pass ] || tail -n 60 "$logs/build.log"
  case $status_torch_build in FAIL*) tail -n 60 "$logs/torch.log" ;; esac
  printf '%s\n' "device_check --build-only: ${build_s}s" "${rows[@]}"
  exit $failed
fi
note_fail "$status_torch_build"

# --- 1. GPU tests ------------------------------------------------------------------------------------------------
: > "$logs/test.log"
run_test() {  # run_test NAME BIN CAP: the whole program; exit 77 (no device) counts as a failure
  local t rc v
  t=$(limit "$3")
  if [ "$t" = 0 ]; then note_not_run tests "$1"; return; fi
  if [ ! -x "$2" ]; then row "$1" "FAIL (not built)"; failed=1; return; fi
  echo "=== $1 ($2, limit ${t}s)" >> "$logs/test.log"
  timeout "$t" "$2" >> "$logs/test.log" 2>&1
  rc=$?
  v=$(verdict $rc)
  row "$1" "$v ($(grep -E '^\[doctest\] test cases' "$logs/test.log" | tail -1 | sed 's/\[doctest\] //'))"
  note_fail "$v"
}
if wants tests; then
  run_test "gpu tests: test_cuda_backend" "$test_bin" "$(cap backend)"
  run_test "gpu tests: test_cuda_optimizer" "$optimizer_bin" "$(cap optimizer)"
fi

# --- 2. compact_torch's CUDA tests ----------------------------------------------------------------------------------
if ! wants torch; then
  :
elif [ "$(limit "$(cap torch)")" = 0 ]; then
  note_not_run torch "compact_torch CUDA tests"
elif [ "$status_torch_build" != pass ]; then
  row "compact_torch CUDA tests" "FAIL (not built: $status_torch_build)"
  failed=1
else
  t=$(limit "$(cap torch)")
  echo "=== pytest examples/pytorch/tests/test_cuda.py (limit ${t}s)" >> "$logs/torch.log"
  PYTHONPATH="$torch_build/lib" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 timeout "$t" "$py" -m pytest -q -rs \
    -p no:cacheprovider examples/pytorch/tests/test_cuda.py >> "$logs/torch.log" 2>&1
  rc=$?
  line=$(grep -E '[0-9]+ (passed|failed|skipped|error)' "$logs/torch.log" | tail -1)
  v=$(verdict $rc)
  # A skipped CUDA test means it did not run on the GPU: a failure here, whatever pytest's exit code.
  if [ "$v" = pass ] && echo "$line" | grep -qE '[0-9]+ skipped'; then v="FAIL (tests skipped)"; fi
  row "compact_torch CUDA tests" "$v ($line)"
  note_fail "$v"
fi

# --- 3. benchmarks and the torch baseline ---------------------------------------------------------------------------
if wants bench; then
  t=$(limit "$(cap bench)")
  if [ "$t" = 0 ]; then
    note_not_run bench "benchmarks (bench_cuda)"
  elif [ ! -x "$bench_bin" ]; then
    row "benchmarks (bench_cuda)" "FAIL (not built)"
    failed=1
  else
    timeout "$t" "$bench_bin" --benchmark_out="$logs/bench.json" --benchmark_out_format=json > "$logs/bench.log" 2>&1
    rc=$?
    row "benchmarks (bench_cuda)" "$([ $rc = 0 ] && echo ran || echo "did not finish: exit $rc (reported, not counted as a failure)")"
  fi
  t=$(limit "$(cap baseline)")
  if [ "$t" = 0 ]; then
    note_not_run bench "torch randn + matmul baseline"
  else
    echo "=== torch baseline ($py)" >> "$logs/bench.log"
    timeout "$t" "$py" bench/gpu/torch_baseline.py "$logs/torch.json" >> "$logs/bench.log" 2>&1
    rc=$?
    row "torch randn + matmul baseline" "$([ $rc = 0 ] && echo ran || echo "not measured (exit $rc)")"
  fi
fi

# --- 4. the sanitizers on the "sanitize" suites ------------------------------------------------------------------------
# racecheck and synccheck look at compact's own kernels only (their names hold "compact"): a hazard they report inside
# cuBLAS or Thrust is not compact's to fix. memcheck checks every kernel: an out-of-bounds access inside cuBLAS can
# come from the arguments compact passes.
sanitizer=$(command -v compute-sanitizer || echo "$cuda_root/bin/compute-sanitizer")
sanitize() {  # sanitize TOOL BIN CAP [doctest filters...]: prints the verdict, or "NOT RUN" without time
  local tool=$1 bin=$2 t rc filter=()
  t=$(limit "$3")
  shift 3
  if [ "$t" = 0 ]; then echo "NOT RUN"; return; fi
  case $tool in racecheck | synccheck) filter=("${kernel_filter[@]}") ;; esac
  echo "=== compute-sanitizer --tool $tool ${filter[*]} $(basename "$bin") $* (limit ${t}s)" >> "$logs/test.log"
  timeout "$t" "$sanitizer" --tool "$tool" "${filter[@]}" --error-exitcode 1 "$bin" "$@" > "$logs/sanitize.tmp" 2>&1
  rc=$?
  cat "$logs/sanitize.tmp" >> "$logs/test.log"
  if [ $rc = 0 ]; then
    echo "pass ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitize.tmp" | tail -1 | sed 's/^========= //'))"
  elif grep -q "Internal Sanitizer Error" "$logs/sanitize.tmp"; then
    # The tool itself failed (seen under racecheck on an H200: "failed to handle a hardware exception"), which is
    # not a hazard it found: still a failure, named as what it is.
    echo "FAIL (compute-sanitizer internal error: $(grep -m1 -o 'Internal Sanitizer Error: .*' "$logs/sanitize.tmp" |
      cut -c27-90))"
  else
    verdict $rc
  fi
}
# sanitize_row NAME TOOL BIN CAP [filters...]
sanitize_row() {
  local name=$1 v
  shift
  v=$(sanitize "$@")
  if [ "$v" = "NOT RUN" ]; then note_not_run sanitize "$name"; else row "$name" "$v"; note_fail "$v"; fi
}
if ! wants sanitize; then
  :
elif [ "$(limit "$(cap probe)")" = 0 ]; then
  note_not_run sanitize "compute-sanitizer (all four runs)"
elif [ ! -x "$sanitizer" ]; then
  row "compute-sanitizer" "FAIL (not found at $sanitizer)"
  failed=1
elif [ ! -x "$test_bin" ]; then
  row "compute-sanitizer" "FAIL (test_cuda_backend not built)"
  failed=1
else
  # The kernel filter's spelling: --kernel-name (Compute Sanitizer 2022.1 and later), else --filter (older).
  if "$sanitizer" --help 2>&1 | grep -q -- '--kernel-name '; then kernel_filter=(--kernel-name kns=compact)
  elif "$sanitizer" --help 2>&1 | grep -q -- '--filter '; then kernel_filter=(--filter kns=compact)
  else kernel_filter=(); fi
  probe=$(sanitize memcheck "$test_bin" "$(cap probe)" --test-suite=sanitize "--test-case=sanitizer probe*")
  if [ "$probe" = "NOT RUN" ]; then
    note_not_run sanitize "sanitizer probe (memcheck)"
  elif [ "${probe%% *}" != pass ] && grep -qiE "device not supported|not supported on this|error 999|cudaErrorUnknown|unknown error" "$logs/sanitize.tmp"; then
    # The sanitizer cannot reach the device on this runtime: reported, not failed (the tests above ran without it).
    row "compute-sanitizer" "unavailable on $runtime: $(grep -iE -m1 'not supported|999|unknown error' "$logs/sanitize.tmp" | cut -c1-80)"
  else
    row "sanitizer probe (memcheck)" "$probe"
    note_fail "$probe"
    if [ "${probe%% *}" = pass ]; then
      [ ${#kernel_filter[@]} -gt 0 ] || row "sanitizer kernel filter" "none known to this compute-sanitizer: every kernel checked"
      for tool in memcheck synccheck; do
        sanitize_row "$tool: test_cuda_backend sanitize" "$tool" "$test_bin" "$(cap "$tool")" --test-suite=sanitize
      done
      # racecheck one test case at a time (its cap shared among them): a crash under it names the kernel family, and
      # the other cases still run.
      mapfile -t cases < <("$test_bin" --test-suite=sanitize --list-test-cases 2>/dev/null |
                           grep -vE '^(\[doctest\]|=+$|$)' | grep -v '^sanitizer probe')
      per_case=$(( $(cap racecheck) / (${#cases[@]} > 0 ? ${#cases[@]} : 1) ))
      [ $per_case -ge 5 ] || per_case=5
      for c in "${cases[@]}"; do
        sanitize_row "racecheck: ${c#every kernel on a small shape: }" racecheck "$test_bin" "$per_case" \
          --test-suite=sanitize "--test-case=$c"
      done
      if [ -x "$optimizer_bin" ]; then
        sanitize_row "memcheck: test_cuda_optimizer sanitize" memcheck "$optimizer_bin" "$(cap memcheck_opt)" \
          --test-suite=sanitize
      fi
    fi
  fi
  rm -f "$logs/sanitize.tmp"
fi

# --- 5. peak memory at the paper's shapes, with what is left -------------------------------------------------------
if wants memory; then
  t=$(limit 600)
  if [ "$status_torch_build" = pass ] && [ "$t" -ge 60 ]; then
    # gpu_memory.sh builds into build-gpu/ (already done: a no-op) and, with COMPACT_SKIP_TESTS=1, leaves its test
    # step to the one above. A timeout leaves the configurations measured so far in memory.log.
    OUT="$build/memory" PY="$py" TORCH_CUDA_ARCH_LIST="${arch:0:1}.${arch:1}" EIGEN3_INCLUDE_DIR="$deps/include/eigen3" \
      COMPACT_SKIP_TESTS=1 PYTHONUNBUFFERED=1 timeout "$t" examples/pytorch/gpu_memory.sh > "$logs/memory.log" 2>&1
    rc=$?
    row "gpu_memory.sh (paper shapes)" "$([ $rc = 0 ] && echo ran || echo "stopped: exit $rc (reported, not counted as a failure)"), $(grep -c 'peak memory' "$logs/memory.log") runs, ${t}s allowed"
  elif [ "$status_torch_build" = pass ] || [ "$t" -lt 60 ]; then
    row "gpu_memory.sh (paper shapes)" "not run: ${t}s left (it runs with what the other steps leave; reported, not counted)"
  else
    row "gpu_memory.sh (paper shapes)" "not run (no compact_torch)"
  fi
fi

# --- summary, last --------------------------------------------------------------------------------------------------
{
  echo
  gpu=$(timeout 5 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  echo "device_check on ${gpu:-no GPU seen by nvidia-smi}, $runtime; total $(now)s of ${budget}s; logs in $logs"
  [ -s "$logs/bench.json" ] && "$py" bench/gpu/summarize.py "$logs" 2>/dev/null
  grep -E "^(config|llama)" "$logs/memory.log" 2>/dev/null | tail -n 25
  echo
  printf '%s\n' "${rows[@]}"
  if [ ${#not_run[@]} -gt 0 ]; then
    list=$(printf '%s\n' "${not_run[@]}" | grep -vx build | paste -sd, -)  # the build always runs
    [ -n "$list" ] || list=tests,torch,bench,sanitize,memory
    echo "not reached within ${budget}s: ${not_run[*]}. Rerun just those (the build comes first again on a fresh machine):"
    echo "  run(command=\"COMPACT_CHECK_STEPS=$list bench/gpu/device_check.sh\", carry=[\".devdeps\"], timeout_s=480)"
  fi
  echo "device_check: $([ $failed = 0 ] && echo PASS || echo FAIL)"
} | tee "$logs/summary.txt"
exit $failed
