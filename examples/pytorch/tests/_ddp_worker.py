# SPDX-License-Identifier: MIT
"""One rank of the DDP tests (test_ddp.py spawns two): trains the tiny LLaMA (float64) with gloo DDP on its half of
each global batch and saves, per step, the reduced gradients and the all-reduce payload, and the final weights."""
import contextlib
import functools
import gc
import os

import torch
import torch.distributed as dist

import compact_torch as ct
from conftest import tiny_llama

STEPS = 4
GLOBAL_BATCH = 4
CONTEXT = 16
VOCAB = 40


def global_batch(step):
    g = torch.Generator().manual_seed(500 + step)
    return torch.randint(0, VOCAB, (GLOBAL_BATCH, CONTEXT), generator=g)


def build(compact):
    model = tiny_llama(vocab=VOCAB, context=CONTEXT, dtype=torch.float64)
    if compact:
        ct.compress(model, rank=0.25, period=2, seed=5)
    return model, ct.CompressedAdamW(model.parameters(), lr=1e-2, weight_decay=0.01)


def teardown():
    """Ends a rank's run; call it after the caller has dropped its DistributedDataParallel. torch 1.13's Reducer, when
    it holds the process group's last reference (the group already destroyed), joins gloo's worker threads in its
    destructor while holding the GIL, and a worker that is still releasing a hook's tensor waits for the GIL: both
    ranks hang (seen once in CI, in ~ProcessGroupGloo under ~Reducer). So every rank's work is finished first (the
    barrier), the Reducer is freed while the group is still registered (the caller's `del`, then the collection
    here), and only then is the group destroyed, with its threads idle."""
    gc.collect()
    dist.destroy_process_group()


def start(rank, world, port, compact, wrapper):
    """Joins the gloo group and builds the model, its optimizer and `wrapper` (a DDP class) around it, with the
    counting comm hook."""
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, opt = build(compact)
    ddp = wrapper(model, broadcast_buffers=False)
    traffic = ct.AllReduceTraffic()
    ddp.register_comm_hook(traffic, ct.counting_allreduce_hook)
    return model, opt, ddp, traffic


def train(rank, world, port, compact, wrapper):
    """STEPS steps of `wrapper` (a DDP class) on this rank's half of each global batch; returns the model, the wrapper
    and per step the reduced gradients (as DDP left them), the all-reduce payload and the parameters before the
    step."""
    model, opt, ddp, traffic = start(rank, world, port, compact, wrapper)
    per = GLOBAL_BATCH // world
    log = []
    for step in range(STEPS):
        ids = global_batch(step)[rank * per:(rank + 1) * per]
        traffic.reset()
        ddp(ids, ids).backward()
        log.append({"grads": {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
                    "total_bytes": traffic.total_bytes, "compressed_bytes": traffic.compressed_bytes,
                    "params": {n: p.detach().clone() for n, p in model.named_parameters()}})
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model, ddp, log


def main(rank, world, port, out_dir, compact):
    model, ddp, log = train(rank, world, port, compact, ct.DistributedDataParallel)
    torch.save({"log": log, "final": model.state_dict()}, os.path.join(out_dir, f"rank{rank}_{int(compact)}.pt"))
    dist.barrier()
    del ddp
    teardown()


def spawn_main(rank, world, port, out_dir):
    for compact in (False, True):
        main(rank, world, port + int(compact), out_dir, compact)


def mismatch_main(rank, world, port, out_dir):
    """DDP over a compressed model where rank 1 alone loads a different step (as a checkpoint loaded on one rank
    would): the next forward must raise on both ranks, naming the layer. Writes each rank's message."""
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, _ = build(True)
    ddp = ct.DistributedDataParallel(model, broadcast_buffers=False)
    ids = global_batch(0)[rank:rank + 1]
    ddp(ids, ids).backward()  # agree: fine
    if rank == 1:
        model.model.layers[1].mlp.down_proj.step = 7
    try:
        ddp(ids, ids)
        message = "no error"
    except ct.CompactError as e:
        message = str(e)
    with open(os.path.join(out_dir, f"mismatch{rank}.txt"), "w") as f:
        f.write(message)
    dist.barrier()
    del ddp
    teardown()


def torch_ddp_main(rank, world, port, out_dir):
    """torch's own DistributedDataParallel (as the Hugging Face Trainer and accelerate build it) over a compress()ed
    model: the constructor leaves the Ghat placeholders alone and the layers average Ghat at the end of backward.
    Saves the final weights, which must be compact_torch.DistributedDataParallel's bit for bit (spawn_main), and the
    log (each step's all-reduce payload of DDP's buckets: the dense parameters only)."""
    model, ddp, log = train(rank, world, port, True, torch.nn.parallel.DistributedDataParallel)
    torch.save({"final": model.state_dict(), "log": log}, os.path.join(out_dir, f"torch_ddp{rank}.pt"))
    dist.barrier()
    del ddp
    teardown()


def layerwise_run(rank, world, port, wrapper, accum, layerwise):
    """STEPS steps of a compressed model under `wrapper`, each rank's half of the global batch split into `accum`
    micro-batches (DDP's no_sync on all but the last), with a layer-wise CompressedAdamW attached to the DDP (the
    counting hook inside its comm hook) or a plain one after backward. Returns the final state dict and the per-step
    all-reduce payload."""
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, _ = build(True)
    kw = dict(layerwise=True, accumulation_steps=accum) if layerwise else {}
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, weight_decay=0.01, **kw)
    ddp = wrapper(model, broadcast_buffers=False)
    traffic = ct.AllReduceTraffic()
    if layerwise:
        opt.attach_ddp(ddp, traffic, ct.counting_allreduce_hook)
    else:
        ddp.register_comm_hook(traffic, ct.counting_allreduce_hook)
    per = GLOBAL_BATCH // world
    micro = per // accum
    payload = []
    for step in range(STEPS):
        ids = global_batch(step)[rank * per:(rank + 1) * per]
        traffic.reset()
        for k in range(accum):
            part = ids[k * micro:(k + 1) * micro]
            with ddp.no_sync() if k < accum - 1 else contextlib.nullcontext():
                (ddp(part, part) / accum).backward()
        payload.append((traffic.total_bytes, traffic.compressed_bytes))
        opt.step()
        opt.zero_grad(set_to_none=True)
    final = model.state_dict()
    dist.barrier()
    del ddp, opt
    teardown()
    return final, payload


LAYERWISE_RUNS = {  # name: (wrapper, accumulation steps, layer-wise)
    "ct-plain": (ct.DistributedDataParallel, 1, False),
    "ct": (ct.DistributedDataParallel, 1, True),
    "torch": (torch.nn.parallel.DistributedDataParallel, 1, True),
    "ct-view": (functools.partial(ct.DistributedDataParallel, gradient_as_bucket_view=True), 1, True),
    "ct-accum": (ct.DistributedDataParallel, 2, True),
    "ct-accum-plain": (ct.DistributedDataParallel, 2, False),
}


def layerwise_main(rank, world, port, out_dir):
    for i, (name, (wrapper, accum, layerwise)) in enumerate(LAYERWISE_RUNS.items()):
        final, payload = layerwise_run(rank, world, port + i, wrapper, accum, layerwise)
        torch.save({"final": final, "payload": payload}, os.path.join(out_dir, f"layerwise_{name}{rank}.pt"))


def unattached_main(rank, world, port, out_dir):
    """A layer-wise CompressedAdamW under DDP without attach_ddp: the first backward must raise on both ranks before
    anything is stepped. Writes each rank's message and whether the weights stayed."""
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, _ = build(True)
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, layerwise=True)
    ddp = ct.DistributedDataParallel(model, broadcast_buffers=False)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = global_batch(0)[rank:rank + 1]
    try:
        ddp(ids, ids).backward()
        message = "no error"
    except ct.CompactError as e:
        message = str(e)
    unchanged = all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    with open(os.path.join(out_dir, f"unattached{rank}.txt"), "w") as f:
        f.write(f"{unchanged}\n{message}")
    dist.barrier()
    del ddp, opt
    teardown()
