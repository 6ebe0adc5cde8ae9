# SPDX-License-Identifier: MIT
"""The compiled extension compact_torch._C and thin, checked wrappers around its operations.

Every function here takes and returns torch tensors; shapes follow compact's row-major convention (x is tokens x n,
P is n x r, the weight W is m x n, the compressed gradient Ghat is m x r). Errors raise CompactError (a ValueError)
whose message is compact's own.
"""
import torch

try:
    from . import _C
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "compact_torch._C (the C++ extension) is not built or does not match this torch. Install the package with "
        "`pip install --no-build-isolation ./examples/pytorch`, or build it into the CMake build directory with "
        f"`cmake --build build --target compact_torch_ext` and put build/examples/pytorch/lib on PYTHONPATH ({e})"
    ) from e

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
