# SPDX-License-Identifier: MIT
"""Everything else autograd saves, stored small: a saved-tensor hook pair around a model's backbone that keeps each
large floating-point activation as compact's sr8 codec (blockwise 8-bit with stochastic rounding: one int8 per value
and one fp32 scale per 64 values, unbiased, bit-identical on CPU and CUDA; docs/spec.md) and each large boolean mask
as bits, and leaves everything else as it is.

What is compressed, per tensor autograd saves (the pack hook sees each one once per op that saves it):
- a floating-point tensor of at least ``min_numel`` values that autograd computed (``requires_grad`` and not a leaf):
  the activations of the nonlinearities (SiLU·gate, GELU), the norms' inputs and outputs, the attention's inputs
  and output when ``attention="compressed"``;
- a boolean tensor of at least ``min_numel`` values (dropout masks): as bits, exactly; and on the CPU a
  floating-point tensor computed without autograd whose elements are all 0 or one value v, both occurring (the CPU's
  dropout keeps its mask as floats {0, 1/(1-p)}): as bits and v, exactly;
- nothing else: parameters and buffers (alive anyway: a copy would add bytes), other tensors computed without
  autograd (CompactLinear's sketches z, RoPE's cos and sin, the attention's log-sum-exp), integer tensors (indices),
  and small tensors (a norm's reciprocal RMS), which are kept exactly.
A tensor saved by several ops (a norm's output read by q, k and v) is encoded once and shared. With
``attention="exact"`` nothing saved inside an attention module (a module whose class name ends in "Attention") is
compressed: scaled-dot-product attention's backward recomputes the probabilities from the saved q, k and the exact
log-sum-exp, and 8-bit q and k perturb them (zero-mean per value, but through exp). The default, "compressed",
takes them through the codec too: on the peer benchmark's task the validation loss of the two agrees to 0.02% over
3 seeds (docs/peers.md), and the attention's four tensors are the largest left at long sequences.

The uniforms of the stochastic rounding come from compact's Philox keyed by (seed, stream, window): the seed is the
codec's, the stream the process's rank-independent codec stream, and the window a counter of encodes, so every
tensor of every step draws fresh, reproducible bits.
"""
import math
import threading
import weakref

import torch

from . import _ext

ATTENTION_POLICIES = ("exact", "compressed")
# Callables given every tensor a codec keeps for backward (compact_torch.memory's tracker adds its note while it
# records: the codec's hooks are the innermost pair, so the tracker's own hook does not see those tensors).
OBSERVERS = []
# The codec's Philox stream: far from the projections' streams (compress() numbers those from 0, CompactLinear's
# automatic ones from 2^62), so a codec uniform never repeats a projection's bits.
CODEC_STREAM = (1 << 63) + 0x5A8


class _Encoded:
    """One saved tensor as the codec keeps it: sr8 (q, scales) or bits, with what it takes to rebuild it."""

    __slots__ = ("kind", "q", "scales", "shape", "dtype", "device", "__weakref__")

    def __init__(self, kind, q, scales, shape, dtype, device):
        self.kind, self.q, self.scales, self.shape, self.dtype, self.device = kind, q, scales, shape, dtype, device


def pack_bits(mask):
    """A boolean tensor as uint8, 8 values a byte (little-endian bit order), flattened."""
    flat = mask.reshape(-1)
    pad = (-flat.numel()) % 8
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8, device=flat.device)
    return (flat.view(-1, 8).to(torch.uint8) * weights).sum(1, dtype=torch.uint8)


def unpack_bits(packed, numel):
    shifts = torch.arange(8, dtype=torch.uint8, device=packed.device)
    return ((packed.view(-1, 1) >> shifts) & 1).view(-1)[:numel].bool()


class SavedCodec:
    """The pack/unpack pair (see the module docstring). ``seed``: of the stochastic rounding's uniforms;
    ``min_numel``: the smallest tensor compressed; ``attention``: "exact" or "compressed"."""

    def __init__(self, seed=0, min_numel=1 << 16, attention="compressed"):
        if attention not in ATTENTION_POLICIES:
            raise _ext.CompactError(f"compact: saved activations: argument attention = {attention!r} is not one of "
                                    f"{ATTENTION_POLICIES}")
        if int(min_numel) < 1:
            raise _ext.CompactError(f"compact: saved activations: argument min_numel = {min_numel} must be >= 1")
        self.seed = _ext.to_int64("seed", int(seed))
        self.stream = _ext.to_int64("stream", CODEC_STREAM)
        self.min_numel = int(min_numel)
        self.attention = attention
        self._window = 0
        self._local = threading.local()
        self._shared = {}  # id(tensor) -> (weakref to it, its version, the _Encoded): one record per saved tensor
        self.raw_bytes = 0  # of the tensors encoded (a running total)

    # -- the exact regions (attention modules under attention="exact") ------------------------------------------
    def exact_depth(self):
        return getattr(self._local, "depth", 0)

    def enter_exact(self):
        self._local.depth = self.exact_depth() + 1

    def leave_exact(self):
        self._local.depth = self.exact_depth() - 1

    # -- the hooks --------------------------------------------------------------------------------------------------
    def _eligible(self, t):
        if t.numel() < self.min_numel or self.exact_depth() > 0:
            return None
        if t.dtype == torch.bool:
            return "bits"
        if t.is_floating_point() and t.requires_grad and t.grad_fn is not None:
            if t.dtype in (torch.float32, torch.float16, torch.bfloat16):
                return "sr8"
        # (a meta tensor, compact_torch.plan's trace, takes the CPU's paths here and in _encode)
        if t.is_floating_point() and not t.requires_grad and t.device.type in ("cpu", "meta") and \
                not isinstance(t, torch.nn.Parameter):
            return "mask?"  # the CPU's dropout saves its mask as floats {0, 1/(1-p)}: bits if it is one
        return None

    @staticmethod
    def _two_valued(t):
        """The nonzero value v when every element of t is 0 or v and both occur (a float dropout mask), else None."""
        if float(t.amin()) != 0.0:  # most candidates (sketches, RoPE's cos and sin) stop here, after one pass
            return None
        v = t.amax()
        if float(v) <= 0.0 or not bool(((t == 0) | (t == v)).all()):
            return None
        return float(v)

    @staticmethod
    def _notify(*tensors):
        for f in OBSERVERS:
            for t in tensors:
                if t is not None:
                    f(t)

    def pack(self, t):
        kind = self._eligible(t)
        value = None
        if kind == "mask?":
            with torch.no_grad():
                value = self._two_valued(t)
            kind = "mask" if value is not None else None
        if kind is None:
            self._notify(t)
            return t
        key = id(t)
        found = self._shared.get(key)
        if found is not None:
            ref, version, record = found
            if ref() is t and version == t._version:
                return record
        record = self._encode(t, kind, value)
        shared = self._shared

        def drop(r, key=key):
            entry = shared.get(key)
            if entry is not None and entry[0] is r:
                del shared[key]

        self._shared[key] = (weakref.ref(t, drop), t._version, record)
        self.raw_bytes += t.numel() * t.element_size()
        self._notify(record.q, record.scales)
        return record

    def _encode(self, t, kind, value=None):
        with torch.no_grad():
            if kind == "bits":
                return _Encoded("bits", pack_bits(t), None, t.shape, t.dtype, t.device)
            if kind == "mask":  # exact: the bits of t != 0, and the one nonzero value as a 1-element tensor
                return _Encoded("mask", pack_bits(t != 0), t.new_full((1,), value), t.shape, t.dtype, t.device)
            x = t.detach()
            if x.device.type in ("cpu", "meta") and x.dtype != torch.float32:
                x = x.float()  # compact's CPU codec reads fp32; 16-bit values widen exactly
            window = self._window
            self._window += 1
            q, scales = _ext.ops.sr8_encode(x.reshape(-1), self.seed, self.stream, window)
            return _Encoded("sr8", q, scales, t.shape, t.dtype, t.device)

    def unpack(self, packed):
        if not isinstance(packed, _Encoded):
            return packed
        if packed.kind in ("bits", "mask"):
            bits = unpack_bits(packed.q, math.prod(packed.shape)).view(packed.shape)
            return bits if packed.kind == "bits" else bits.to(packed.dtype) * packed.scales
        out_dtype = packed.dtype if packed.device.type == "cuda" else torch.float32
        x = _ext.ops.sr8_decode(packed.q, packed.scales, out_dtype)
        return x.to(packed.dtype).view(packed.shape)

    def hooks(self):
        """The context manager that applies the pair (torch.autograd.graph.saved_tensors_hooks)."""
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


class _SiluMul(torch.autograd.Function):
    """silu(gate) * up (the SwiGLU of LLaMA-family MLPs) saving gate and up only: backward recomputes silu(gate)
    instead of keeping it, so the MLP saves two tensors of its width instead of three. The forward is the stock
    module's two operations, the backward autograd's formulas (aten's silu_backward), so values and gradients are
    the unfused ones bit for bit."""

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return torch.nn.functional.silu(gate) * up

    @staticmethod
    def backward(ctx, dy):
        gate, up = ctx.saved_tensors
        d_gate = d_up = None
        if ctx.needs_input_grad[1]:
            d_up = dy * torch.nn.functional.silu(gate)
        if ctx.needs_input_grad[0]:
            d_gate = torch.ops.aten.silu_backward(dy * up, gate)
        return d_gate, d_up


def _is_silu(act):
    """torch's nn.SiLU, or transformers' SiLUActivation (ACT2FN["silu"]), which calls F.silu."""
    return isinstance(act, torch.nn.SiLU) or type(act).__name__ == "SiLUActivation"


_SWIGLU_SOURCE = "self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))"
_swiglu_classes = {}


def _is_swiglu_mlp(module):
    """A LLaMA-family MLP (LLaMA, Mistral, Qwen2/3, their MoE experts): gate_proj, up_proj, down_proj, a SiLU act_fn,
    and a forward that is exactly down_proj(act_fn(gate_proj(x)) * up_proj(x)) (checked on its source, once per
    class: a variant that does more is left alone)."""
    if not (all(hasattr(module, n) for n in ("gate_proj", "up_proj", "down_proj"))
            and _is_silu(getattr(module, "act_fn", None))):
        return False
    cls = type(module)
    if cls not in _swiglu_classes:
        import inspect

        try:
            source = inspect.getsource(cls.forward)
        except (OSError, TypeError):
            source = ""
        body = [line.strip() for line in source.splitlines()[1:] if line.strip() and not line.strip().startswith("#")]
        _swiglu_classes[cls] = body in (["return " + _SWIGLU_SOURCE],
                                        ["down_proj = " + _SWIGLU_SOURCE, "return down_proj"])
    return _swiglu_classes[cls]


def _swiglu_forward(module):
    def forward(x, *args, **kwargs):
        return module.down_proj(_SiluMul.apply(module.gate_proj(x), module.up_proj(x)))

    return forward


def _is_attention(module):
    return type(module).__name__.endswith("Attention")


def install(model, codec, backbone=None):
    """Applies ``codec`` to everything autograd saves while ``backbone`` (default: the model's ``base_model``, its
    decoder or encoder stack, so the LM head and loss stay outside) runs forward, by wrapping that module's forward;
    with attention="exact", every attention module's forward runs as an exact region; a LLaMA-family MLP computes
    silu(gate) * up with _SiluMul (silu(gate) recomputed in backward, not saved). Returns a handle whose
    ``remove()`` undoes it."""
    backbone = backbone if backbone is not None else getattr(model, "base_model", model)
    wrapped = []  # the modules whose forward is an instance attribute set here

    def wrap(module, make):
        module.forward = make(module.forward)
        wrapped.append(module)

    def with_hooks(original):
        def forward(*args, **kwargs):
            with codec.hooks():
                return original(*args, **kwargs)

        return forward

    def exact(original):
        def forward(*args, **kwargs):
            codec.enter_exact()
            try:
                return original(*args, **kwargs)
            finally:
                codec.leave_exact()

        return forward

    wrap(backbone, with_hooks)
    for module in backbone.modules():
        if _is_swiglu_mlp(module):
            module.forward = _swiglu_forward(module)
            wrapped.append(module)
    if codec.attention == "exact":
        for module in backbone.modules():
            if module is not backbone and _is_attention(module):
                wrap(module, exact)

    class Handle:
        def remove(self):
            for module in wrapped:
                module.__dict__.pop("forward", None)
            wrapped.clear()

    model._compact_saved = (codec, Handle())
    return model._compact_saved[1]
