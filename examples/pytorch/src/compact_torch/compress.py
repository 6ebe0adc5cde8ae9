# SPDX-License-Identifier: MIT
"""compress(): replace the nn.Linear layers of an existing model by CompactLinear, in place."""
import fnmatch

from torch import nn

from ._ext import CompactError
from .linear import CompactLinear, _SharePool

# The paper compresses every linear layer of the transformer blocks except the attention output projection, and
# leaves embeddings and the output head alone. These patterns (fnmatch on the module's dotted name) name those
# layers in Hugging Face LLaMA/Mistral/Qwen (o_proj, lm_head), GPT-NeoX/OPT-style (out_proj), BERT/RoBERTa
# (attention.output.dense, classifier) and sequence-classification heads (score).
DEFAULT_EXCLUDE = ("lm_head", "*.lm_head", "*.o_proj", "*.out_proj", "*.attention.output.dense", "score",
                   "classifier", "classifier.*", "*.classifier", "*.classifier.*")


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


def compress(model, rank=0.25, dist="gaussian", share_inputs=True, include=None, exclude=DEFAULT_EXCLUDE, seed=0,
             period=200):
    """Replaces ``model``'s ``nn.Linear`` layers by ``CompactLinear`` in place and returns ``model``.

    Args:
        rank: per layer; < 1 is a fraction of the layer's in_features, >= 1 an absolute rank.
        dist: "gaussian", "rademacher" or "srht".
        share_inputs: layers that read the same input tensor (q/k/v; gate/up) share one P and one stored z. The
            grouping is observed on the first forward with autograd (every rank and every resumed run sees the same
            one) and saved in the state dict.
        include: fnmatch patterns of module names to compress (default: every nn.Linear).
        exclude: patterns to leave alone (default ``DEFAULT_EXCLUDE``: attention output projections, lm_head,
            classifier heads). Linear layers whose weight is tied to another module's (e.g. a tied lm_head) are
            never compressed.
        seed, period: of every layer's P (streams are numbered 0, 1, ... in module order).

    Raises CompactError when no layer matches or a rank cannot be built for some layer (before changing anything).
    """
    tied = _tied_parameters(model)
    chosen = []
    for name, module in model.named_modules():
        if type(module) is not nn.Linear or not name:  # exactly nn.Linear (subclasses may change forward), not
            continue                                    # the model itself (use CompactLinear.from_linear)
        if include is not None and not _matches(name, include):
            continue
        if exclude and _matches(name, exclude):
            continue
        if id(module.weight) in tied:
            continue
        chosen.append(name)
    if not chosen:
        raise CompactError(f"compact: compress: no nn.Linear matched include = {include!r}, exclude = {exclude!r}")
    pool = _SharePool() if share_inputs else None
    # Build every replacement first, so a bad rank for some layer leaves the model untouched.
    replacements = []
    for stream, name in enumerate(chosen):
        linear = model.get_submodule(name)
        layer = CompactLinear.from_linear(linear, rank=rank, dist=dist, seed=seed, period=period, stream=stream)
        if pool is not None:
            layer._pool = pool
            layer._sharing_decided = False
        replacements.append((name, layer))
    for name, layer in replacements:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, layer)
    return model
