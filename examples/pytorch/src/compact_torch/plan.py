# SPDX-License-Identifier: MIT
"""Will it fit? The peak training memory of a Hugging Face model, planned without allocating it.

    python -m compact_torch.plan --model llama-7b --batch 16 --seq 256 --dtype bf16 \\
        --method full,ckpt,compact,compact-all-ckpt,compact-all-8bit-lw-ckpt --rank 0.125

``plan()`` runs the *real* training step of a method -- model construction, ``compress()``, forward, loss, backward,
optimizer step, after a first step at batch 1 has created the optimizer state, as ``peer_memory.py`` measures it --
with the model and batch on PyTorch's meta device, where every operation computes shapes and no data. Meta storages
are counted by compact_torch.memory.CpuMemoryTracker(meta=True): its allocator hook gives each meta storage a
placeholder address and logs the bytes it would hold, in the same log as the CPU's, so the step is classified exactly
as the tracker classifies a CPU step (weights, gradients, optimizer state, activations = what autograd saved,
temporaries = the rest) and the phase of the peak (forward, backward, optimizer) is found the same way. A 7B model
costs seconds of CPU time and no memory to speak of.

What the plan counts, and where it can differ from a CPU measurement of the same step:

- A meta tensor takes the CPU's code paths (compact's codec and update branch on ``device.type`` and treat meta as
  the CPU; PyTorch's meta kernels follow the CPU's; scaled_dot_product_attention, for which the dispatcher has no
  meta choice, runs the kernel the CPU picks: ``_meta_sdpa``), so the plan is the CPU step's bytes. The tests check
  that it equals the tracker's measurement byte for byte, category by category, on small LLaMA and RoBERTa models
  for every traced method (tests/test_plan.py), both counted at the level of kernel calls (``op_level``): what a
  kernel allocates and frees within one call is left out, because it depends on the implementation (a CPU kernel's
  own scratch, the intermediates of a meta kernel written in Python). The tracker's own peak can therefore be
  higher than the plan, by at most the scratch of the kernel running at its peak (``plan(device="cpu")`` reports
  which and how much: 0 to 64 KiB on the tested models, e.g. a bf16 operand widened for an ``add_`` into an fp32
  tensor, or the P panels of compact's CPU sketch). Where the CPU's kernel returns other dtypes than its meta
  kernel, ``_CPU_OUTPUT_DTYPES`` converts (layer norm's mean and rstd: the input's 16-bit dtype on the CPU).
- Checkpointing keeps the CPU's RNG state across a recomputation of CPU inputs but not of meta ones: the planner
  has it treat meta inputs as CPU ones.
- Data-dependent Python branches (``if mask.all():``) are answered by ``_OpLog``: True, the answer for an
  unpadded batch (no padding, no packed sequences), which is what the plan models. The float dropout masks that
  compact's codec stores as bits on the CPU are recognised by their origin (``bernoulli_``).
- On a GPU, kernels differ in a few places (scaled_dot_product_attention's flash kernels save a log-sum-exp of
  batch x heads x seq fp32 like the CPU's; dropout saves a bool mask instead of a float one; layer norm saves fp32
  statistics; torch's AdamW defaults to foreach, whose temporaries are lists of parameter-sized tensors), and the
  caching allocator adds fragmentation on top of the allocated bytes: measure it there with ``finetune_memory.py
  --device cuda`` or ``gpu_memory.sh``.
- compact's CPU backend mallocs bounded scratch outside torch (``memory.compact_scratch_bytes``): not in the totals.

Optimizer configurations are pluggable (``OPTIMIZERS``). Layer-wise updates and 8-bit moments are traced where the
optimizer has them: ``+layerwise`` and ``+8bit`` on a method whose optimizer is CompressedAdamW run
``CompressedAdamW(layerwise=True)`` and ``CompressedAdamW(moments="8bit", full_rank_moments="8bit")``, as the methods
``compact-all-lw*`` and ``compact-all-8bit*`` do (the 8-bit step, ``torch.ops.compact.adamw8_step``, runs its fake
kernel on meta tensors: in place, nothing allocated, as on the CPU). Only torch's AdamW (``full``, ``ckpt``, ``lora``)
has neither in code: there the modifiers are *modelled* from the traced step's log by ``modelled()`` and labelled so:
``+8bit`` (every floating optimizer state tensor of more than one value held as 1 byte per value plus a 4-byte scale
per block of 256 values) and ``+layerwise`` (each gradient applied and freed as soon as it is formed: at most one
gradient alive).
"""
import argparse
import contextlib
import dataclasses
import gc
import json
import math
import os
import sys

import torch

REPORTED = ("weights", "gradients", "optimizer", "activations", "temporaries")

# Built-in shapes (the published configs' sizes; weights are never loaded).
MODELS = {
    "llama-7b": dict(model_type="llama", hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                     num_attention_heads=32, num_key_value_heads=32, vocab_size=32000, max_position_embeddings=2048,
                     rms_norm_eps=1e-6, tie_word_embeddings=False),
    "llama3-8b": dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192,
                      rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False),
    "mistral-7b": dict(model_type="mistral", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
                       max_position_embeddings=32768, rms_norm_eps=1e-5, sliding_window=None,
                       tie_word_embeddings=False),
    "roberta-base": dict(model_type="roberta", vocab_size=50265, hidden_size=768, num_hidden_layers=12,
                         num_attention_heads=12, intermediate_size=3072, max_position_embeddings=514,
                         type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                         num_labels=2, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.0),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

class PlanError(ValueError):
    """A bad argument to the planner (unknown model or method, a size out of range) or a step it cannot trace."""


# -- optimizer setups: name -> function(model, lr) -> optimizer ------------------------------------------------------

def _adamw(model, lr):
    # foreach=False: the per-parameter loop (torch's default on the CPU; CUDA's default foreach keeps whole lists of
    # parameter-sized temporaries).
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0,
                             foreach=False)


def _compressed_adamw(model, lr, layerwise=False, eight_bit=False):
    from .optim import CompressedAdamW

    kw = {"layerwise": True} if layerwise else {}
    if eight_bit:  # 8-bit moments for the compressed layers and every other parameter (peer_memory.py's -8bit)
        kw.update(moments="8bit", full_rank_moments="8bit")
    return CompressedAdamW(model.parameters(), lr=lr, weight_decay=0.0, **kw)


def _compressed_adamw_layerwise(model, lr):
    # Each parameter stepped inside backward and its gradient freed at once (compact_torch.layerwise).
    return _compressed_adamw(model, lr, layerwise=True)


def _compressed_adamw_8bit(model, lr):
    # torch.ops.compact.adamw8_step on 8-bit moments (its fake kernel is its meta kernel: it writes in place and
    # allocates nothing, on the meta device as on the CPU, where a 16-bit gradient is widened inside the call).
    return _compressed_adamw(model, lr, eight_bit=True)


def _compressed_adamw_8bit_layerwise(model, lr):
    return _compressed_adamw(model, lr, layerwise=True, eight_bit=True)


OPTIMIZERS = {"adamw": _adamw, "compressed-adamw": _compressed_adamw,
              "compressed-adamw-layerwise": _compressed_adamw_layerwise,
              "compressed-adamw-8bit": _compressed_adamw_8bit,
              "compressed-adamw-8bit-layerwise": _compressed_adamw_8bit_layerwise}
# An optimizer's traced form with a modifier: "+layerwise" / "+8bit" on a method whose optimizer has one is traced,
# not modelled.
TRACED_FORM = {
    "layerwise": {"compressed-adamw": "compressed-adamw-layerwise",
                  "compressed-adamw-8bit": "compressed-adamw-8bit-layerwise"},
    "8bit": {"compressed-adamw": "compressed-adamw-8bit",
             "compressed-adamw-layerwise": "compressed-adamw-8bit-layerwise"},
}
# Optimizers that already have a modifier (a method of theirs with it again is refused).
HAS_MODIFIER = {"layerwise": ("compressed-adamw-layerwise", "compressed-adamw-8bit-layerwise"),
                "8bit": ("compressed-adamw-8bit", "compressed-adamw-8bit-layerwise")}

# The modifiers a method name can carry. Where its optimizer has no traced form (torch.optim.AdamW: the methods full,
# ckpt, lora) the modifier is modelled (see modelled()).
MODIFIERS = ("8bit", "layerwise")


@dataclasses.dataclass(frozen=True)
class Method:
    """One training configuration: gradient checkpointing, compress()'s arguments (None: no compression), the
    optimizer setup (a key of OPTIMIZERS)."""
    ckpt: bool = False
    compress: dict = None
    optimizer: str = "adamw"
    lora: bool = False
    about: str = ""


_COMPACT = dict(rank=0.25, dist="srht", period=200)
LORA_RANK = 16  # peer_memory.py's compact configuration
_ALL = dict(_COMPACT, saved="all")
METHODS = {
    "full": Method(about="torch.optim.AdamW, full rank"),
    "ckpt": Method(ckpt=True, about="full + gradient checkpointing (non-reentrant)"),
    "compact": Method(compress=_COMPACT, optimizer="compressed-adamw",
                      about="compress(): the paper's layers, r = n/4, SRHT; CompressedAdamW"),
    "compact-ckpt": Method(ckpt=True, compress=_COMPACT, optimizer="compressed-adamw", about="compact + checkpointing"),
    "compact-linears": Method(compress=dict(_COMPACT, saved="linears"), optimizer="compressed-adamw",
                              about="compress(saved=\"linears\"): CompAct on every linear of a block"),
    "compact-loss": Method(compress=dict(_COMPACT, saved="loss"), optimizer="compressed-adamw",
                           about="compress(saved=\"loss\"): the paper's layers, the LM head and loss in chunks"),
    "compact-activations": Method(compress=dict(_COMPACT, saved="activations"), optimizer="compressed-adamw",
                                  about="compress(saved=\"activations\"): the paper's layers, the rest autograd "
                                        "saves in the 8-bit codec"),
    "compact-all": Method(compress=_ALL, optimizer="compressed-adamw",
                          about="compress(saved=\"all\"): every linear, chunked LM head and loss, 8-bit saved tensors"),
    "compact-all-exact": Method(compress=dict(_ALL, attention="exact"), optimizer="compressed-adamw",
                                about="compact-all with attention=\"exact\""),
    "compact-all-ckpt": Method(ckpt=True, compress=_ALL, optimizer="compressed-adamw",
                               about="compact-all + checkpointing"),
    "compact-all-lw": Method(compress=_ALL, optimizer="compressed-adamw-layerwise",
                             about="compact-all with layer-wise updates (CompressedAdamW(layerwise=True))"),
    "compact-all-lw-ckpt": Method(ckpt=True, compress=_ALL, optimizer="compressed-adamw-layerwise",
                                  about="compact-all-lw + checkpointing"),
    "compact-all-8bit": Method(compress=_ALL, optimizer="compressed-adamw-8bit",
                               about="compact-all + CompressedAdamW(moments=\"8bit\", full_rank_moments=\"8bit\")"),
    "compact-all-8bit-ckpt": Method(ckpt=True, compress=_ALL, optimizer="compressed-adamw-8bit",
                                    about="compact-all-8bit + checkpointing"),
    "compact-all-8bit-lw": Method(compress=_ALL, optimizer="compressed-adamw-8bit-layerwise",
                                  about="compact-all with 8-bit moments and layer-wise updates"),
    "compact-all-8bit-lw-ckpt": Method(ckpt=True, compress=_ALL, optimizer="compressed-adamw-8bit-layerwise",
                                       about="compact-all-8bit-lw + checkpointing"),
    "lora": Method(lora=True, about=f"PEFT LoRA, rank {LORA_RANK}, on the attention and MLP linears; AdamW on the "
                                    "adapters (needs peft)"),
    "lora-compact": Method(lora=True, compress=_COMPACT, optimizer="compressed-adamw",
                           about="LoRA + compress(peft_model): each adapter's A stores a sketch of its input"),
}


def parse_method(name):
    """'compact-all-ckpt+8bit+layerwise' -> (base method name, Method, modifiers tuple); PlanError if unknown."""
    if not isinstance(name, str) or not name:
        raise PlanError(f"compact_torch.plan: method = {name!r} must be a non-empty string")
    base, *mods = name.split("+")
    if base not in METHODS:
        raise PlanError(f"compact_torch.plan: unknown method {base!r} (in {name!r}); methods: "
                        f"{', '.join(METHODS)}, each optionally followed by +8bit and/or +layerwise")
    for m in mods:
        if m not in MODIFIERS:
            raise PlanError(f"compact_torch.plan: unknown modifier {m!r} in method {name!r}; modifiers: "
                            f"{', '.join(MODIFIERS)}")
    if len(set(mods)) != len(mods):
        raise PlanError(f"compact_torch.plan: method {name!r} repeats a modifier")
    for m in mods:
        if METHODS[base].optimizer in HAS_MODIFIER[m]:
            raise PlanError(f"compact_torch.plan: method {name!r}: {base!r} already has {m} (its optimizer is "
                            f"{METHODS[base].optimizer!r})")
    return base, METHODS[base], tuple(sorted(mods))


def traced_form(name, spec, mods):
    """(spec, mods) with each modifier that the method's optimizer has in code applied to it (traced), the rest left
    to modelled() (parse_method has refused a modifier the method already has, e.g. compact-all-lw+layerwise)."""
    for m in ("8bit", "layerwise"):  # 8-bit first: compressed-adamw -> -8bit -> -8bit-layerwise
        if m not in mods:
            continue
        if spec.optimizer in TRACED_FORM[m]:
            spec = dataclasses.replace(spec, optimizer=TRACED_FORM[m][spec.optimizer])
            mods = tuple(x for x in mods if x != m)
    return spec, mods


# -- models -------------------------------------------------------------------------------------------------------

def load_config(model):
    """A transformers config from a built-in name (MODELS) or the path of a config.json."""
    import transformers

    if isinstance(model, transformers.PretrainedConfig):
        return model
    if not isinstance(model, str):
        raise PlanError(f"compact_torch.plan: model = {model!r} must be one of {', '.join(MODELS)} or the path of a "
                        "config.json")
    if model in MODELS:
        shape = dict(MODELS[model])
        return transformers.AutoConfig.for_model(shape.pop("model_type"), **shape)
    if not (model.endswith(".json") or os.path.isdir(model)):
        raise PlanError(f"compact_torch.plan: unknown model {model!r}: one of {', '.join(MODELS)} or the path of a "
                        "config.json")
    if not os.path.exists(model):
        raise PlanError(f"compact_torch.plan: model config {model!r} does not exist")
    try:
        return transformers.AutoConfig.from_pretrained(model)
    except (OSError, ValueError, KeyError) as e:
        raise PlanError(f"compact_torch.plan: cannot read the model config {model!r}: {e}") from e


def is_causal_lm(config):
    return config.model_type not in ("roberta", "bert", "xlm-roberta")


def build_model(config, device, dtype):
    """The model of ``config`` for training (attention through SDPA, no KV cache, no dropout in attention unless the
    config has it), on ``device`` ("meta": no memory), its weights in ``dtype``."""
    import transformers

    config = config.__class__.from_dict(config.to_dict())  # a copy: the caller's config is not changed
    config._attn_implementation = "sdpa"
    config.use_cache = False
    if is_causal_lm(config):
        cls = transformers.AutoModelForCausalLM
    else:
        cls = transformers.AutoModelForSequenceClassification
        if getattr(config, "num_labels", None) is None:
            config.num_labels = 2
    # transformers 5 names the argument dtype (torch_dtype is deprecated there)
    kw = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    with torch.device(device):
        model = cls.from_config(config, **{kw: dtype})
    return model.train()


def make_batch(config, b, s, device):
    """An unpadded batch: input ids and labels (next tokens for a causal LM, one label per sequence otherwise)."""
    if device == "meta":
        ids = torch.empty(b, s, dtype=torch.int64, device=device)
        labels = ids if is_causal_lm(config) else torch.empty(b, dtype=torch.int64, device=device)
    else:
        g = torch.Generator().manual_seed(b * 1000 + s)
        ids = torch.randint(3, config.vocab_size, (b, s), generator=g)
        labels = ids.clone() if is_causal_lm(config) else torch.randint(0, 2, (b,), generator=g)
    batch = {"input_ids": ids, "labels": labels}
    if not is_causal_lm(config):
        batch["attention_mask"] = (torch.empty if device == "meta" else torch.ones)(b, s, dtype=torch.int64,
                                                                                     device=device)
    return batch


def setup(method, model, lr=1e-3):
    """Applies ``method`` (a Method) to ``model``; returns (the model to train, its optimizer): PEFT wraps the model
    it is given."""
    if method.ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if method.lora:
        try:
            import peft
        except ImportError as e:
            raise PlanError("compact_torch.plan: the LoRA methods need peft (pip install peft)") from e
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] \
            if is_causal_lm(model.config) else ["query", "key", "value", "dense"]
        model = peft.get_peft_model(model, peft.LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, lora_dropout=0.0,
                                                           target_modules=targets))
    if method.compress is not None:
        from .compress import compress

        compress(model, **method.compress)
    return model, OPTIMIZERS[method.optimizer](model, lr)


# -- the meta trace -------------------------------------------------------------------------------------------------

def _ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


class _OpLog:
    """A TorchDispatchMode (built on first use) that notes the allocator's sequence numbers around every kernel call
    (``intervals``: (before, after) pairs, in order), so that allocations made and freed inside one call -- a kernel's
    own scratch on the CPU, the intermediates of a meta kernel written in Python -- can be told apart from the
    tensors the step's operations produce (``op_level``). On the meta device it also answers data-dependent
    questions (a Python ``bool()``/``item()`` of a meta tensor: True for a bool, the answer of an unpadded batch) and
    remembers which meta storages hold dropout masks (written by ``bernoulli_``; a new storage at the same address
    forgets it)."""

    @staticmethod
    def make(meta):
        from torch.utils._python_dispatch import TorchDispatchMode

        from . import _memtrack

        seq = _memtrack.seq
        bernoulli = (torch.ops.aten.bernoulli_.float, torch.ops.aten.bernoulli_.Tensor)

        class OpLog(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.masks = set()
                self.intervals = []
                self.kernels = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if meta and func is torch.ops.aten._local_scalar_dense.default and args[0].device.type == "meta":
                    if args[0].dtype == torch.bool:
                        return True
                    raise PlanError(f"compact_torch.plan: the step reads the value of a {args[0].dtype} meta tensor "
                                    "(.item()): a data-dependent branch the planner cannot answer")
                before = seq()
                out = func(*args, **kwargs)
                if meta and func in _CPU_OUTPUT_DTYPES and args[0].device.type == "meta":
                    out = _CPU_OUTPUT_DTYPES[func](args, out)  # inside the call: the meta kernel's outputs are freed
                self.intervals.append((before, seq()))
                self.kernels.append(func)
                if meta:
                    inputs = {_ptr(a) for a in args if torch.is_tensor(a) and a.device.type == "meta"}
                    for o in (out if isinstance(out, (tuple, list)) else (out,)):
                        if torch.is_tensor(o) and o.device.type == "meta":
                            p = _ptr(o)
                            if func in bernoulli:
                                self.masks.add(p)
                            elif p not in inputs:
                                self.masks.discard(p)
                return out

        return OpLog()


def _layer_norm_stats_in_input_dtype(args, out):
    # The CPU's native_layer_norm returns mean and rstd in a 16-bit input's dtype (its meta kernel, like CUDA's, in
    # fp32); layer norm's backward saves them.
    x = args[0]
    if x.dtype not in (torch.bfloat16, torch.float16):
        return out
    return out[0], out[1].to(x.dtype), out[2].to(x.dtype)


# Kernels whose CPU implementation returns outputs of other dtypes than their meta kernel: {aten op: fix(args, out)}.
_CPU_OUTPUT_DTYPES = {torch.ops.aten.native_layer_norm.default: _layer_norm_stats_in_input_dtype}


def op_level(records, intervals):
    """The rows of a tracker log (ptr, bytes, alloc_seq, free_seq) without the allocations made and freed inside one
    kernel call (``intervals`` from _OpLog): what the plan counts (a kernel's internal scratch depends on the kernel
    that runs, and a meta kernel's on how PyTorch wrote it)."""
    import bisect

    starts = [b for b, _ in intervals]
    keep = []
    for k, (_, _, a, f) in enumerate(records.tolist()):
        if f >= 0:
            i = bisect.bisect_left(starts, a) - 1  # the last call that began before this allocation
            if i >= 0 and a <= intervals[i][1] and f <= intervals[i][1]:
                continue
        keep.append(k)
    return records[keep]


_SDP_CHOICES = {}


def _cpu_sdp_choice(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """The attention kernel the CPU picks for these arguments (meta's own choice is always the math path, which
    saves the batch x heads x seq x seq probabilities that the CPU's flash kernel does not). Asked of the CPU with
    one-token tensors of the same dtype, heads, head size and mask dtype, once per such key: the first (batch 1,
    untracked) step fills the cache, so the measured step allocates nothing here."""
    heads = lambda t: t.shape[-3] if t.dim() >= 3 else None  # noqa: E731 - not the batch: one entry per model
    k = (query.dtype, query.dim(), heads(query), query.shape[-1], heads(key), key.shape[-1], value.shape[-1],
         None if attn_mask is None else (attn_mask.dtype, attn_mask.dim()), float(dropout_p), bool(is_causal), scale,
         bool(enable_gqa), query.requires_grad or key.requires_grad or value.requires_grad)
    if k not in _SDP_CHOICES:
        def small(t):
            shape = (1,) * (t.dim() - 3) + (t.shape[-3] if t.dim() >= 3 else 1, 1, t.shape[-1]) if t.dim() >= 3 \
                else (1, t.shape[-1])
            return torch.zeros(shape[-t.dim():], dtype=t.dtype, requires_grad=k[-1] and t.is_floating_point())

        mask = None if attn_mask is None else torch.zeros((1,) * attn_mask.dim(), dtype=attn_mask.dtype)
        _SDP_CHOICES[k] = torch._fused_sdp_choice(small(query), small(key), small(value), attn_mask=mask,
                                                  dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                                  enable_gqa=enable_gqa)
    return _SDP_CHOICES[k]


def _meta_sdpa(sdpa):
    """scaled_dot_product_attention that runs meta tensors through the kernel the CPU picks (PyTorch's dispatcher has
    no kernel choice for meta and always takes the math path, which saves the batch x heads x seq x seq
    probabilities that the CPU's flash kernel does not). Installed as torch.nn.functional's attribute during a meta
    step (a TorchFunctionMode would not see checkpointing's recomputation)."""

    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if query.device.type == "meta" and _cpu_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                           enable_gqa) == 1:  # sdp::SDPBackend::flash_attention
            if attn_mask is not None and attn_mask.dtype == torch.bool:
                raise PlanError("compact_torch.plan: a boolean attention mask on the CPU's flash attention is not "
                                "modelled (an unpadded batch has none)")
            return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]
        return sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                    enable_gqa=enable_gqa)

    return attention


@contextlib.contextmanager
def _meta_step_context(oplog):
    """The CPU's attention kernel choice and checkpointing's CPU device type; compact's codec told which meta tensors
    are dropout masks."""
    from . import saved

    original = saved.SavedCodec._two_valued

    def two_valued(t):
        if t.device.type == "meta":
            return 1.0 if _ptr(t) in oplog.masks else None  # the value only sizes a 1-element tensor
        return original(t)

    import torch.utils.checkpoint as checkpoint

    infer = checkpoint._infer_device_type

    def infer_device_type(*args):
        # Checkpointing treats meta inputs as a device of their own and then keeps no CPU RNG state across the
        # recomputation (torch.random.fork_rng does nothing for "meta"); CPU inputs give torch's default device type.
        found = infer(*args)
        return checkpoint.DefaultDeviceType.get_device_type() if found == "meta" else found

    sdpa = torch.nn.functional.scaled_dot_product_attention
    saved.SavedCodec._two_valued = staticmethod(two_valued)
    torch.nn.functional.scaled_dot_product_attention = _meta_sdpa(sdpa)
    checkpoint._infer_device_type = infer_device_type
    try:
        yield
    finally:
        saved.SavedCodec._two_valued = staticmethod(original)
        torch.nn.functional.scaled_dot_product_attention = sdpa
        checkpoint._infer_device_type = infer


def _require_torch():
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 1):
        raise PlanError(f"compact_torch.plan needs torch >= 2.1 (meta kernels for the training step, "
                        f"TorchDispatchMode); this is torch {torch.__version__}")


def _check_sizes(batch, seq):
    for name, v in (("batch", batch), ("seq", seq)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise PlanError(f"compact_torch.plan: {name} = {v!r} must be a positive integer")


def plan(model, batch, seq, dtype="fp32", method="full", rank=None, lr=1e-3, device="meta"):
    """The peak training memory of one optimizer step of ``model`` at ``batch`` x ``seq`` tokens, weights in
    ``dtype`` ("fp32" or "bf16"), trained by ``method`` (a key of METHODS, optionally with "+8bit"/"+layerwise");
    ``rank``: compress()'s rank for the compact methods (default: the method's, 0.25).

    ``model``: a key of MODELS, the path of a config.json, or a transformers config. ``device="meta"`` plans
    (nothing allocated); ``device="cpu"`` runs the same step for real under the tracker (the reference the tests
    compare with; small models only). Returns a dict: the tracker's categories in bytes ("weights", "gradients",
    "optimizer", "activations", "temporaries"), "total" (their sum, the peak's training bytes), "phase" of the
    peak, "kind" ("traced", or "modelled 8bit", "modelled layerwise", "modelled 8bit+layerwise": the modifiers
    modelled on the traced step), "phase_peaks" (the highest total within "forward", "backward" and "optimizer";
    None when modelled), "traced" (the traced step's report when modelled) and the arguments. Installs the
    tracker's allocator hooks for the rest of the process (see memory.py).
    """
    _require_torch()
    _check_sizes(batch, seq)
    if dtype not in DTYPES:
        raise PlanError(f"compact_torch.plan: dtype = {dtype!r} must be one of {', '.join(DTYPES)}")
    if device not in ("meta", "cpu"):
        raise PlanError(f"compact_torch.plan: device = {device!r} must be 'meta' (plan) or 'cpu' (measure)")
    _, spec, mods = parse_method(method)
    spec, mods = traced_form(method, spec, mods)
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, (int, float)) or not rank > 0:
            raise PlanError(f"compact_torch.plan: rank = {rank!r} must be a number > 0 (< 1: a fraction of each "
                            "layer's in_features)")
        if spec.compress is not None:
            spec = dataclasses.replace(spec, compress=dict(spec.compress, rank=rank))
    config = load_config(model)
    from . import memory

    tracker = memory.CpuMemoryTracker(meta=True)  # before the model: every tensor of the step is seen
    torch.manual_seed(0)
    net, opt = setup(spec, build_model(config, device, DTYPES[dtype]), lr)
    meta = device == "meta"
    oplog = _OpLog.make(meta)

    def ctx():
        stack = contextlib.ExitStack()
        if meta:
            stack.enter_context(_meta_step_context(oplog))
        stack.enter_context(oplog)
        return stack

    def step(b):
        loss = net(**make_batch(config, b, seq, device)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    with ctx():
        step(1)  # the optimizer state exists from the first step on
    data = make_batch(config, batch, seq, device)
    # No garbage collection inside the step: freeing an earlier object's tensors there would move the peak of the
    # live bytes (which include them) away from the step's own peak.
    gc.collect()
    gc.disable()
    rss = _rss_reset() if not meta else None
    live_at_start = tracker.live_bytes()
    try:
        with ctx():
            raw, marks = memory.tracked_step(tracker, lambda: net(**data).loss, net, opt)
        hwm = _rss_peak() if rss is not None else None
    finally:
        gc.enable()
    records = op_level(tracker.records, oplog.intervals)
    report = memory.analyze(records, tracker.start_seq, memory.model_tensors(net, opt), tracker.saved_records)
    phase = memory.peak_phase(report["peak_seq"], marks)
    phase_peaks = _phase_peaks(records, tracker.start_seq, memory.model_tensors(net, opt), tracker.saved_records,
                               marks)
    out = {k: report[k] for k in REPORTED}
    out.update(total=report["total"], phase=phase, phase_peaks=phase_peaks, kind="traced",
               model=model if isinstance(model, str) else config.model_type, batch=batch, seq=seq, dtype=dtype,
               method=method, device=device,
               rank=spec.compress["rank"] if spec.compress is not None else None)
    if not meta:  # the tracker's own peak, kernels' scratch included (see op_level)
        out["tracker_total"] = raw["total"]
        out["tracker"] = {k: raw[k] for k in REPORTED}
        out.update(_scratch_at(tracker.records, oplog, raw["peak_seq"]))
        # The step's rise above its start: tracker (all torch CPU tensors) and resident memory (peak RSS).
        out["tracker_rise"] = raw["peak"] - live_at_start
        out["rss_rise"] = hwm - rss if rss is not None and hwm is not None else None
    if mods:
        traced = dict(out)
        out.update(modelled(records, tracker.start_seq, tracker.saved_records, report, net, opt, marks, mods))
        out["kind"] = "modelled " + "+".join(mods)  # what is modelled; the rest of the step is traced
        out["phase_peaks"] = None  # modelled() models the peak only (the traced step's are in "traced")
        out["traced"] = traced
    return out


def _proc_status(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _rss_reset():
    """Resets the process's peak RSS (Linux: clear_refs 5) and returns its RSS now, or None where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _proc_status("VmRSS")


def _rss_peak():
    return _proc_status("VmHWM")


def _scratch_at(records, oplog, at):
    """The kernel running at sequence number ``at`` and the bytes it allocated and frees within its call that are
    live then (what op_level leaves out at that moment)."""
    import bisect

    i = bisect.bisect_left([b for b, _ in oplog.intervals], at) - 1
    if i < 0 or at > oplog.intervals[i][1]:
        return {"kernel_at_tracker_peak": None, "scratch_at_tracker_peak": 0}
    b, e = oplog.intervals[i]
    scratch = sum(n for _, n, a, f in records.tolist() if b < a <= at and at < f <= e)
    return {"kernel_at_tracker_peak": str(oplog.kernels[i]), "scratch_at_tracker_peak": scratch}


def _phase_peaks(records, start, cats, saved, marks):
    """The highest total (training bytes, as "total") within each phase of the step: {"forward", "backward",
    "optimizer": bytes}, so that the phases that do not hold the peak are compared too."""
    from . import memory

    nbytes, alloc, free = records[:, 1], records[:, 2], records[:, 3]
    new, freed = alloc > start, free >= 0
    seqs = torch.cat([alloc[new], free[freed]])
    order = torch.argsort(seqs)
    seqs = seqs[order]
    live = int(nbytes[~new].sum()) + torch.cumsum(torch.cat([nbytes[new], -nbytes[freed]])[order], 0)
    out, lo = {}, start
    for name in ("forward", "backward", "optimizer"):
        hi = marks[name]
        inside = (seqs > lo) & (seqs <= hi)
        at = lo  # no event in the phase: its level is the one it starts with
        if bool(inside.any()):
            i = int(torch.argmax(live[inside]))
            at = int(seqs[inside][i])
        out[name] = memory.analyze(records, start, cats, saved, at_seq=at)["total"]
        lo = hi
    return out


# -- modelled optimizer variants ------------------------------------------------------------------------------------

def q8_bytes(numel):
    """Bytes of an 8-bit blockwise state tensor of ``numel`` values: 1 byte each and a 4-byte scale per 256."""
    return numel + 4 * math.ceil(numel / 256)


def modelled(records, start, saved, report, model, opt, marks, mods):
    """The traced step's log changed as the modifiers would change it (documented assumptions, not a trace):

    - "8bit": every floating optimizer state tensor of more than one value takes ``q8_bytes(numel)`` instead of its
      bytes; the state is live through the whole step, so the curve drops by the difference everywhere (the 8-bit
      step's own dequantized temporaries are not modelled);
    - "layerwise": each gradient is applied and freed as soon as it is formed, so at most one gradient is alive: the
      curve loses every gradient formed so far, and at the moment a gradient is formed it holds that gradient plus
      the optimizer's temporaries for one parameter (the largest rise seen in the traced optimizer phase, an upper
      bound); the optimizer phase then holds no gradient.

    Returns the categories, total and phase of the modelled peak."""
    from . import memory

    cats = memory.model_tensors(model, opt)
    opt_delta, seen = 0, set()
    if "8bit" in mods:
        for t in cats["optimizer"]:
            p = memory.storage_of(t).data_ptr()
            if p in seen or not t.is_floating_point() or t.numel() <= 1:
                continue
            seen.add(p)
            opt_delta += memory.storage_nbytes(t) - q8_bytes(t.numel())
    if "layerwise" not in mods:  # the curve drops uniformly: same peak moment
        out = {k: report[k] for k in REPORTED}
        out["optimizer"] -= opt_delta
        return dict(out, total=report["total"] - opt_delta, phase=memory.peak_phase(report["peak_seq"], marks))
    ptr, nbytes, alloc, free = (records[:, k].tolist() for k in range(4))
    grad_ptrs = {memory.storage_of(t).data_ptr() for t in cats["gradients"]}
    events = []  # (seq, delta, is a gradient's allocation), in order
    for p, b, a, f in zip(ptr, nbytes, alloc, free):
        if a > start:
            events.append((a, b, f < 0 and p in grad_ptrs))
        if f >= 0:
            events.append((f, -b, False))
    events.sort()
    base = sum(b for b, a in zip(nbytes, alloc) if a <= start)
    # One parameter's update temporaries: the largest rise of live bytes in the traced optimizer phase.
    live, level, opt_temps = base, None, 0
    for s, d, _ in events:
        if s > marks["backward"]:
            level = live if level is None else level
            opt_temps = max(opt_temps, live + d - level)
        live += d
    live, grads, best = base, 0, (base, start, 0)
    for s, d, g in events:
        live += d
        grads += d if g else 0
        value = live - grads + (d + opt_temps if g else 0)
        if value > best[0]:
            best = (value, s, d if g else 0)
    at = memory.analyze(records, start, cats, saved, at_seq=best[1])
    out = {k: at[k] for k in REPORTED}
    out["optimizer"] -= opt_delta
    out["gradients"] = best[2]
    out["temporaries"] += opt_temps if best[2] else 0
    return dict(out, total=sum(out[k] for k in REPORTED), phase=memory.peak_phase(best[1], marks))


# -- the command line -----------------------------------------------------------------------------------------------

def fmt_bytes(b):
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.1f} MiB"


def table(rows, markdown=False):
    """The breakdown of each row (bytes as MiB/GiB) as text or Markdown."""
    measured = any("tracker_total" in r for r in rows)
    head = ["method", *REPORTED, "total", "total (GB)", "peak in", "kind"]
    head += ["tracker total", "step rise: tracker", "step rise: peak RSS"] if measured else []
    body = []
    for r in rows:
        body.append([r["method"], *(fmt_bytes(r[k]) for k in REPORTED), fmt_bytes(r["total"]),
                     f"{r['total'] / 1e9:.2f}", r["phase"], r["kind"]])
        if measured:
            body[-1] += [fmt_bytes(r["tracker_total"]), fmt_bytes(r["tracker_rise"]),
                         fmt_bytes(r["rss_rise"]) if r.get("rss_rise") is not None else "-"]
    if markdown:
        lines = ["| " + " | ".join(head) + " |",
                 "|---|" + "---:|" * len(REPORTED) + "---:|---:|---|---|" + "---:|" * (3 if measured else 0)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    fmt = lambda row: "  ".join(str(x).rjust(w) if i else str(x).ljust(w)  # noqa: E731
                                for i, (x, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt(head)] + [fmt(row) for row in body])


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m compact_torch.plan", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-7b", help=f"{', '.join(MODELS)} or the path of a config.json")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--dtype", default="bf16", help=f"weights' dtype: {', '.join(DTYPES)}")
    p.add_argument("--method", default="full,compact",
                   help="comma-separated: " + ", ".join(METHODS) + "; each optionally +8bit and/or +layerwise "
                        "(traced on CompressedAdamW's methods, modelled on AdamW's: full, ckpt, lora)")
    p.add_argument("--rank", type=float, default=None, help="compress()'s rank for the compact methods (default 0.25)")
    p.add_argument("--markdown", action="store_true", help="a Markdown table (for docs)")
    p.add_argument("--json", action="store_true", help="one JSON object per method")
    p.add_argument("--device", default="meta", choices=["meta", "cpu"],
                   help="meta: plan (default); cpu: run the step for real under the tracker (small models), to check "
                        "the plan against the tracker and peak RSS")
    p.add_argument("--list", action="store_true", help="the methods and models")
    args = p.parse_args(argv)
    if args.list:
        for name, m in METHODS.items():
            print(f"{name:18s} {m.about}")
        print("modifiers: +8bit, +layerwise (traced on CompressedAdamW's methods, modelled on AdamW's);  models: "
              + ", ".join(MODELS))
        return 0
    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    try:
        if not methods:
            raise PlanError("compact_torch.plan: --method is empty")
        for m in methods:
            parse_method(m)
        _check_sizes(args.batch, args.seq)
        if args.dtype not in DTYPES:
            raise PlanError(f"compact_torch.plan: --dtype {args.dtype!r} must be one of {', '.join(DTYPES)}")
        load_config(args.model)
        rows = [plan(args.model, args.batch, args.seq, args.dtype, m, rank=args.rank, device=args.device)
                for m in methods]
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        for r in rows:
            print(json.dumps({k: v for k, v in r.items() if k != "traced"}))
        return 0
    title = (f"{args.model}, batch {args.batch} x seq {args.seq}, {args.dtype} weights "
             + ("(planned on the meta device)" if args.device == "meta" else "(measured on the CPU)"))
    print(("**" + title + "**\n") if args.markdown else title)
    print(table(rows, markdown=args.markdown))
    print("\nAllocated bytes of the CPU code path; a GPU's caching allocator adds fragmentation on top (measure with "
          "finetune_memory.py --device cuda or gpu_memory.sh). 'modelled' rows change the traced step's log as "
          "documented in compact_torch.plan.modelled.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
