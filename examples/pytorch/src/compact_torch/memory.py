# SPDX-License-Identifier: MIT
"""Peak training memory as the paper measures it: peak allocated bytes, split into weights, gradients, optimizer
state, activations (tensors autograd saved for backward) and temporaries (everything else the step allocated).

This module is a measuring tool for scripts and tests; the compact_torch package never imports it. On the GPU the
peak is ``torch.cuda.max_memory_allocated`` (what the paper reports). On the CPU there is no such counter, and RSS
counts the allocator's caches, the corpus, libraries and freed-but-unreturned pages, so ``CpuMemoryTracker`` loads
compact_torch._memtrack, which replaces torch's CPU allocator *for the rest of the process* by one that wraps it
(c10's CPU allocator serves every CPU tensor torch creates) and logs (pointer, bytes, allocation sequence number,
free sequence number) for every allocation while recording. The live bytes at every moment follow exactly from the
log, so does the peak, and so does the set of allocations live at the peak. Each of those is then classified:

- weights, gradients, optimizer: the storages of parameters and buffers, of ``.grad`` tensors and of optimizer state
  tensors, which are still live when recording stops (matched by pointer);
- activations: allocations that autograd saved for backward while they were live (a saved-tensor hook notes the
  storage's pointer and the allocator's sequence number at the moment of saving; the z of a CompactLinear is one);
- temporaries: every other allocation made inside the step: intermediate results, the batch, the loss, autograd's
  gradient buffers before they land in ``.grad``, and the optimizer's temporaries (AdamW's per-parameter
  ``denom`` and, with foreach, whole lists of them);
- other: live at the peak, made before the step and belonging to no category (tensors of other objects).

The count is exact for torch tensors; memory that a library mallocs itself is not seen, which for compact is the
bounded scratch of its CPU backend (``compact_torch._ext.cpu_scratch_bytes``), reported next to the peak.
``profiler_peak`` measures the same step's peak with ``torch.profiler`` (``profile_memory=True``) for comparison.
``CpuMemoryTracker(meta=True)`` also logs meta-device storages as the bytes they would hold, with placeholder
addresses: compact_torch.plan runs a step on the meta device under it. ``tracked_step`` is the one measured step
(forward, backward, optimizer step, with the phase of the peak) of the measuring scripts and the planner.
"""
import array

import torch

CATEGORIES = ("weights", "gradients", "optimizer", "activations", "temporaries", "other")


def storage_of(t):
    """The storage of t (untyped where torch has it)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def storage_nbytes(t):
    s = storage_of(t)
    return s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()


def tensors_in(value, _seen=None, _depth=0):
    """Every tensor reachable from ``value`` through lists, tuples, dicts and the attributes of plain objects (to a
    depth of 4): an optimizer's state may hold tensors inside objects of its own (GaLore's and APOLLO's projectors
    keep their projection matrices as attributes), and those count as optimizer state."""
    seen = set() if _seen is None else _seen
    if id(value) in seen or _depth > 4:
        return []
    seen.add(id(value))
    if torch.is_tensor(value):
        if hasattr(value, "__tensor_flatten__") and type(value) is not torch.Tensor and \
                not isinstance(value, torch.nn.Parameter):
            # A tensor subclass (torchao's 8-bit optimizer state): its memory is its inner tensors'.
            names, _ = value.__tensor_flatten__()
            out = []
            for name in names:
                out += tensors_in(getattr(value, name), seen, _depth + 1)
            return out
        return [value]
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, set)):
        items = list(value)
    elif hasattr(value, "__dict__") and not isinstance(value, (type, torch.nn.Module)):
        items = list(vars(value).values())
    else:
        return []
    out = []
    for v in items:
        out += tensors_in(v, seen, _depth + 1)
    return out


def model_tensors(model, optimizer=None):
    """{category: [tensors]} for weights (parameters and buffers), gradients and optimizer state (every tensor the
    optimizer's ``state`` reaches, inside its own objects too: ``tensors_in``)."""
    weights = list(model.parameters()) + list(model.buffers())
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    state = tensors_in(list(optimizer.state.values())) if optimizer is not None else []
    return {"weights": weights, "gradients": grads, "optimizer": state}


def category_bytes(tensors_by_category):
    """{category: bytes}, each storage counted once (in the first category that holds it)."""
    seen, out = set(), {}
    for cat, tensors in tensors_by_category.items():
        total = 0
        for t in tensors:
            key = (t.device, storage_of(t).data_ptr())
            if key[1] != 0 and key not in seen:
                seen.add(key)
                total += storage_nbytes(t)
        out[cat] = total
    return out


def _memtrack():
    from . import _memtrack  # the allocator wrapper: loaded only here, by a measuring script

    return _memtrack


class CpuMemoryTracker:
    """Exact live bytes of CPU tensors (see the module docstring). Create it before the model: tensors allocated
    before the tracker is installed are invisible to it (``analyze`` refuses to classify them). Installing it
    replaces torch's CPU allocator for the rest of the process; use it in measuring scripts and tests only."""

    def __init__(self, meta=False):
        self._mt = _memtrack()
        self._mt.install()
        # meta=True also counts meta tensors as the bytes they would hold (compact_torch.plan): their storages get
        # placeholder addresses, unique while they live, and go into the same log.
        self._devices = ("cpu", "meta") if meta else ("cpu",)
        if meta:
            self._mt.install_meta()
        self.records = None
        self._start_seq = None
        self._missed = 0
        self._saved = None
        self._hooks = None

    def live_bytes(self):
        return int(self._mt.live_bytes())

    @property
    def start_seq(self):
        """The sequence number at the last ``start()`` (log rows allocated at or before it were live then)."""
        return self._start_seq

    def seq(self):
        """The allocator's sequence number now (to mark phases of a step: compare with the report's peak_seq)."""
        return int(self._mt.seq())

    def start(self):
        """Starts recording (the allocations live now are part of the log) and notes the tensors autograd saves."""
        self._missed = int(self._mt.missed_frees())
        self._saved = array.array("q")
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._hooks.__enter__()
        from . import saved  # a codec's hooks are innermost: it reports what it keeps

        saved.OBSERVERS.append(self._pack)
        self._start_seq = int(self._mt.start())

    def _pack(self, t):
        ptr = storage_of(t).data_ptr() if t.numel() and t.device.type in self._devices else 0
        if ptr:
            self._saved.append(ptr)
            self._saved.append(int(self._mt.seq()))
        return t

    @property
    def recording(self):
        """Whether the tracker is between ``start()`` and ``stop()``/``cancel()``."""
        return self._hooks is not None

    def _end(self):
        log, tracker_peak = self._mt.stop()
        self._hooks.__exit__(None, None, None)
        self._hooks = None
        from . import saved

        saved.OBSERVERS.remove(self._pack)
        return log, tracker_peak

    def cancel(self):
        """Stops recording without a report (after a step that failed); nothing when not recording."""
        if self.recording:
            self._end()

    def stop(self, tensors_by_category):
        """Stops recording and returns the peak and its breakdown (see ``analyze``)."""
        if not self.recording:
            raise RuntimeError("compact_torch.memory: CpuMemoryTracker.stop() without start()")
        log, tracker_peak = self._end()
        records = torch.frombuffer(bytearray(log), dtype=torch.int64).reshape(-1, 4) if log else \
            torch.zeros(0, 4, dtype=torch.int64)
        saved = torch.frombuffer(self._saved, dtype=torch.int64).reshape(-1, 2) if len(self._saved) else \
            torch.zeros(0, 2, dtype=torch.int64)
        # The log and the saved-tensor notes, for a caller that analyzes a variant of the step (compact_torch.plan).
        self.records, self.saved_records = records, saved
        report = analyze(records, self._start_seq, tensors_by_category, saved)
        # Storages released without the tracker's deleter during the step (closed when their address came back).
        report["missed_frees"] = int(self._mt.missed_frees()) - self._missed
        if report["peak"] != tracker_peak:
            raise RuntimeError(f"compact_torch.memory: the log gives a peak of {report['peak']} bytes but the "
                               f"tracker counted {tracker_peak}")
        return report


def _unpack(t):
    return t


PHASES = ("forward", "backward", "optimizer")


def peak_phase(seq, marks):
    """The phase of a step that holds the allocator's sequence number ``seq`` (a report's "peak_seq"): "forward",
    "backward" or "optimizer", given ``marks`` {phase: the sequence number at its end} as ``tracked_step`` notes
    them."""
    missing = [p for p in PHASES[:2] if p not in marks]
    if missing:
        raise ValueError(f"compact_torch.memory.peak_phase: argument marks = {marks!r} lacks {', '.join(missing)}")
    return "forward" if seq <= marks["forward"] else "backward" if seq <= marks["backward"] else "optimizer"


def tracked_step(tracker, loss_fn, model, optimizer, around=None):
    """One training step recorded by ``tracker`` (a CpuMemoryTracker): ``loss = loss_fn()`` (the forward pass),
    ``loss.backward()``, ``optimizer.step()``, with the tracker's sequence number noted at the end of each phase.
    The measured step of the memory scripts (peer_memory.py, finetune_memory.py) and of
    ``compact_torch.plan(device="cpu")``. ``around``, when given, runs the step: it is called with the step as a
    function of no arguments (``profiler_peak`` measures the same step with torch.profiler that way).

    Returns ``(report, marks)``: the tracker's report of the step (``CpuMemoryTracker.stop``, with the weights,
    gradients and optimizer state of ``model`` and ``optimizer`` found by pointer) plus "phase", the phase that holds
    the peak (``peak_phase``), and "around", what ``around`` returned (None without it); ``marks``: {"forward",
    "backward", "optimizer": the sequence number at its end}. The loss lives until the tracker stops (it is a tensor
    of the step). Gradients are not zeroed. Bad arguments raise before anything runs; a step that raises leaves the
    tracker stopped (``cancel``) and the error propagates.
    """
    fn = "compact_torch.memory.tracked_step"
    if not isinstance(tracker, CpuMemoryTracker):
        raise TypeError(f"{fn}: argument tracker must be a CpuMemoryTracker, got {type(tracker).__name__}")
    if tracker.recording:
        raise RuntimeError(f"{fn}: argument tracker is already recording (start() was called without stop())")
    if not callable(loss_fn):
        raise TypeError(f"{fn}: argument loss_fn must be callable, got {type(loss_fn).__name__}")
    if around is not None and not callable(around):
        raise TypeError(f"{fn}: argument around must be callable or None, got {type(around).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{fn}: argument model must be a torch.nn.Module, got {type(model).__name__}")
    if not hasattr(optimizer, "step") or not hasattr(optimizer, "state"):
        raise TypeError(f"{fn}: argument optimizer must be an optimizer (step() and state), got "
                        f"{type(optimizer).__name__}")
    marks, kept = {}, []

    def step():
        loss = loss_fn()
        if not torch.is_tensor(loss) or loss.numel() != 1:
            shape = tuple(loss.shape) if torch.is_tensor(loss) else type(loss).__name__
            raise ValueError(f"{fn}: argument loss_fn must return a one-element loss tensor, got {shape}")
        kept.append(loss)
        marks["forward"] = tracker.seq()
        loss.backward()
        marks["backward"] = tracker.seq()
        optimizer.step()
        marks["optimizer"] = tracker.seq()

    tracker.start()
    try:
        result = around(step) if around is not None else step()
        if len(marks) != len(PHASES):
            raise RuntimeError(f"{fn}: argument around returned without running the step")
    except BaseException:
        tracker.cancel()
        raise
    report = tracker.stop(model_tensors(model, optimizer))
    report["phase"] = peak_phase(report["peak_seq"], marks)
    report["around"] = result
    return report, marks


def analyze(records, start_seq, tensors_by_category, saved=None, at_seq=None):
    """Peak live bytes over the log and the bytes of each category live at that moment.

    ``records``: int64 rows (ptr, bytes, alloc_seq, free_seq or -1 if still live); rows with alloc_seq <= start_seq
    were live when recording started. ``saved``: int64 rows (ptr, seq) of the tensors autograd saved, each with the
    sequence number at the moment of saving. Returns {"peak": bytes, "weights", "gradients", "optimizer",
    "activations", "temporaries", "other"} (the categories sum to the peak), "total" (= peak - other), "peak_seq" (the
    sequence number at the peak, to place it among marks taken with the tracker's ``seq()``) and "end": the
    categories live at the end. Given ``at_seq``, the same for the moment just after that sequence number instead of
    the peak ("peak" is then the live bytes at that moment).
    """
    ptr, nbytes, alloc, free = (records[:, k] for k in range(4))
    base = int(nbytes[alloc <= start_seq].sum())
    new = alloc > start_seq
    freed = free >= 0
    seqs = torch.cat([alloc[new], free[freed]])
    deltas = torch.cat([nbytes[new], -nbytes[freed]])
    order = torch.argsort(seqs)
    live = base + torch.cumsum(deltas[order], 0)
    if at_seq is not None:
        before = seqs[order] <= at_seq
        peak, t_peak = (int(live[before][-1]) if bool(before.any()) else base), int(at_seq)
    elif live.numel() == 0 or int(live.max()) <= base:
        peak, t_peak = base, start_seq
    else:
        i = int(torch.argmax(live))  # first maximum
        peak, t_peak = int(live[i]), int(seqs[order][i])
    at_peak = (alloc <= t_peak) & (~freed | (free > t_peak))

    # Storages still live at the end, by pointer -> category.
    category_of = {}
    for cat, tensors in tensors_by_category.items():
        for t in tensors:
            p = storage_of(t).data_ptr()
            if p != 0 and t.device.type in ("cpu", "meta"):
                category_of.setdefault(p, cat)
    live_end_ptrs = set(ptr[~freed].tolist())
    missing = [c for p, c in category_of.items() if p not in live_end_ptrs]
    if missing:
        raise RuntimeError(f"compact_torch.memory: {len(missing)} tensors ({sorted(set(missing))}) were allocated "
                           "before the tracker was installed; create CpuMemoryTracker before the model")

    # The allocations autograd saved: the record of the pointer that was live at the moment of saving.
    activation = torch.zeros(records.shape[0], dtype=torch.bool)
    if saved is not None and saved.numel():
        by_ptr = {}
        for k, p in enumerate(ptr.tolist()):
            by_ptr.setdefault(p, []).append(k)
        alloc_l, free_l = alloc.tolist(), free.tolist()
        for p, seq in saved.tolist():
            for k in by_ptr.get(p, ()):
                if alloc_l[k] <= seq and (free_l[k] < 0 or free_l[k] > seq):
                    activation[k] = True
                    break

    out = {c: 0 for c in CATEGORIES}
    end = {c: 0 for c in CATEGORIES}
    rows = zip(ptr.tolist(), nbytes.tolist(), alloc.tolist(), freed.tolist(), at_peak.tolist(), activation.tolist())
    for p, b, a, is_freed, live_at_peak, saved_for_backward in rows:
        cat = category_of.get(p) if not is_freed else None
        if cat is None:
            if saved_for_backward and a > start_seq:
                cat = "activations"
            elif a > start_seq:
                cat = "temporaries"
            else:
                cat = "other"
        if live_at_peak:
            out[cat] += b
        if not is_freed:
            end[cat] += b
    assert sum(out.values()) == peak
    out["peak"] = peak
    out["peak_seq"] = t_peak
    out["total"] = peak - out["other"]  # training memory at the peak
    out["end"] = end
    return out


def profiler_peak(step):
    """Runs ``step()`` under ``torch.profiler.profile(profile_memory=True)`` (CPU) and returns the peak of the CPU
    bytes allocated by torch during it, above what was allocated when it started, from the profiler's own allocation
    events (torch >= 2.1). The profiler sees frees only of blocks allocated while it records, so this equals the
    tracker's peak minus its live bytes at the start exactly when the step frees nothing allocated before it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # Each allocation event carries the allocator's running total of profiled bytes after it (total_allocated) and
    # its own size (negative for a free): the total before the first event is the smallest "before" value.
    after, before = [], []

    def visit(node):
        if node.tag == torch._C._profiler._EventType.Allocation and node.extra_fields.device.type == "cpu":
            after.append(node.extra_fields.total_allocated)
            before.append(node.extra_fields.total_allocated - node.extra_fields.alloc_size)
        for child in node.children:
            visit(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        visit(root)
    return max(after) - min(before) if after else 0


def compact_scratch_bytes(model):
    """The largest scratch compact's CPU backend mallocs in one call (sketch or unsketch_grad) for ``model``'s
    CompactLinear layers: outside torch's allocator, so the tracker does not see it; an upper bound to add to a
    compact total (one call runs at a time)."""
    from . import _ext
    from .linear import compact_layers

    best = 0
    for layer in compact_layers(model):
        dtype = torch.float64 if layer.weight.dtype == torch.float64 else torch.float32
        for unsketch in (False, True):
            best = max(best, _ext.cpu_scratch_bytes(layer.in_features, layer.rank, layer.dist, dtype, unsketch))
    return best


def cuda_peak_report(model, optimizer, device):
    """After a step measured from ``torch.cuda.reset_peak_memory_stats``: the peak (max_memory_allocated) and the
    bytes of weights, gradients and optimizer state (tensor sizes); "activations+temporaries" is the rest of the
    peak, assuming every gradient is live at the peak (exact when the peak falls in the optimizer step, an
    underestimate of the rest by the gradients not yet formed otherwise)."""
    peak = int(torch.cuda.max_memory_allocated(device))
    sizes = category_bytes(model_tensors(model, optimizer))
    out = dict(sizes)
    out["activations"] = None
    out["temporaries"] = None
    out["activations+temporaries"] = peak - sum(sizes.values())
    out["other"] = 0
    out["peak"] = out["total"] = peak
    return out
