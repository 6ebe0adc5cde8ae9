# SPDX-License-Identifier: MIT
"""Peak training memory of fine-tuning RoBERTa-base at GLUE shapes: full-rank AdamW against CompAct, the measurement
behind the paper's "50% lower peak memory for fine-tuning" (Shamshoum et al., NAACL 2025). See docs/pytorch.md.

The model is Hugging Face's RobertaForSequenceClassification with roberta-base's shape (12 layers, hidden 768, 12
heads, intermediate 3072, vocabulary 50265, 2 labels), randomly initialised: memory does not depend on the weights,
and nothing is downloaded. CompAct compresses the paper's layers (compress()'s RoBERTa default: query, key, value,
intermediate.dense, output.dense) with Gaussian P, rank r = n/4 or n/8, q/k/v sharing one sketch.

One optimizer step is measured, on the CPU, with compact_torch.memory.CpuMemoryTracker (every byte of every torch
tensor, classified as weights, gradients, optimizer state, activations = tensors autograd saved for backward, and
temporaries = everything else the step allocated), after the optimizer state exists: a first step at batch 1
creates it, then gradients are set to None and the measured step (forward, backward, optimizer) runs at the
configured shape. Each configuration runs in its own process (the tracker counts process-wide). With --device cuda
the peak is torch.cuda.max_memory_allocated (the paper's counter), which does not split activations from
temporaries.

    python examples/pytorch/finetune_memory.py --grid --attention no-dropout --out-dir out   # a table, a process each
    python examples/pytorch/finetune_memory.py --method compact --rank 0.125 --batch 16 --seq 128   # one row
    python examples/pytorch/finetune_memory.py --method full --batch 16 --seq 128 --profile  # + torch.profiler's peak
    python examples/pytorch/finetune_memory.py --grid --device cuda --out-dir gpu_finetune      # on a GPU
"""
import argparse
import csv
import os
import shlex
import subprocess
import sys
import time

FIELDS = ["name", "method", "rank", "batch", "seq", "device", "amp", "attention", "scores_saved", "optimizer_impl",
          "weights",
          "gradients", "optimizer", "activations", "temporaries", "scratch", "total", "vs_full", "peak_phase",
          "profiler_peak_delta", "tracker_peak_delta", "step_seconds", "torch", "transformers", "command"]


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", action="store_true", help="every configuration of the table, a process each")
    p.add_argument("--grid-seqs", default="128,512")
    p.add_argument("--grid-batches", default="16,32")
    p.add_argument("--grid-ranks", default="0.25,0.125")
    p.add_argument("--grid-skip", default="", help="shapes to leave out, e.g. 32x512")
    p.add_argument("--method", choices=["full", "compact"], default="full")
    p.add_argument("--rank", type=float, default=0.25)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--foreach", choices=["default", "on", "off"], default="default",
                   help="torch.optim.AdamW's foreach for the full-rank baseline (default: torch's choice, the "
                        "per-parameter loop on the CPU; CUDA's default is foreach, whose temporaries are whole "
                        "lists of parameter-sized tensors)")
    p.add_argument("--attention", choices=["stock", "no-dropout"], default="stock",
                   help="stock: RoBERTa's attention dropout 0.1, for which the CPU's scaled_dot_product_attention runs "
                        "its math path and autograd saves the B x H x S x S scores, probabilities and dropout mask "
                        "(CUDA runs a fused kernel with dropout); no-dropout: attention dropout 0, which lets the CPU "
                        "run its fused (flash) kernel, saving what CUDA's fused kernels save with dropout (q, k, v, "
                        "output, log-sum-exp; no S x S tensor)")
    p.add_argument("--profile", action="store_true", help="also measure the step's peak with torch.profiler")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu (the tracker) or cuda (torch.cuda.max_memory_allocated: "
                                                   "activations and temporaries together)")
    p.add_argument("--amp", choices=["off", "bf16"], default="off", help="bf16 autocast")
    p.add_argument("--out-dir", default="finetune_memory_out")
    return p.parse_args(argv)


def roberta_base(attention, layers=12):
    import transformers

    config = transformers.RobertaConfig(vocab_size=50265, hidden_size=768, num_hidden_layers=layers,
                                        num_attention_heads=12, intermediate_size=3072, max_position_embeddings=514,
                                        type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
                                        eos_token_id=2, num_labels=2, hidden_dropout_prob=0.1,
                                        attention_probs_dropout_prob=0.1 if attention == "stock" else 0.0)
    config._attn_implementation = "sdpa"
    return transformers.RobertaForSequenceClassification(config)


def scores_saved(attention, seq):
    """Whether autograd saves an S x S attention tensor (one layer, one sequence, in train mode)."""
    import torch

    model = roberta_base(attention, layers=1).train()
    found = []

    def pack(t):
        found.append(t.dim() >= 2 and tuple(t.shape[-2:]) == (seq, seq))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(**batch_of(1, seq, 0)).loss
    return any(found)


def batch_of(b, s, seed, device="cpu"):
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 50265, (b, s), generator=g)
    batch = {"input_ids": ids, "attention_mask": torch.ones(b, s, dtype=torch.int64),
             "labels": torch.randint(0, 2, (b,), generator=g)}
    return {k: v.to(device) for k, v in batch.items()}


def run(args):
    import torch
    import transformers

    import compact_torch as ct
    from compact_torch import memory

    import contextlib

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    tracker = None if cuda else memory.CpuMemoryTracker()  # before the model: every tensor of the run is seen
    torch.manual_seed(0)
    model = roberta_base(args.attention).train().to(device)  # dropout on, as in fine-tuning
    if args.method == "compact":
        ct.compress(model, rank=args.rank, dist="gaussian", period=500)
        opt = ct.CompressedAdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
        impl = "CompressedAdamW"
    else:
        foreach = {"default": None, "on": True, "off": False}[args.foreach]
        opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, foreach=foreach)
        impl = f"AdamW(foreach={args.foreach})"

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16) if args.amp == "bf16" else contextlib.nullcontext()

    # The optimizer state exists from the first step on; create it with a batch of one.
    with autocast():
        loss = model(**batch_of(1, args.seq, 1, device)).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)

    batches = []

    def forward():  # the batch is made inside the step (one of its tensors) and lives as long as the step
        batches.append(batch_of(args.batch, args.seq, 2, device))
        with autocast():
            return model(**batches[-1]).loss

    t0 = time.perf_counter()
    profiled = None
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        forward().backward()
        opt.step()
        torch.cuda.synchronize(device)
        report = memory.cuda_peak_report(model, opt, device)
        report["activations"], report["temporaries"] = report["activations+temporaries"], ""
        phase, base, scratch, saved = "", None, 0, ""
    else:
        base = tracker.live_bytes()
        report, _ = memory.tracked_step(tracker, forward, model, opt,
                                        around=memory.profiler_peak if args.profile else None)
        profiled, phase = report["around"], report["phase"]
        batches.clear()
        scratch = memory.compact_scratch_bytes(model)
        saved = scores_saved(args.attention, args.seq)
    seconds = time.perf_counter() - t0
    row = {
        "name": (f"compact-r{round(1 / args.rank)}" if args.method == "compact" else
                 "full" if args.foreach == "default" else f"full-foreach-{args.foreach}"),
        "method": args.method, "rank": args.rank if args.method == "compact" else "", "batch": args.batch,
        "seq": args.seq, "device": device.type, "amp": args.amp, "attention": args.attention, "scores_saved": saved,
        "optimizer_impl": impl,
        **{k: report[k] for k in ("weights", "gradients", "optimizer", "activations", "temporaries")},
        "scratch": scratch, "total": report["total"] + scratch, "peak_phase": phase,
        "profiler_peak_delta": "" if profiled is None else profiled,
        "tracker_peak_delta": "" if base is None else report["peak"] - base,
        "step_seconds": f"{seconds:.1f}", "torch": torch.__version__, "transformers": transformers.__version__,
        "command": " ".join(shlex.quote(a) for a in [os.path.basename(sys.argv[0])] + sys.argv[1:]),
    }
    mib = lambda b: f"{b / 2**20:.1f}" if b != "" else "-"  # noqa: E731
    print(f"[{row['name']} b{args.batch} s{args.seq} {args.attention} {device.type}] weights {mib(row['weights'])}, "
          f"gradients {mib(row['gradients'])}, optimizer {mib(row['optimizer'])}, activations "
          f"{mib(row['activations'])}{' (with temporaries)' if cuda else ''}, temporaries {mib(row['temporaries'])}, "
          f"scratch {mib(scratch)}, total {mib(row['total'])} MiB; peak in the {phase or '?'}; {seconds:.0f} s"
          + (f"; profiler peak above start {profiled:,} B, tracker {row['tracker_peak_delta']:,} B"
             if profiled is not None else ""), flush=True)
    if report.get("missed_frees"):
        print(f"  note: {report['missed_frees']} storages were released without the tracker's deleter", flush=True)
    from train_llama import append_row  # the script next to this one

    append_row(os.path.join(args.out_dir, "results.csv"), FIELDS, row)


def finish(out_dir):
    """Fills vs_full against the full-rank row of the same shape and prints the table."""
    path = os.path.join(out_dir, "results.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    key = lambda r: (r["batch"], r["seq"], r["attention"], r.get("device", "cpu"), r.get("amp", "off"))  # noqa: E731
    full = {key(r): int(r["total"]) for r in rows if r["method"] == "full"
            and r["optimizer_impl"] == "AdamW(foreach=default)"}
    for r in rows:
        base = full.get(key(r))
        r["vs_full"] = f"{int(r['total']) / base:.3f}" if base else ""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    mib = lambda r, k: f"{int(r[k]) / 2**20:8.1f}" if r[k] else f"{'-':>8s}"  # noqa: E731
    print(f"\n{'config':16s} {'attention':10s} {'batch':>5s} {'seq':>4s} {'weights':>8s} {'grads':>8s} {'optim':>8s} "
          f"{'activ':>8s} {'temps':>8s} {'total':>8s} {'vs full':>7s} peak in")
    for r in rows:
        print(f"{r['name']:16s} {r['attention']:10s} {r['batch']:>5s} {r['seq']:>4s} {mib(r, 'weights')} "
              f"{mib(r, 'gradients')} {mib(r, 'optimizer')} {mib(r, 'activations')} {mib(r, 'temporaries')} "
              f"{mib(r, 'total')} "
              f"{r['vs_full']:>7s} {r['peak_phase']}")


def grid(args, argv):
    """Every (seq, batch) of the grid, full rank and each rank, a process each; --grid-skip drops shapes (b x s)."""
    keep = []
    skip = {"--grid", "--grid-seqs", "--grid-batches", "--grid-ranks", "--grid-skip", "--method", "--rank", "--batch",
            "--seq", "--foreach"}
    it = iter(argv)
    for a in it:
        if a in skip:
            if a != "--grid":
                next(it, None)
            continue
        keep.append(a)
    for seq in args.grid_seqs.split(","):
        for b in args.grid_batches.split(","):
            if f"{b}x{seq}" in args.grid_skip.split(","):
                continue
            ranks = args.grid_ranks.split(",")
            configs = [["--method", "full"], ["--method", "full", "--foreach", "on"]]
            configs += [["--method", "compact", "--rank", r] for r in ranks]
            for c in configs:
                cmd = [sys.executable, os.path.abspath(__file__), "--batch", b, "--seq", seq] + c + keep
                print("$ " + " ".join(shlex.quote(x) for x in cmd[1:]), flush=True)
                rc = subprocess.run(cmd).returncode
                if rc != 0:
                    print(f"  FAILED with exit status {rc} (e.g. out of memory): no row", flush=True)
    finish(args.out_dir)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.grid:
        return grid(args, argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
