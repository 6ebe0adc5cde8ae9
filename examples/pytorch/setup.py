# SPDX-License-Identifier: MIT
"""Builds compact_torch._C from compact's headers with torch.utils.cpp_extension.

The CPU extension (compact's Eigen backend) is always built. The CUDA backend is added when torch was built with
CUDA and nvcc is found (COMPACT_TORCH_CUDA=0 forces it off, =1 makes its absence an error). Environment:

  COMPACT_INCLUDE_DIR   compact's include/ (default: ../../include next to this file, i.e. the repository's)
  EIGEN3_INCLUDE_DIR    Eigen 3.4 (default: /usr/include/eigen3)
  COMPACT_TORCH_CUDA    auto (default) | 0 | 1
  COMPACT_TORCH_BLAS    0 (default) | 1: link OpenBLAS and register compact's BLAS GEMM engine
  TORCH_CUDA_ARCH_LIST  torch's own variable; when unset and no GPU is visible, compact builds for 8.0;9.0
"""
import glob
import os
import shutil

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    raise SystemExit("compact_torch setup: " + message)


def find_compact_include():
    path = os.environ.get("COMPACT_INCLUDE_DIR", os.path.join(HERE, "..", "..", "include"))
    path = os.path.abspath(path)
    if not os.path.isfile(os.path.join(path, "compact", "compact.hpp")):
        fail(f"compact headers not found at {path} (set COMPACT_INCLUDE_DIR to the include/ of a compact checkout)")
    return path


def find_eigen_include():
    candidates = [os.environ.get("EIGEN3_INCLUDE_DIR"), "/usr/include/eigen3", "/usr/local/include/eigen3"]
    for path in candidates:
        if path and os.path.isfile(os.path.join(path, "Eigen", "Core")):
            return path
    fail("Eigen 3.4 not found (Debian: apt-get install libeigen3-dev, or set EIGEN3_INCLUDE_DIR)")


def find_openblas():
    """(include dir, library dir) of OpenBLAS's CBLAS when COMPACT_TORCH_BLAS=1, else None."""
    if os.environ.get("COMPACT_TORCH_BLAS", "0") != "1":
        return None
    headers = ["/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h", "/usr/include/openblas/cblas.h"]
    headers += glob.glob("/usr/include/*/openblas*/cblas.h")
    libs = glob.glob("/usr/lib/*/libopenblas.so") + glob.glob("/usr/lib/libopenblas.so")
    for h in headers:
        if os.path.isfile(h) and libs:
            return os.path.dirname(h), os.path.dirname(libs[0])
    fail("COMPACT_TORCH_BLAS=1 but OpenBLAS (cblas.h and libopenblas.so) was not found "
         "(Debian: apt-get install libopenblas-dev)")


def cxx_standard(torch):
    """The C++ standard of the torch being built against: C++20 where its headers demand it, else C++17."""
    from torch.utils.cpp_extension import include_paths

    for path in include_paths():
        header = os.path.join(path, "ATen", "ATen.h")
        if os.path.isfile(header):
            with open(header, encoding="utf-8", errors="replace") as f:
                if "C++20 or later" in f.read():
                    return "c++20"
    return "c++17"


DEFAULT_CUDA_ARCHS = "8.0;9.0"


def set_cuda_archs(torch):
    """torch picks the architectures of the visible GPUs; with none visible (a build machine) it cannot, so
    compact states a default set unless TORCH_CUDA_ARCH_LIST is given."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return
    os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_CUDA_ARCHS
    print(f"compact_torch setup: no GPU visible and TORCH_CUDA_ARCH_LIST unset; building for {DEFAULT_CUDA_ARCHS}")


def want_cuda(torch, cuda_home):
    mode = os.environ.get("COMPACT_TORCH_CUDA", "auto")
    nvcc = cuda_home and os.path.isfile(os.path.join(cuda_home, "bin", "nvcc"))
    available = torch.version.cuda is not None and bool(nvcc)
    if mode == "1" and not available:
        fail(f"COMPACT_TORCH_CUDA=1 but torch.version.cuda = {torch.version.cuda} and nvcc "
             f"{'found' if nvcc else 'not found'} (CUDA_HOME = {cuda_home})")
    return available and mode != "0"


def extension():
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, CppExtension, CUDAExtension

    include_dirs = [find_compact_include(), find_eigen_include(), os.path.join(HERE, "csrc")]
    # compact is C++17 (and C++20-clean) and refuses -ffast-math; the standard follows torch's headers. OpenMP drives
    # its CPU backend (torch's libgomp is shared).
    std = "-std=" + cxx_standard(torch)
    cxx = ["-O3", "-g0", std, "-fopenmp", "-Wno-deprecated-declarations"]  # the last: torch's headers
    libraries, library_dirs, link = [], [], ["-fopenmp"]
    blas = find_openblas()
    if blas is not None:
        include_dirs.append(blas[0])
        library_dirs.append(blas[1])
        libraries.append("openblas")
        cxx.append("-DCOMPACT_USE_BLAS")
    sources = ["csrc/compact_torch.cpp"]
    if want_cuda(torch, CUDA_HOME):
        cxx.append("-DCOMPACT_TORCH_WITH_CUDA")
        set_cuda_archs(torch)
        nvcc = ["-O3", std, "-DCOMPACT_TORCH_WITH_CUDA"]
        return CUDAExtension("compact_torch._C", sources + ["csrc/compact_torch_cuda.cu"], include_dirs=include_dirs,
                             library_dirs=library_dirs, libraries=libraries + ["cublas"],
                             extra_compile_args={"cxx": cxx, "nvcc": nvcc}, extra_link_args=link)
    return CppExtension("compact_torch._C", sources, include_dirs=include_dirs, library_dirs=library_dirs,
                        libraries=libraries, extra_compile_args={"cxx": cxx}, extra_link_args=link)


def memtrack_extension():
    """compact_torch._memtrack, the CPU allocation tracker of the memory measurements: a module of its own (c10 and
    pybind11 only), loaded by compact_torch.memory when a measuring script asks for it, never by the package."""
    from torch.utils.cpp_extension import CppExtension

    return CppExtension("compact_torch._memtrack", ["csrc/memtrack.cpp"],
                        extra_compile_args={"cxx": ["-O2", "-g0", "-std=" + cxx_standard(None),
                                                    "-Wno-deprecated-declarations"]})  # the last: torch 1.13's headers


def main():
    from torch.utils.cpp_extension import BuildExtension

    setup(ext_modules=[extension(), memtrack_extension()],
          cmdclass={"build_ext": BuildExtension.with_options(use_ninja=bool(shutil.which("ninja")))})


if __name__ == "__main__":
    main()
