#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CI's proof that the device check builds on the device image: as root, stages .devdeps/ from this machine's Debian
# packages (device_check.sh --stage-deps), then runs `device_check.sh --build-only` in a private mount namespace
# (unshare -m) where the system's Eigen, doctest and Google Benchmark headers, libraries, CMake package files and
# pkg-config files are hidden behind empty bind mounts: the build can only use the toolkit, CMake/ninja and .devdeps,
# as on the device. Compiles only (CUDA tests and benchmarks for sm_90, warnings as errors; compact_torch's CUDA
# extension when COMPACT_DEVICE_PYTHON, default python3, has a CUDA torch, else a line says it is left to the
# device). Needs no GPU. Exits 0 with a line where there is no nvcc.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
  echo "ci_build_only.sh: needs root (unshare -m and bind mounts)" >&2
  exit 1
fi
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ]; then
  echo "ci_build_only.sh: no nvcc ($nvcc): nothing to prove here"
  exit 0
fi
start=$(date +%s)
bench/gpu/device_check.sh --stage-deps

# What the device image lacks: Debian's dev packages of the three dependencies (headers, libraries, CMake and
# pkg-config files). Directories get an empty directory mounted over them, files an empty file.
multiarch=$(dirname "$(ls -d /usr/lib/*-linux-gnu/libbenchmark.so 2>/dev/null | head -1)" 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
hide_dirs="/usr/include/eigen3 /usr/include/doctest /usr/include/benchmark /usr/share/eigen3 /usr/lib/cmake/eigen3
  /usr/lib/cmake/doctest /usr/share/doctest $multiarch/cmake/benchmark"
hide_files="$(ls "$multiarch"/libbenchmark* 2>/dev/null | tr '\n' ' ') /usr/share/pkgconfig/eigen3.pc
  $multiarch/pkgconfig/benchmark.pc /usr/lib/pkgconfig/doctest.pc"

export hide_dirs hide_files
unshare -m bash -euo pipefail -c '
  mount --make-rprivate /
  empty=$(mktemp -d)
  mkdir "$empty/dir"
  : > "$empty/file"
  for d in $hide_dirs; do if [ -d "$d" ]; then mount --bind "$empty/dir" "$d"; fi; done
  for f in $hide_files; do if [ -f "$f" ]; then mount --bind "$empty/file" "$f"; fi; done
  for p in /usr/include/eigen3/Eigen/Core /usr/include/doctest/doctest.h /usr/include/benchmark/benchmark.h; do
    if [ -e "$p" ]; then echo "ci_build_only.sh: $p is still visible" >&2; exit 1; fi
  done
  echo "system Eigen, doctest and Google Benchmark hidden: building from .devdeps only"
  COMPACT_WERROR=ON COMPACT_BUILD_DIR="$PWD/build-device-ci" COMPACT_BUILD_LOGS="$PWD/build-device-ci-logs" \
    bench/gpu/device_check.sh --build-only
'
echo "ci_build_only.sh: done in $(( $(date +%s) - start ))s"
