# SPDX-License-Identifier: MIT
"""The LM head and its cross-entropy in chunks of tokens: the batch x sequence x vocabulary logits never exist.

    import compact_torch as ct
    loss = ct.chunked_lm_loss(hidden, model.lm_head.weight, labels)  # = HF's loss of lm_head(hidden) and labels
    ct.patch_causal_lm(model)     # a stock Hugging Face *ForCausalLM: its training loss goes through chunked_lm_loss
    ct.unpatch_causal_lm(model)   # the stock forward again

The math. Token i has the hidden state h_i (a row of H, N x d), the head is W (V x d) with an optional bias b, the
target is y_i, and tokens whose target is ``ignore_index`` are left out. The logits are z_i = W h_i + b (under
``logit_softcap`` c: z_i <- c tanh(z_i / c), Gemma 2's final soft-cap), lse_i = log sum_v exp(z_iv), and the
token's loss is lse_i - z_iy_i. The loss is the sum over the kept tokens ("sum"), that sum divided by their count
("mean"; NaN when no token is kept, as torch's cross_entropy gives) or by ``num_items_in_batch``, or the per-token
vector ("none"; 0 at ignored tokens). With G = d loss / d Z, G_iv = s_i (softmax(z_i)_v - [v = y_i]) (s_i the
reduction's scale, 0 at ignored tokens; under the cap times 1 - (z_iv / c)^2): dH = G W, dW = G^T H, db = sum_i G_i.

The tokens are processed ``chunk_tokens`` at a time, so at most one chunk's logits (chunk x V) exist at once. Two
ways to get the gradients (``mode``):

- "recompute": the forward keeps H (a view of the input), the labels and lse (N floats); the backward recomputes
  each chunk's logits and forms its G there. Four N x d x V products per step (one forward, three backward).
- "forward_grad" (Liger-Kernel's fused linear cross-entropy): the forward forms each chunk's G at once and
  accumulates dH (N x d, H's dtype) and dW (V x d) and db (V) in fp32, which it keeps; the backward only scales them
  by the incoming gradient. Three products per step, but the forward does the backward's work (skipped when no
  gradient is needed) and dW (V x d fp32) is held from the forward to the backward. Its backward can run only once
  (``retain_graph`` backward twice raises), and it has no "none" reduction.

DEFAULT_MODE is "recompute" for a head that trains, by the bytes first and the time second. A frozen head (its
weight and bias need no gradient: adapter fine-tuning, where PEFT freezes the LM head) makes ``mode=None`` pick
"forward_grad": without dW it keeps only dH from the forward (N x d, the bytes "recompute" keeps in H) and runs two
products per step, the unfused loss's count, where "recompute" runs three; reduction "none" stays "recompute". On the LLaMA head shape (4 x 1024 tokens,
d = 512, V = 32000, fp32, chunks of 512) both modes peak at the same bytes (139.6 MB above the inputs, against
1573 MB unfused; the same 670.1 MB for both in a 2-layer LLaMA step, 2628 MB stock), but "recompute" keeps 0.05 MB
from the forward to the backward where "forward_grad" keeps 73.9 MB (dW and dH), which add up when several losses
share one backward; "forward_grad" is faster (1.78 s against 2.45 s per forward and backward on 2 CPU cores, 11.6 ms
against 15.2 ms on an H200; the unfused loss: 2.02 s, 9.5 ms).

Precision, as Hugging Face's ForCausalLMLoss (which upcasts the logits with ``.float()``): each chunk's logits are
computed in the compute dtype (the autocast dtype under autocast, else the inputs' dtype), then the log-sum-exp,
the soft-cap, the loss and G in fp32 (fp64 stays fp64, where HF would round to fp32); G is rounded to the compute
dtype for the two gradient products, as autograd would round the gradient of the logits; dW and db are summed over
the chunks in fp32 and every gradient is returned in its input's dtype. Only torch operations: CPU and CUDA,
torch 1.13 and 2.x.
"""
import contextlib
import dataclasses
import inspect
import types

import torch

from .linear import autocast_dtype

MODES = ("recompute", "forward_grad")
DEFAULT_MODE = "recompute"
DEFAULT_CHUNK_TOKENS = 512
REDUCTIONS = ("mean", "sum", "none")


def _no_autocast(device_type):
    """Autocast off inside the Function, whose casts are explicit (the backward may run with or without it)."""
    try:
        return torch.autocast(device_type=device_type, enabled=False)
    except RuntimeError:  # a device type autocast does not know: nothing to turn off
        return contextlib.nullcontext()


def compute_dtype(hidden, weight):
    """The dtype of the logits: autocast's when autocast is on for hidden's device (which, like autocast's linear,
    leaves fp64 alone), else the promotion of hidden's and weight's dtypes."""
    cast = autocast_dtype(hidden.device.type)
    if cast is not None and torch.float64 not in (hidden.dtype, weight.dtype):
        return cast
    return torch.promote_types(hidden.dtype, weight.dtype)


def _chunk_logits(h, w, b, dt, acc, softcap, want_dcap):
    """A chunk's logits in ``acc`` (after the soft-cap) and, when asked under the cap, 1 - (z / c)^2."""
    h = h.to(dt)
    z = torch.mm(h, w.t()) if b is None else torch.addmm(b, h, w.t())
    if z.dtype != acc:
        z = z.to(acc)
    dcap = None
    if softcap is not None:
        z.div_(softcap).tanh_()
        if want_dcap:
            dcap = torch.addcmul(torch.ones_like(z), z, z, value=-1.0)
        z.mul_(softcap)
    return z, h, dcap


def _grad_of_logits_(p, y, valid, scale, dcap):
    """In place: p (softmax of a chunk's logits) -> G = scale (p - onehot(y)), 0 at ignored rows, times dcap."""
    p.scatter_add_(1, y.unsqueeze(1), torch.full((p.shape[0], 1), -1.0, dtype=p.dtype, device=p.device))
    p.masked_fill_(~valid.unsqueeze(1), 0.0)  # not a multiply: an ignored row may hold inf or NaN
    if scale is not None:
        p.mul_(scale.unsqueeze(1) if scale.dim() else scale)
    if dcap is not None:
        p.mul_(dcap)
    return p


def _accumulate_grads(g, h, w, rows, dt, grads):
    """Adds a chunk's G (acc dtype) into grads = [dH (N x d) or None, dW (V x d, acc) or None, db (V, acc) or
    None]: dH[rows] = G W, dW += G^T h, db += sum of G's rows. The products run in the compute dtype."""
    gh, gw, gb = grads
    if gb is not None:
        gb.add_(g.sum(0))
    gc = g.to(dt) if g.dtype != dt else g
    if gh is not None:
        if gh.dtype == dt:
            torch.mm(gc, w, out=gh[rows])
        else:
            gh[rows].copy_(torch.mm(gc, w))
    if gw is not None:
        if gw.dtype == dt:
            gw.addmm_(gc.t(), h)
        else:  # a product in the compute dtype, summed over the chunks in fp32
            gw.add_(torch.mm(gc.t(), h))


def _scale_of(reduction, grad_out, count, acc):
    """The per-token scale s of the loss's gradient: grad_out for "sum", grad_out / max(count, 1) for "mean" (torch
    gives zero gradients when every token is ignored), the per-token grad_out for "none"."""
    grad_out = grad_out.to(acc)
    if reduction == "mean":
        return grad_out / count.clamp(min=1).to(acc)
    return grad_out


class _ChunkedLMLoss(torch.autograd.Function):
    """hidden (N x d), weight (V x d), bias (V) or None, labels (N, int64, already shifted) -> the loss (fp32)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, ignore_index, chunk, mode, reduction, softcap, dt, needs):
        acc = torch.promote_types(dt, torch.float32)
        n = hidden.shape[0]
        valid = labels != ignore_index
        y = torch.where(valid, labels, torch.zeros_like(labels))
        count = valid.sum()
        keep_grads = mode == "forward_grad" and any(needs)
        ctx.mode, ctx.reduction, ctx.softcap, ctx.dt, ctx.ignore_index, ctx.chunk = mode, reduction, softcap, dt, \
            ignore_index, chunk
        ctx.consumed = False
        with _no_autocast(hidden.device.type):
            w = weight.to(dt)
            b = None if bias is None else bias.to(dt)
            losses = torch.empty(n, dtype=acc, device=hidden.device)
            lse = torch.empty(n, dtype=acc, device=hidden.device) if mode == "recompute" else None
            if keep_grads:
                grads = [torch.empty_like(hidden) if needs[0] else None,
                         torch.zeros(weight.shape, dtype=acc, device=weight.device) if needs[1] else None,
                         torch.zeros(bias.shape, dtype=acc, device=bias.device) if needs[2] else None]
            for start in range(0, n, chunk):
                rows = slice(start, min(start + chunk, n))
                z, h, dcap = _chunk_logits(hidden[rows], w, b, dt, acc, softcap, keep_grads)
                zy = z.gather(1, y[rows].unsqueeze(1)).squeeze(1)
                m = z.amax(1)
                s = z.sub_(m.unsqueeze(1)).exp_().sum(1)  # z <- exp(z - max), in place
                lse_c = s.log().add_(m)
                losses[rows] = torch.where(valid[rows], lse_c - zy, torch.zeros_like(zy))
                if lse is not None:
                    lse[rows] = lse_c
                if keep_grads:
                    p = z.div_(s.unsqueeze(1))  # the softmax
                    _accumulate_grads(_grad_of_logits_(p, y[rows], valid[rows], None, dcap), h, w, rows, dt, grads)
                    del p
                del z, h, dcap  # before the next chunk's logits are made
        if mode == "recompute":
            ctx.save_for_backward(hidden, weight, bias, labels, lse, count)
        elif keep_grads:
            ctx.has = tuple(g is not None for g in grads)
            ctx.save_for_backward(*(g for g in grads if g is not None), count)
        else:
            ctx.has = (False, False, False)
            ctx.save_for_backward(count)
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        if reduction == "none":
            return losses
        total = losses.sum()
        return total / count.to(acc) if reduction == "mean" else total

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.consumed:
            raise RuntimeError("compact_torch.chunked_lm_loss: mode 'forward_grad' scales the gradients it formed in "
                               "the forward in place, so it supports one backward; use mode='recompute' to run "
                               "backward through it more than once")
        if ctx.mode == "forward_grad":
            return _ChunkedLMLoss._backward_saved(ctx, grad_out)
        hidden, weight, bias, labels, lse, count = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        dt, acc = ctx.dt, lse.dtype
        scale = _scale_of(ctx.reduction, grad_out, count, acc)
        valid = labels != ctx.ignore_index
        y = torch.where(valid, labels, torch.zeros_like(labels))
        n = hidden.shape[0]
        with _no_autocast(hidden.device.type):
            w = weight.to(dt)
            b = None if bias is None else bias.to(dt)
            grads = [torch.empty_like(hidden) if needs[0] else None,
                     torch.zeros(weight.shape, dtype=acc, device=weight.device) if needs[1] else None,
                     torch.zeros(bias.shape, dtype=acc, device=bias.device) if needs[2] else None]
            if any(needs):
                for start in range(0, n, ctx.chunk):
                    rows = slice(start, min(start + ctx.chunk, n))
                    z, h, dcap = _chunk_logits(hidden[rows], w, b, dt, acc, ctx.softcap, True)
                    p = z.sub_(lse[rows].unsqueeze(1)).exp_()  # the softmax, from the saved log-sum-exp
                    s = scale[rows] if ctx.reduction == "none" else scale
                    _accumulate_grads(_grad_of_logits_(p, y[rows], valid[rows], s, dcap), h, w, rows, dt, grads)
                    del z, h, dcap, p
        gh, gw, gb = grads
        return (gh, None if gw is None else gw.to(ctx.dtypes[1]), None if gb is None else gb.to(ctx.dtypes[2]),
                None, None, None, None, None, None, None, None)

    @staticmethod
    def _backward_saved(ctx, grad_out):
        saved = list(ctx.saved_tensors)
        count = saved.pop()
        grads = [saved.pop(0) if has else None for has in ctx.has]
        ctx.consumed = True
        scale = _scale_of(ctx.reduction, grad_out, count, torch.promote_types(ctx.dt, torch.float32))
        out = []
        for g, dtype in zip(grads, ctx.dtypes):
            out.append(None if g is None else g.mul_(scale).to(dtype))
        return tuple(out) + (None,) * 8


def chunked_lm_loss(hidden, weight, labels, bias=None, *, chunk_tokens=DEFAULT_CHUNK_TOKENS, ignore_index=-100,
                    shift=True, reduction="mean", num_items_in_batch=None, logit_softcap=None, mode=None):
    """cross_entropy(hidden @ weight.T + bias, labels) computed ``chunk_tokens`` tokens at a time (module docstring).

    hidden: (..., d) floating; weight: (V, d) (the LM head's, possibly tied to the embedding: autograd adds both
    gradients); bias: (V,) or None; labels: integer, hidden.shape[:-1]. ``shift``: as HF's ForCausalLMLoss, labels
    are shifted left by one along the last dimension and padded with ``ignore_index`` (token t predicts label t+1);
    pass already shifted labels with shift=False. ``reduction``: "mean" over the kept tokens, "sum", or "none" (an
    fp32 tensor of labels' shape, 0 at ignored tokens; mode "recompute" only). ``num_items_in_batch``: when given,
    the sum divided by it (HF's gradient-accumulation normalisation; reduction must be "mean").
    ``logit_softcap``: c in z <- c tanh(z / c) (Gemma 2). ``mode``: "recompute" or "forward_grad" (None:
    "forward_grad" when the head's weight and bias need no gradient and reduction is not "none", else
    DEFAULT_MODE; module docstring). Returns the loss in fp32 (fp64 for fp64 inputs)."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"compact_torch.chunked_lm_loss: mode must be one of {MODES}, got {mode!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"compact_torch.chunked_lm_loss: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if reduction == "none" and mode == "forward_grad":
        raise ValueError("compact_torch.chunked_lm_loss: mode 'forward_grad' forms the gradients of the summed loss "
                         "in the forward, so it has no reduction 'none'; use mode='recompute'")
    if num_items_in_batch is not None and reduction != "mean":
        raise ValueError(f"compact_torch.chunked_lm_loss: num_items_in_batch replaces the mean's denominator; it "
                         f"does not go with reduction={reduction!r}")
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        raise ValueError(f"compact_torch.chunked_lm_loss: chunk_tokens must be a positive int, got {chunk_tokens!r}")
    if weight.dim() != 2 or hidden.dim() < 1 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError(f"compact_torch.chunked_lm_loss: hidden {tuple(hidden.shape)} and weight "
                         f"{tuple(weight.shape)} do not make hidden @ weight.T")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"compact_torch.chunked_lm_loss: bias {tuple(bias.shape)} for weight {tuple(weight.shape)}")
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(f"compact_torch.chunked_lm_loss: labels must be integers, got {labels.dtype}")
    labels = labels.to(hidden.device)
    if shift:  # HF: pad(labels, (0, 1), value=ignore_index)[..., 1:]
        labels = torch.cat([labels[..., 1:], torch.full_like(labels[..., :1], ignore_index)], dim=-1)
    if tuple(labels.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(f"compact_torch.chunked_lm_loss: labels {tuple(labels.shape)} do not match hidden "
                         f"{tuple(hidden.shape)} (labels must have hidden.shape[:-1])")
    grad = torch.is_grad_enabled()
    needs = (grad and hidden.requires_grad, grad and weight.requires_grad,
             grad and bias is not None and bias.requires_grad)
    if mode is None:
        mode = "forward_grad" if reduction != "none" and not needs[1] and not needs[2] else DEFAULT_MODE
    loss = _ChunkedLMLoss.apply(hidden.reshape(-1, hidden.shape[-1]), weight, bias, labels.reshape(-1).long(),
                                int(ignore_index), chunk_tokens, mode, "sum" if num_items_in_batch is not None
                                else reduction, None if logit_softcap is None else float(logit_softcap),
                                compute_dtype(hidden, weight), needs)
    if num_items_in_batch is not None:  # as HF's fixed_cross_entropy
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss.view(labels.shape) if reduction == "none" else loss


# ---- Hugging Face *ForCausalLM ------------------------------------------------------------------------------------

_STATE = "_compact_chunked_lm_loss"
# The attribute and global names of the stock forward (transformers 5.x LlamaForCausalLM and the many families
# generated from it) and of Gemma 2's soft-capped one. A forward that names anything else (Cohere's logit_scale,
# Granite's logits_scaling, the MoE forwards' auxiliary loss) does more than decoder -> lm_head -> ForCausalLMLoss,
# and patching it would change its loss, so patch_causal_lm refuses it.
_STOCK_NAMES = frozenset({"CausalLMOutputWithPast", "attentions", "cache", "config", "hidden_states",
                          "last_hidden_state", "lm_head", "loss_function", "model", "slice_logits_to_keep",
                          "vocab_size"})
_SOFTCAP_NAMES = frozenset({"final_logit_softcapping", "tanh", "torch"})


def _slice_logits_to_keep(hidden, logits_to_keep):
    try:
        from transformers.modeling_utils import slice_logits_to_keep
    except ImportError:  # transformers before slice_logits_to_keep: an int or a 1-D tensor of positions
        keep = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        return hidden[:, keep, :]
    return slice_logits_to_keep(hidden, logits_to_keep)


def _forward_names(cls):
    code = getattr(inspect.unwrap(cls.forward), "__code__", None)
    return frozenset(code.co_names) if code is not None else None


def _patched_forward(self, *args, **kwargs):
    state = self.__dict__[_STATE]
    original, sig = state["original"], state["signature"]
    bound = sig.bind(*args, **kwargs)  # the original's TypeError for arguments it would refuse
    arguments = dict(bound.arguments)
    extra = dict(arguments.pop(state["var_keyword"], {})) if state["var_keyword"] else {}
    labels = arguments.pop("labels", None)
    if labels is None or not (self.training or state["in_eval"]):
        return original(*args, **kwargs)
    head = self.lm_head
    if type(head) is not torch.nn.Linear or head._forward_hooks or head._forward_pre_hooks:
        raise RuntimeError("compact_torch.patch_causal_lm: lm_head is no longer a plain nn.Linear without hooks "
                           f"({type(head).__name__}); unpatch_causal_lm(model) before wrapping or sharding it")
    logits_to_keep = arguments.pop("logits_to_keep", 0)
    # can_return_tuple: return_dict from the call, else the config's.
    return_dict = extra.pop("return_dict", None)
    if return_dict is None:
        return_dict = self.config.return_dict if hasattr(self, "config") else True
    # As the stock forward: every other argument, the loss's keyword arguments included, goes to the decoder.
    outputs = self.model(**arguments, **extra)
    hidden = _slice_logits_to_keep(outputs.last_hidden_state, logits_to_keep)
    shift_labels = extra.get("shift_labels")
    loss = chunked_lm_loss(hidden, head.weight, labels if shift_labels is None else shift_labels, head.bias,
                           chunk_tokens=state["chunk_tokens"], ignore_index=extra.get("ignore_index", -100),
                           shift=shift_labels is None, num_items_in_batch=extra.get("num_items_in_batch"),
                           logit_softcap=getattr(self.config, "final_logit_softcapping", None)
                           if state["softcap"] else None, mode=state["mode"])
    from transformers.modeling_outputs import CausalLMOutputWithPast

    rest = {f.name: getattr(outputs, f.name, None) for f in dataclasses.fields(CausalLMOutputWithPast)
            if f.name not in ("loss", "logits")}
    out = CausalLMOutputWithPast(loss=loss, logits=None, **rest)
    return out if return_dict else out.to_tuple()


def patch_causal_lm(model, chunk_tokens=DEFAULT_CHUNK_TOKENS, mode=None, in_eval=False):
    """Makes a stock Hugging Face ``*ForCausalLM`` compute its loss with chunked_lm_loss when called with labels in
    training mode (and in eval mode too with ``in_eval=True``), in place; returns the model.

    On that path the forward runs the decoder (``model.model``) exactly as the stock forward does (same arguments,
    ``logits_to_keep``, kwargs such as ``num_items_in_batch``, ``shift_labels`` and ``ignore_index``, ``return_dict``)
    and returns a CausalLMOutputWithPast whose ``loss`` is the chunked loss and whose ``logits`` is None: the full
    logits are what this avoids, and None fails loudly where a caller expected them (an empty tensor would not);
    with return_dict=False the tuple, as HF's to_tuple, leaves the None out. Without labels, or in eval mode, the
    original forward runs unchanged (full logits). The original bound forward is kept; unpatch_causal_lm restores it.

    Refused (ValueError), because patching would change the result: a forward that does more than decoder ->
    lm_head -> the loss (other logit scalings, MoE auxiliary losses), a loss_function other than HF's
    ForCausalLMLoss, an lm_head that is not a plain nn.Linear without hooks (LoRA, CompactLinear, FSDP)."""
    try:
        from transformers.loss.loss_utils import ForCausalLMLoss
    except ImportError as e:
        raise ValueError("compact_torch.patch_causal_lm needs transformers (5.x)") from e
    if mode is not None and mode not in MODES:
        raise ValueError(f"compact_torch.patch_causal_lm: mode must be one of {MODES}, got {mode!r}")
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        raise ValueError(f"compact_torch.patch_causal_lm: chunk_tokens must be a positive int, got {chunk_tokens!r}")
    name = type(model).__name__
    names = _forward_names(type(model))
    if names is None or not {"model", "lm_head", "loss_function"} <= names:
        raise ValueError(f"compact_torch.patch_causal_lm: {name}.forward is not the stock decoder -> lm_head -> "
                         "loss_function forward")
    unknown = names - _STOCK_NAMES - _SOFTCAP_NAMES
    if unknown:
        raise ValueError(f"compact_torch.patch_causal_lm: {name}.forward uses {sorted(unknown)} beyond the stock "
                         "causal-LM forward, so its loss is not HF's ForCausalLMLoss of lm_head(hidden); not patched")
    if model.loss_function is not ForCausalLMLoss:
        raise ValueError(f"compact_torch.patch_causal_lm: {name}'s loss_function is {model.loss_function!r}, not "
                         "ForCausalLMLoss")
    head = getattr(model, "lm_head", None)
    if type(head) is not torch.nn.Linear or head._forward_hooks or head._forward_pre_hooks:
        raise ValueError(f"compact_torch.patch_causal_lm: {name}.lm_head is {type(head).__name__}, not a plain "
                         "nn.Linear without hooks (patch before wrapping or sharding it)")
    if _STATE in model.__dict__:  # patched already: new settings
        model.__dict__[_STATE].update(chunk_tokens=chunk_tokens, mode=mode, in_eval=bool(in_eval))
        return model
    original = model.forward
    sig = inspect.signature(original)
    var_keyword = next((p.name for p in sig.parameters.values() if p.kind == inspect.Parameter.VAR_KEYWORD), None)
    if "labels" not in sig.parameters:
        raise ValueError(f"compact_torch.patch_causal_lm: {name}.forward takes no labels")

    def forward(self, *args, **kwargs):
        return _patched_forward(self, *args, **kwargs)

    forward.__doc__ = getattr(original, "__doc__", None)
    forward.__name__ = forward.__qualname__ = "forward"
    # The original's signature (Trainer reads it for **kwargs, i.e. whether the model takes num_items_in_batch).
    forward.__signature__ = sig.replace(parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
                                        + list(sig.parameters.values()))
    patched = types.MethodType(forward, model)  # a bound method: copy.deepcopy rebinds it to the copy
    model.__dict__[_STATE] = dict(original=original, had_own_forward="forward" in model.__dict__, patched=patched,
                                  signature=sig, var_keyword=var_keyword, chunk_tokens=chunk_tokens, mode=mode,
                                  in_eval=bool(in_eval), softcap="final_logit_softcapping" in names)
    model.forward = patched
    return model


def unpatch_causal_lm(model):
    """Undoes patch_causal_lm (the original forward again); a model that is not patched is returned unchanged."""
    state = model.__dict__.get(_STATE)
    if state is None:
        return model
    if model.__dict__.get("forward") is not state["patched"]:
        raise RuntimeError("compact_torch.unpatch_causal_lm: the model's forward was replaced after "
                           "patch_causal_lm; undo that first")
    del model.__dict__[_STATE]
    if state["had_own_forward"]:
        model.__dict__["forward"] = state["original"]
    else:
        del model.__dict__["forward"]
    return model


def is_patched(model):
    """Whether patch_causal_lm is in force on ``model``."""
    return _STATE in model.__dict__

