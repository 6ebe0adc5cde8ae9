# SPDX-License-Identifier: MIT
"""Builds compact_torch._C from compact's headers with torch.utils.cpp_extension, against the torch it runs with.

    pip install --no-build-isolation ./examples/pytorch

A C++ extension is tied to the torch it was compiled against (its headers, its C++ standard, its libc10 ABI), so this
build takes the torch already installed where it runs; pyproject.toml therefore does not list torch as a build
requirement, and --no-build-isolation lets the build see it.

The CPU extension (compact's Eigen backend) is always built. The CUDA backend is added when torch was built with
CUDA and nvcc is found; otherwise the build says in one line that it is left out. Environment:

  COMPACT_INCLUDE_DIR   compact's include/ (default: include/ in an sdist, else ../../include, the repository's)
  EIGEN3_INCLUDE_DIR    Eigen 3.4 (default: searched in the active environment and the system, see find_eigen)
  COMPACT_TORCH_CUDA    auto (default) | 0 (CPU only) | 1 (the CUDA backend is required)
  COMPACT_TORCH_BLAS    0 (default) | 1: link OpenBLAS and register compact's BLAS GEMM engine
  TORCH_CUDA_ARCH_LIST  torch's own variable; when unset and no GPU is visible, compact builds for 8.0;9.0+PTX
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
# The extensions find torch's libraries next to them (site-packages/torch/lib) whatever the loader's default path holds,
# e.g. Debian's libtorch-dev; `ldd` then shows the torch they were linked with.
TORCH_RPATH = "-Wl,-rpath,$ORIGIN/../torch/lib"
DEFAULT_CUDA_ARCHS = "8.0;9.0+PTX"  # sm_80 and sm_90 code, and compute_90 PTX that newer GPUs compile at load


def fail(message):
    raise SystemExit("compact_torch setup: " + message)


def say(message):
    """One line of the build's choices, printed by the commands that build (pip runs setup.py also to read the
    metadata; those runs stay quiet). pip shows it with -v."""
    if any(cmd in sys.argv for cmd in ("build_ext", "build", "bdist_wheel", "install", "develop", "editable_wheel")):
        print("compact_torch setup: " + message, flush=True)


def import_torch():
    try:
        import torch
    except ImportError:
        fail(f"torch is not importable by {sys.executable}. compact_torch builds against the torch it is installed "
             "into: install torch first, then `pip install --no-build-isolation ./examples/pytorch` (without "
             "--no-build-isolation pip builds in an empty environment that has no torch)")
    return torch


def find_compact_include():
    """compact's include/: COMPACT_INCLUDE_DIR, else the copy inside an sdist, else the repository's."""
    explicit = os.environ.get("COMPACT_INCLUDE_DIR")
    candidates = [explicit] if explicit else [os.path.join(HERE, "include"), os.path.join(HERE, "..", "..", "include")]
    for path in candidates:
        if os.path.isfile(os.path.join(path, "compact", "compact.hpp")):
            return os.path.abspath(path)
    fail(f"compact's headers (compact/compact.hpp) not found in {', '.join(map(os.path.abspath, candidates))} (set "
         "COMPACT_INCLUDE_DIR to the include/ of a compact checkout)")


def compact_version(include_dir):
    """compact's version, from the one place it is kept: COMPACT_VERSION_* in compact/config.hpp."""
    with open(os.path.join(include_dir, "compact", "config.hpp"), encoding="utf-8") as f:
        text = f.read()
    parts = [re.search(rf"#define COMPACT_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        fail(f"COMPACT_VERSION_MAJOR/MINOR/PATCH not found in {include_dir}/compact/config.hpp")
    return ".".join(m.group(1) for m in parts)


def eigen_version(path):
    """(world, major, minor) of the Eigen at `path` (the directory holding Eigen/Core), or None."""
    macros = os.path.join(path, "Eigen", "src", "Core", "util", "Macros.h")
    if not os.path.isfile(macros):
        return None
    with open(macros, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = [re.search(rf"#define EIGEN_{p}_VERSION\s+(\d+)", text) for p in ("WORLD", "MAJOR", "MINOR")]
    return tuple(int(m.group(1)) for m in found) if all(found) else None


def find_eigen():
    """Eigen 3.4's include directory: EIGEN3_INCLUDE_DIR, else the active environment (conda, the venv or Python
    prefix), pkg-config, CPLUS_INCLUDE_PATH/CPATH, and the system's /usr/include/eigen3 and /usr/local."""
    explicit = os.environ.get("EIGEN3_INCLUDE_DIR")
    if explicit:
        candidates = [explicit]
    else:
        prefixes = [os.environ.get("CONDA_PREFIX"), sys.prefix, sys.base_prefix]
        candidates = [os.path.join(p, "include", "eigen3") for p in prefixes if p]
        try:
            cflags = subprocess.run(["pkg-config", "--cflags-only-I", "eigen3"], capture_output=True, text=True,
                                    check=False).stdout.split()
            candidates += [flag[2:] for flag in cflags if flag.startswith("-I")]
        except OSError:  # no pkg-config
            pass
        for var in ("CPLUS_INCLUDE_PATH", "CPATH"):
            for entry in filter(None, os.environ.get(var, "").split(os.pathsep)):
                candidates += [entry, os.path.join(entry, "eigen3")]
        candidates += ["/usr/include/eigen3", "/usr/local/include/eigen3"]
    for path in dict.fromkeys(candidates):  # ordered, without repeats
        if os.path.isfile(os.path.join(path, "Eigen", "Core")):
            version = eigen_version(path)
            if version is None or version[:2] < (3, 4):
                fail(f"Eigen at {path} is {'.'.join(map(str, version)) if version else 'of unknown version'}; "
                     "compact needs Eigen 3.4 (set EIGEN3_INCLUDE_DIR to one)")
            return os.path.abspath(path)
    if explicit:
        fail(f"EIGEN3_INCLUDE_DIR = {explicit} has no Eigen/Core (it must be the directory that holds Eigen/, e.g. "
             "/usr/include/eigen3)")
    fail("Eigen 3.4 not found (looked in " + ", ".join(dict.fromkeys(candidates)) + "). Install it (Debian: apt-get "
         "install libeigen3-dev; conda: conda install eigen) or set EIGEN3_INCLUDE_DIR to the directory holding Eigen/")


def find_openblas():
    """(cblas.h's directory, libopenblas.so's full path) when COMPACT_TORCH_BLAS=1, else None. The library is linked
    by its full path: a -L for its directory (e.g. /usr/lib/x86_64-linux-gnu) ahead of torch's would let the linker
    take a system libtorch (Debian's libtorch-dev) instead of the torch this build runs with."""
    if os.environ.get("COMPACT_TORCH_BLAS", "0") != "1":
        return None
    headers = ["/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h", "/usr/include/openblas/cblas.h"]
    headers += glob.glob("/usr/include/*/openblas*/cblas.h")
    libs = glob.glob("/usr/lib/*/libopenblas.so") + glob.glob("/usr/lib/libopenblas.so")
    for h in headers:
        if os.path.isfile(h) and libs:
            return os.path.dirname(h), libs[0]
    fail("COMPACT_TORCH_BLAS=1 but OpenBLAS (cblas.h and libopenblas.so) was not found "
         "(Debian: apt-get install libopenblas-dev)")


def cxx_standard():
    """The C++ standard the torch being built against demands: the highest `__cplusplus < N` its headers refuse
    (torch >= 2.10: C++20), at least C++17 (compact's own)."""
    from torch.utils.cpp_extension import include_paths

    required = 201703
    for path in include_paths():
        for header in ("ATen/ATen.h", "c10/macros/Macros.h", "torch/extension.h"):
            name = os.path.join(path, header)
            if os.path.isfile(name):
                with open(name, encoding="utf-8", errors="replace") as f:
                    for value in re.findall(r"__cplusplus\s*<\s*(\d{6})L", f.read()):
                        required = max(required, int(value))
    return {201703: "c++17", 202002: "c++20"}.get(required, "c++23" if required > 202002 else "c++17")


def cuda_archs(torch):
    """The CUDA architectures to build for. torch picks those of the visible GPUs; with none visible (a build
    machine or container) it cannot, so compact states a default set unless TORCH_CUDA_ARCH_LIST is given."""
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
            os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(f"{a}.{b}" for a, b in caps)
            say(f"building the CUDA backend for the visible GPUs: {os.environ['TORCH_CUDA_ARCH_LIST']}")
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_CUDA_ARCHS
            say(f"no GPU visible and TORCH_CUDA_ARCH_LIST unset: building the CUDA backend for {DEFAULT_CUDA_ARCHS}")
    return [a for a in re.split(r"[;\s]+", os.environ["TORCH_CUDA_ARCH_LIST"]) if a]


def want_cuda(torch, cuda_home):
    """Whether to build the CUDA backend (COMPACT_TORCH_CUDA=auto|0|1); says in one line why when it is left out."""
    mode = os.environ.get("COMPACT_TORCH_CUDA", "auto")
    if mode not in ("auto", "0", "1"):
        fail(f"COMPACT_TORCH_CUDA = {mode!r} must be auto, 0 or 1")
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else None
    has_nvcc = bool(nvcc) and os.path.isfile(nvcc)
    if mode == "0":
        say("COMPACT_TORCH_CUDA=0: the CUDA backend is left out (CPU only)")
        return False
    if torch.version.cuda is None:
        if mode == "1":
            fail(f"COMPACT_TORCH_CUDA=1 but torch {torch.__version__} was built without CUDA")
        say(f"torch {torch.__version__} has no CUDA: the CUDA backend is left out (CPU only)")
        return False
    if not has_nvcc:
        where = f"{nvcc} does not exist" if nvcc else "CUDA_HOME is unset and no nvcc is on PATH"
        if mode == "1":
            fail(f"COMPACT_TORCH_CUDA=1 but nvcc was not found ({where})")
        say(f"torch {torch.__version__} has CUDA {torch.version.cuda} but nvcc was not found ({where}): the CUDA "
            "backend is left out (install the CUDA toolkit or set CUDA_HOME, then reinstall)")
        return False
    # torch refuses an nvcc of another major version than its own CUDA (a minor difference only warns).
    release = re.search(r"release (\d+)\.(\d+)", subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                                                  check=False).stdout)
    if release and release.group(1) != torch.version.cuda.split(".")[0]:
        what = (f"nvcc {release.group(1)}.{release.group(2)} ({nvcc}) is not of the CUDA major version torch "
                f"{torch.__version__} was built with ({torch.version.cuda})")
        if mode == "1":
            fail(f"COMPACT_TORCH_CUDA=1 but {what}")
        say(f"{what}: the CUDA backend is left out (point CUDA_HOME to a CUDA {torch.version.cuda.split('.')[0]}.x "
            "toolkit, then reinstall)")
        return False
    return True


def build_py_writing(build_info):
    """A build_py command that also writes compact_torch/_build_info.py into the build directory (never the source
    tree): the torch this extension is compiled against (checked at import, before the extension is loaded) and the
    CUDA architectures; the extension itself reports the rest (csrc: build_info)."""

    class BuildPy(build_py):
        def run(self):
            super().run()
            package_dir = os.path.join(self.build_lib, "compact_torch")
            os.makedirs(package_dir, exist_ok=True)
            with open(os.path.join(package_dir, "_build_info.py"), "w", encoding="utf-8") as f:
                f.write("# Generated by examples/pytorch/setup.py when this copy of compact_torch was built.\n")
                f.write(f"TORCH_VERSION = {build_info['torch']!r}\n")
                f.write(f"CUDA_ARCHS = {tuple(build_info['cuda_archs'])!r}\n")

        def get_outputs(self, include_bytecode=1):
            return super().get_outputs(include_bytecode) + [
                os.path.join(self.build_lib, "compact_torch", "_build_info.py")]

    return BuildPy


class Sdist(sdist):
    """sdist that carries compact's headers (include/compact), so the sdist builds away from the repository."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        target = os.path.join(base_dir, "include", "compact")
        if not os.path.isdir(target):
            shutil.copytree(os.path.join(find_compact_include(), "compact"), target)


def extension(torch):
    """The extension compact_torch._C and what setup.py records about it ({"torch", "cuda_archs"})."""
    from torch.utils.cpp_extension import CUDA_HOME, CppExtension, CUDAExtension

    include_dirs = [find_compact_include(), find_eigen(), os.path.join(HERE, "csrc")]
    # compact is C++17 (and C++20-clean) and refuses -ffast-math; the standard follows torch's headers. OpenMP drives
    # its CPU backend (torch's libgomp is shared).
    std = "-std=" + cxx_standard()
    cxx = ["-O3", "-g0", std, "-fopenmp", "-Wno-deprecated-declarations"]  # the last: torch's headers
    link = ["-fopenmp", TORCH_RPATH]
    blas = find_openblas()
    if blas is not None:
        include_dirs.append(blas[0])
        link.append(blas[1])
        cxx.append("-DCOMPACT_USE_BLAS")
    sources = ["csrc/compact_torch.cpp"]
    if not want_cuda(torch, CUDA_HOME):
        return (CppExtension("compact_torch._C", sources, include_dirs=include_dirs, extra_compile_args={"cxx": cxx},
                             extra_link_args=link),
                {"torch": torch.__version__, "cuda_archs": []})
    archs = cuda_archs(torch)
    cxx.append("-DCOMPACT_TORCH_WITH_CUDA")
    nvcc = ["-O3", std, "-DCOMPACT_TORCH_WITH_CUDA"]
    return (CUDAExtension("compact_torch._C", sources + ["csrc/compact_torch_cuda.cu"], include_dirs=include_dirs,
                          libraries=["cublas"], extra_compile_args={"cxx": cxx, "nvcc": nvcc}, extra_link_args=link),
            {"torch": torch.__version__, "cuda_archs": archs})


def memtrack_extension():
    """compact_torch._memtrack, the CPU allocation tracker of the memory measurements: a module of its own (c10 and
    pybind11 only), loaded by compact_torch.memory when a measuring script asks for it, never by the package."""
    from torch.utils.cpp_extension import CppExtension

    return CppExtension("compact_torch._memtrack", ["csrc/memtrack.cpp"],
                        extra_compile_args={"cxx": ["-O2", "-g0", "-std=" + cxx_standard(),
                                                    "-Wno-deprecated-declarations"]},  # the last: torch 1.13's headers
                        extra_link_args=[TORCH_RPATH])


def main():
    torch = import_torch()
    from torch.utils.cpp_extension import BuildExtension

    ext, build_info = extension(torch)
    setup(version=compact_version(find_compact_include()), license="MIT", ext_modules=[ext, memtrack_extension()],
          cmdclass={"build_ext": BuildExtension.with_options(use_ninja=bool(shutil.which("ninja"))),
                    "build_py": build_py_writing(build_info), "sdist": Sdist})


if __name__ == "__main__":
    main()
