// SPDX-License-Identifier: MIT
#pragma once
/// What the GPU test programs share: one stream and cuBLAS handle for the run, seeded scalars, and a main that runs
/// only the device-free suite "host" and exits 77 (ctest: skipped) when there is no device.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <compact/compact.hpp>

#include "error_of.hpp"

namespace compact_test {

/// One stream and one cuBLAS handle for the whole test run. The stream is a blocking one, so it is ordered after
/// the work Thrust's device_vector constructors put on the legacy default stream. The handle forbids
/// reduced-precision reductions (split-K partial sums kept in a 16-bit output type), so every GEMM accumulates in
/// fp32 whatever algorithm cuBLAS picks, which is what the tests' error bounds assume.
struct GpuContext {
  compact::Cuda backend;
  GpuContext() {
    compact::check_cuda(cudaStreamCreate(&backend.stream), "stream");
    compact::check_cublas(cublasCreate(&backend.cublas), "cublasCreate");
    compact::check_cublas(
        cublasSetMathMode(backend.cublas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                                    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        "cublasSetMathMode");
  }
  ~GpuContext() {
    cublasDestroy(backend.cublas);
    cudaStreamDestroy(backend.stream);
  }
  void sync() const { compact::check_cuda(cudaStreamSynchronize(backend.stream), "cudaStreamSynchronize"); }
};

inline const GpuContext& gpu() {
  static const GpuContext context;
  return context;
}

/// Uniform values in [-1, 1), rounded to T (fixed seed).
template <class T>
std::vector<T> random_scalars(std::size_t count, std::uint64_t seed) {
  std::vector<T> v(count);
  for (auto& x : v) {
    seed = compact::splitmix64(seed);
    x = compact::detail::CudaScalar<T>::from_float(static_cast<float>(static_cast<double>(seed >> 11) * 0x1p-52 - 1.0));
  }
  return v;
}

/// The main of a GPU test program: every suite with a device; without one, the suite "host" only, then exit 77.
inline int run_gpu_tests(int argc, char** argv, const char* program) {
  doctest::Context context(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // the failed query leaves an error behind; nothing else will run on the device
    context.setOption("test-suite", "host");
    const int failed = context.run();
    if (failed != 0 || context.shouldExit()) return failed != 0 ? failed : 0;
    std::printf("%s: no CUDA device: ran the device-free suite \"host\" only, skipping (exit 77)\n", program);
    return 77;
  }
  return context.run();
}

}  // namespace compact_test
