# SPDX-License-Identifier: MIT
"""Data-parallel training whose all-reduce carries the compressed gradients Ghat (m x r) of CompactLinear layers.

Every rank regenerates the same P from the seed, so Ghat = dy^T z is all that must be reduced for a compressed
layer: the m x n weight has requires_grad=False (DDP neither buckets nor reduces it) and the layer's ``weight_ghat``
parameter, whose gradient is Ghat, is an ordinary DDP parameter. Each rank then applies the same CompressedAdamW
update N P^T to its copy of W, so the weights stay identical without ever being communicated after the initial
broadcast. See docs/pytorch.md for the comparison with PyTorch's PowerSGD hook.
"""
import torch
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from .linear import compact_layers, owner_of


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """``torch.nn.parallel.DistributedDataParallel`` for models with CompactLinear layers (any arguments of DDP).

    DDP broadcasts every parameter from rank 0 when it is constructed, writing into each one; a CompactLinear's
    ``weight_ghat`` holds no memory (a zero-stride view of one zero), which cannot be written. This wrapper gives
    the placeholders real zeros for the duration of the constructor and takes them back afterwards; the reducer
    only ever touches their gradients. Plain DDP on such a model fails in that broadcast with "unsupported
    operation: more than one element of the written-to tensor refers to a single memory location".
    """

    def __init__(self, module, *args, **kwargs):
        layers = compact_layers(module)
        for layer in layers:
            layer.weight_ghat.data = torch.zeros(layer.weight_ghat.shape, dtype=layer.weight_ghat.dtype,
                                                 device=layer.weight_ghat.device)
        try:
            super().__init__(module, *args, **kwargs)
        finally:
            for layer in layers:
                layer._reset_ghat()


class AllReduceTraffic:
    """Counts the bytes DDP hands to all-reduce (the payload: bucket sizes), split into compressed gradients (Ghat
    of CompactLinear layers) and everything else. A ring all-reduce over N ranks sends 2 (N - 1) / N times the
    payload per rank."""

    def __init__(self, process_group=None):
        self.process_group = process_group
        self.reset()

    def reset(self):
        self.total_bytes = 0
        self.compressed_bytes = 0
        self.calls = 0

    def add(self, bucket):
        buf = bucket.buffer()
        self.total_bytes += buf.numel() * buf.element_size()
        self.calls += 1
        for p, g in zip(bucket.parameters(), bucket.gradients()):
            if owner_of(p) is not None:
                self.compressed_bytes += g.numel() * g.element_size()


def counting_allreduce_hook(state, bucket):
    """A DDP comm hook: DDP's own all-reduce (``default_hooks.allreduce_hook``: divide by the world size, sum),
    counting the payload in ``state`` (an AllReduceTraffic)."""
    state.add(bucket)
    return default_hooks.allreduce_hook(state.process_group, bucket)


def uncompressed_gradient_bytes(model):
    """The all-reduce payload of one step of full-rank DDP training of ``model``: every trainable parameter's size,
    with each CompactLinear counted as the m x n weight it would have without compression. Returns
    (total, of which compact layers)."""
    total = compact = 0
    for p in model.parameters():
        layer = owner_of(p)
        if layer is not None:
            b = layer.weight.numel() * layer.weight.element_size()
            total += b
            compact += b
        elif p.requires_grad:
            total += p.numel() * p.element_size()
    return total, compact

