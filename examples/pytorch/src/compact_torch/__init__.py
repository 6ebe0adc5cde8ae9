# SPDX-License-Identifier: MIT
"""compact_torch: CompAct (compressed activations, Shamshoum et al., NAACL 2025) for PyTorch, on compact's seeded
random projections.

    import compact_torch as ct
    ct.compress(model, rank=0.25, dist="gaussian")          # nn.Linear -> CompactLinear, in place
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-3)   # m x r moments for compressed layers
    ddp = ct.DistributedDataParallel(model)                 # all-reduces Ghat (m x r), not m x n

See docs/pytorch.md.
"""
from ._ext import CompactError, build_info, compressed_grad, has_cuda, materialize, sketch, unsketch_grad_
from .compress import DEFAULT_EXCLUDE, compress
from .distributed import AllReduceTraffic, DistributedDataParallel, counting_allreduce_hook
from .linear import CompactLinear, compact_layers, owner_of, resolve_rank
from .memory import CpuMemoryTracker
from .optim import CompressedAdamW

__version__ = build_info()["compact"]  # compact's version (compact/config.hpp), which this package shares

__all__ = [
    "AllReduceTraffic", "CompactError", "CompactLinear", "CompressedAdamW", "CpuMemoryTracker", "DEFAULT_EXCLUDE",
    "DistributedDataParallel", "build_info", "compact_layers", "compress", "compressed_grad", "counting_allreduce_hook",
    "has_cuda", "materialize", "owner_of", "resolve_rank", "sketch", "unsketch_grad_",
]
