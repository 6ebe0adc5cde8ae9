# SPDX-License-Identifier: MIT
"""docs/pytorch.png from train_llama.py's CSVs: peak-memory breakdown bars (one panel per results directory) and
the validation-loss curves of the training grid.

    python3 examples/pytorch/plot_pytorch.py --bars docs/pytorch_data/grid docs/pytorch_data/moonshot \
        docs/pytorch_data/shapes:llama-350m:256 --curves docs/pytorch_data/grid --out docs/pytorch.png
"""
import argparse
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PARTS = [("weights", "weights"), ("gradients", "gradients"), ("optimizer", "optimizer state"),
         ("activations", "activations + temporaries"), ("scratch", "compact CPU scratch (bound)")]
COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def bars(ax, rows, title):
    labels, bottoms = [], [0.0] * len(rows)
    for (key, label), color in zip(PARTS, COLORS):
        # CSVs written since temporaries were split from activations carry both; older ones hold their sum in
        # "activations".
        vals = [(int(r[key] or 0) + (int(r.get("temporaries") or 0) if key == "activations" else 0)) / 2**20
                for r in rows]
        ax.bar(range(len(rows)), vals, bottom=bottoms, color=color, label=label, width=0.7)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for i, r in enumerate(rows):
        if r.get("vs_full"):
            ax.text(i, bottoms[i], f"{float(r['vs_full']):.2f}", ha="center", va="bottom", fontsize=7)
        labels.append(r["name"].replace("compact-", "").replace("-gaussian", "-g").replace("-srht", "-s")
                      .replace("-shared", "-sh").replace("-per-layer", "-pl"))
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("peak MiB")
    ax.set_title(title, fontsize=9)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bars", nargs="+", default=[],
                   help="result directories (DIR, or DIR:CONFIG:TOKENS_PER_STEP for one group), one panel per "
                        "(model, tokens per step, vocabulary)")
    p.add_argument("--curves", nargs="*", default=[], help="result directories whose curves.csv are plotted")
    p.add_argument("--out", default="pytorch.png")
    args = p.parse_args()
    panels = []
    for spec in args.bars:
        d, _, only = spec.partition(":")  # DIR or DIR:CONFIG:TOKENS_PER_STEP
        rows = [r for r in read(os.path.join(d, "results.csv")) if r["total"]]
        if only:
            config, tokens = only.split(":")
            rows = [r for r in rows if r["config"] == config and r["tokens_per_step"] == tokens]
        groups = {}
        for r in rows:
            groups.setdefault((r["config"], r["tokens_per_step"], r["vocab"]), []).append(r)
        for (config, tokens, vocab), group in groups.items():
            panels.append((group, f"{config}, vocab {vocab}, {tokens} tokens/step ({os.path.basename(d)})"))
    n = len(panels) + len(args.curves)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 4.8), squeeze=False)
    for ax, (group, title) in zip(axes[0], panels):
        bars(ax, group, title)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(PARTS), fontsize=8, frameon=False)
    for ax, d in zip(axes[0][len(panels):], args.curves):
        curves = {}
        for r in read(os.path.join(d, "curves.csv")):
            curves.setdefault(r["name"], []).append((int(r["step"]), float(r["val_loss"])))
        for name, pts in curves.items():
            style = dict(color="black", lw=2) if name.startswith("full") else dict(lw=1, alpha=0.8)
            ax.plot([s for s, _ in pts], [v for _, v in pts], label=name, **style)
        ax.set_xlabel("step")
        ax.set_ylabel("validation loss")
        lows = [v for pts in curves.values() for _, v in pts]
        ax.set_ylim(min(lows) - 0.02, min(lows) + 0.8)
        ax.set_title(f"validation loss ({os.path.basename(d)})", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(args.out, dpi=110)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
