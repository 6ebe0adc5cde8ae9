# SPDX-License-Identifier: MIT
# The layout of include/compact/ as a checked rule (docs/design.md, "Layout"): each room includes only the rooms below
# it, and only portability.hpp tests __CUDA_ARCH__ / __CUDACC__ or names device intrinsics.
#   spec/     config.hpp, portability.hpp, spec/
#   api/      the above and api/
#   kernels/  the above and kernels/
#   cpu/      the above and cpu/ (no cuda/)
#   cuda/     anything
# Run as: cmake -DINCLUDE_DIR=<repo>/include/compact -P layering.cmake
set(allowed_spec "config.hpp;portability.hpp;spec/")
set(allowed_api "${allowed_spec};api/")
set(allowed_kernels "${allowed_api};kernels/")
set(allowed_cpu "${allowed_kernels};cpu/")
set(failures "")
foreach(room IN ITEMS spec api kernels cpu)
  file(GLOB files "${INCLUDE_DIR}/${room}/*.hpp" "${INCLUDE_DIR}/${room}/*.inl")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" includes REGEX "^#include \"compact/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"compact/([^\"]+)\".*" "\\1" target "${line}")
      set(ok FALSE)
      foreach(prefix IN LISTS allowed_${room})
        string(FIND "${target}" "${prefix}" at)
        if(at EQUAL 0)
          set(ok TRUE)
        endif()
      endforeach()
      if(NOT ok)
        list(APPEND failures "${f}: includes compact/${target}, above its room")
      endif()
    endforeach()
    if(NOT room STREQUAL "cpu")
      file(STRINGS "${f}" device REGEX "^[^/]*(__CUDA_ARCH__|__CUDACC__|__ldca|__stwb|_rn\\()")
      if(device)
        list(APPEND failures "${f}: device-specific code outside portability.hpp: ${device}")
      endif()
    endif()
  endforeach()
endforeach()
if(failures)
  string(REPLACE ";" "\n" failures "${failures}")
  message(FATAL_ERROR "layering violations:\n${failures}")
endif()
message(STATUS "layering: spec < api < kernels < cpu, device code only in portability.hpp")
