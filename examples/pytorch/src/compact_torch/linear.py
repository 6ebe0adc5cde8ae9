# SPDX-License-Identifier: MIT
"""CompactLinear: an nn.Linear whose autograd saves only z = x P, with its weight gradient formed as Ghat = dy^T z.

How the pieces fit (see docs/pytorch.md):

- ``weight`` (m x n, or n x m for a GPT-2 ``Conv1D``) is an ``nn.Parameter`` with ``requires_grad=False``: no
  m x n gradient is ever formed, DDP does not reduce it, ``clip_grad_norm_`` and plain optimizers skip it.
  ``CompressedAdamW`` updates it in place through P.
- ``weight_ghat`` is a parameter of shape m x r whose ``.grad`` receives Ghat = dy^T z, in float32 (float64 for a
  float64 weight) whatever the weight's or the activations' dtype: 16-bit gradients are accumulated in fp32, as
  compact's C++ optimizers do. Its value carries no information and costs no memory: it is a zero-stride view of a
  single zero. It exists so that everything PyTorch does with gradients (accumulation over micro-batches,
  ``clip_grad_norm_``, DDP's and FSDP2's reductions, GradScaler, optimizer state keyed by parameter) works on the
  compressed gradient unchanged.
- P (n x r) is never stored: compact regenerates it from the layer's sketch state, a CPU int64 tensor (seed, stream,
  period, step) with window = step // period; ``step`` counts optimizer steps (advanced by ``CompressedAdamW``), so
  every micro-batch of one step uses the same P and P is resampled every ``period`` steps. The operators read the
  state tensor when they run, so a compiled graph takes it as an input and is not recompiled as the step advances.
- Layers that read the same input tensor (``compress(share_inputs=True)``: q/k/v, gate/up) share one state tensor
  after their first forward, hence one P and one stored z.
- The state dict holds exactly the keys of the plain layer (``weight``, ``bias``): a plain checkpoint loads into a
  compressed model and back, strictly. The sketch configuration lives in JSON (``compress.sketch_config``, and
  ``model.config.compact_torch`` for Hugging Face models) and the step in ``CompressedAdamW``'s state.
"""
import itertools
import math
import weakref

import torch
import torch.nn.functional as F
from torch import nn

from . import _ext
from ._ext import CompactError

# Streams of layers built without an explicit stream (compress() numbers its layers 0, 1, ... instead).
_auto_streams = itertools.count(1 << 32)
FIRST_AUTO_STREAM = 1 << 32

# Placeholder (or weight) parameter -> its layer (weakly), so that optimizers and DDP hooks given only parameters
# find the layer.
_owners = {}
_weight_owners = {}

# Rows of W per block when the update goes through a temporary (see CompactLinear._apply_update): about 4 MiB of fp32.
UPDATE_BLOCK_ELEMENTS = 1 << 20


def _register(table, param, layer):
    key = id(param)
    ref = table.get(key)
    if ref is not None and ref() is layer:
        return
    table[key] = weakref.ref(layer, lambda _ref, key=key, table=table: table.pop(key, None))


def _register_owner(layer):
    _register(_owners, layer.weight_ghat, layer)
    _register(_weight_owners, layer.weight, layer)


def owner_of(param):
    """The CompactLinear whose ``weight_ghat`` is ``param``, or None for any other tensor."""
    ref = _owners.get(id(param))
    layer = ref() if ref is not None else None
    return layer if layer is not None and layer.weight_ghat is param else None


def weight_owner_of(param):
    """The CompactLinear whose ``weight`` is ``param``, or None for any other tensor."""
    ref = _weight_owners.get(id(param))
    layer = ref() if ref is not None else None
    return layer if layer is not None and layer.weight is param else None


def resolve_rank(rank, in_features, dist="gaussian"):
    """The integer rank for ``rank`` (< 1: a fraction of in_features, rounded, at least 1; >= 1: an absolute rank).

    Raises CompactError (compact's message for r > n) for ranks that cannot be built."""
    if isinstance(rank, bool) or not isinstance(rank, (int, float)) or not math.isfinite(rank):
        raise CompactError(f"compact: argument rank = {rank!r} must be a finite number")
    if rank <= 0:
        raise CompactError(f"compact: argument rank = {rank} must be > 0 (a fraction of in_features when < 1, "
                           "an absolute rank when >= 1)")
    if rank < 1:
        r = max(1, int(round(rank * in_features)))
    else:
        if rank != int(rank):
            raise CompactError(f"compact: argument rank = {rank} is >= 1, so it must be an integer (an absolute rank)")
        r = int(rank)
    _ext.check_projector(in_features, r, dist)
    return r


def is_conv1d(module):
    """Whether ``module`` is Hugging Face's ``Conv1D`` (GPT-2): y = x W + b with W stored in_features x out_features."""
    return (type(module).__name__ == "Conv1D" and type(module).__module__.startswith("transformers")
            and hasattr(module, "nf") and hasattr(module, "nx"))


def _is_compiling():
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        return compiler.is_compiling()
    return False


def _local(t):
    """The local shard of a DTensor (FSDP2), or t itself."""
    return t.to_local() if hasattr(t, "to_local") else t


def _version_of(x):
    try:
        return x._version
    except RuntimeError:  # an inference tensor has no version counter; it cannot be modified outside inference mode
        return -1


class _SharePool:
    """Layers made by one compress(share_inputs=True) call: on its first forward with autograd, a layer that reads
    the same input tensor as an earlier pool member with the same (seed, period, step, rank, dist) adopts that
    member's sketch state tensor, so the two share P and one stored z."""

    def __init__(self, group=0):
        self.group = group


class _InputEntry:
    __slots__ = ("ref", "version", "sketches", "members")


class _SketchCache:
    """Per live input tensor: the sketches computed from it ((seed, stream, rank, dist, dtype) -> (window, z)) and
    the sketch states of the share-pool members that read it ((pool, compatibility) -> state tensor).

    An entry lives exactly as long as its input tensor (a weak reference whose callback drops it) and holds its
    sketches strongly. Sibling layers therefore find each other's z whether or not autograd keeps it: under
    ``torch.utils.checkpoint(use_reentrant=False)`` nothing is saved in the first forward, and z would otherwise die
    between q's forward and k's, splitting the group."""

    def __init__(self):
        self._entries = {}

    def entry(self, x):
        key = id(x)
        e = self._entries.get(key)
        if e is not None and e.ref() is x:
            version = _version_of(x)
            if e.version != version:  # x was modified in place: what was computed from it is stale
                e.version, e.sketches, e.members = version, {}, {}
            return e
        e = _InputEntry()
        entries = self._entries

        def drop(ref, key=key):
            current = entries.get(key)
            if current is not None and current.ref is ref:
                del entries[key]

        e.ref = weakref.ref(x, drop)
        e.version, e.sketches, e.members = _version_of(x), {}, {}
        entries[key] = e
        return e

    def clear(self):
        self._entries.clear()

    def __len__(self):
        return len(self._entries)


_cache = _SketchCache()


def autocast_dtype(device_type):
    """The autocast dtype in force for ``device_type`` ("cpu", "cuda", ...) when autocast is on there, else None (also
    for a device type autocast does not know)."""
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4 (the device-less forms are deprecated there)
        try:
            return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
        except RuntimeError:  # a device type autocast does not know
            return None
    if device_type == "cuda":
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
    if device_type == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return None


class _GhatReduction:
    """Averages the compressed gradients Ghat over the ranks at the end of each backward pass, for layers that torch's
    own DistributedDataParallel leaves alone (compress() lists their placeholders in the model's
    ``_ddp_params_and_buffers_to_ignore``, which the DDP that the Hugging Face Trainer, accelerate and Lightning build
    reads: its constructor would otherwise write into the zero-stride placeholders). The first layer to form Ghat in
    a backward pass queues a callback with autograd's engine (as DDP's reducer finalizes), which runs once every
    gradient has been accumulated: then, before any gradient clipping or optimizer step, one all-reduce per device and
    dtype of the flattened Ghat of those layers, in a fixed order, divided by the world size first and then summed, as
    DDP's default hook does (so the trajectory is compact_torch.DistributedDataParallel's bit for bit). Under
    gradient accumulation it runs after every micro-batch, which averages the same sum: avg(avg(g1) + g2) =
    avg(g1) + avg(g2). Every rank must run the same backward passes with the same compressed layers, as DDP requires.
    ``compact_torch.set_ghat_allreduce(False)`` turns it off (model parallelism where ranks hold different layers)."""

    def __init__(self):
        self.enabled = True
        self.pending = {}
        self.queued = False

    def wanted(self, layer):
        if not (self.enabled and layer._ghat_reducer == "self"):
            return False
        dist = torch.distributed
        return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1

    def add(self, layer):
        if layer is None:
            return
        self.pending[layer._index] = layer
        if not self.queued:
            self.queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self.run)

    def run(self):
        layers = [self.pending[k] for k in sorted(self.pending)]
        self.pending, self.queued = {}, False
        world = torch.distributed.get_world_size()
        buckets = {}
        for layer in layers:
            p = layer.weight_ghat
            if p.grad is None or hasattr(p.grad, "to_local"):
                continue
            buckets.setdefault((str(p.grad.device), str(p.grad.dtype)), []).append(p.grad)
        for key in sorted(buckets):
            grads = buckets[key]
            flat = torch._utils._flatten_dense_tensors(grads)
            flat.div_(world)
            torch.distributed.all_reduce(flat)
            for g, reduced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
                g.copy_(reduced)


_ghat_reduction = _GhatReduction()
_layer_count = itertools.count()


def set_ghat_allreduce(enabled):
    """Whether compressed layers average their Ghat over the ranks at the end of backward under torch's own DDP
    (default True; see _GhatReduction)."""
    _ghat_reduction.enabled = bool(enabled)


class _CompactLinearFunction(torch.autograd.Function):
    """y = x W^T + b (x W + b for a transposed weight). Saves z (given, computed under no_grad) and a reference to W
    (autograd checks W's version in backward: an optimizer step between forward and backward raises).

    Backward: dx = dy W (exact), db = sum dy (exact), and the gradient of the placeholder is Ghat = dy^T z, accumulated
    in fp32 (fp64 for fp64 activations) and returned in the placeholder's dtype."""

    @staticmethod
    def forward(ctx, x, z, weight, bias, ghat_param, transposed):
        ctx.save_for_backward(z, weight)
        owner = owner_of(ghat_param)
        ctx.layer = weakref.ref(owner) if owner is not None and _ghat_reduction.wanted(owner) else None
        ctx.has_bias = bias is not None
        ctx.transposed = transposed
        ctx.ghat_dtype = ghat_param.dtype
        if not transposed:
            return F.linear(x, weight, bias)
        x2 = x.reshape(-1, x.shape[-1])  # GPT-2's Conv1D, operation for operation
        y = torch.mm(x2, weight) if bias is None else torch.addmm(bias, x2, weight)
        return y.view(x.shape[:-1] + (weight.shape[1],))

    @staticmethod
    def backward(ctx, dy):
        z, weight = ctx.saved_tensors
        dx = db = ghat = None
        if ctx.needs_input_grad[0]:
            w = weight.to(dy.dtype)
            dx = dy.matmul(w.t() if ctx.transposed else w)
        dy2 = dy.reshape(-1, dy.shape[-1])
        if ctx.has_bias and ctx.needs_input_grad[3]:
            db = dy2.sum(0)
        if ctx.needs_input_grad[4]:
            ghat = _ext.ops.compressed_grad(dy2.to(z.dtype), z, ctx.ghat_dtype)
            if ctx.layer is not None:
                _ghat_reduction.add(ctx.layer())
        return dx, None, None, db, ghat, None


class CompactLinear(nn.Module):
    """A drop-in for ``nn.Linear`` (y = x W^T + b) that stores z = x P (tokens x r) for backward instead of x.

    Args:
        in_features, out_features, bias: as ``nn.Linear`` (same initialization).
        rank: r; < 1 is a fraction of in_features (0.25 -> n/4), >= 1 an absolute rank (1 <= r <= n).
        dist: "gaussian" (N(0, 1/r) entries), "rademacher" (+-1/sqrt(r)) or "srht" (O(n log n) per row).
        seed: the run seed of P, an integer in [0, 2^64).
        period: P is resampled every ``period`` optimizer steps (0: never).
        stream: which P of the run this layer uses; None picks a fresh one. Layers with equal (seed, stream) and
            rank share P.

    ``from_module`` wraps an existing ``nn.Linear`` or GPT-2 ``Conv1D`` (sharing its tensors; a Conv1D keeps its
    transposed in x out weight, so its checkpoints stay Conv1D's). Train it with ``CompressedAdamW`` (which also
    advances the step); DDP through ``compact_torch.DistributedDataParallel``, FSDP2 through
    ``compact_torch.fully_shard``. Under ``torch.no_grad()`` it is a plain linear. Autocast (CPU and CUDA) applies to
    the forward as to ``nn.Linear``; z is stored in the autocast dtype, Ghat accumulated in fp32.
    """

    def __init__(self, in_features, out_features, bias=True, rank=0.25, dist="gaussian", seed=0, period=200,
                 stream=None, device=None, dtype=None):
        super().__init__()
        self._configure(in_features, out_features, rank, dist, seed, period, stream, transposed=False)
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(self.out_features, self.in_features, **factory), requires_grad=False)
        self.bias = nn.Parameter(torch.empty(self.out_features, **factory)) if bias else None
        self.reset_parameters()
        self.weight_ghat = nn.Parameter(self._ghat_value())
        _register_owner(self)

    @classmethod
    def from_module(cls, module, rank=0.25, dist="gaussian", seed=0, period=200, stream=None):
        """A CompactLinear holding the weight and bias tensors (shared, not copied) of ``module``: an ``nn.Linear``
        or Hugging Face's ``Conv1D`` (GPT-2), whose in x out weight layout is kept."""
        if is_conv1d(module):
            in_features, out_features, transposed = module.nx, module.nf, True
        elif isinstance(module, nn.Linear):
            in_features, out_features, transposed = module.in_features, module.out_features, False
        else:
            raise CompactError(f"compact: CompactLinear.from_module: a {type(module).__name__} is neither an "
                               "nn.Linear nor transformers' Conv1D")
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._configure(in_features, out_features, rank, dist, seed, period, stream, transposed)
        layer.weight = nn.Parameter(module.weight.data, requires_grad=False)
        layer.bias = None if module.bias is None else nn.Parameter(module.bias.data, module.bias.requires_grad)
        layer.weight_ghat = nn.Parameter(layer._ghat_value())
        _register_owner(layer)
        return layer

    @classmethod
    def from_linear(cls, linear, rank=0.25, dist="gaussian", seed=0, period=200, stream=None):
        """``from_module`` for an ``nn.Linear``."""
        return cls.from_module(linear, rank=rank, dist=dist, seed=seed, period=period, stream=stream)

    def to_plain(self):
        """The plain module this layer stands for (``nn.Linear``, or ``Conv1D`` for a transposed weight) holding the
        same weight and bias tensors, the weight trainable again."""
        if self.transposed:
            from transformers.pytorch_utils import Conv1D

            plain = Conv1D.__new__(Conv1D)
            nn.Module.__init__(plain)
            plain.nf, plain.nx = self.out_features, self.in_features
        else:
            plain = nn.Linear.__new__(nn.Linear)
            nn.Module.__init__(plain)
            plain.in_features, plain.out_features = self.in_features, self.out_features
        plain.weight = nn.Parameter(self.weight.data, requires_grad=True)
        plain.bias = None if self.bias is None else nn.Parameter(self.bias.data, self.bias.requires_grad)
        plain.train(self.training)
        return plain

    def _configure(self, in_features, out_features, rank, dist, seed, period, stream, transposed):
        """Checks and sets everything but the tensors."""
        if int(in_features) < 1 or int(out_features) < 1:
            raise CompactError(f"compact: CompactLinear: in_features = {in_features} and out_features = "
                               f"{out_features} must be >= 1")
        if int(period) < 0:
            raise CompactError(f"compact: CompactLinear: argument period = {period} must be >= 0 (0: never resample)")
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.dist = _ext.check_dist(dist)
        self.rank = resolve_rank(rank, self.in_features, self.dist)
        self.transposed = bool(transposed)
        stream = next(_auto_streams) if stream is None else stream
        self._state = _ext.state_tensor(seed, stream, int(period), 0)
        self._pool = None
        self._sharing_decided = True
        self._record = None
        # Who averages Ghat over the ranks under data parallelism: None (nobody: no data parallelism known), "self"
        # (the layer, at the end of backward: compress() told torch's own DDP to leave the placeholder alone), "ddp"
        # (compact_torch.DistributedDataParallel's buckets) or "fsdp" (fully_shard's reduce-scatter).
        self._ghat_reducer = None
        self._index = next(_layer_count)  # construction order: the same on every rank that builds the same model

    def reset_parameters(self):
        """nn.Linear's initialization."""
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
            if self.bias is not None:
                bound = 1 / math.sqrt(self.in_features)
                nn.init.uniform_(self.bias, -bound, bound)

    def _ghat_dtype(self):
        return torch.float64 if self.weight.dtype == torch.float64 else torch.float32

    def _ghat_value(self):
        zero = torch.zeros((), dtype=self._ghat_dtype(), device=self.weight.device)
        return zero.expand(self.out_features, self.rank)

    # -- the sketch state ------------------------------------------------------------------------------------------

    @property
    def seed(self):
        return _ext.from_int64(self._state[0])

    @property
    def stream(self):
        return _ext.from_int64(self._state[1])

    @property
    def period(self):
        return int(self._state[2])

    @property
    def step(self):
        """Optimizer steps taken (advanced by CompressedAdamW; shared by the layers of one sketch group)."""
        return int(self._state[3])

    @step.setter
    def step(self, value):
        if int(value) < 0:
            raise CompactError(f"compact: CompactLinear: step = {value} must be >= 0")
        self._state[3] = int(value)

    def set_sketch_state(self, seed=None, stream=None, period=None, step=None):
        """Sets fields of the sketch state (of every layer sharing it)."""
        s = [self.seed, self.stream, self.period, self.step]
        for i, v in enumerate((seed, stream, period, step)):
            if v is not None:
                s[i] = int(v)
        self._state.copy_(_ext.state_tensor(*s))
        self._sync_record()

    @property
    def window(self):
        """The resampling window of the coming optimizer step: step // period (0 when period is 0)."""
        period = self.period
        return self.step // period if period else 0

    def sketch_state(self):
        """(seed, stream, window): compact's SketchState of the P that the coming step uses."""
        return self.seed, self.stream, self.window

    def config(self):
        """The layer's sketch configuration as JSON values (see compress.sketch_config)."""
        return {"rank": self.rank, "dist": self.dist, "seed": self.seed, "stream": self.stream, "period": self.period,
                "layout": "conv1d" if self.transposed else "linear", "sharing_decided": self._sharing_decided,
                "share_group": None if self._pool is None else self._pool.group}

    def _sync_record(self):
        if self._record is not None:
            self._record.update(self.config())

    def _share_state_with(self, state):
        self._state = state

    def projection(self, dtype=None, device=None):
        """P (in_features x rank) of the coming step, materialized (for tests and inspection only)."""
        dtype = self.weight.dtype if dtype is None else dtype
        device = self.weight.device if device is None else device
        return _ext.ops.materialize(self.in_features, self.rank, self._state, self.dist,
                                    torch.empty(0, dtype=dtype, device=device))

    def _sketch(self, x, x2):
        """z = x2 P, shared with a sibling that already sketched the same input tensor x with the same P."""
        entry = _cache.entry(x)
        if self._pool is not None and not self._sharing_decided:
            seed, _, period, step = self._state.tolist()
            state = entry.members.get((id(self._pool), (seed, period, step, self.rank, self.dist)))
            if state is not None:
                self._share_state_with(state)
            self._sharing_decided = True
            self._sync_record()
        seed, stream, period, step = self._state.tolist()  # after adopting a sibling's state: its stream
        if self._pool is not None:
            entry.members.setdefault((id(self._pool), (seed, period, step, self.rank, self.dist)), self._state)
        window = step // period if period else 0
        key = (seed, stream, self.rank, self.dist, x2.dtype)
        cached = entry.sketches.get(key)
        if cached is not None and cached[0] == window:
            return cached[1]
        z = _ext.ops.sketch(x2, self.rank, self._state, self.dist)
        entry.sketches[key] = (window, z)  # one z per sketch: an input reused across windows keeps only the latest
        return z

    def _plain_forward(self, x):
        if not self.transposed:
            return F.linear(x, self.weight, self.bias)
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.mm(x2, self.weight) if self.bias is None else torch.addmm(self.bias, x2, self.weight)
        return y.view(x.shape[:-1] + (self.out_features,))

    def forward(self, x):
        if self.weight.requires_grad:
            raise CompactError("compact: CompactLinear.weight must not require grad: its gradient is formed in "
                               "compressed form in weight_ghat.grad (was requires_grad_() called on the model?)")
        if not (torch.is_grad_enabled() and self.weight_ghat.requires_grad):
            return self._plain_forward(x)
        if x.dim() < 1 or x.shape[-1] != self.in_features:
            raise CompactError(f"compact: CompactLinear: input has shape {tuple(x.shape)}, expected (..., "
                               f"in_features = {self.in_features})")
        if x.device != self.weight.device:
            raise CompactError(f"compact: CompactLinear: input is on {x.device} but the weight is on "
                               f"{self.weight.device}")
        amp = autocast_dtype(x.device.type) if x.dtype != torch.float64 else None
        compute_dtype = amp or x.dtype
        if amp is None and x.dtype != self.weight.dtype:
            raise CompactError(f"compact: CompactLinear: input has dtype {x.dtype} but the weight has dtype "
                               f"{self.weight.dtype}")
        x2 = x.reshape(-1, self.in_features)
        if _is_compiling():
            # Traced by torch.compile: no Python-side cache. Siblings share one state tensor, so their sketch nodes
            # have identical inputs and the graph's common-subexpression elimination keeps one z.
            if not self._sharing_decided:
                raise CompactError("compact: CompactLinear: compress(share_inputs=True) decides which layers share "
                                   "a sketch on the first forward with autograd, which must run eagerly: run one "
                                   "training forward before torch.compile, or compress with share_inputs=False")
            with torch.no_grad():
                z = _ext.ops.sketch(x2.to(compute_dtype), self.rank, self._state, self.dist)
        else:
            _register_owner(self)  # cheap; keeps the owner map right after copies that bypassed __init__
            with torch.no_grad():
                z = self._sketch(x, x2.to(compute_dtype))
        return _CompactLinearFunction.apply(x, z, self.weight, self.bias, self.weight_ghat, self.transposed)

    # -- the optimizer's update ------------------------------------------------------------------------------------

    @torch.no_grad()
    def _apply_update(self, update, alpha, beta):
        """W <- beta W + alpha N P^T for N = ``update`` (m x r, fp32 or fp64), P of the coming step.

        Straight into W through compact's unsketch_grad (no m x n temporary) where its backend takes W's dtype and
        layout: float32/float64 on the CPU; float32, float16, bfloat16 on CUDA, N rounded to W's type first as
        compact's CUDA optimizer does. Otherwise (16-bit W on the CPU, the transposed Conv1D weight) through blocks
        of about UPDATE_BLOCK_ELEMENTS entries: each block of rows of W is widened to fp32 (fp64), updated by
        unsketch_grad with the unrounded N and rounded back once. Under FSDP2 W and N are row shards of the same rows,
        and each rank updates its own (P does not depend on the row)."""
        w = _local(self.weight)
        n = _local(update)
        # A meta tensor (compact_torch.plan's trace) takes the CPU's path, whose memory the plan reproduces.
        direct = (w.dtype in (torch.float32, torch.float64) if w.device.type in ("cpu", "meta")
                  else w.dtype in (torch.float32, torch.float16, torch.bfloat16))
        if direct and not self.transposed:
            _ext.ops.unsketch_grad_(w, n if n.dtype == w.dtype else n.to(w.dtype), float(alpha), float(beta),
                                    self._state, self.dist)
            return
        compute = torch.float64 if w.dtype == torch.float64 else torch.float32
        logical = w.t() if self.transposed else w  # m x n
        rows = max(1, UPDATE_BLOCK_ELEMENTS // self.in_features)
        for i in range(0, logical.shape[0], rows):
            block = logical[i:i + rows]
            tmp = block.to(compute).contiguous()
            _ext.ops.unsketch_grad_(tmp, n[i:i + rows].to(compute), float(alpha), float(beta), self._state, self.dist)
            block.copy_(tmp)  # bumps W's version counter (a view shares it)

    # -- module plumbing -------------------------------------------------------------------------------------------

    def _reset_ghat(self):
        """Points weight_ghat back at a zero-stride zero of the gradient dtype on the weight's device (no memory).
        A sharded placeholder (FSDP2's DTensor) is left alone."""
        if hasattr(self.weight_ghat, "to_local"):
            return
        self.weight_ghat.data = self._ghat_value()
        _register_owner(self)

    def _apply(self, fn, *args, **kwargs):
        # .to()/.cuda()/.half() turn the zero-stride placeholder into a dense m x r copy: point it back.
        result = super()._apply(fn, *args, **kwargs)
        self._reset_ghat()
        return result

    def __setstate__(self, state):
        # copy.deepcopy and pickle: the copy's placeholder was cloned densely and is not yet in the owner map.
        super().__setstate__(state)
        self._reset_ghat()

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination.pop(prefix + "weight_ghat", None)  # no information: the state dict is the plain layer's

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # The placeholder is not saved and cannot be written (zero-stride): load everything else, keeping its order.
        params = list(self._parameters.items())
        self._parameters.pop("weight_ghat")
        try:
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                          error_msgs)
        finally:
            self._parameters.clear()
            self._parameters.update(params)

    def extra_repr(self):
        layout = ", layout=conv1d" if self.transposed else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"rank={self.rank}, dist={self.dist!r}, seed={self.seed}, stream={self.stream}, "
                f"period={self.period}{layout}")


def compact_layers(module):
    """Every CompactLinear in ``module`` (itself included), in module order."""
    return [m for m in module.modules() if isinstance(m, CompactLinear)]
