// SPDX-License-Identifier: MIT
/// compact::check_cuda and compact::check_cublas, public for integrations' own CUDA calls: a failed status becomes a
/// compact::error naming the call and the status (name and description), success passes. No device needed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu_support.cuh"

#include <string>

using compact_test::error_of;

TEST_SUITE("host") {
  TEST_CASE("check_cuda passes cudaSuccess and names the call, the error and its description otherwise") {
    CHECK(error_of([] { compact::check_cuda(cudaSuccess, "cudaEventRecord"); }) == "");
    CHECK(error_of([] { compact::check_cuda(cudaErrorInvalidValue, "keep: cudaEventRecord"); }) ==
          std::string("compact: keep: cudaEventRecord: cudaErrorInvalidValue (") +
              cudaGetErrorString(cudaErrorInvalidValue) + ")");
    CHECK(error_of([] {
            compact::check_cuda(cudaErrorMemoryAllocation, "cudaMalloc");
          }).find("compact: cudaMalloc: cudaErrorMemoryAllocation (") == 0);
  }

  TEST_CASE("check_cublas passes CUBLAS_STATUS_SUCCESS and names the call and the status otherwise") {
    CHECK(error_of([] { compact::check_cublas(CUBLAS_STATUS_SUCCESS, "cublasSgemm"); }) == "");
    CHECK(error_of([] { compact::check_cublas(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm"); }) ==
          std::string("compact: cublasSgemm: CUBLAS_STATUS_INVALID_VALUE (") +
              cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE) + ")");
  }
}

int main(int argc, char** argv) { return compact_test::run_gpu_tests(argc, argv, "test_cuda_check"); }
