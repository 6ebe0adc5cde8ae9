# SPDX-License-Identifier: MIT
# Builds and runs tests/package/consumer against compact, through find_package (install tree) or add_subdirectory.
# Usage: cmake -DCOMPACT_SOURCE_DIR=... -DWORK_DIR=... -DMODE=find_package|add_subdirectory -P run_consumer.cmake
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}")
  endif()
endfunction()

# No build type: the consumer compiles without optimization (what is tested is the packaging: found, linked, run; the
# find_package test takes 16 s instead of 23 s with Release on a 2-core machine).
set(consumer_args -S ${COMPACT_SOURCE_DIR}/tests/package/consumer -B ${WORK_DIR}/consumer -DCMAKE_BUILD_TYPE=)
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${COMPACT_SOURCE_DIR} -B ${WORK_DIR}/compact -DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix
      -DCOMPACT_BUILD_TESTS=OFF -DCOMPACT_BUILD_BENCHMARKS=OFF -DCOMPACT_BUILD_EXAMPLES=OFF -DCOMPACT_ENABLE_CUDA=OFF
      -DCOMPACT_INSTALL=ON)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/compact)
  run(${CMAKE_COMMAND} ${consumer_args} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCONSUMER_MODE=find_package)
else()
  run(${CMAKE_COMMAND} ${consumer_args} -DCONSUMER_MODE=add_subdirectory -DCOMPACT_SOURCE_DIR=${COMPACT_SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run(${WORK_DIR}/consumer/consumer)
if(EXISTS ${WORK_DIR}/consumer/consumer_blas)  # built where OpenBLAS is found (compact::blas)
  run(${WORK_DIR}/consumer/consumer_blas)
endif()
