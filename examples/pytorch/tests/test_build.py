# SPDX-License-Identifier: MIT
"""The build says what it is: build_info(), the torch-version check at import, and the error a CUDA tensor gets from a
build without the CUDA backend."""
import os
import re
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from compact_torch import _ext  # noqa: E402

CONFIG_HPP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "compact", "config.hpp")


def test_build_info_describes_this_build():
    info = ct.build_info()
    assert set(info) == {"torch", "cuda", "cuda_archs", "cxx_standard", "blas", "compact"}
    # Recorded by setup.py at build time and checked at import: the running torch.
    assert info["torch"] == torch.__version__
    # The extension's own view (torch/version.h it was compiled against) agrees with what setup.py recorded.
    compiled = _ext._C.build_info()
    assert info["torch"].startswith(compiled["torch_version"])
    assert info["cuda"] is ct.has_cuda()
    assert (len(info["cuda_archs"]) > 0) is info["cuda"]
    assert all(re.fullmatch(r"\d+\.\d+(\+PTX)?", a) for a in info["cuda_archs"])
    # The extension's __cplusplus: C++20 where torch's ATen.h refuses anything older (current wheels), else C++17
    # (Debian's 1.13).
    from torch.utils.cpp_extension import include_paths

    aten = [os.path.join(p, "ATen", "ATen.h") for p in include_paths()]
    demands_20 = any(os.path.isfile(h) and "__cplusplus < 202002L" in open(h, encoding="utf-8").read() for h in aten)
    assert info["cxx_standard"] == ("c++20" if demands_20 else "c++17")
    assert isinstance(info["blas"], bool)
    assert ct.__version__ == info["compact"]
    if os.path.isfile(CONFIG_HPP):  # run from the repository: the version is config.hpp's
        with open(CONFIG_HPP, encoding="utf-8") as f:
            text = f.read()
        want = ".".join(re.search(rf"#define COMPACT_VERSION_{p}\s+(\d+)", text).group(1)
                        for p in ("MAJOR", "MINOR", "PATCH"))
        assert info["compact"] == want


def test_import_under_another_torch_names_both_versions(tmp_path):
    # A copy of the installed package whose build record names another torch; the extension itself is linked, not
    # copied. The import must stop before loading it, naming both versions.
    src = os.path.dirname(ct.__file__)
    dst = tmp_path / "compact_torch"
    dst.mkdir()
    for name in os.listdir(src):
        path = os.path.join(src, name)
        if name.endswith(".py"):
            shutil.copy(path, dst / name)
        elif name.startswith("_C"):
            os.symlink(path, dst / name)
    (dst / "_build_info.py").write_text("TORCH_VERSION = '0.0.1+other'\nCUDA_ARCHS = ()\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run([sys.executable, "-c", "import compact_torch"], env=env, capture_output=True, text=True,
                         cwd=str(tmp_path), timeout=300)
    assert run.returncode != 0
    assert "ImportError: compact_torch was built against torch 0.0.1+other" in run.stderr
    assert f"but this is torch {torch.__version__}" in run.stderr
    assert "pip install --no-build-isolation --force-reinstall" in run.stderr


class _CudaShaped(torch.Tensor):
    """A tensor that says it lives on CUDA without any CUDA (torch without CUDA can make it): only its metadata can be
    read. The dispatcher sends compact's operators on it to their CUDA kernels; any other operation raises."""

    @staticmethod
    def __new__(cls, *size):
        return torch.Tensor._make_wrapper_subclass(cls, size, dtype=torch.float32, device="cuda")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func.name().startswith("compact::"):
            # Past this class, on to the operator's CUDA kernel. The guard is a context manager on torch >= 2 and an
            # object that holds dispatch off while it lives on torch 1.13.
            guard = torch._C._DisableTorchDispatch()
            if hasattr(guard, "__enter__"):
                with guard:
                    return func(*args, **(kwargs or {}))
            try:
                return func(*args, **(kwargs or {}))
            finally:
                del guard
        raise RuntimeError(f"{func} reached a tensor without data")


@pytest.mark.skipif(ct.has_cuda(), reason="this build has the CUDA backend (test_cuda.py covers it)")
def test_a_cuda_tensor_in_a_cpu_only_build_names_the_missing_backend_and_how_to_get_it():
    x = _CudaShaped(4, 8)
    assert x.is_cuda
    state = _ext.state_tensor(1, 2, 1, 3)
    calls = {
        "sketch": lambda: _ext.ops.sketch(x, 2, state, "gaussian"),
        "unsketch_grad_": lambda: _ext.ops.unsketch_grad_(x, _CudaShaped(4, 2), 1.0, 0.0, state, "gaussian"),
        "compressed_grad": lambda: _ext.ops.compressed_grad(x, x),
        "materialize": lambda: _ext.ops.materialize(8, 2, state, "gaussian", x),
    }
    for fn, call in calls.items():
        with pytest.raises(ct.CompactError) as e:
            call()
        message = str(e.value)
        assert f"compact: {fn}: argument" in message and "is a CUDA tensor" in message
        assert "this build of compact_torch has no CUDA backend" in message
        assert "COMPACT_TORCH_CUDA=1 pip install --no-build-isolation --force-reinstall ./examples/pytorch" in message


def test_cpu_isa_names_the_kernels_instruction_set_and_obeys_the_cap():
    assert ct.cpu_isa() in ("avx512", "avx2", "scalar")
    # COMPACT_CPU_ISA caps the run-time choice (read once per process): a fresh process with the cap says so.
    code = "import compact_torch as ct; print(ct.cpu_isa())"
    for cap in ("scalar", "avx2"):
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "COMPACT_CPU_ISA": cap},
                             capture_output=True, text=True, check=True).stdout.strip()
        want = cap if cap == "scalar" or ct.cpu_isa() != "scalar" else "scalar"
        assert out == want
