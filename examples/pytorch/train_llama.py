# SPDX-License-Identifier: MIT
"""Train a LLaMA-style character model on the `fortunes` text with full-rank AdamW or with CompAct, and measure peak
training memory the way the paper does (peak allocated bytes: weights, gradients, optimizer state, activations and
temporaries), tokens/s and validation loss. See docs/pytorch.md for the results and the exact commands.

    python3 examples/pytorch/train_llama.py --opt compact --rank 0.5      # one configuration
    python3 examples/pytorch/train_llama.py --study --out-dir out         # the grid of docs/pytorch.md (a process each)
    python3 examples/pytorch/train_llama.py --smoke                       # a few steps of full and compact, checked
    python3 examples/pytorch/train_llama.py --bench-step --config llama-60m --batch 4 --context 256
                                                   # step time of full rank and CompAct side by side, one process
    torchrun --nproc_per_node=2 examples/pytorch/train_llama.py --ddp ... # data parallel (gloo on CPU, NCCL on GPU)

Memory: on the CPU, compact_torch.memory.CpuMemoryTracker counts the exact bytes of every live torch tensor (never
RSS) and splits activations (tensors saved for backward) from temporaries; on the GPU, torch.cuda.max_memory_allocated
(activations and temporaries together). One whole optimizer step (micro-batches, clipping, optimizer) is
measured at --memory-step, after the optimizer state exists. compact's CPU SRHT mallocs a bounded scratch outside torch
(one padded row per thread, freed on return); its bound is reported and added to the compact total. The dense
sketches' panels of P are torch tensors, counted as temporaries.
"""
import argparse
import contextlib
import csv
import math
import os
import shlex
import subprocess
import sys
import time

import torch

import compact_torch as ct
from compact_torch import memory
from compact_torch.llama import PRESETS, LlamaConfig, LlamaForCausalLM

RESULT_FIELDS = ["name", "opt", "rank", "sharing", "dist", "config", "d_model", "layers", "d_ff", "vocab", "params",
                 "batch", "context", "accum", "tokens_per_step", "steps", "device", "dtype", "weights", "gradients",
                 "optimizer", "activations", "temporaries", "scratch", "total", "vs_full", "final_val_loss",
                 "loss_vs_full", "tokens_per_s", "seconds", "allreduce_bytes_per_step", "allreduce_compressed_bytes",
                 "world", "command"]


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_argument_group("mode")
    mode.add_argument("--study", action="store_true", help="run the grid of docs/pytorch.md, one process per config")
    mode.add_argument("--smoke", action="store_true", help="a few steps of full and compact on a tiny model, checked")
    mode.add_argument("--ddp", action="store_true", help="data parallel under torchrun (gloo on CPU, NCCL on GPU)")
    mode.add_argument("--memory-only", action="store_true", help="measure one step's memory, skip evaluation")
    mode.add_argument("--bench-step", action="store_true",
                      help="time training steps of full rank and CompAct (--rank, --sharing, --bench-dists) side by "
                      "side in one process and print the tokens/s ratio and a per-phase breakdown")
    mode.add_argument("--out-dir", default="train_llama_out", help="results.csv and curves.csv go here")
    run = p.add_argument_group("configuration")
    run.add_argument("--opt", choices=["full", "compact"], default="compact")
    run.add_argument("--rank", type=float, default=0.5, help="< 1: fraction of each layer's in_features")
    run.add_argument("--sharing", choices=["shared", "per-layer"], default="shared")
    run.add_argument("--dist", choices=["gaussian", "rademacher", "srht"], default="gaussian")
    run.add_argument("--period", type=int, default=200, help="resample P every this many steps")
    run.add_argument("--alpha", type=float, default=1.0, help="scale of the compressed update")
    model = p.add_argument_group("model and data")
    model.add_argument("--config", choices=sorted(PRESETS), default="llama-small")
    model.add_argument("--d-model", type=int, help="override the preset's hidden size")
    model.add_argument("--layers", type=int, help="override the preset's number of blocks")
    model.add_argument("--heads", type=int, help="override the preset's number of heads")
    model.add_argument("--d-ff", type=int, help="override the preset's MLP size")
    model.add_argument("--vocab", type=int, default=0, help="vocabulary size (0: the characters of the corpus; "
                       "32000 gives the paper's embedding and head shapes)")
    model.add_argument("--context", type=int, default=128)
    model.add_argument("--batch", type=int, default=16, help="sequences per optimizer step (global under --ddp)")
    model.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    model.add_argument("--data-dir", default="/usr/share/games/fortunes")
    train = p.add_argument_group("training")
    train.add_argument("--steps", type=int, default=300)
    train.add_argument("--lr", type=float, default=3e-3)
    train.add_argument("--warmup", type=int, default=30)
    train.add_argument("--weight-decay", type=float, default=0.0)
    train.add_argument("--clip", type=float, default=1.0, help="clip_grad_norm_ max norm (0: off)")
    train.add_argument("--eval-every", type=int, default=50)
    train.add_argument("--eval-batches", type=int, default=16)
    train.add_argument("--memory-step", type=int, default=2, help="the step whose memory is measured")
    train.add_argument("--seed", type=int, default=1)
    train.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared 2-core machine)")
    train.add_argument("--device", default="cpu")
    train.add_argument("--amp", choices=["off", "bf16"], default="off", help="bf16 autocast (CPU or CUDA)")
    train.add_argument("--baseline-foreach", choices=["default", "off"], default="default",
                       help="torch.optim.AdamW's foreach for the full-rank baseline")
    train.add_argument("--name", help="the row's name (default: derived from the configuration)")
    study = p.add_argument_group("study")
    study.add_argument("--study-ranks", default="2,4,8", help="rank divisors of the study grid")
    study.add_argument("--study-dists", default="gaussian,srht")
    study.add_argument("--study-sharing", default="shared,per-layer")
    bench = p.add_argument_group("bench-step")
    bench.add_argument("--bench-dists", default="srht,gaussian", help="the CompAct configurations timed")
    bench.add_argument("--bench-rounds", type=int, default=7,
                       help="timed rounds; each round runs one step of every configuration, in rotating order")
    bench.add_argument("--bench-warmup", type=int, default=2, help="untimed steps of each configuration first")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------------------------
# Data: every fortune file (sorted), bytes; 1024-byte chunks, every 10th is validation (as examples/torch/).

def load_corpus(data_dir):
    names = sorted(n for n in os.listdir(data_dir) if "." not in n and os.path.isfile(os.path.join(data_dir, n)))
    if not names:
        raise SystemExit(f"train_llama: no text in {data_dir} (Debian: apt-get install fortunes)")
    text = b"".join(open(os.path.join(data_dir, n), "rb").read() for n in names)
    present = sorted(set(text))
    lut = torch.full((256,), -1, dtype=torch.long)
    lut[torch.tensor(present)] = torch.arange(len(present))
    ids = lut[torch.frombuffer(bytearray(text), dtype=torch.uint8).long()]
    chunk = torch.arange(ids.numel()) // 1024
    is_val = chunk % 10 == 9
    return ids[~is_val].clone(), ids[is_val].clone(), len(present)


def windows(data, starts, context):
    idx = starts[:, None] + torch.arange(context + 1)[None, :]
    return data[idx]


def train_batch(train, args, step, micro):
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 101 + micro)
    per_micro = args.batch // args.accum
    starts = torch.randint(0, train.numel() - args.context - 1, (per_micro,), generator=g)
    return windows(train, starts, args.context)


def eval_starts(val, args):
    g = torch.Generator().manual_seed(12345)
    return torch.randint(0, val.numel() - args.context - 1, (args.eval_batches, args.batch // args.accum), generator=g)


# ---------------------------------------------------------------------------------------------------------------
# Model and optimizer

def build_model(args, vocab):
    preset = dict(PRESETS[args.config])
    for key, flag in (("hidden_size", "d_model"), ("num_hidden_layers", "layers"), ("num_attention_heads", "heads"),
                      ("intermediate_size", "d_ff")):
        if getattr(args, flag) is not None:
            preset[key] = getattr(args, flag)
    config = LlamaConfig(vocab_size=args.vocab or vocab, max_position_embeddings=args.context, **preset)
    torch.manual_seed(args.seed)  # same initial weights for every configuration
    model = LlamaForCausalLM(config).to(args.device)
    if args.opt == "compact":
        ct.compress(model, rank=args.rank, dist=args.dist, share_inputs=args.sharing == "shared", seed=args.seed,
                    period=args.period)
    return model, config


def build_optimizer(args, model):
    if args.opt == "compact":
        return ct.CompressedAdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99), eps=1e-8,
                                  weight_decay=args.weight_decay, alpha=args.alpha)
    foreach = None if args.baseline_foreach == "default" else False
    return torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99), eps=1e-8,
                             weight_decay=args.weight_decay, foreach=foreach)


def lr_lambda(args):
    def f(step):
        if step < args.warmup:
            return (step + 1) / args.warmup
        progress = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
    return f


def config_name(args):
    if args.name:
        return args.name
    if args.opt == "full":
        return "full" if args.baseline_foreach == "default" else "full-foreach-off"
    div = round(1 / args.rank) if args.rank < 1 else None
    r = f"r{div}" if div and abs(1 / div - args.rank) < 1e-9 else f"r{args.rank:g}"
    return f"compact-{r}-{args.sharing}-{args.dist}"


# ---------------------------------------------------------------------------------------------------------------
# One configuration

def setup_distributed(args):
    """Joins the torchrun job (gloo on CPU, NCCL on GPU); returns (world, rank)."""
    import torch.distributed as dist

    cuda = args.device.startswith("cuda")
    dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        args.device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        torch.cuda.set_device(torch.device(args.device))
    world = dist.get_world_size()
    if args.batch % (world * args.accum):
        raise SystemExit(f"--batch {args.batch} must be a multiple of world size x --accum = {world * args.accum}")
    return world, dist.get_rank()


def loaded_openblas():
    """The OpenBLAS this process has loaded (ctypes handle), or None. Debian's torch runs its CPU GEMMs on it."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line and "/" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
            lib.openblas_get_num_threads.restype = ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    return None


def set_threads(threads):
    """--threads for every pool: torch's intra-op threads (which also bound compact's task pool) and, when torch runs
    on OpenBLAS (Debian's torch), OpenBLAS's own pthreads, which torch.set_num_threads leaves at one per core. Returns
    the OpenBLAS thread count (0: no OpenBLAS in the process)."""
    torch.set_num_threads(threads)
    lib = loaded_openblas()
    if lib is None:
        return 0
    lib.openblas_set_num_threads(int(threads))
    return int(lib.openblas_get_num_threads())


def run(args, world=1, rank=0):
    set_threads(args.threads)
    device = torch.device(args.device)
    train, val, vocab = load_corpus(args.data_dir)
    # The tracker comes after the corpus (data is not training state) and before the model (whose tensors it must
    # see). It is process-wide, so each configuration runs in its own process for a clean count.
    tracker = memory.CpuMemoryTracker() if device.type == "cpu" and not args.ddp else None
    model, config = build_model(args, vocab)
    params = sum(p.numel() for p in model.parameters() if ct.owner_of(p) is None)  # not the Ghat placeholders
    opt = build_optimizer(args, model)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(args))
    net = model
    traffic = None
    if args.ddp:
        net = ct.DistributedDataParallel(model, broadcast_buffers=False)  # RoPE tables are constants
        traffic = ct.AllReduceTraffic()
        net.register_comm_hook(traffic, ct.counting_allreduce_hook)

    per_rank = args.batch // world
    mem, curve, traffic_steps = None, [], []
    tokens = 0
    train_time = 0.0
    loss_sum, loss_count = 0.0, 0
    if rank == 0:
        print(f"[{config_name(args)}] {params / 1e6:.2f} M parameters, vocab {config.vocab_size}, "
              f"{args.batch} x {args.context} tokens per step, world {world}", flush=True)
    for step in range(args.steps):
        measure = step == args.memory_step
        if measure:
            if tracker is not None:
                tracker.start()
            elif device.type == "cuda":
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
        if traffic is not None:
            traffic.reset()
        t0 = time.perf_counter()
        step_loss = train_step(net, opt, args, train, step, rank, per_rank, device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        if measure:
            if tracker is not None:
                mem = tracker.stop(memory.model_tensors(model, opt))
            elif device.type == "cuda":
                mem = memory.cuda_peak_report(model, opt, device)
        if traffic is not None:
            traffic_steps.append((traffic.total_bytes, traffic.compressed_bytes))
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step > args.memory_step or args.steps <= args.memory_step + 1:
            train_time += dt
            tokens += args.batch * args.context
        if world > 1:  # log the global batch's loss, not this rank's half (one scalar, outside DDP's buckets)
            t = torch.tensor([step_loss / world], dtype=torch.float64)
            torch.distributed.all_reduce(t)
            step_loss = float(t)
        loss_sum, loss_count = loss_sum + step_loss, loss_count + 1
        last = step + 1 == args.steps
        if not args.memory_only and ((step + 1) % args.eval_every == 0 or last):
            v = evaluate(model, val, args, device)
            curve.append((step + 1, loss_sum / loss_count, v))
            loss_sum, loss_count = 0.0, 0
            if rank == 0:
                print(f"  step {step + 1:5d}  train {curve[-1][1]:.4f}  val {v:.4f}  "
                      f"{tokens / max(train_time, 1e-9):8.0f} tok/s", flush=True)
        if args.memory_only and step >= args.memory_step:
            break
    scratch = memory.compact_scratch_bytes(model) if device.type == "cpu" else 0
    row = {
        "name": config_name(args), "opt": args.opt, "rank": args.rank if args.opt == "compact" else "",
        "sharing": args.sharing if args.opt == "compact" else "", "dist": args.dist if args.opt == "compact" else "",
        "config": args.config, "d_model": config.hidden_size, "layers": config.num_hidden_layers,
        "d_ff": config.intermediate_size, "vocab": config.vocab_size, "params": params, "batch": args.batch,
        "context": args.context, "accum": args.accum, "tokens_per_step": args.batch * args.context,
        "steps": args.steps, "device": device.type, "dtype": "bf16-autocast" if args.amp == "bf16" else "fp32",
        "final_val_loss": f"{curve[-1][2]:.5f}" if curve else "", "tokens_per_s": f"{tokens / max(train_time, 1e-9):.0f}",
        "seconds": f"{train_time:.1f}", "world": world,
        "command": " ".join(shlex.quote(a) for a in [os.path.basename(sys.argv[0])] + sys.argv[1:]),
    }
    if mem is not None:
        row.update({k: mem[k] for k in ("weights", "gradients", "optimizer", "activations", "temporaries")})
        if mem["activations"] is None:  # the GPU's peak does not split them: the rest of the peak, together
            row["activations"], row["temporaries"] = mem["activations+temporaries"], ""
        row["scratch"] = scratch
        row["total"] = mem["total"] + scratch
    if traffic_steps:
        steady = traffic_steps[-1]
        row["allreduce_bytes_per_step"], row["allreduce_compressed_bytes"] = steady
        full_total, full_compact = ct.distributed.uncompressed_gradient_bytes(model)
        if rank == 0:
            print(f"  all-reduce payload per step: {steady[0]:,} bytes (compressed gradients {steady[1]:,}); "
                  f"full rank would send {full_total:,} ({full_compact:,} for the compressed layers' m x n): "
                  f"total ratio {steady[0] / full_total:.4f}, compressed layers "
                  f"{steady[1] / full_compact if full_compact else float('nan'):.4f}", flush=True)
    if rank == 0 and mem is not None:
        fields = ("weights", "gradients", "optimizer", "activations", "temporaries", "scratch", "total")
        print("  peak memory (bytes): " + ", ".join(f"{k} {row[k]:,}" for k in fields if row[k] != ""), flush=True)
        if mem.get("missed_frees"):
            print(f"  note: {mem['missed_frees']} storages were released without the tracker's deleter", flush=True)
    row["ghat_bytes"] = sum(layer.out_features * layer.rank * layer.weight.element_size()
                            for layer in ct.compact_layers(model))
    return row, curve, traffic_steps


def train_step(net, opt, args, train, step, rank, per_rank, device, timer=None):
    """One optimizer step over --accum micro-batches; returns the loss. With a PhaseTimer (--bench-step), the forward,
    backward and optimizer phases are added to it."""
    total = 0.0
    per_micro = per_rank // args.accum
    for micro in range(args.accum):
        batch = train_batch(train, args, step, micro)  # the global micro-batch; this rank takes its slice
        batch = batch[rank * per_micro:(rank + 1) * per_micro].to(device)
        t0 = time.perf_counter()
        with autocast(args, device):
            loss = net(batch[:, :-1], batch[:, 1:]) / args.accum
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        total += float(loss)
        if timer is not None:
            timer.t["forward"] += t1 - t0
            timer.t["backward"] += t2 - t1
    if args.clip > 0:
        torch.nn.utils.clip_grad_norm_(net.parameters(), args.clip)
    t0 = time.perf_counter()
    opt.step()
    if timer is not None:
        timer.t["optimizer"] += time.perf_counter() - t0
    return total


def autocast(args, device):
    """bf16 autocast (CPU or CUDA) with --amp bf16, else nothing (torch 1.13 probes CUDA even for a disabled
    autocast)."""
    if args.amp == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def evaluate(model, val, args, device):
    model.eval()
    losses = []
    for starts in eval_starts(val, args):
        batch = windows(val, starts, args.context).to(device)
        with autocast(args, device):
            losses.append(float(model(batch[:, :-1], batch[:, 1:])))
    model.train()
    return sum(losses) / len(losses)


# ---------------------------------------------------------------------------------------------------------------
# Output

def append_row(path, fields, row):
    """Appends ``row`` (missing fields empty) to the CSV at ``path``, writing the header first for a new file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in fields})


def write_results(out_dir, row, curve):
    append_row(os.path.join(out_dir, "results.csv"), RESULT_FIELDS, row)
    path = os.path.join(out_dir, "curves.csv")
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["name", "step", "train_loss", "val_loss"])
        for s, tl, vl in curve:
            w.writerow([row["name"], s, f"{tl:.5f}", f"{vl:.5f}"])


def finish_relative(out_dir):
    """Fills vs_full and loss_vs_full of results.csv against its full-rank row of the same model and batch."""
    path = os.path.join(out_dir, "results.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    key = lambda r: (r["config"], r["d_model"], r["layers"], r["vocab"], r["batch"], r["context"], r["device"])  # noqa
    full = {key(r): r for r in rows if r["opt"] == "full" and r["name"] == "full"}
    for r in rows:
        base = full.get(key(r))
        if base is None:
            continue
        if r["total"] and base["total"]:
            r["vs_full"] = f"{int(r['total']) / int(base['total']):.4f}"
        if r["final_val_loss"] and base["final_val_loss"]:
            r["loss_vs_full"] = f"{float(r['final_val_loss']) / float(base['final_val_loss']) - 1:+.4f}"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RESULT_FIELDS)
        w.writeheader()
        w.writerows(rows)
    return rows


def study(args, argv):
    """Every configuration in its own process (a clean allocation count each), appended to out_dir/results.csv."""
    base = [a for a in argv if a not in ("--study",)]
    for flag in ("--study-ranks", "--study-dists", "--study-sharing", "--opt", "--rank", "--sharing", "--dist"):
        while flag in base:
            i = base.index(flag)
            del base[i:i + 2]
    configs = [["--opt", "full"]]
    for div in args.study_ranks.split(","):
        for sharing in args.study_sharing.split(","):
            for dist in args.study_dists.split(","):
                configs.append(["--opt", "compact", "--rank", str(1 / int(div)), "--sharing", sharing, "--dist", dist])
    for c in configs:
        cmd = [sys.executable, os.path.abspath(__file__)] + base + c
        print("$ " + " ".join(shlex.quote(a) for a in cmd[1:]), flush=True)
        subprocess.run(cmd, check=True)
    rows = finish_relative(args.out_dir)
    print_table(rows)


def print_table(rows):
    print(f"\n{'name':34s} {'total MiB':>10s} {'vs full':>8s} {'val loss':>9s} {'vs full':>8s} {'tok/s':>7s}")
    for r in rows:
        total = f"{int(r['total']) / 2**20:.2f}" if r["total"] else "-"
        print(f"{r['name']:34s} {total:>10s} {r['vs_full'] or '-':>8s} {r['final_val_loss'] or '-':>9s} "
              f"{r['loss_vs_full'] or '-':>8s} {r['tokens_per_s']:>7s}")


def smoke(args):
    """A few steps of full rank and compact on a tiny model: finite, falling losses; compact's peak below full's;
    under --ddp, the all-reduce payload of the compressed layers equals sum m r (r = n/4 here)."""
    args.config, args.context, args.batch, args.steps, args.eval_every, args.eval_batches = "llama-tiny", 32, 8, 6, 3, 2
    args.warmup, args.memory_step, args.rank, args.lr = 1, 2, 0.25, 1e-2
    world, rank = setup_distributed(args) if args.ddp else (1, 0)
    results = {}
    for opt in ("full", "compact"):
        args.opt, args.name = opt, None
        row, curve, traffic_steps = run(args, world, rank)
        results[opt] = (row, curve, traffic_steps)
        if rank == 0:
            write_results(args.out_dir, row, curve)
    ok = True
    for opt, (row, curve, _) in results.items():
        losses = [c[1] for c in curve]
        if not all(math.isfinite(x) for x in losses) or not losses[-1] < losses[0]:
            print(f"FAILED: {opt} train losses {losses} are not finite and falling")
            ok = False
    if not args.ddp:
        full, comp = int(results["full"][0]["total"]), int(results["compact"][0]["total"])
        print(f"peak total: full {full:,} bytes, compact {comp:,} ({comp / full:.3f})")
        ok &= comp < full
    else:
        row, _, traffic_steps = results["compact"]
        if traffic_steps[-1][1] != row["ghat_bytes"]:
            print(f"FAILED: compressed all-reduce payload {traffic_steps[-1][1]} != sum m r x 4 = {row['ghat_bytes']}")
            ok = False
        torch.distributed.destroy_process_group()
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------------------------
# Step time, side by side

class PhaseTimer:
    """Wall time of one training step split into phases: forward (of which compact's sketches), backward (of which
    compact's Ghat = dy^T z), optimizer (of which CompAct's update of the compressed layers: moments and the
    decompression W += alpha N P^T) and the rest (batch, clipping, zero_grad). The compact parts are timed by wrapping
    the operators and CompressedAdamW._compressed_update while a timer is active; nothing is wrapped otherwise."""

    PHASES = ("forward", "sketch", "backward", "ghat", "optimizer", "compressed_update", "other", "total")

    def __init__(self):
        self.t = dict.fromkeys(self.PHASES, 0.0)

    def wrap(self, key, fn):
        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.t[key] += time.perf_counter() - t0
        return timed


@contextlib.contextmanager
def timing_compact(timer):
    """Routes compact's sketch and Ghat operators and the compressed update through `timer` while active."""
    from compact_torch import _ext, optim

    class Ops:  # the operators the layers call through _ext.ops, the two timed ones wrapped
        def __getattr__(self, name):
            return getattr(real_ops, name)

    real_ops, real_update = _ext.ops, optim.CompressedAdamW._compressed_update
    ops = Ops()
    ops.sketch = timer.wrap("sketch", real_ops.sketch)
    ops.compressed_grad = timer.wrap("ghat", real_ops.compressed_grad)
    _ext.ops = ops
    optim.CompressedAdamW._compressed_update = timer.wrap("compressed_update", real_update)
    try:
        yield
    finally:
        _ext.ops, optim.CompressedAdamW._compressed_update = real_ops, real_update


def timed_step(net, opt, args, train, step, device, timer):
    """train_step of one process (the whole batch) with its phases timed, then zero_grad."""
    t_start = time.perf_counter()
    with timing_compact(timer):
        train_step(net, opt, args, train, step, 0, args.batch, device, timer)
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    total = time.perf_counter() - t_start
    timer.t["total"] += total
    timer.t["other"] += total - timer.t["forward"] - timer.t["backward"] - timer.t["optimizer"]
    return total


def bench_step(args):
    """Full rank and each CompAct configuration of --bench-dists, built in this process from the same initial weights,
    stepped in rounds (one step of each per round, the order rotating so that load drifts hit all alike). Prints the
    median step time, tokens/s, the ratio to full rank (median of the per-round ratios) and the per-phase medians."""
    import platform
    import statistics

    blas_threads = set_threads(args.threads)
    device = torch.device(args.device)
    train, _, vocab = load_corpus(args.data_dir)
    configs = [("full", dict(opt="full"))]
    for dist in args.bench_dists.split(","):
        configs.append((f"compact-{args.sharing}-{dist}", dict(opt="compact", dist=dist)))
    runs = []
    for name, over in configs:
        a = argparse.Namespace(**{**vars(args), **over})
        model, _ = build_model(a, vocab)
        runs.append((name, a, model, build_optimizer(a, model)))
    tokens = args.batch * args.context
    load0 = os.getloadavg()
    for step in range(args.bench_warmup):
        for name, a, model, opt in runs:
            timed_step(model, opt, a, train, step, device, PhaseTimer())
    samples = {name: [] for name, *_ in runs}
    for rnd in range(args.bench_rounds):
        k = rnd % len(runs)
        for name, a, model, opt in runs[k:] + runs[:k]:
            timer = PhaseTimer()
            timed_step(model, opt, a, train, args.bench_warmup + rnd, device, timer)
            samples[name].append(timer.t)
    load1 = os.getloadavg()
    full = samples["full"]
    print(f"\nstep time, {args.config} ({args.batch} x {args.context} = {tokens} tokens per step), rank {args.rank} "
          f"{args.sharing}, torch {torch.__version__}, {torch.get_num_threads()} torch thread(s), OpenBLAS threads "
          f"{blas_threads} (0: none loaded), device {device}, compact CPU ISA {getattr(ct, 'cpu_isa', lambda: '?')()}, "
          f"{platform.processor() or platform.machine()}; load average "
          f"{load0[0]:.2f} at the start, {load1[0]:.2f} at the end; medians of {args.bench_rounds} rounds")
    head = ("config", "step ms", "tok/s", "vs full", "forward", "(sketch)", "backward", "(Ghat)", "optimizer",
            "(compact upd.)", "other")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    ratios = {}
    for name, *_ in runs:
        med = {key: statistics.median(t[key] for t in samples[name]) * 1e3 for key in PhaseTimer.PHASES}
        ratio = statistics.median(f["total"] / t["total"] for f, t in zip(full, samples[name]))
        ratios[name] = ratio
        compact_cell = (lambda key: f"{med[key]:.1f}") if name != "full" else (lambda key: "-")
        print(f"| {name} | {med['total']:.1f} | {tokens / med['total'] * 1e3:.0f} | {ratio:.3f} | "
              f"{med['forward']:.1f} | {compact_cell('sketch')} | {med['backward']:.1f} | {compact_cell('ghat')} | "
              f"{med['optimizer']:.1f} | {compact_cell('compressed_update')} | {med['other']:.1f} |")
    for name, ratio in ratios.items():
        if name != "full":
            print(f"{name}: {ratio:.3f}x full rank's tokens/s")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.bench_step:
        return bench_step(args)
    if args.study:
        return study(args, argv)
    if args.smoke:
        return smoke(args)
    world, rank = setup_distributed(args) if args.ddp else (1, 0)
    row, curve, _ = run(args, world, rank)
    if rank == 0:
        write_results(args.out_dir, row, curve)
    if args.ddp:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
