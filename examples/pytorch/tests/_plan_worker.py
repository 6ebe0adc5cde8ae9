# SPDX-License-Identifier: MIT
"""Runs compact_torch.plan on tiny models, on the meta device and for real on the CPU under the tracker, and prints
one JSON line per configuration (test_plan.py runs it in a process of its own: the planner installs the tracker's
allocator hooks, CPU and meta, for the rest of its process).

    python _plan_worker.py llama:full:fp32 roberta:compact-all:fp32 llama:compact-all-8bit:fp32:64 ...

(kind:method:dtype, optionally :rank for compress()).
"""
import json
import sys

import torch
import transformers

from compact_torch import plan as P


def tiny(kind):
    """Small models of each family: LLaMA with grouped-query attention (4 heads, 2 key/value heads), RoBERTa with
    hidden dropout 0.1 (its masks go through compact's codec under saved="all")."""
    if kind == "llama":
        return transformers.LlamaConfig(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                        max_position_embeddings=256, tie_word_embeddings=False)
    return transformers.RobertaConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=128, max_position_embeddings=130, type_vocab_size=1,
                                      pad_token_id=1, num_labels=2, hidden_dropout_prob=0.1,
                                      attention_probs_dropout_prob=0.0)


def main(specs):
    torch.set_num_threads(1)
    for spec in specs:
        kind, method, dtype, *rank = spec.split(":")
        rank = float(rank[0]) if rank else None
        row = {"spec": spec}
        for device in ("cpu", "meta"):
            r = P.plan(tiny(kind), 2, 32, dtype, method, rank=rank, device=device)
            row[device] = {k: v for k, v in r.items() if k != "traced"}
            if "traced" in r:
                row[device + "_traced"] = r["traced"]
        if "+" in method:
            net = P.build_model(tiny(kind), "meta", P.DTYPES[dtype])
            row["param_numels"] = [p.numel() for p in net.parameters()]
            row["param_bytes"] = [p.numel() * p.element_size() for p in net.parameters()]
        if "8bit" in method and r["kind"] == "traced":
            row["q8_numels"] = q8_numels(kind, method, dtype, rank)
        print(json.dumps(row), flush=True)


def q8_numels(kind, method, dtype, rank):
    """The values of each moment CompressedAdamW holds in 8 bits in this configuration, after a real CPU step."""
    base, spec, mods = P.parse_method(method)
    spec, _ = P.traced_form(method, spec, mods)
    if rank is not None:
        spec = P.dataclasses.replace(spec, compress=dict(spec.compress, rank=rank))
    torch.manual_seed(0)
    net, opt = P.setup(spec, P.build_model(tiny(kind), "cpu", P.DTYPES[dtype]))
    net(**P.make_batch(net.config, 1, 8, "cpu")).loss.backward()
    opt.step()
    return sorted(st["exp_avg_q"].numel() for st in opt.state.values() if "exp_avg_q" in st)


if __name__ == "__main__":
    main(sys.argv[1:])
