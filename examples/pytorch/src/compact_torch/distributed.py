# SPDX-License-Identifier: MIT
"""Data-parallel training whose all-reduce carries the compressed gradients Ghat (m x r) of CompactLinear layers.

Every rank regenerates the same P from the seed, so Ghat = dy^T z is all that must be reduced for a compressed
layer: the m x n weight has requires_grad=False (DDP neither buckets nor reduces it) and the layer's ``weight_ghat``
parameter, whose gradient is Ghat, is an ordinary DDP parameter. Each rank then applies the same CompressedAdamW
update N P^T to its copy of W, so the weights stay identical without ever being communicated after the initial
broadcast. That needs every rank to regenerate the *same* P: the wrapper checks before every forward that all ranks
agree on every layer's (seed, stream, period, step, rank), so a checkpoint loaded on one rank only raises instead of
averaging Ghat taken in different bases. See docs/pytorch.md for the comparison with PyTorch's PowerSGD hook.

FSDP2 (``fully_shard``) needs no comm hook either: Ghat is reduce-scattered like any gradient and CompressedAdamW
applies the update to each rank's row shard of W.
"""
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from ._ext import DISTRIBUTIONS, CompactError
from .linear import _register_owner, compact_layers, owner_of


def _sketch_state_matrix(layers):
    """L x 5 int64: (seed, stream, period, step, rank) per layer plus the distribution folded into the rank column."""
    if not layers:
        return torch.zeros(0, 5, dtype=torch.int64)
    rows = [torch.cat([layer._state, torch.tensor([layer.rank * len(DISTRIBUTIONS) + DISTRIBUTIONS.index(layer.dist)])])
            for layer in layers]
    return torch.stack(rows)


def check_sketch_states(module, process_group=None, names=None):
    """Raises CompactError on every rank unless all ranks of ``process_group`` agree on the sketch state (seed,
    stream, period, step, rank, dist) of every CompactLinear of ``module``. One all-reduce of 2 x 5 int64 per layer
    (max of the values and of their negations); on a mismatch one all-gather more to name the layer and the values."""
    layers = compact_layers(module)
    states = _sketch_state_matrix(layers)
    device = torch.device("cpu")
    if dist.get_backend(process_group) == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    both = torch.cat([states, -states]).to(device)
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=process_group)
    both = both.cpu()
    high, low = both[:len(layers)], -both[len(layers):]
    if torch.equal(high, low):
        return
    gathered = [torch.empty_like(states).to(device) for _ in range(dist.get_world_size(process_group))]
    dist.all_gather(gathered, states.to(device), group=process_group)
    gathered = [g.cpu() for g in gathered]
    bad = int(torch.nonzero((high != low).any(1))[0])
    if names is None:
        by_id = {id(m): n for n, m in module.named_modules()}
        name = by_id.get(id(layers[bad]), str(bad))
    else:
        name = names[bad]
    per_rank = "; ".join(
        f"rank {k}: seed {int(g[bad, 0]) % (1 << 64)}, stream {int(g[bad, 1]) % (1 << 64)}, period {int(g[bad, 2])}, "
        f"step {int(g[bad, 3])}, r = {int(g[bad, 4]) // len(DISTRIBUTIONS)}" for k, g in enumerate(gathered))
    raise CompactError(f"compact: the ranks disagree on the sketch state of layer {name!r} ({per_rank}); their "
                       "compressed gradients would be averaged in different bases. Load the same checkpoint (model "
                       "and CompressedAdamW state) on every rank")


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """``torch.nn.parallel.DistributedDataParallel`` for models with CompactLinear layers (any arguments of DDP).

    DDP broadcasts every parameter from rank 0 when it is constructed, writing into each one; a CompactLinear's
    ``weight_ghat`` holds no memory (a zero-stride view of one zero), which cannot be written. This wrapper gives
    the placeholders real zeros for the duration of the constructor and takes them back afterwards; the reducer
    only ever touches their gradients. Plain DDP on such a model fails in that broadcast with "unsupported
    operation: more than one element of the written-to tensor refers to a single memory location".

    With ``check_states=True`` (the default) the wrapper checks at construction and before every forward with autograd
    that all ranks agree on every layer's sketch state (``check_sketch_states``): one small all-reduce per forward.
    """

    def __init__(self, module, *args, check_states=True, **kwargs):
        layers = compact_layers(module)
        for layer in layers:
            layer.weight_ghat.data = torch.zeros(layer.weight_ghat.shape, dtype=layer.weight_ghat.dtype,
                                                 device=layer.weight_ghat.device)
        # compress() tells torch's DDP to leave the placeholders alone (CompressedAdamW then reduces Ghat); this
        # wrapper buckets them instead, so it builds DDP without those names and marks the layers.
        ignored = getattr(module, "_ddp_params_and_buffers_to_ignore", None)
        if ignored is not None:
            placeholders = {n for n, p in module.named_parameters() if owner_of(p) is not None}
            module._ddp_params_and_buffers_to_ignore = [n for n in ignored if n not in placeholders]
        try:
            super().__init__(module, *args, **kwargs)
        finally:
            for layer in layers:
                layer._reset_ghat()
            if ignored is not None:
                module._ddp_params_and_buffers_to_ignore = ignored
        for layer in layers:
            layer._ghat_reducer = "ddp"
        self._check_states = check_states
        ids = {id(layer) for layer in layers}
        self._layer_names = [n for n, m in module.named_modules() if id(m) in ids]
        if check_states:
            check_sketch_states(module, self.process_group, self._layer_names)

    def forward(self, *inputs, **kwargs):
        # Every forward with autograd: the optimizer (or a checkpoint load) may have changed the states since.
        if self._check_states and torch.is_grad_enabled():
            check_sketch_states(self.module, self.process_group, self._layer_names)
        return super().forward(*inputs, **kwargs)


def fully_shard(module, **kwargs):
    """``torch.distributed.fsdp.fully_shard`` (FSDP2, torch >= 2.6) for modules with CompactLinear layers (any
    arguments of fully_shard); returns what it returns.

    FSDP2 shards every parameter by rows: a layer's W (requires_grad=False) and its Ghat placeholder alike, so a
    rank's shard of Ghat and of W cover the same rows, and CompressedAdamW updates W's shard through P with its
    shard of N. Ghat is reduce-scattered like any gradient. FSDP2 refuses non-contiguous parameters ("FSDP does not
    support non-contiguous parameters yet"), so the wrapper first gives each unsharded placeholder real zeros; its
    shard then costs m x r / world values per rank, and FSDP2 all-gathers it with the weight for the forward (r/n of
    the weight's traffic). The wrapper then registers the sharded parameters, which are new objects, so that the
    optimizer recognises them."""
    try:
        from torch.distributed.fsdp import fully_shard as torch_fully_shard
    except Exception as e:  # ImportError; torch 1.13's FSDP module fails to import under Python 3.11 (ValueError)
        raise CompactError(f"compact: fully_shard needs torch >= 2.6 (torch.distributed.fsdp.fully_shard); this is "
                           f"torch {torch.__version__}") from e
    layers = compact_layers(module)
    for layer in layers:
        ghat = layer.weight_ghat
        if not hasattr(ghat, "to_local"):  # not sharded by an inner fully_shard call yet
            ghat.data = torch.zeros(ghat.shape, dtype=ghat.dtype, device=ghat.device)
    result = torch_fully_shard(module, **kwargs)
    for layer in layers:
        _register_owner(layer)
        layer._ghat_reducer = "fsdp"  # reduce-scattered by FSDP2: the layer does not average it itself
    return result


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

