# SPDX-License-Identifier: MIT
"""One rank of the FSDP2 test (test_fsdp.py spawns two): trains the tiny LLaMA (float64) sharded with
compact_torch.fully_shard over gloo on its half of each global batch, and saves, per step, the reduced gradients
(gathered whole), the shapes of its local shards, and the final weights."""
import os

import torch
import torch.distributed as dist

import compact_torch as ct
from _ddp_worker import GLOBAL_BATCH, STEPS, build, global_batch


def main(rank, world, port, out_dir):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, _ = build(True)
    for block in model.model.layers:
        ct.fully_shard(block)
    ct.fully_shard(model)
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    per = GLOBAL_BATCH // world
    log = []
    for step in range(STEPS):
        ids = global_batch(step)[rank * per:(rank + 1) * per]
        model(ids, ids).backward()
        q = model.model.layers[0].self_attn.q_proj
        local = {"ghat_grad": tuple(q.weight_ghat.grad.to_local().shape), "weight": tuple(q.weight.to_local().shape),
                 "ghat_shard_dims": [getattr(pl, "dim", None) for pl in q.weight_ghat.grad.placements]}
        log.append({"grads": {n: p.grad.full_tensor() for n, p in model.named_parameters() if p.grad is not None},
                    "local": local})
        opt.step()
        opt.zero_grad(set_to_none=True)
    final = {n: p.full_tensor() for n, p in model.named_parameters() if ct.owner_of(p) is None}
    steps = sorted({layer.step for layer in ct.compact_layers(model)})
    torch.save({"log": log, "final": final, "steps": steps}, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()
