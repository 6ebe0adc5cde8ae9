# SPDX-License-Identifier: MIT
"""compress() and decompress(): turn a model's linear layers into CompactLinear in place, and back.

Like a PEFT adapter, the conversion can be undone and leaves checkpoints plain: a compressed model's state dict has
exactly the plain model's keys, and its sketch configuration (which layers, rank, distribution, seed, stream,
period) is JSON: ``sketch_config(model)``, kept in ``model.config.compact_torch`` for Hugging Face models so that
``save_pretrained`` writes it to config.json. ``compress()`` on a model loaded from such a checkpoint restores it.
"""
import fnmatch
import json
import os

from torch import nn

from ._ext import CompactError
from .linear import FIRST_AUTO_STREAM, CompactLinear, _SharePool, compact_layers, is_conv1d, owner_of
from .optim import guard_foreign_optimizers

# The generic default, for models of no known family: every linear layer except attention output projections and
# heads. These patterns (fnmatch on the module's dotted name) name those layers in Hugging Face LLaMA/Mistral/Qwen
# (o_proj, lm_head), GPT-NeoX/OPT-style (out_proj), BERT/RoBERTa (attention.output.dense, classifier, pooler) and
# sequence-classification heads (score).
DEFAULT_EXCLUDE = ("lm_head", "*.lm_head", "*.o_proj", "*.out_proj", "*.attention.output.dense", "score",
                   "classifier", "classifier.*", "*.classifier", "*.classifier.*", "*.pooler.dense", "pooler.dense")

# The paper's choice of layers (Shamshoum et al., NAACL 2025): the linear layers of every transformer block that read
# the block's hidden states -- the attention's query, key and value projections and the whole MLP -- but not the
# attention output projection; embeddings, poolers and task heads stay full rank. Per family, as (include, exclude)
# patterns on Hugging Face's module names:
#   decoders (LLaMA, Mistral, Qwen2/3): q_proj, k_proj, v_proj, gate_proj, up_proj, down_proj (not o_proj);
#   BERT/RoBERTa, the paper's fine-tuning model: attention.self.{query,key,value}, intermediate.dense (the MLP's up
#     projection) and output.dense (its down projection), not attention.output.dense (the attention output);
#   GPT-2 (Conv1D layers): attn.c_attn (q, k, v fused), mlp.c_fc, mlp.c_proj, not attn.c_proj.
_DECODER = (("*.self_attn.q_proj", "*.self_attn.k_proj", "*.self_attn.v_proj", "*.mlp.gate_proj", "*.mlp.up_proj",
             "*.mlp.down_proj"), ())
_ENCODER = (("*.attention.self.query", "*.attention.self.key", "*.attention.self.value", "*.intermediate.dense",
             "*.output.dense"), ("*.attention.output.dense",))
FAMILY_DEFAULTS = {
    "llama": _DECODER, "mistral": _DECODER, "qwen2": _DECODER, "qwen3": _DECODER,
    "bert": _ENCODER, "roberta": _ENCODER, "xlm-roberta": _ENCODER,
    "gpt2": (("*.attn.c_attn", "*.mlp.c_fc", "*.mlp.c_proj"), ()),
}

# saved="all": CompAct on every linear of a block, the attention output projection too.
_DECODER_ALL = (_DECODER[0] + ("*.self_attn.o_proj",), ())
_ENCODER_ALL = (_ENCODER[0] + ("*.attention.output.dense",), ())
FAMILY_ALL_LINEARS = {
    "llama": _DECODER_ALL, "mistral": _DECODER_ALL, "qwen2": _DECODER_ALL, "qwen3": _DECODER_ALL,
    "bert": _ENCODER_ALL, "roberta": _ENCODER_ALL, "xlm-roberta": _ENCODER_ALL,
    "gpt2": (FAMILY_DEFAULTS["gpt2"][0] + ("*.attn.c_proj",), ()),
}
# Generic models under saved="all": every linear but heads and poolers.
ALL_LINEARS_EXCLUDE = ("lm_head", "*.lm_head", "score", "classifier", "classifier.*", "*.classifier",
                       "*.classifier.*", "*.pooler.dense", "pooler.dense")

# The pieces saved= selects beyond the paper's layers (docs/pytorch.md, "Saving more than the linear inputs"):
#   linears     CompAct on every linear of a block (the attention output projection too)
#   loss        the LM head and cross-entropy in chunks of tokens, no batch x sequence x vocabulary logits
#               (causal language models: compact_torch.loss)
#   activations everything else autograd saves through compact's sr8 codec (compact_torch.saved)
SAVED_PIECES = ("linears", "loss", "activations")

DEFAULTS = {"rank": 0.25, "dist": "gaussian", "share_inputs": True, "seed": 0, "period": 200}
CONFIG_FORMAT = "compact_torch.sketch_config"
CONFIG_VERSION = 1


def _matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _tied_parameters(model):
    """ids of parameters that more than one module holds (tied weights must stay ordinary parameters)."""
    seen, tied = set(), set()
    for module in model.modules():
        for p in module.parameters(recurse=False):
            if id(p) in seen:
                tied.add(id(p))
            seen.add(id(p))
    return tied


def model_family(model):
    """The Hugging Face ``model_type`` of ``model.config`` (e.g. "llama", "roberta"), or None."""
    return getattr(getattr(model, "config", None), "model_type", None)


def _is_compressible(module):
    return type(module) is nn.Linear or is_conv1d(module)  # exactly nn.Linear: subclasses may change forward


def _hf_config(model):
    config = getattr(model, "config", None)
    return config if config is not None and hasattr(config, "to_dict") else None


def sketch_config(model):
    """The sketch configuration of ``model``'s CompactLinear layers as JSON values: {"format", "version", "layers":
    {module name: {"rank", "dist", "seed", "stream", "period", "layout", "sharing_decided", "share_group"}}, and,
    when compress() applied pieces beyond the layers, "saved": {"linears": True, "loss": True, "activations":
    {"seed", "attention"}} (the pieces applied)}.
    ``compress(model, config=...)`` restores it on the plain model."""
    record = {"format": CONFIG_FORMAT, "version": CONFIG_VERSION,
              "layers": {name: m.config() for name, m in model.named_modules() if isinstance(m, CompactLinear)}}
    pieces = getattr(model, "_compact_pieces", None)
    if pieces:
        record["saved"] = dict(pieces)
    return record


def _lora_layers(model):
    """{name: module} of the PEFT LoRA (and DoRA) layers in ``model``: modules with a ``base_layer`` and a ModuleDict
    ``lora_A`` of adapters (peft.tuners.lora.Linear)."""
    return {name: m for name, m in model.named_modules()
            if hasattr(m, "base_layer") and isinstance(getattr(m, "lora_A", None), nn.ModuleDict)}


def _choose(model, include, exclude, tied):
    """The names of the layers to compress, and those that matched but are frozen.

    Plain models: every nn.Linear (or Conv1D) whose name matches. PEFT LoRA models: the patterns name the adapted
    layers (e.g. ``*.self_attn.q_proj``, as on the plain model), and what is compressed is each adapter's A
    (``...q_proj.lora_A.default``): the frozen base layer saves no input for its weight (torch saves x only for a
    weight that needs a gradient) and stays as it is, B reads A's small output. A frozen linear is never compressed:
    it saves no input for its weight either, so there is nothing to gain, and its weight stays frozen."""
    lora = _lora_layers(model)
    adapters = tuple(f"{name}.{part}." for name in lora for part in ("lora_A", "lora_B"))
    chosen, frozen = [], []

    def consider(name, module, match_name):
        if include is not None and not _matches(match_name, include):
            return
        if exclude and _matches(match_name, exclude):
            return
        if id(module.weight) in tied:
            return
        if not module.weight.requires_grad:
            frozen.append(name)
            return
        chosen.append(name)

    for name, module in model.named_modules():
        if not name or not _is_compressible(module):  # not the model itself (use CompactLinear.from_module)
            continue
        if name.startswith(adapters):
            continue  # A and B of LoRA layers: A below, B reads A's small output
        consider(name, module, name)  # a LoRA layer's base_layer too: compressed only if the user trains it
    for name, layer in lora.items():
        for adapter, a in layer.lora_A.items():
            if _is_compressible(a):
                consider(f"{name}.lora_A.{adapter}", a, name)
    return chosen, frozen


def _nothing_matched(model, include, exclude, frozen):
    """The message when compress() finds no layer: the patterns, and what the model has instead."""
    names = [name for name, m in model.named_modules() if name and _is_compressible(m)]
    msg = f"compact: compress: no nn.Linear matched include = {include!r}, exclude = {exclude!r} (trainable ones)"
    if frozen:
        msg += (f"; {len(frozen)} matching layers are frozen (requires_grad=False, e.g. {frozen[0]!r}): a frozen "
                "linear saves no input for its weight, so compress leaves it as it is")
    lora = _lora_layers(model)
    if lora:
        msg += (f"; this is a PEFT LoRA model: patterns name the adapted layers (e.g. {next(iter(lora))!r}), whose "
                "adapters' A compress() compresses")
    if names:
        sample = ", ".join(repr(n) for n in names[:4])
        msg += f"; the model's linear layers are named like {sample} ({len(names)} in all)"
    else:
        msg += "; the model has no nn.Linear or Conv1D at all"
    return msg


def _placeholder_names(model):
    """The names (in ``model.named_parameters()``) of the CompactLinear placeholders weight_ghat."""
    return [name for name, p in model.named_parameters() if owner_of(p) is not None]


def _tell_ddp(model):
    """Adds the placeholders to ``model._ddp_params_and_buffers_to_ignore``, which torch's DistributedDataParallel
    reads when it is built (the Trainer, accelerate and Lightning build it from the model they are given): it then
    neither broadcasts into them (a zero-stride placeholder cannot be written) nor buckets them, and the layers
    average their gradients Ghat themselves at the end of each backward pass (linear._GhatReduction)."""
    ignored = list(getattr(model, "_ddp_params_and_buffers_to_ignore", []))
    ignored += [n for n in _placeholder_names(model) if n not in ignored]
    model._ddp_params_and_buffers_to_ignore = ignored
    for layer in compact_layers(model):
        layer._ghat_reducer = "self"  # its Ghat is averaged at the end of backward (linear._GhatReduction)
    guard_foreign_optimizers()


def _parse_saved(saved):
    """The pieces of saved= (a tuple of SAVED_PIECES): "linear" (the default, the paper's layers: none), "all", one
    piece's name or an iterable of them."""
    if saved is None or saved == "linear":
        return ()
    if saved == "all":
        return SAVED_PIECES
    pieces = (saved,) if isinstance(saved, str) else tuple(saved)
    unknown = [p for p in pieces if p not in SAVED_PIECES]
    if unknown:
        raise CompactError(f"compact: compress: argument saved = {saved!r} names {unknown}, which are not pieces; "
                           f"saved takes 'linear' (the default), 'all', or some of {list(SAVED_PIECES)}")
    return tuple(p for p in SAVED_PIECES if p in pieces)


def _is_causal_lm(model):
    return hasattr(model, "lm_head") and type(model).__name__.endswith("ForCausalLM")


def _inner_model(model):
    """The Hugging Face model itself: a PEFT model's base model (``get_base_model()``), else ``model``."""
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) else model


# The "loss" piece keeps one chunk of fp32 logits at a time: chunks of at most this many bytes (32 MiB: 256 tokens of
# a 32000-word vocabulary, 64 of Llama 3's 128256), between 64 and 512 tokens.
LOSS_CHUNK_BYTES = 32 << 20


def loss_chunk_tokens(vocab):
    """Tokens per chunk of the chunked LM loss for a vocabulary: the largest power of two whose fp32 logits fit in
    LOSS_CHUNK_BYTES, within [64, 512]."""
    tokens = 512
    while tokens > 64 and tokens * vocab * 4 > LOSS_CHUNK_BYTES:
        tokens //= 2
    return tokens


def _apply_pieces(model, pieces, seed, attention="compressed"):
    """The loss and activations pieces (the linears piece is the choice of layers). Records them on the model."""
    applied = {}
    inner = _inner_model(model)
    if "loss" in pieces and _is_causal_lm(inner):
        from .loss import patch_causal_lm

        patch_causal_lm(inner, chunk_tokens=loss_chunk_tokens(inner.lm_head.out_features))
        applied["loss"] = True
    if "activations" in pieces:
        from .saved import SavedCodec, install

        # Around the backbone (decoder or encoder stack), so the LM head and loss stay outside.
        install(model, SavedCodec(seed=seed, attention=attention), backbone=getattr(inner, "base_model", inner))
        applied["activations"] = {"seed": int(seed), "attention": attention}
    if "linears" in pieces:
        applied["linears"] = True
    model._compact_pieces = applied


def _remove_pieces(model):
    applied = getattr(model, "_compact_pieces", None) or {}
    if "loss" in applied:
        from .loss import unpatch_causal_lm

        unpatch_causal_lm(_inner_model(model))
    handle = getattr(model, "_compact_saved", None)
    if handle is not None:
        handle[1].remove()
        del model._compact_saved
    if hasattr(model, "_compact_pieces"):
        del model._compact_pieces


def _publish(model):
    """Points model.config.compact_torch (Hugging Face models) at the live configuration: each layer keeps its own
    entry and updates it when its sharing is decided or its state is loaded."""
    config = _hf_config(model)
    if config is None:
        return
    record = sketch_config(model)
    for name, entry in record["layers"].items():
        model.get_submodule(name)._record = entry
    config.compact_torch = record


def _load_config(config):
    if isinstance(config, (str, os.PathLike)):
        with open(config, encoding="utf-8") as f:
            config = json.load(f)
    if not isinstance(config, dict) or config.get("format") != CONFIG_FORMAT:
        raise CompactError(f"compact: compress: argument config is not a sketch configuration (a dict with format = "
                           f"{CONFIG_FORMAT!r}, from sketch_config or model.config.compact_torch)")
    if config.get("version") != CONFIG_VERSION:
        raise CompactError(f"compact: compress: sketch configuration version {config.get('version')!r} is not "
                           f"supported (this compact_torch reads version {CONFIG_VERSION})")
    return config


def _replace(model, replacements):
    for name, layer in replacements:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, layer)


def _restore(model, config):
    """compress() from a saved sketch configuration: the same layers, ranks, streams and sharing."""
    replacements, states, pools = [], {}, {}
    for name, rec in config["layers"].items():
        try:
            module = model.get_submodule(name)
        except AttributeError:
            raise CompactError(f"compact: compress: the sketch configuration names layer {name!r}, which this model "
                               "does not have") from None
        layout = "conv1d" if is_conv1d(module) else "linear" if type(module) is nn.Linear else None
        if layout != rec["layout"]:
            raise CompactError(f"compact: compress: the sketch configuration has layer {name!r} as {rec['layout']}, "
                               f"but the model's is a {type(module).__name__}")
        layer = CompactLinear.from_module(module, rank=int(rec["rank"]), dist=rec["dist"], seed=int(rec["seed"]),
                                          period=int(rec["period"]), stream=int(rec["stream"]))
        key = (layer.seed, layer.stream, layer.period, layer.rank, layer.dist)
        if key in states:  # siblings: one state tensor, as after their first forward
            layer._share_state_with(states[key])
        states.setdefault(key, layer._state)
        if rec.get("share_group") is not None:
            layer._pool = pools.setdefault(rec["share_group"], _SharePool(rec["share_group"]))
        layer._sharing_decided = bool(rec["sharing_decided"]) or layer._pool is None
        replacements.append((name, layer))
    if not replacements:
        raise CompactError("compact: compress: the sketch configuration lists no layer")
    _replace(model, replacements)
    pieces = config.get("saved") or {}
    if pieces:
        act = pieces.get("activations") or {}
        _apply_pieces(model, tuple(p for p in SAVED_PIECES if p in pieces), act.get("seed", 0),
                      act.get("attention", "compressed"))
    _tell_ddp(model)
    _publish(model)
    return model


def compress(model, rank=None, dist=None, share_inputs=None, include=None, exclude=None, seed=None, period=None,
             config=None, saved=None, attention=None):
    """Replaces linear layers of ``model`` (``nn.Linear``, and GPT-2's ``Conv1D``) by ``CompactLinear`` in place
    and returns ``model``.

    Args:
        rank: per layer; < 1 is a fraction of the layer's in_features, >= 1 an absolute rank (default 0.25).
        dist: "gaussian" (default), "rademacher" or "srht".
        share_inputs: layers that read the same input tensor (q/k/v; gate/up) share one P and one stored z (default
            True). The grouping is observed on the first forward with autograd (eagerly: before torch.compile) and
            recorded in the sketch configuration.
        include, exclude: fnmatch patterns of module names to compress / to leave. When both are None, the paper's
            layers for the model's family (``FAMILY_DEFAULTS``, by ``model.config.model_type``: LLaMA, Mistral, Qwen2,
            Qwen3, BERT, RoBERTa, XLM-RoBERTa, GPT-2), and for other models every linear layer but
            ``DEFAULT_EXCLUDE`` (attention output projections, heads, poolers). Given include alone, exclude is
            empty; given exclude alone, include is the family's (or every layer). Layers whose weight is tied to
            another module's (e.g. a tied lm_head) are never compressed.
        seed, period: of every layer's P (defaults 0 and 200). Streams are numbered in module order, after the
            streams of layers an earlier compress() call made, so two calls never share P by accident.
        config: a sketch configuration (``sketch_config(model)``, a dict or the path of its JSON) to restore instead
            of choosing layers; None (default) restores ``model.config.compact_torch`` when the model has no
            CompactLinear yet and carries one (a model loaded from a compressed model's ``save_pretrained``), False
            never restores. Restoring takes no other argument.
        saved: what is stored small beyond the paper's layers. "linear": the paper's layers only. None (the
            default): "linear", and for a PEFT LoRA causal language model (adapter fine-tuning, the LM head frozen)
            "loss" too, whose chunked head then forms its gradient in the forward at the unfused loss's cost.
            "all": every piece below; or one piece's name, or a list of them:
            "linears": CompAct on every linear of a block, the attention output projection too (when include and
            exclude are None);
            "loss": for a causal language model, the LM head and cross-entropy in chunks of tokens, the batch x
            sequence x vocabulary logits never formed (compact_torch.loss; the model then returns no logits when
            given labels in training);
            "activations": everything else autograd saves in the model's backbone as compact's 8-bit codec
            (compact_torch.saved).
        attention: with the "activations" piece, "compressed" (default: the attention's saved q, k, v and output go
            through the codec too; validation loss within 0.02% of "exact" over 3 seeds, docs/peers.md) or "exact"
            (nothing saved inside attention modules is compressed).

    Raises CompactError when no layer matches, a rank cannot be built for some layer, or a configuration does not fit
    the model (before changing anything).
    """
    given = {k: v for k, v in dict(rank=rank, dist=dist, share_inputs=share_inputs, include=include,
                                   exclude=exclude, seed=seed, period=period, saved=saved,
                                   attention=attention).items() if v is not None}
    pieces = _parse_saved(saved)
    if saved is None and _lora_layers(model) and _is_causal_lm(_inner_model(model)) \
            and not getattr(model, "_compact_pieces", None):
        pieces = ("loss",)  # adapter fine-tuning: the logits are the largest saved tensor (docs/pytorch.md)
    if attention is not None and attention not in ("exact", "compressed"):
        raise CompactError(f"compact: compress: argument attention = {attention!r} is not 'exact' or 'compressed'")
    if getattr(model, "_compact_pieces", None) and pieces:
        raise CompactError(f"compact: compress: the model already has saved pieces {sorted(model._compact_pieces)}; "
                           "decompress it first")
    saved = None
    if config is not None and config is not False:
        saved = _load_config(config)
    elif config is None and not compact_layers(model):
        hf = _hf_config(model)
        if hf is not None and getattr(hf, "compact_torch", None):
            saved = _load_config(hf.compact_torch)
    if saved is not None:
        if given:
            raise CompactError(f"compact: compress: the model carries a saved sketch configuration, which compress "
                               f"restores; it takes no other argument, got {sorted(given)} (pass config=False to "
                               "compress afresh)")
        return _restore(model, saved)

    opts = {**DEFAULTS, **{k: v for k, v in given.items() if k in DEFAULTS}}
    family = (FAMILY_ALL_LINEARS if "linears" in pieces else FAMILY_DEFAULTS).get(model_family(model))
    if include is None and exclude is None:
        generic = ALL_LINEARS_EXCLUDE if "linears" in pieces else DEFAULT_EXCLUDE
        include, exclude = family if family is not None else (None, generic)
    elif include is None:
        include = family[0] if family is not None else None
    elif exclude is None:
        exclude = ()
    tied = _tied_parameters(model)
    chosen, frozen = _choose(model, include, exclude, tied)
    if not chosen:
        raise CompactError(_nothing_matched(model, include, exclude, frozen))
    existing = compact_layers(model)
    used = [layer.stream for layer in existing if layer.stream < FIRST_AUTO_STREAM]
    first = max(used) + 1 if used else 0
    group = 1 + max((layer._pool.group for layer in existing if layer._pool is not None), default=-1)
    pool = _SharePool(group) if opts["share_inputs"] else None
    # Build every replacement first, so a bad rank for some layer leaves the model untouched.
    replacements = []
    for k, name in enumerate(chosen):
        layer = CompactLinear.from_module(model.get_submodule(name), rank=opts["rank"], dist=opts["dist"],
                                          seed=opts["seed"], period=opts["period"], stream=first + k)
        if pool is not None:
            layer._pool = pool
            layer._sharing_decided = False
        replacements.append((name, layer))
    _replace(model, replacements)
    if pieces:
        _apply_pieces(model, pieces, opts["seed"], attention or "compressed")
    _tell_ddp(model)
    _publish(model)
    return model


def decompress(model):
    """Undoes compress(): every CompactLinear in ``model`` becomes the ``nn.Linear`` (or ``Conv1D``) it stands for,
    holding the same weight and bias tensors, the weight trainable again; ``model.config.compact_torch`` is removed.
    Returns ``model``. An optimizer built for the compressed model must be rebuilt."""
    if isinstance(model, CompactLinear):
        raise CompactError("compact: decompress: call layer.to_plain() on a single CompactLinear")
    placeholders = set(_placeholder_names(model))
    replacements = [(name, m.to_plain()) for name, m in model.named_modules() if isinstance(m, CompactLinear)]
    _replace(model, replacements)
    _remove_pieces(model)
    ignored = getattr(model, "_ddp_params_and_buffers_to_ignore", None)
    if ignored is not None:
        kept = [n for n in ignored if n not in placeholders]
        if kept:
            model._ddp_params_and_buffers_to_ignore = kept
        else:
            del model._ddp_params_and_buffers_to_ignore
    config = _hf_config(model)
    if config is not None and hasattr(config, "compact_torch"):
        del config.compact_torch
    return model
