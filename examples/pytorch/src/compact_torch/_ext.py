# SPDX-License-Identifier: MIT
"""The compiled extension compact_torch._C, its operators torch.ops.compact.*, and thin wrappers around them.

Every function here takes and returns torch tensors; shapes follow compact's row-major convention (x is tokens x n,
P is n x r, the weight W is m x n, the compressed gradient Ghat is m x r). Errors raise CompactError (a ValueError)
whose message is compact's own, whether the operator is called through these wrappers or through torch.ops.

The operators take the sketch state as a CPU int64 tensor (seed, stream, period, step) and derive the window
step // period when they run, so a graph compiled by torch.compile reads it as an input. Their fake (meta) kernels,
registered below, give torch.compile their output shapes: torch.library.register_fake on torch >= 2.4,
torch.library.impl_abstract on 2.1-2.3; torch 1.13 and 2.0 run them eagerly only.
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
ops = torch.ops.compact

DISTRIBUTIONS = tuple(_C.distributions())  # compact::Distributions, the library's list, in lower case
_U64 = 1 << 64


def check_dist(dist):
    """Returns dist if it names a distribution, else raises CompactError."""
    if dist not in DISTRIBUTIONS:
        raise CompactError(f"compact: argument dist = {dist!r} is not one of {', '.join(map(repr, DISTRIBUTIONS))}")
    return dist


def to_int64(name, value):
    """compact's uint64 seed or stream as the int64 the state tensor holds (the same 64 bits)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _U64:
        raise CompactError(f"compact: argument {name} = {value!r} must be an integer in [0, 2^64)")
    return value - _U64 if value >= 1 << 63 else value


def from_int64(value):
    return int(value) % _U64


def state_tensor(seed, stream, period, step):
    """The state tensor the operators take: (seed, stream, period, step), int64 on the CPU."""
    if period < 0 or step < 0:
        raise CompactError(f"compact: period = {period} and step = {step} must be >= 0")
    return torch.tensor([to_int64("seed", seed), to_int64("stream", stream), int(period), int(step)],
                        dtype=torch.int64)


def _window_state(seed, stream, window):
    return state_tensor(int(seed), int(stream), 1, int(window))  # period 1: the window is the step


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


def projector_cache_info():
    """What the cache of CUDA projectors kept across calls did in this process: a dict of "hits", "builds",
    "entries", "bytes" (their workspaces, in torch's caching allocator) and "evictions". An SRHT projector's setup
    (its sample and signs, about 26 launches) runs once per (state, n, rank, dtype, device) and is kept for the
    following sketch and unsketch_grad calls; dense projectors have no setup and are not kept. All zero without
    compact's CUDA backend."""
    return {k: int(v) for k, v in _C.projector_cache_info().items()}


def projector_cache_clear():
    """Drops every kept CUDA projector; their workspaces go back to torch's caching allocator."""
    _C.projector_cache_clear()


def cpu_isa():
    """The instruction set compact's CPU kernels run on in this process: "avx512", "avx2" or "scalar" (the
    environment variable COMPACT_CPU_ISA caps it)."""
    return str(_C.cpu_isa())


def sketch(x, rank, seed, stream, window, dist="gaussian"):
    """z = x P for P (n x rank) of the state (seed, stream, window). x: (..., n); z: (..., rank)."""
    if x.dim() < 1:
        raise CompactError(f"compact: sketch: argument x must have at least 1 dimension, got {x.dim()}")
    z = ops.sketch(x.reshape(-1, x.shape[-1]), int(rank), _window_state(seed, stream, window), check_dist(dist))
    return z.reshape(*x.shape[:-1], int(rank))


def unsketch_grad_(out, g, alpha, beta, seed, stream, window, dist="gaussian"):
    """out = alpha g P^T + beta out, in place; g: m x r, out: m x n. Returns out (its version counter bumped)."""
    ops.unsketch_grad_(out, g, float(alpha), float(beta), _window_state(seed, stream, window), check_dist(dist))
    return out


def compressed_grad(dy, z, g=None, beta=0.0, dtype=None):
    """Ghat = dy^T z; dy: B x m, z: B x r, Ghat: m x r, of dtype ``dtype`` (default dy's; float32 is allowed for
    16-bit dy and z: the products are accumulated in fp32 either way). With ``g``: g = dy^T z + beta g in place."""
    if g is None:
        return ops.compressed_grad(dy, z, dtype)
    ops.compressed_grad_(g, dy, z, float(beta))
    return g


def materialize(n, rank, seed, stream, window, dist="gaussian", dtype=torch.float32, device="cpu"):
    """P (n x rank) itself, for tests and debugging (compact never forms it in sketch or unsketch_grad)."""
    like = torch.empty(0, dtype=dtype, device=device)
    return ops.materialize(int(n), int(rank), _window_state(seed, stream, window), check_dist(dist), like)


def check_projector(n, rank, dist):
    """Raises CompactError (compact's message) unless a projector n x rank of `dist` can be built."""
    _C.check_projector(int(n), int(rank), check_dist(dist))


def cpu_scratch_bytes(n, rank, dist, dtype=torch.float32, unsketch=False):
    """Bytes compact's CPU backend allocates outside torch for one sketch (or unsketch_grad) call, freed on return."""
    return int(_C.cpu_scratch_bytes(int(n), int(rank), check_dist(dist), dtype == torch.float64, bool(unsketch)))


# -- fake kernels: output shapes for torch.compile's tracing (no data is touched) ------------------------------------

def _fake_sketch(x, rank, state, dist):
    return x.new_empty((x.shape[0], rank))


def _fake_unsketch_grad_(out, g, alpha, beta, state, dist):
    return None


def _fake_materialize(n, rank, state, dist, like):
    return like.new_empty((n, rank))


def _fake_compressed_grad(dy, z, out_dtype=None):
    return dy.new_empty((dy.shape[1], z.shape[1]), dtype=out_dtype if out_dtype is not None else dy.dtype)


def _fake_compressed_grad_(g, dy, z, beta):
    return None


def _fake_sr8_encode(x, seed, stream, window):
    n = x.numel()
    return x.new_empty((n,), dtype=torch.int8), x.new_empty(((n + 63) // 64,), dtype=torch.float32)


def _fake_sr8_decode(q, scales, dtype=None):
    return q.new_empty((q.numel(),), dtype=dtype if dtype is not None else torch.float32)


def _fake_adamw8_step(grad, m_q, m_scales, v_q, v_scales, param, out, lr, b1, b2, eps, weight_decay, step):
    return None


FAKE_KERNELS = {"sketch": _fake_sketch, "unsketch_grad_": _fake_unsketch_grad_, "materialize": _fake_materialize,
                "compressed_grad": _fake_compressed_grad, "compressed_grad_": _fake_compressed_grad_,
                "sr8_encode": _fake_sr8_encode, "sr8_decode": _fake_sr8_decode,
                "adamw8_step": _fake_adamw8_step}


def _register_fake_kernels():
    register = getattr(torch.library, "register_fake", None) or getattr(torch.library, "impl_abstract", None)
    if register is None:  # torch < 2.1: no torch.compile support for the ops (they run eagerly)
        return False
    for name, fn in FAKE_KERNELS.items():
        register(f"compact::{name}")(fn)
    return True


HAS_FAKE_KERNELS = _register_fake_kernels()
