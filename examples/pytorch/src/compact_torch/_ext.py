# SPDX-License-Identifier: MIT
"""The compiled extension compact_torch._C and thin, checked wrappers around its operations.

Every function here takes and returns torch tensors; shapes follow compact's row-major convention (x is tokens x n,
P is n x r, the weight W is m x n, the compressed gradient Ghat is m x r). Errors raise CompactError (a ValueError)
whose message is compact's own.
"""
import torch

_REINSTALL = ("reinstall compact_torch into this environment: `pip install --no-build-isolation --force-reinstall "
              "./examples/pytorch` (or, in the CMake build, `cmake --build build --target compact_torch_ext`)")

# A C++ extension works only under the torch it was compiled against; a different one fails to load it with an
# undefined symbol, or worse loads it. So the torch version recorded at build time is checked before loading it.
try:
    from . import _build_info
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(f"compact_torch is not built (no compact_torch._build_info): {_REINSTALL}") from e
if torch.__version__ != _build_info.TORCH_VERSION:
    raise ImportError(f"compact_torch was built against torch {_build_info.TORCH_VERSION} but this is torch "
                      f"{torch.__version__}; a C++ extension works only with the torch it was compiled against: "
                      f"{_REINSTALL}")

try:
    from . import _C
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(f"compact_torch._C (the C++ extension) failed to load ({e}): {_REINSTALL}") from e

CompactError = _C.CompactError

DISTRIBUTIONS = ("gaussian", "rademacher", "srht")


def check_dist(dist):
    """Returns dist if it names a distribution, else raises CompactError."""
    if dist not in DISTRIBUTIONS:
        raise CompactError(f"compact: argument dist = {dist!r} is not one of {', '.join(map(repr, DISTRIBUTIONS))}")
    return dist


def has_cuda():
    """Whether this build of the extension has compact's CUDA backend."""
    return bool(_C.has_cuda())


def build_info():
    """What this copy of compact_torch was built with, as a dict:

    - ``torch``: the torch version it was compiled against (import checks that it is the one running);
    - ``cuda``: whether compact's CUDA backend is compiled in; ``cuda_archs``: the architectures it was compiled for
      (e.g. ``["8.0", "9.0+PTX"]``; empty without CUDA);
    - ``cxx_standard``: the C++ standard of the extension (``"c++17"``, ``"c++20"``: torch's headers decide);
    - ``blas``: whether compact's BLAS GEMM engine (OpenBLAS, COMPACT_TORCH_BLAS=1) is registered;
    - ``compact``: the version of compact's headers it was built from (compact/config.hpp).
    """
    compiled = _C.build_info()
    standard = {201703: "c++17", 202002: "c++20"}.get(compiled["cplusplus"], f"__cplusplus {compiled['cplusplus']}")
    return {
        "torch": _build_info.TORCH_VERSION,
        "cuda": bool(compiled["cuda"]),
        "cuda_archs": list(_build_info.CUDA_ARCHS),
        "cxx_standard": standard,
        "blas": bool(compiled["blas"]),
        "compact": compiled["compact_version"],
    }


def sketch(x, rank, seed, stream, window, dist="gaussian"):
    """z = x P for P (n x rank) of the state (seed, stream, window). x: (..., n); z: (..., rank)."""
    if x.dim() < 1:
        raise CompactError(f"compact: sketch: argument x must have at least 1 dimension, got {x.dim()}")
    z = _C.sketch(x.reshape(-1, x.shape[-1]), int(rank), int(seed), int(stream), int(window), check_dist(dist))
    return z.reshape(*x.shape[:-1], int(rank))


def unsketch_grad_(out, g, alpha, beta, seed, stream, window, dist="gaussian"):
    """out = alpha g P^T + beta out, in place; g: m x r, out: m x n. Returns out."""
    _C.unsketch_grad_(out, g, float(alpha), float(beta), int(seed), int(stream), int(window), check_dist(dist))
    return out


def compressed_grad(dy, z, g=None, beta=0.0):
    """Ghat = dy^T z (+ beta g, in place, when g is given); dy: B x m, z: B x r, Ghat: m x r."""
    return _C.compressed_grad(dy, z, g, float(beta))


def materialize(n, rank, seed, stream, window, dist="gaussian", dtype=torch.float32, device="cpu"):
    """P (n x rank) itself, for tests and debugging (compact never forms it in sketch or unsketch_grad)."""
    like = torch.empty(0, dtype=dtype, device=device)
    return _C.materialize(int(n), int(rank), int(seed), int(stream), int(window), check_dist(dist), like)


def check_projector(n, rank, dist):
    """Raises CompactError (compact's message) unless a projector n x rank of `dist` can be built."""
    _C.check_projector(int(n), int(rank), check_dist(dist))


def cpu_scratch_bytes(n, rank, dist, dtype=torch.float32, unsketch=False):
    """Bytes compact's CPU backend allocates outside torch for one sketch (or unsketch_grad) call, freed on return."""
    return int(_C.cpu_scratch_bytes(int(n), int(rank), check_dist(dist), dtype == torch.float64, bool(unsketch)))
