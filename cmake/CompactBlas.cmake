# SPDX-License-Identifier: MIT
# Optimized BLAS for compact's CPU backend. Defines the imported target compact::OpenBLAS (OpenBLAS's CBLAS:
# cblas.h + libopenblas) and sets COMPACT_OPENBLAS_FOUND. Included by the top CMakeLists, where it also defines the
# INTERFACE target compact::blas (compact::compact + compact::OpenBLAS + the macro COMPACT_USE_BLAS, with which
# compact/compact.hpp includes compact/cpu/blas.hpp: that header registers OpenBLAS as the GemmEngine::kBlas of the
# program, see include/compact/cpu/gemm_engine.hpp) and, with COMPACT_USE_BLAS=ON, links the same to compact::compact.
# Installed next to compactConfig.cmake, which includes it to recreate compact::OpenBLAS for consumers of an install
# tree. Debian/Ubuntu: apt install libopenblas-dev (ships OpenBLASConfig.cmake; any libopenblas + cblas.h also works).
set(COMPACT_OPENBLAS_FOUND OFF)
if(TARGET compact::OpenBLAS)
  set(COMPACT_OPENBLAS_FOUND ON)
else()
  find_package(OpenBLAS CONFIG QUIET)
  if(OpenBLAS_FOUND AND OpenBLAS_LIBRARIES AND OpenBLAS_INCLUDE_DIRS)
    set(compact_openblas_libraries ${OpenBLAS_LIBRARIES})
    set(compact_openblas_include_dirs ${OpenBLAS_INCLUDE_DIRS})
  else()
    find_library(COMPACT_OPENBLAS_LIBRARY NAMES openblas openblasp openblaso)
    find_path(COMPACT_OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread
                                                                  x86_64-linux-gnu/openblas-pthread)
    set(compact_openblas_libraries ${COMPACT_OPENBLAS_LIBRARY})
    set(compact_openblas_include_dirs ${COMPACT_OPENBLAS_INCLUDE_DIR})
  endif()
  if(compact_openblas_libraries AND compact_openblas_include_dirs)
    add_library(compact::OpenBLAS INTERFACE IMPORTED)
    set_target_properties(compact::OpenBLAS PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${compact_openblas_include_dirs}"
                                                       INTERFACE_LINK_LIBRARIES "${compact_openblas_libraries}")
    set(COMPACT_OPENBLAS_FOUND ON)
  endif()
endif()

# In compact's own build: define compact::blas, and with the option on give compact::compact the BLAS engine too.
if(PROJECT_NAME STREQUAL "compact" AND TARGET compact AND NOT TARGET compact_blas)
  if(COMPACT_OPENBLAS_FOUND)
    add_library(compact_blas INTERFACE)
    add_library(compact::blas ALIAS compact_blas)
    set_target_properties(compact_blas PROPERTIES EXPORT_NAME blas)
    target_link_libraries(compact_blas INTERFACE compact compact::OpenBLAS)
    target_compile_definitions(compact_blas INTERFACE COMPACT_USE_BLAS)
    message(STATUS "compact: OpenBLAS found, compact::blas provides the BLAS GEMM engine")
  endif()
  if(COMPACT_USE_BLAS)
    if(NOT COMPACT_OPENBLAS_FOUND)
      message(FATAL_ERROR "COMPACT_USE_BLAS=ON but OpenBLAS (cblas.h + libopenblas) was not found; install "
                          "libopenblas-dev or set OpenBLAS_DIR / CMAKE_PREFIX_PATH")
    endif()
    target_link_libraries(compact INTERFACE compact::OpenBLAS)
    target_compile_definitions(compact INTERFACE COMPACT_USE_BLAS)
    message(STATUS "compact: compact::compact registers the BLAS GEMM engine (COMPACT_USE_BLAS)")
  endif()
endif()
