# SPDX-License-Identifier: MIT
"""compact_torch: CompAct (compressed activations, Shamshoum et al., NAACL 2025) for PyTorch, on compact's seeded
random projections.

    import compact_torch as ct
    ct.compress(model, rank=0.25, dist="gaussian")          # the paper's layers -> CompactLinear, in place
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-3)   # m x r moments for compressed layers
    ddp = ct.DistributedDataParallel(model)                 # all-reduces Ghat (m x r), not m x n
    ct.decompress(model)                                    # back to nn.Linear, same weights

The operators are torch.ops.compact.* (torch.compile traces them). See docs/pytorch.md. The CPU memory tracker of
the measurements is compact_torch.memory, which the package never imports.
"""
from ._ext import (CompactError, build_info, compressed_grad, cpu_isa, has_cuda, materialize,
                   projector_cache_clear, projector_cache_info, sketch, unsketch_grad_)
from .compress import DEFAULT_EXCLUDE, FAMILY_DEFAULTS, compress, decompress, sketch_config
from .distributed import (AllReduceTraffic, DistributedDataParallel, check_sketch_states, counting_allreduce_hook,
                          fully_shard)
from .linear import CompactLinear, compact_layers, owner_of, resolve_rank, set_ghat_allreduce, weight_owner_of
from .loss import chunked_lm_loss, patch_causal_lm, unpatch_causal_lm
from .optim import CompressedAdamW

__version__ = build_info()["compact"]  # compact's version (compact/config.hpp), which this package shares

__all__ = [
    "AllReduceTraffic", "build_info", "check_sketch_states", "chunked_lm_loss", "compact_layers", "CompactError",
    "CompactLinear", "compress", "compressed_grad", "CompressedAdamW", "counting_allreduce_hook", "cpu_isa",
    "decompress", "DEFAULT_EXCLUDE", "DistributedDataParallel", "FAMILY_DEFAULTS", "fully_shard", "has_cuda",
    "materialize", "owner_of", "patch_causal_lm", "projector_cache_clear", "projector_cache_info", "resolve_rank",
    "set_ghat_allreduce", "sketch", "sketch_config", "unpatch_causal_lm", "unsketch_grad_", "weight_owner_of",
]
