# SPDX-License-Identifier: MIT
# Optimized BLAS for compact's CPU backend. Defines the imported target compact::OpenBLAS (OpenBLAS's CBLAS:
# cblas.h + libopenblas) and sets COMPACT_OPENBLAS_FOUND. Included by the top CMakeLists when COMPACT_USE_BLAS=ON,
# where it also links compact::OpenBLAS to the `compact` INTERFACE target with the macro COMPACT_USE_BLAS (the dense
# CPU projectors then call cblas_{s,d}gemm, see include/compact/cpu/blas.hpp), and installed next to
# compactConfig.cmake, which includes it to recreate compact::OpenBLAS for consumers of an install tree.
# Debian/Ubuntu: apt install libopenblas-dev (ships OpenBLASConfig.cmake; any libopenblas + cblas.h also works).
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

# In compact's own build with the option on: route the CPU GEMMs to OpenBLAS and install this module.
if(PROJECT_NAME STREQUAL "compact" AND COMPACT_USE_BLAS AND TARGET compact AND NOT DEFINED compact_blas_linked)
  if(NOT COMPACT_OPENBLAS_FOUND)
    message(FATAL_ERROR "COMPACT_USE_BLAS=ON but OpenBLAS (cblas.h + libopenblas) was not found; install "
                        "libopenblas-dev or set OpenBLAS_DIR / CMAKE_PREFIX_PATH")
  endif()
  target_link_libraries(compact INTERFACE compact::OpenBLAS)
  target_compile_definitions(compact INTERFACE COMPACT_USE_BLAS)
  set(compact_blas_linked ON)
  if(COMPACT_INSTALL)
    install(FILES ${CMAKE_CURRENT_LIST_FILE} DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/compact)
  endif()
  message(STATUS "compact: CPU GEMMs use OpenBLAS (COMPACT_USE_BLAS)")
endif()
