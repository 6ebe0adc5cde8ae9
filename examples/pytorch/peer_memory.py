# SPDX-License-Identifier: MIT
"""compact against the memory tools a user would pick instead, side by side: the same Hugging Face model, batch and
exact tracker for every method, one process per measurement. See docs/peers.md for the results.

Methods (``--method``; ``--list`` prints them with what each installs):
  full            torch.optim.AdamW, full rank (the baseline every ratio is taken against)
  ckpt            full + Hugging Face gradient checkpointing (non-reentrant)
  galore          GaLore (galore-torch) GaLoreAdamW, rank 128 on the blocks' linear weights, gap 200, scale 0.25
  apollo          APOLLO (apollo-torch) rank 128, random projection, channel-wise scaling, scale 1
  apollo-mini     APOLLO-Mini: rank 1, tensor-wise scaling, scale 128
  flora           Flora (flora-opt), rank 128 (Adafactor-based, factored second moment)
  adamw8bit       torchao's AdamW8bit (blockwise 8-bit moments)
  adamw8bit-bnb   bitsandbytes' AdamW8bit
  cce             full + cut-cross-entropy's fused linear cross-entropy (impl "torch_compile", the one that runs on a
                  CPU)
  liger           full + Liger-Kernel's fused linear cross-entropy (Triton: GPU only)
  compact         compact's CompAct layers (the paper's: q, k, v, gate, up, down), r = n/4, SRHT, CompressedAdamW
  compact-ckpt    compact + gradient checkpointing
  compact-all     compress(saved="all"): CompAct on every linear, the chunked LM head and loss, everything else
                  autograd saves through compact's 8-bit codec, the attention's tensors included (the default)
  compact-all-exact  compact-all with attention="exact" (nothing saved inside attention modules compressed)
  compact-all-ckpt  compact-all + gradient checkpointing
  compact-all-lw  compact-all with layer-wise updates (CompressedAdamW(layerwise=True): each parameter stepped in
                  backward, its gradient freed at once)
  compact-all-lw-ckpt  compact-all-lw + gradient checkpointing
  compact-all-8bit  compact-all + CompressedAdamW(moments="8bit", full_rank_moments="8bit"): 8-bit moments for the
                  compressed layers' m x r moments and every other parameter of >= 4096 values
  compact-all-8bit-ckpt  compact-all-8bit + gradient checkpointing
  compact-all-8bit-lw  compact-all with 8-bit moments and layer-wise updates (compact's smallest optimizer state
                  and gradients)
  compact-all-8bit-lw-ckpt  compact-all-8bit-lw + gradient checkpointing
  lora            PEFT LoRA, rank 16 on q, k, v, o, gate, up and down, torch's AdamW on the adapters (fine-tuning)
  lora-velora     LoRA + PEFT's VeLoRA (VeloraConfig() defaults: A's input stored compressed)
  lora-compact    LoRA + compress(peft_model) with its defaults: each adapter's A stores a sketch of its input, the
                  frozen LM head's loss in chunks (saved="loss"), CompressedAdamW
  lora-compact-linear  the same with saved="linear": the adapters' sketches only
  lora-compact-all  LoRA + compress(peft_model, saved="all")
  lora-compact-8bit  lora-compact with CompressedAdamW's 8-bit moments
Models (``--model``): ``llama``, a stock transformers LlamaForCausalLM (hidden 512, intermediate 1376, 8 layers,
8 heads, vocabulary 32000, untied head, SDPA attention, fp32), random token ids; ``roberta``, RoBERTa-base
fine-tuning (RobertaForSequenceClassification, roberta-base's shape, 2 labels, SDPA attention). Nothing is
downloaded: both are built from their configs with random weights (memory and step time do not depend on them).

Memory (``--measure memory``, the default): one whole optimizer step after the optimizer state exists (a first step
at batch 1 creates it), on the CPU with compact_torch.memory.CpuMemoryTracker (every byte of every torch tensor,
classified as weights, gradients, optimizer state -- every tensor the optimizer's state reaches, inside its own
objects too --, activations = tensors autograd saved, temporaries = the rest the step allocated), or on a GPU with
torch.cuda.max_memory_allocated. Step time (``--measure time``): the median of --time-steps steps after two warm-up
steps, in a process of its own without the tracker. Validation loss (``--measure loss``): a smaller model of the
same family on real text (the `fortunes` corpus of Debian's fortunes package, characters as tokens), --loss-steps
steps, evaluated on held-out text; mean and spread over seeds come from the grid.

    python examples/pytorch/peer_memory.py --grid --out-dir out            # every method x shape, memory and time
    python examples/pytorch/peer_memory.py --method galore --model llama --batch 4 --seq 1024   # one row
    python examples/pytorch/peer_memory.py --loss-grid --out-dir out       # the loss runs, seeds 1-3
    python examples/pytorch/peer_memory.py --smoke                         # CI: a tiny shape, every method that runs
"""
import argparse
import csv
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
import traceback

FIELDS = ["method", "model", "batch", "seq", "measure", "status", "weights", "gradients", "optimizer", "activations",
          "temporaries", "scratch", "total", "vs_full", "peak_phase", "step_seconds", "time_vs_full", "seed", "steps",
          "val_loss", "loss_vs_full", "versions", "command"]

# The peers and the PyPI distribution each needs (versions pinned in examples/pytorch/peers-constraints.txt).
METHODS = {
    "full": (), "ckpt": (), "galore": ("galore-torch",), "apollo": ("apollo-torch",),
    "apollo-mini": ("apollo-torch",), "flora": ("flora-opt",), "adamw8bit": ("torchao",),
    "adamw8bit-bnb": ("bitsandbytes",), "cce": ("cut-cross-entropy",), "liger": ("liger-kernel",), "compact": (),
    "compact-ckpt": (), "compact-all": (), "compact-all-exact": (), "compact-all-ckpt": (),
    "compact-all-lw": (), "compact-all-lw-ckpt": (), "compact-all-8bit": (), "compact-all-8bit-ckpt": (),
    "compact-all-8bit-lw": (), "compact-all-8bit-lw-ckpt": (),
    "lora": ("peft",), "lora-velora": ("peft",), "lora-compact": ("peft",), "lora-compact-linear": ("peft",),
    "lora-compact-all": ("peft",), "lora-compact-8bit": ("peft",),
}
LORA_RANK = 16
LLAMA = dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8, vocab_size=32000)
LLAMA_LOSS = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4)
PEER_RANK = 128
LR = {"llama": 1e-3, "roberta": 2e-5}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--method", choices=sorted(METHODS), default="full")
    p.add_argument("--model", choices=["llama", "roberta"], default="llama")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--measure", choices=["memory", "time", "loss"], default="memory")
    p.add_argument("--time-steps", type=int, default=5)
    p.add_argument("--loss-steps", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", default="/usr/share/games/fortunes")
    p.add_argument("--out-dir", default="peer_memory_out")
    p.add_argument("--grid", action="store_true", help="every method at every shape of --grid-shapes, memory and time")
    p.add_argument("--grid-shapes", default="llama:4x256,llama:4x1024,roberta:16x128,roberta:32x512")
    p.add_argument("--grid-methods", default=",".join(METHODS))
    p.add_argument("--grid-measures", default="memory,time")
    p.add_argument("--loss-grid", action="store_true", help="the loss runs: --loss-methods x seeds 1-3")
    p.add_argument("--loss-methods", default="full,flora,adamw8bit-bnb,compact,compact-all,compact-all-exact")
    p.add_argument("--loss-shape", default="4x128")
    p.add_argument("--smoke", action="store_true", help="a tiny shape, every method once, checked (CI)")
    p.add_argument("--list", action="store_true", help="print the methods and what each needs")
    p.add_argument("--markdown", metavar="RESULTS_CSV",
                   help="print the Markdown tables of docs/peers.md from a results.csv and exit")
    return p.parse_args(argv)


def versions(method):
    """'torch X, transformers Y, <peer> Z' for the row."""
    from importlib import metadata

    names = ["torch", "transformers", *METHODS[method]]
    out = []
    for n in names:
        try:
            out.append(f"{n} {metadata.version(n)}")
        except metadata.PackageNotFoundError:
            out.append(f"{n} (not installed)")
    return ", ".join(out)


# ---------------------------------------------------------------------------------------------------------------
# Models and batches

def build_model(kind, vocab=None, loss_shape=False):
    import transformers

    if kind == "llama":
        shape = dict(LLAMA, **(LLAMA_LOSS if loss_shape else {}))
        if vocab is not None:
            shape["vocab_size"] = vocab
        config = transformers.LlamaConfig(**shape, max_position_embeddings=2048, tie_word_embeddings=False,
                                          attention_dropout=0.0, use_cache=False)
        config._attn_implementation = "sdpa"
        return transformers.LlamaForCausalLM(config)
    config = transformers.RobertaConfig(vocab_size=50265, hidden_size=768, num_hidden_layers=12,
                                        num_attention_heads=12, intermediate_size=3072, max_position_embeddings=514,
                                        type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
                                        eos_token_id=2, num_labels=2, hidden_dropout_prob=0.1,
                                        attention_probs_dropout_prob=0.0)
    config._attn_implementation = "sdpa"
    return transformers.RobertaForSequenceClassification(config)


def random_batch(kind, b, s, seed, device, vocab=None):
    import torch

    g = torch.Generator().manual_seed(seed)
    if kind == "llama":
        ids = torch.randint(0, vocab or LLAMA["vocab_size"], (b, s), generator=g)
        batch = {"input_ids": ids, "labels": ids.clone()}
    else:
        ids = torch.randint(3, 50265, (b, s), generator=g)
        batch = {"input_ids": ids, "attention_mask": torch.ones(b, s, dtype=torch.int64),
                 "labels": torch.randint(0, 2, (b,), generator=g)}
    return {k: v.to(device) for k, v in batch.items()}


def block_linear_weights(model):
    """The 2-D weights of the transformer blocks' linear layers: what GaLore, APOLLO and Flora project (the embeddings
    and heads stay in plain AdamW groups, as in their papers' LLaMA and RoBERTa setups)."""
    from torch import nn

    names = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and (".layers." in name or ".layer." in name):
            names.append(name + ".weight")
    params = dict(model.named_parameters())
    return [params[n] for n in names]


def split_groups(model, chosen, extra):
    ids = {id(p) for p in chosen}
    rest = [p for p in model.parameters() if id(p) not in ids and p.requires_grad]
    return [{"params": rest}, {"params": chosen, **extra}]


# ---------------------------------------------------------------------------------------------------------------
# Methods: each returns (model, optimizer) ready to train

def enable_checkpointing(model):
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False


def setup(method, model, lr):
    """Applies ``method`` to ``model`` and returns (the model to train, its optimizer): PEFT wraps the model it is
    given. Raises ImportError when the peer is not installed and RuntimeError when it cannot run here (the row then
    says so)."""
    model, opt = model, _setup(method, model, lr)
    return (opt[0], opt[1]) if isinstance(opt, tuple) else (model, opt)


def moments_of(method):
    """CompressedAdamW's moment arguments of a compact method: 8-bit everywhere for the -8bit methods."""
    return dict(moments="8bit", full_rank_moments="8bit") if "-8bit" in method else {}


def _setup(method, model, lr):
    import torch

    if method.startswith("lora"):
        import peft

        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] \
            if hasattr(model, "lm_head") else ["query", "key", "value", "dense"]
        velora = {"velora_config": peft.tuners.lora.config.VeloraConfig()} if method == "lora-velora" else {}
        model = peft.get_peft_model(model, peft.LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, lora_dropout=0.0,
                                                           target_modules=targets, **velora))
        if method.startswith("lora-compact"):
            import compact_torch as ct

            saved = {"lora-compact-all": "all", "lora-compact-linear": "linear"}.get(method)
            ct.compress(model, rank=0.25, dist="srht", period=200, **({"saved": saved} if saved else {}))
            return model, ct.CompressedAdamW(model.parameters(), lr=lr, weight_decay=0.0, **moments_of(method))
        return model, torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    if method.endswith("ckpt"):
        enable_checkpointing(model)
    if method in ("full", "ckpt"):
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    if method.startswith("compact"):
        import compact_torch as ct

        pieces = dict(saved="all", attention="exact" if method.endswith("exact") else "compressed") \
            if "-all" in method else {}
        ct.compress(model, rank=0.25, dist="srht", period=200, **pieces)
        return ct.CompressedAdamW(model.parameters(), lr=lr, weight_decay=0.0, layerwise="-lw" in method,
                                  **moments_of(method))
    if method == "galore":
        from galore_torch import GaLoreAdamW

        groups = split_groups(model, block_linear_weights(model),
                              {"rank": PEER_RANK, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std"})
        return GaLoreAdamW(groups, lr=lr, weight_decay=0.0)
    if method in ("apollo", "apollo-mini"):
        from apollo_torch import APOLLOAdamW

        extra = ({"rank": PEER_RANK, "proj": "random", "scale_type": "channel", "scale": 1,
                  "update_proj_gap": 200, "proj_type": "std"} if method == "apollo" else
                 {"rank": 1, "proj": "random", "scale_type": "tensor", "scale": 128, "update_proj_gap": 200,
                  "proj_type": "std"})
        return APOLLOAdamW(split_groups(model, block_linear_weights(model), extra), lr=lr, weight_decay=0.0)
    if method == "flora":
        from flora_opt.optimizers.torch.flora import Flora

        return Flora(model.parameters(), lr=lr, rank=PEER_RANK, relative_step=False, scale_parameter=False)
    if method == "adamw8bit":
        from torchao.optim import AdamW8bit

        return AdamW8bit(model.parameters(), lr=lr, weight_decay=0.0)
    if method == "adamw8bit-bnb":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(model.parameters(), lr=lr, weight_decay=0.0)
    if method == "cce":
        from cut_cross_entropy import linear_cross_entropy

        # The PyPI release has no transformers patch: the causal LM's loss through linear_cross_entropy (hidden
        # states and the head's weight, labels shifted by one as Hugging Face does), no logits returned.
        patch_loss(model, lambda h, w, labels: linear_cross_entropy(h, w, labels, shift=1, impl="torch_compile"))
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    if method == "liger":
        from liger_kernel.transformers import _apply_liger_kernel_to_instance

        _apply_liger_kernel_to_instance(model=model, fused_linear_cross_entropy=True, cross_entropy=False,
                                        rope=False, rms_norm=False, swiglu=False)
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    raise ValueError(method)


def patch_loss(model, loss_fn):
    """Replaces ``model``'s forward (a *ForCausalLM) by one that returns only the loss ``loss_fn(hidden, lm_head
    weight, labels)`` (a fused linear cross-entropy: no logits tensor)."""
    import types

    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model.model

    def forward(self, input_ids=None, labels=None, **kwargs):
        hidden = decoder(input_ids=input_ids, **kwargs).last_hidden_state
        return types.SimpleNamespace(loss=loss_fn(hidden, self.lm_head.weight, labels), logits=None)

    model.forward = types.MethodType(forward, model)


def train_step(model, opt, batch, marks=None, mark=None):
    loss = model(**batch).loss
    if marks is not None:
        marks["forward"] = mark()
    loss.backward()
    if marks is not None:
        marks["backward"] = mark()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)


# ---------------------------------------------------------------------------------------------------------------
# One measurement

def measure_memory(args, row):
    import torch

    from compact_torch import memory

    device = torch.device(args.device)
    tracker = None if device.type == "cuda" else memory.CpuMemoryTracker()  # before the model
    torch.manual_seed(args.seed)
    model, opt = setup(args.method, build_model(args.model).train().to(device), LR[args.model])
    train_step(model, opt, random_batch(args.model, 1, args.seq, 0, device))  # the optimizer state exists now
    batch = random_batch(args.model, args.batch, args.seq, 1, device)
    if tracker is None:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        torch.cuda.synchronize(device)
        report = memory.cuda_peak_report(model, opt, device)
        report["activations"], report["temporaries"] = report["activations+temporaries"], ""
        phase, scratch = "", 0
    else:
        report, _ = memory.tracked_step(tracker, lambda: model(**batch).loss, model, opt)
        phase = report["phase"]
        scratch = memory.compact_scratch_bytes(model)
    row.update({k: report[k] for k in ("weights", "gradients", "optimizer", "activations", "temporaries")})
    row.update(scratch=scratch, total=report["total"] + scratch, peak_phase=phase)


def measure_time(args, row):
    import torch

    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model, opt = setup(args.method, build_model(args.model).train().to(device), LR[args.model])
    batches = [random_batch(args.model, args.batch, args.seq, k, device) for k in range(args.time_steps + 2)]
    times = []
    for k, batch in enumerate(batches):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        train_step(model, opt, batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if k >= 2:  # two warm-up steps (the optimizer state, lazy initialisations, compiled kernels)
            times.append(time.perf_counter() - t0)
    row["step_seconds"] = f"{statistics.median(times):.4f}"


def measure_loss(args, row):
    """Trains the smaller LLaMA on the fortunes text for --loss-steps steps (cosine schedule with 10% warm-up) and
    evaluates the mean next-token loss on 16 fixed held-out batches."""
    import torch

    if args.model != "llama":
        raise SystemExit("peer_memory: the loss runs use the LLaMA family (--model llama)")
    from train_llama import load_corpus  # the script next to this one: the fortunes characters, every tenth
    # 1024-character chunk held out

    device = torch.device(args.device)
    train, val, vocab = load_corpus(args.data_dir)
    torch.manual_seed(args.seed)
    model, opt = setup(args.method, build_model("llama", vocab=vocab, loss_shape=True).train().to(device), LR["llama"])
    warm = max(1, args.loss_steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.loss_steps))))
    g = torch.Generator().manual_seed(args.seed)

    def window_batch(data, starts):
        idx = starts[:, None] + torch.arange(args.seq)[None, :]
        ids = data[idx].to(device)
        return {"input_ids": ids, "labels": ids}

    for _ in range(args.loss_steps):
        starts = torch.randint(0, train.numel() - args.seq - 1, (args.batch,), generator=g)
        train_step(model, opt, window_batch(train, starts))
        sched.step()
    model.eval()
    eg = torch.Generator().manual_seed(12345)
    losses = []
    with torch.no_grad():
        for _ in range(16):
            starts = torch.randint(0, val.numel() - args.seq - 1, (args.batch,), generator=eg)
            losses.append(float(model(**window_batch(val, starts)).loss))
    row.update(steps=args.loss_steps, val_loss=f"{sum(losses) / len(losses):.5f}")


def run_one(args):
    import torch

    torch.set_num_threads(args.threads)
    row = {"method": args.method, "model": args.model, "batch": args.batch, "seq": args.seq, "measure": args.measure,
           "seed": args.seed if args.measure == "loss" else "", "versions": versions(args.method),
           "command": " ".join(shlex.quote(a) for a in [os.path.basename(sys.argv[0])] + sys.argv[1:])}
    try:
        {"memory": measure_memory, "time": measure_time, "loss": measure_loss}[args.measure](args, row)
        row["status"] = "ok"
    except ImportError as e:
        row["status"] = f"not installed: {e}"
    except Exception as e:  # a peer that does not run here (a GPU-only kernel, a CPU without its backend)
        last = traceback.extract_tb(e.__traceback__)[-1]
        row["status"] = (f"does not run: {type(e).__name__}: {str(e).splitlines()[0][:160]} "
                         f"({os.path.basename(last.filename)}:{last.lineno})")
    mib = lambda k: f"{int(row[k]) / 2**20:.1f}" if row.get(k) not in (None, "") else "-"  # noqa: E731
    detail = (f"total {mib('total')} MiB (activations {mib('activations')}, temporaries {mib('temporaries')}, "
              f"optimizer {mib('optimizer')}), peak in the {row.get('peak_phase') or '?'}"
              if args.measure == "memory" else f"{row.get('step_seconds', '-')} s per step"
              if args.measure == "time" else f"val loss {row.get('val_loss', '-')}")
    print(f"[{args.method} {args.model} {args.batch}x{args.seq} {args.measure}] {row['status']}"
          + (f": {detail}" if row["status"] == "ok" else ""), flush=True)
    append_row(os.path.join(args.out_dir, "results.csv"), row)
    return 0 if row["status"] == "ok" or not row["status"].startswith("error") else 1


def append_row(path, row):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow(row)


# ---------------------------------------------------------------------------------------------------------------
# Grids and the table

def spawn(argv):
    cmd = [sys.executable, os.path.abspath(__file__)] + argv
    print("$ " + " ".join(shlex.quote(x) for x in cmd[1:]), flush=True)
    rc = subprocess.run(cmd).returncode
    if rc != 0:
        print(f"  exit status {rc} (e.g. out of memory): no row", flush=True)


def common(args):
    return ["--out-dir", args.out_dir, "--threads", str(args.threads), "--device", args.device,
            "--time-steps", str(args.time_steps)]


def grid(args):
    for shape in args.grid_shapes.split(","):
        model, bs = shape.split(":")
        b, s = bs.split("x")
        for method in args.grid_methods.split(","):
            for measure in args.grid_measures.split(","):
                spawn(["--method", method, "--model", model, "--batch", b, "--seq", s, "--measure", measure]
                      + common(args))
    finish(args.out_dir)


def loss_grid(args):
    b, s = args.loss_shape.split("x")
    for method in args.loss_methods.split(","):
        for seed in (1, 2, 3):
            spawn(["--method", method, "--model", "llama", "--batch", b, "--seq", s, "--measure", "loss",
                   "--seed", str(seed), "--loss-steps", str(args.loss_steps), "--data-dir", args.data_dir]
                  + common(args))
    finish(args.out_dir)


def finish(out_dir):
    """Fills vs_full, time_vs_full and loss_vs_full against the full-rank rows and prints the tables (markdown)."""
    path = os.path.join(out_dir, "results.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    ok = [r for r in rows if r["status"] == "ok"]
    key = lambda r: (r["model"], r["batch"], r["seq"])  # noqa: E731
    full_mem = {key(r): int(r["total"]) for r in ok if r["method"] == "full" and r["measure"] == "memory"}
    full_time = {key(r): float(r["step_seconds"]) for r in ok if r["method"] == "full" and r["measure"] == "time"}
    full_loss = [float(r["val_loss"]) for r in ok if r["method"] == "full" and r["measure"] == "loss"]
    for r in rows:
        if r["status"] != "ok":
            continue
        if r["measure"] == "memory" and key(r) in full_mem:
            r["vs_full"] = f"{int(r['total']) / full_mem[key(r)]:.3f}"
        if r["measure"] == "time" and key(r) in full_time:
            r["time_vs_full"] = f"{float(r['step_seconds']) / full_time[key(r)]:.3f}"
        if r["measure"] == "loss" and full_loss:
            r["loss_vs_full"] = f"{float(r['val_loss']) / statistics.mean(full_loss):.4f}"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    markdown(path)


def markdown(path):
    """docs/peers.md's tables from results.csv: per shape, each method's total peak (MiB and vs full rank), its
    breakdown, step time vs full rank, and the status of methods that do not run; then the loss runs."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    mem = [r for r in rows if r["measure"] == "memory"]
    times = {(r["method"], r["model"], r["batch"], r["seq"]): r for r in rows if r["measure"] == "time"}
    mib = lambda r, k: f"{int(r[k]) / 2**20:.0f}" if r.get(k) not in (None, "") else "–"  # noqa: E731
    shapes = []
    for r in mem:
        key = (r["model"], r["batch"], r["seq"])
        if key not in shapes:
            shapes.append(key)
    for model, b, s in shapes:
        print(f"\n**{model}, {b} × {s}** (MiB; total = the peak's training bytes, vs = ÷ full rank's; time = median "
              "step ÷ full rank's)\n")
        print("| method | total | vs | weights | grads | optimizer | activations | temporaries | peak in | time |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
        for r in mem:
            if (r["model"], r["batch"], r["seq"]) != (model, b, s):
                continue
            t = times.get((r["method"], model, b, s), {})
            if r["status"] != "ok":
                print(f"| {r['method']} | {r['status']} | | | | | | | | |")
                continue
            print(f"| {r['method']} | {mib(r, 'total')} | {r.get('vs_full') or '–'} | {mib(r, 'weights')} | "
                  f"{mib(r, 'gradients')} | {mib(r, 'optimizer')} | {mib(r, 'activations')} | "
                  f"{mib(r, 'temporaries')} | {r['peak_phase']} | {t.get('time_vs_full') or '–'} |")
    losses = {}
    for r in rows:
        if r["measure"] == "loss" and r["status"] == "ok":
            losses.setdefault(r["method"], []).append(float(r["val_loss"]))
    if losses:
        full = statistics.mean(losses["full"]) if "full" in losses else None
        lora = statistics.mean(losses["lora"]) if "lora" in losses else None
        print("\n| method | seeds | validation loss, mean | spread (max − min) | vs full rank | vs LoRA |")
        print("|---|---:|---:|---:|---:|---:|")
        for m, v in losses.items():
            rel = f"{statistics.mean(v) / full:.4f}" if full else "–"
            rel_lora = f"{statistics.mean(v) / lora:.4f}" if lora and m.startswith("lora") else "–"
            print(f"| {m} | {len(v)} | {statistics.mean(v):.4f} | {max(v) - min(v):.4f} | {rel} | {rel_lora} |")
    return 0


def smoke(args):
    """CI: every method at a tiny shape (2 x 32, a 2-layer model) in this process: each that is installed and runs on
    this machine takes one step with a finite loss; the rest are reported with their reason."""
    global LLAMA
    import torch

    try:
        import transformers  # noqa: F401
    except ImportError:
        print("smoke: skipped, no transformers here (it needs torch >= 2)")
        return 77

    LLAMA = dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4, vocab_size=256)
    global PEER_RANK
    PEER_RANK = 8
    torch.set_num_threads(1)
    ran, failed = [], []
    for method in METHODS:
        torch.manual_seed(0)
        try:
            model, opt = setup(method, build_model("llama").train(), 1e-3)
            losses = [train_step(model, opt, random_batch("llama", 2, 32, k, "cpu")) for k in range(2)]
        except ImportError as e:
            print(f"smoke: {method}: not installed ({e})")
            continue
        except Exception as e:  # noqa: BLE001 - the reason is reported
            print(f"smoke: {method}: does not run here ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
            failed.append(method)
            continue
        if not all(math.isfinite(x) for x in losses):
            raise SystemExit(f"smoke: {method}: non-finite loss {losses}")
        print(f"smoke: {method}: ok, losses {losses[0]:.3f} {losses[1]:.3f}")
        ran.append(method)
    for must in ("full", "ckpt", "compact", "compact-ckpt", "compact-all", "compact-all-ckpt", "compact-all-lw"):
        if must not in ran:
            raise SystemExit(f"smoke: {must} did not run")
    print(f"smoke: {len(ran)} methods ran: {', '.join(ran)}; not here: {', '.join(failed) or 'none'}")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.list:
        for m, needs in METHODS.items():
            print(f"{m:14s} {', '.join(needs) or '(torch, transformers, compact_torch)'}")
        return 0
    if args.markdown:
        return markdown(args.markdown)
    if args.smoke:
        return smoke(args)
    if args.grid:
        return grid(args) or 0
    if args.loss_grid:
        return loss_grid(args) or 0
    return run_one(args)


if __name__ == "__main__":
    sys.exit(main())
