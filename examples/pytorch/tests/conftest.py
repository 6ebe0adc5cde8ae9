# SPDX-License-Identifier: MIT
"""Shared helpers of the compact_torch tests. Every test module starts with pytest.importorskip("torch"), so the
suite is skipped, saying why, only where torch is missing; a missing or stale extension is an error."""
import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

# Allocated when pytest imports this file, before any test module can install compact_torch's allocation tracker.
EARLY_TENSOR = torch.zeros(16)

# fp32 and fp64 unit roundoff: the error of a sum of k products is at most gamma_k = k u / (1 - k u) times the sum of
# their absolute values (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).
UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}


def gamma(k, dtype):
    u = UNIT_ROUNDOFF[dtype]
    return k * u / (1 - k * u)


class SavedTensorBytes:
    """Counts the bytes of the distinct storages autograd saves for backward (inside the context), leaving out
    parameters (autograd references them; they are not activations)."""

    def __init__(self, model=None):
        self._params = set() if model is None else {p.data_ptr() for p in model.parameters()}
        self.ptrs = {}

    def _pack(self, t):
        ptr = t.data_ptr() if t.numel() else None
        if ptr is not None and ptr not in self._params:
            storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
            nbytes = storage.nbytes() if hasattr(storage, "nbytes") else storage.size() * t.element_size()
            self.ptrs[storage.data_ptr()] = nbytes
        return t

    @property
    def bytes(self):
        return sum(self.ptrs.values())

    def __enter__(self):
        self._ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def tiny_llama(vocab=40, context=16, layers=2, dtype=torch.float32, seed=0):
    from compact_torch.llama import LlamaConfig, LlamaForCausalLM, PRESETS

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, max_position_embeddings=context,
                         **{**PRESETS["llama-tiny"], "num_hidden_layers": layers})
    return LlamaForCausalLM(config).to(dtype)
