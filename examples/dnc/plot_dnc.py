#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Plots of the DNC planning-budget study (docs/dnc.md) from the CSVs dnc_study writes.

Usage: plot_dnc.py DATA_DIR PNG_DIR. Reads results.csv, pcurve.csv, curves.csv, memory.csv and budget.csv (those
present); writes dnc_generalization.png (accuracy per problem size, mean over seeds with the seeds' range),
dnc_pcurve.png (accuracy against the test-time planning budget for fixed trained models: the learned time
complexity), dnc_memory.png (held bytes against p, the largest p that fits the full-rank p = n memory, and the CPU
time of each variant) and dnc_training.png (training loss, mean over seeds).
"""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TASKS = [("shortest_path", "Graph Shortest Path (size = nodes)"),
         ("min_cut", "Graph MinCut (size = nodes)"),
         ("convex_hull", "Convex Hull (size = points)"),
         ("associative_recall", "Associative Recall (size = items)")]
VARIANTS = ["full", "compact-r4", "ckpt", "compact-r4-ckpt"]
COLORS = {"const": "tab:orange", "linear": "tab:blue"}


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def by_seed(rows, key, value):
    """{label: {key: [value per seed]}} and each label's first row."""
    out, first = defaultdict(lambda: defaultdict(list)), {}
    for r in rows:
        out[r["label"]][key(r)].append(value(r))
        first.setdefault(r["label"], r)
    return out, first


def mean_range(ax, xs, per_x, color, label, style="-"):
    means = [sum(v) / len(v) for v in per_x]
    ax.plot(xs, means, style, marker="o", color=color, label=label)
    ax.fill_between(xs, [min(v) for v in per_x], [max(v) for v in per_x], color=color, alpha=0.2)


def generalization(results, png):
    tasks = [t for t in TASKS if any(r["task"] == t[0] for r in results)]
    if not tasks:
        return
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.6 * len(tasks), 4), squeeze=False)
    for col, (task, title) in enumerate(tasks):
        ax = axes[0][col]
        rows = [r for r in results if r["task"] == task]
        acc, first = by_seed(rows, lambda r: int(r["size"]), lambda r: float(r["accuracy"]))
        for label, per in acc.items():
            sizes = sorted(per)
            seeds = len(per[sizes[0]])
            name = f"p = {first[label]['budget_value']}" + ("·n" if first[label]["budget"] == "linear" else "")
            mean_range(ax, sizes, [per[s] for s in sizes], COLORS[first[label]["budget"]],
                       f"{name} ({first[label]['variant']}, {seeds} seeds)")
        train_max = max(int(r["size"]) for r in rows if r["beyond_training"] == "0")
        ax.axvline(train_max + 0.5, color="grey", lw=0.8)
        ax.set_title(title)
        ax.set_xlabel("problem size (grey line: largest training size)")
        ax.set_ylabel("solved exactly (mean; band: seeds' range)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def pcurve(rows, png):
    tasks = [t for t in TASKS if any(r["task"] == t[0] for r in rows)]
    if not tasks:
        return
    sizes = {t: sorted({int(r["size"]) for r in rows if r["task"] == t}) for t, _ in tasks}
    ncol = max(len(s) for s in sizes.values())
    fig, axes = plt.subplots(len(tasks), ncol, figsize=(4.2 * ncol, 3.4 * len(tasks)), squeeze=False)
    for row, (task, title) in enumerate(tasks):
        for col, size in enumerate(sizes[task]):
            ax = axes[row][col]
            sel = [r for r in rows if r["task"] == task and int(r["size"]) == size]
            acc, first = by_seed(sel, lambda r: int(r["planning"]), lambda r: float(r["accuracy"]))
            n = int(sel[0]["budget_unit"])
            for label, per in acc.items():
                ps = sorted(per)
                f = first[label]
                mean_range(ax, [p / n for p in ps], [per[p] for p in ps], COLORS[f["budget"]],
                           f"trained p = {f['budget_value']}" + ("·n" if f["budget"] == "linear" else ""))
                ax.axvline(int(f["trained_planning"]) / n, color=COLORS[f["budget"]], ls=":", lw=1)
            ax.set_title(f"{title.split(' (')[0]}, size {size} (n = {n})", fontsize=10)
            ax.set_xlabel("test-time planning steps p / n (dotted: the training budget)")
            ax.set_ylabel("solved exactly")
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        for col in range(len(sizes[task]), ncol):
            axes[row][col].axis("off")
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def memory(mem, budget, png):
    if not budget:
        return
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    ax = axes[0]
    lines = defaultdict(list)
    for r in mem:
        if r["task"] == "shortest_path" and r["variant"] in VARIANTS:
            lines[r["variant"]].append((int(r["planning"]), int(r["held_bytes"]) / 2**20))
    for variant in VARIANTS:
        pts = sorted(lines[variant])
        ax.plot([p for p, _ in pts], [b for _, b in pts], marker="o", label=variant)
    sp = [b for b in budget if b["task"] == "shortest_path"]
    ax.axhline(int(sp[0]["budget_bytes"]) / 2**20, color="k", lw=0.8, ls=":", label="full rank at p = n")
    ax.set_title(f"Shortest Path, {sp[0]['size']} nodes (n = {sp[0]['budget_unit']}), batch {sp[0]['batch']}")
    ax.set_xlabel("planning steps p")
    ax.set_ylabel("bytes held by autograd after forward (MiB)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    tasks = [t for t, _ in TASKS if any(b["task"] == t for b in budget)]
    width = 0.8 / len(VARIANTS)
    for k, variant in enumerate(VARIANTS):
        rows = {b["task"]: b for b in budget if b["variant"] == variant}
        xs = [i + (k - (len(VARIANTS) - 1) / 2) * width for i in range(len(tasks))]
        axes[1].bar(xs, [float(rows[t]["k_max"]) for t in tasks], width, label=variant)
        axes[2].bar(xs, [float(rows[t]["time_vs_full_at_n"]) for t in tasks], width, label=variant)
    for ax, ylabel, title in [(axes[1], "largest p / n in the full-rank p = n memory", "Planning steps per memory"),
                              (axes[2], "CPU time per iteration / full rank (both at p = n)", "Time cost")]:
        ax.set_xticks(range(len(tasks)))
        ax.set_xticklabels([t.replace("_", " ") for t in tasks])
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def training(curves, png):
    tasks = [t for t in TASKS if any(r["task"] == t[0] for r in curves)]
    if not tasks:
        return
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.6 * len(tasks), 3.8), squeeze=False)
    for col, (task, title) in enumerate(tasks):
        ax = axes[0][col]
        loss, _ = by_seed([r for r in curves if r["task"] == task], lambda r: int(r["iteration"]),
                          lambda r: float(r["loss"]))
        for label, per in loss.items():
            its = sorted(per)
            color = COLORS["const" if "-const" in label else "linear"]
            mean_range(ax, its, [per[i] for i in its], color, label, style="-")
        ax.set_title(title.split(" (")[0])
        ax.set_xlabel("iteration")
        ax.set_ylabel("training loss (mean of the last log window)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    data, out = sys.argv[1], sys.argv[2]
    generalization(read(f"{data}/results.csv"), f"{out}/dnc_generalization.png")
    pcurve(read(f"{data}/pcurve.csv"), f"{out}/dnc_pcurve.png")
    memory(read(f"{data}/memory.csv"), read(f"{data}/budget.csv"), f"{out}/dnc_memory.png")
    training(read(f"{data}/curves.csv"), f"{out}/dnc_training.png")


if __name__ == "__main__":
    main()
