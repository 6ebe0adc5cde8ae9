# SPDX-License-Identifier: MIT
"""Peak training memory as the paper measures it: peak allocated bytes, split into weights, gradients, optimizer
state and activations.

On the GPU the peak is ``torch.cuda.max_memory_allocated`` (what the paper reports). On the CPU there is no such
counter, and RSS counts the allocator's caches, the corpus, libraries and freed-but-unreturned pages, so the
extension installs a tracking CPU allocator: it wraps c10's CPU allocator (which serves every CPU tensor torch
creates) and logs (pointer, bytes, allocation sequence number, free sequence number) for every allocation while
recording. The live bytes at every moment follow exactly from the log, so does the peak, and so does the set of
allocations live at the peak. Each of those is then classified by pointer: the storages of parameters and buffers
(weights), of ``.grad`` tensors (gradients) and of optimizer state tensors (optimizer state), which are still live
when recording stops; every allocation made and freed inside the measured step is an activation or temporary
(autograd's saved tensors, intermediate results, the sketch z). The count is exact for torch tensors; memory that
a library mallocs itself is not seen, which for compact is the bounded scratch of its CPU backend
(``_ext.cpu_scratch_bytes``), reported next to the peak.
"""
import torch

from . import _ext

CATEGORIES = ("weights", "gradients", "optimizer", "activations", "other")


def storage_of(t):
    """The storage of t (untyped where torch has it)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def storage_nbytes(t):
    s = storage_of(t)
    return s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()


def model_tensors(model, optimizer=None):
    """{category: [tensors]} for weights (parameters and buffers), gradients and optimizer state."""
    weights = list(model.parameters()) + list(model.buffers())
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    state = []
    if optimizer is not None:
        for st in optimizer.state.values():
            state += [v for v in st.values() if torch.is_tensor(v)]
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


class CpuMemoryTracker:
    """Exact live bytes of CPU tensors (see the module docstring). Create it before the model: tensors allocated
    before the tracker is installed are invisible to it (``analyze`` refuses to classify them)."""

    def __init__(self):
        _ext._C.tracker_install()
        self._start_seq = None
        self._missed = 0

    @staticmethod
    def live_bytes():
        return int(_ext._C.tracker_live_bytes())

    def start(self):
        """Starts recording (the allocations live now are part of the log)."""
        self._missed = int(_ext._C.tracker_missed_frees())
        self._start_seq = int(_ext._C.tracker_start())

    def stop(self, tensors_by_category):
        """Stops recording and returns the peak and its breakdown (see ``analyze``)."""
        records, tracker_peak = _ext._C.tracker_stop()
        report = analyze(records, self._start_seq, tensors_by_category)
        # Storages released without the tracker's deleter during the step (closed when their address came back).
        report["missed_frees"] = int(_ext._C.tracker_missed_frees()) - self._missed
        if report["peak"] != tracker_peak:
            raise RuntimeError(f"compact_torch.memory: the log gives a peak of {report['peak']} bytes but the "
                               f"tracker counted {tracker_peak}")
        return report


def analyze(records, start_seq, tensors_by_category):
    """Peak live bytes over the log and the bytes of each category live at that moment.

    ``records``: int64 rows (ptr, bytes, alloc_seq, free_seq or -1 if still live); rows with alloc_seq <= start_seq
    were live when recording started. Returns {"peak": bytes, "weights": ..., "gradients": ..., "optimizer": ...,
    "activations": ..., "other": ...} (the categories sum to the peak; "other" is what was live but belongs to no
    category and was not freed in the step, e.g. data or tensors of other objects), "total" (= peak - other) and
    "end": the categories live at the end.
    """
    ptr, nbytes, alloc, free = (records[:, k] for k in range(4))
    base = int(nbytes[alloc <= start_seq].sum())
    new = alloc > start_seq
    freed = free >= 0
    seqs = torch.cat([alloc[new], free[freed]])
    deltas = torch.cat([nbytes[new], -nbytes[freed]])
    order = torch.argsort(seqs)
    live = base + torch.cumsum(deltas[order], 0)
    if live.numel() == 0 or int(live.max()) <= base:
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
            if p != 0 and t.device.type == "cpu":
                category_of.setdefault(p, cat)
    live_end_ptrs = set(ptr[~freed].tolist())
    missing = [c for p, c in category_of.items() if p not in live_end_ptrs]
    if missing:
        raise RuntimeError(f"compact_torch.memory: {len(missing)} tensors ({sorted(set(missing))}) were allocated "
                           "before the tracker was installed; create CpuMemoryTracker before the model")

    out = {c: 0 for c in CATEGORIES}
    end = {c: 0 for c in CATEGORIES}
    for p, b, is_freed, live_at_peak in zip(ptr.tolist(), nbytes.tolist(), freed.tolist(), at_peak.tolist()):
        cat = "activations" if is_freed else category_of.get(p, "other")
        if live_at_peak:
            out[cat] += b
        if not is_freed:
            end[cat] += b
    assert sum(out.values()) == peak
    out["peak"] = peak
    out["total"] = peak - out["other"]  # training memory at the peak: weights + gradients + optimizer + activations
    out["end"] = end
    return out


def cuda_peak_report(model, optimizer, device):
    """After a step measured from ``torch.cuda.reset_peak_memory_stats``: the peak (max_memory_allocated) and the
    bytes of weights, gradients and optimizer state (tensor sizes); "activations" is the rest of the peak, i.e.
    activations and temporaries assuming every gradient is live at the peak (exact when the peak falls in the
    optimizer step, an underestimate of activations by the gradients not yet formed otherwise)."""
    peak = int(torch.cuda.max_memory_allocated(device))
    sizes = category_bytes(model_tensors(model, optimizer))
    out = dict(sizes)
    out["activations"] = peak - sum(sizes.values())
    out["other"] = 0
    out["peak"] = out["total"] = peak
    return out
