# SPDX-License-Identifier: MIT
"""Layer-wise updates for CompressedAdamW: each parameter is stepped as soon as its gradient is complete, inside
backward, and its gradient is freed at once, so the gradients of the whole model never exist together.

The rules (docs/pytorch.md, "Layer-wise updates"):

- Micro-batches are counted by backward passes, not per parameter: every backward pass in which at least one of the
  optimizer's parameters receives a gradient is one micro-batch, and the k-th of them closes the accumulation window.
  During that backward pass each parameter is stepped when its gradient is complete (its post-accumulate-grad hook);
  a parameter that received gradients earlier in the window but none in the closing pass is stepped when that pass
  ends. Counting per parameter instead would let a parameter that skips a micro-batch (an unused branch) fall one
  micro-batch behind and step in the middle of the next window; with the global count every parameter steps exactly
  when ``optimizer.step()`` after k micro-batches would have, on the same summed gradient.
- Each sketch group's state (P) advances once per window, when the closing backward pass ends: after every member
  layer (q/k/v share one state) has stepped with the P its Ghat was formed in.
- Under DistributedDataParallel the hook fires before the all-reduce, so nothing is stepped there: ``attach_ddp``
  wraps the DDP comm hook and steps each bucket's parameters in the future's callback, on the averaged gradient.
- Gradient clipping needs the global norm, which exists only after every parameter has been stepped:
  ``torch.nn.utils.clip_grad_norm_`` over a layer-wise optimizer's parameters raises, except with max_norm = inf,
  which returns the 2-norm of the gradients of the last window; ``step()`` called by a Hugging Face Trainer with
  max_grad_norm > 0 raises (the Trainer clips from .grad through accelerate, which would find no gradient).
"""
import math
import os
import sys
import threading
import weakref

import torch

from ._ext import CompactError
from .linear import _ghat_reduction, owner_of

_updaters = weakref.WeakSet()  # live LayerwiseUpdates (for the clip_grad_norm_ guard)
_clip_original = []


def require_post_accumulate_hooks():
    if not hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
        raise CompactError(f"compact: CompressedAdamW(layerwise=True) needs torch >= 2.1 "
                           f"(Tensor.register_post_accumulate_grad_hook); this is torch {torch.__version__}")


def _find_updater(params):
    ids = {id(p) for p in params}
    for u in list(_updaters):
        if ids & u.param_ids:
            return u
    return None


def _guarded_clip_grad_norm_(parameters, max_norm, norm_type=2.0, *args, **kwargs):
    """torch.nn.utils.clip_grad_norm_, refusing parameters of a layer-wise CompressedAdamW (see the module doc)."""
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    updater = _find_updater(params)
    if updater is None:
        return _clip_original[0](params, max_norm, norm_type, *args, **kwargs)
    if math.isinf(float(max_norm)) and float(norm_type) == 2.0:
        return updater.last_grad_norm()
    raise CompactError(
        f"compact: clip_grad_norm_(max_norm = {max_norm}) over the parameters of a layer-wise CompressedAdamW: each "
        "parameter was already stepped, and its gradient freed, during backward, before the global norm existed; "
        "layer-wise updates cannot clip by the global norm. Turn clipping off (Hugging Face Trainer: "
        "max_grad_norm=0) or use CompressedAdamW(layerwise=False)")


def _calling_trainer_max_grad_norm(depth=12):
    """args.max_grad_norm of the Hugging Face Trainer that calls optimizer.step(), if one does (its training loop
    clips from .grad itself, through accelerate, without calling clip_grad_norm_: with every gradient already freed it
    would clip nothing and log a norm of 0)."""
    frame = sys._getframe(1)
    for _ in range(depth):
        frame = frame.f_back
        if frame is None:
            return None
        obj = frame.f_locals.get("self")
        if obj is not None and type(obj).__module__.startswith("transformers."):
            clip = getattr(getattr(obj, "args", None), "max_grad_norm", None)
            if clip is not None:
                return clip
    return None


def _graph_task_id():
    get = getattr(torch._C, "_current_graph_task_id", None)
    return get() if get is not None else None


def _nested_backward():
    """Whether the caller runs inside a backward pass started from inside another one: the Python frames of the
    calling thread pass through torch.autograd.backward/grad twice, or through a reentrant checkpoint's backward
    (which a device thread runs without the outer pass's frames)."""
    autograd = os.path.join("torch", "autograd", "__init__.py")
    checkpoint = os.path.join("torch", "utils", "checkpoint.py")
    entries = 0
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename.endswith(checkpoint) and code.co_name == "backward":
            return True
        if code.co_filename.endswith(autograd) and code.co_name in ("backward", "grad"):
            entries += 1
        frame = frame.f_back
    return entries > 1


def _install_clip_guard():
    if not _clip_original:
        _clip_original.append(torch.nn.utils.clip_grad_norm_)
        torch.nn.utils.clip_grad_norm_ = _guarded_clip_grad_norm_


class LayerwiseUpdates:
    """The hooks and bookkeeping of ``CompressedAdamW(layerwise=True)``; the optimizer owns one."""

    def __init__(self, optimizer, accumulation_steps):
        self.opt = weakref.ref(optimizer)  # the hooks hold this object; the optimizer holds it
        self.k = accumulation_steps
        self.lock = threading.RLock()  # DDP's comm-hook callbacks may run on the process group's thread
        self.micro = 0  # backward passes finished in the current window
        self.in_backward = False  # a window-end callback is queued for the running backward pass
        self.task = None  # the autograd graph task it is queued with
        self.stepped = set()  # ids of the parameters stepped in the closing backward pass
        self.norms = {}  # parameter index -> 2-norm of the gradient it was stepped with (this window)
        self.grad_norm = None  # the last closed window's gradient 2-norm
        self.windows_since_step = 0  # windows closed since optimizer.step() was last called
        self.ddp = None
        self.futures = []
        self.param_ids = set()
        self.handles = []
        self._groups_seen = None
        self._group_of = {}
        self._index = {}
        _updaters.add(self)
        _install_clip_guard()

    # -- registration ----------------------------------------------------------------------------------------------

    def check_params(self, params):
        for p in params:
            if hasattr(p, "to_local"):
                raise CompactError("compact: CompressedAdamW(layerwise=True) does not support sharded (DTensor, "
                                   "FSDP2) parameters")

    def add_params(self, params):
        ref = weakref.ref(self)

        def hook(p):
            updater = ref()
            if updater is not None:
                updater._on_grad(p)

        for p in params:
            if id(p) in self.param_ids or not p.requires_grad:
                continue
            self.param_ids.add(id(p))
            self.handles.append(p.register_post_accumulate_grad_hook(hook))

    def _refresh_groups(self, opt):
        # load_state_dict replaces the group dicts: look groups up again whenever they changed.
        seen = [id(g) for g in opt.param_groups]
        if seen != self._groups_seen:
            self._group_of = {id(p): g for g in opt.param_groups for p in g["params"]}
            self._index = {id(p): i for i, p in enumerate(p for g in opt.param_groups for p in g["params"])}
            self._groups_seen = seen

    # -- single process --------------------------------------------------------------------------------------------

    def _on_grad(self, p):
        with self.lock:
            task = _graph_task_id()
            if self.in_backward and task != self.task and not _nested_backward():
                # The pass that queued the window-end callback never finished (an exception in backward): this is
                # a new pass. (A nested pass, reentrant checkpointing, leaves the outer pass's callback in place.)
                self.in_backward = False
                self.stepped, self.norms = set(), {}
            if not self.in_backward:
                self._check_distributed()
                self.in_backward = True
                self.task = task
                torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
            if self.micro != self.k - 1 or self.ddp is not None:
                return  # accumulating, or DDP steps it after the all-reduce (or, for a compressed layer under
                # torch's own DDP, after the layers' average of Ghat at the end of backward)
            self._step(p)

    def _check_distributed(self):
        dist = torch.distributed
        if self.ddp is None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            raise CompactError(
                "compact: a layer-wise CompressedAdamW in a process group of "
                f"{dist.get_world_size()} ranks without attach_ddp(): each parameter would be stepped before its "
                "gradient is averaged over the ranks. Call optimizer.attach_ddp(ddp_model) after wrapping the model "
                "in DistributedDataParallel (the Hugging Face Trainer's own DDP is not supported: use "
                "layerwise=False there)")

    def _step(self, p, grad=None):
        """Steps p with its gradient (or ``grad``, the averaged one, under DDP) and frees the gradient."""
        opt = self.opt()
        self._refresh_groups(opt)
        if grad is not None:
            p.grad = grad
        g = p.grad
        if g is None:
            return
        with torch.no_grad():
            self.norms[self._index[id(p)]] = torch.linalg.vector_norm(g, 2.0)
            opt._step_param(p, self._group_of[id(p)])
        p.grad = None
        self.stepped.add(id(p))

    def _end_backward(self):
        """Runs once when a backward pass that reached the optimizer's parameters ends."""
        with self.lock:
            self.in_backward = False
            if _nested_backward():
                raise CompactError(
                    "compact: a layer-wise CompressedAdamW's parameters received gradients in a backward pass nested "
                    "in another (reentrant activation checkpointing, torch.utils.checkpoint(use_reentrant=True)): "
                    "the outer pass, which may still add to them, is the micro-batch. Use use_reentrant=False "
                    "(Hugging Face: gradient_checkpointing_kwargs={'use_reentrant': False})")
            if self.micro != self.k - 1:
                self.micro += 1
                return
        for fut in self.futures:  # DDP: the buckets' steps, on the process group's thread
            fut.wait()
        with self.lock:
            self.futures = []
            if _ghat_reduction.queued:
                _ghat_reduction.run()  # average the pending Ghat now (its own queued call then finds nothing)
            opt = self.opt()
            self._refresh_groups(opt)
            for group in opt.param_groups:
                for p in group["params"]:
                    if id(p) not in self.stepped and p.grad is not None and id(p) in self.param_ids:
                        self._step(p)
            states = {}
            for group in opt.param_groups:
                for p in group["params"]:
                    layer = owner_of(p)
                    if layer is not None:
                        states[id(layer._state)] = layer._state
            opt._advance_sketches(states.values())
            norms = [self.norms[i] for i in sorted(self.norms)]
            self.grad_norm = (torch.linalg.vector_norm(torch.stack(norms), 2.0) if norms
                              else torch.tensor(0.0))
            self.norms = {}
            self.stepped = set()
            self.micro = 0
            self.windows_since_step += 1

    # -- DistributedDataParallel -----------------------------------------------------------------------------------

    def attach_ddp(self, ddp, state=None, hook=None):
        if not isinstance(ddp, torch.nn.parallel.DistributedDataParallel):
            raise CompactError(f"compact: CompressedAdamW.attach_ddp: argument ddp is a {type(ddp).__name__}, not a "
                               "torch.nn.parallel.DistributedDataParallel")
        if self.ddp is not None:
            raise CompactError("compact: CompressedAdamW.attach_ddp: this optimizer is already attached to a "
                               "DistributedDataParallel")
        if getattr(ddp, "find_unused_parameters", False):
            raise CompactError("compact: CompressedAdamW.attach_ddp: find_unused_parameters=True is not supported "
                               "(the comm hook cannot tell a parameter no rank used from one it must step)")
        if hook is None:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook, state = default_hooks.allreduce_hook, ddp.process_group
        ref = weakref.ref(self)

        def layerwise_hook(hook_state, bucket):
            fut = hook(hook_state, bucket)
            updater = ref()
            if updater is None:
                return fut
            params, grads = bucket.parameters(), bucket.gradients()
            with updater.lock:
                closing = updater.micro == updater.k - 1
            if not closing:
                return fut

            def step_bucket(f):
                result = f.value()
                result = result[0] if isinstance(result, (list, tuple)) else result
                u = ref()
                offset = 0
                with u.lock:
                    for p, g in zip(params, grads):
                        n = g.numel()
                        if id(p) in u.param_ids:
                            u._step(p, result.narrow(0, offset, n).view_as(g))
                        offset += n
                return result

            out = fut.then(step_bucket)
            with updater.lock:
                updater.futures.append(out)
            return out

        ddp.register_comm_hook(state, layerwise_hook)
        self.ddp = weakref.ref(ddp)

    # -- optimizer.step() / zero_grad() ----------------------------------------------------------------------------

    def check_step(self):
        clip = _calling_trainer_max_grad_norm()
        if clip:
            raise CompactError(
                f"compact: the Hugging Face Trainer clips gradients (max_grad_norm = {clip}) but its optimizer is a "
                "layer-wise CompressedAdamW: each parameter was already stepped, and its gradient freed, during "
                "backward, before the global norm existed; layer-wise updates cannot clip by the global norm. Set "
                "max_grad_norm=0 in TrainingArguments or use CompressedAdamW(layerwise=False)")
        with self.lock:
            micro, windows = self.micro, self.windows_since_step
            self.windows_since_step = 0
        if micro != 0:
            raise CompactError(f"compact: CompressedAdamW(layerwise=True, accumulation_steps={self.k}).step() called "
                               f"after {micro} of the window's {self.k} backward passes; layer-wise updates happen "
                               "in the window's last backward pass. Call step() once every "
                               f"{self.k} backward passes (Hugging Face Trainer: gradient_accumulation_steps={self.k})")
        if windows > 1:
            raise CompactError(f"compact: CompressedAdamW(layerwise=True, accumulation_steps={self.k}).step(): "
                               f"{windows} windows of {self.k} backward passes were stepped since the last step(); "
                               "the training loop accumulates over more backward passes than the optimizer. Give "
                               "the optimizer accumulation_steps equal to the loop's (Hugging Face Trainer: "
                               "gradient_accumulation_steps)")

    def check_zero_grad(self):
        with self.lock:
            micro = self.micro
        if micro != 0:
            raise CompactError(f"compact: CompressedAdamW(layerwise=True, accumulation_steps={self.k}).zero_grad() "
                               f"called after {micro} of the window's {self.k} backward passes would discard the "
                               "gradients accumulated so far")

    def last_grad_norm(self):
        if self.grad_norm is None:
            raise CompactError("compact: clip_grad_norm_(max_norm = inf) over a layer-wise CompressedAdamW's "
                               "parameters before any window was stepped: no gradient norm exists yet")
        return self.grad_norm

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []
        self.param_ids = set()
