#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Plots of the DNC planning-budget study (docs/dnc.md) from the CSVs dnc_study writes.

Usage: plot_dnc.py DATA_DIR PNG_DIR [--tables]. Reads results.csv, pcurve.csv, curves.csv, memory.csv and budget.csv (those
present); writes dnc_generalization.png (accuracy per problem size, mean over seeds with the seeds' range),
dnc_pcurve.png (accuracy against the test-time planning budget for fixed trained models: the learned time
complexity), dnc_memory.png (held bytes against p, the largest p that fits the full-rank p = n memory, and the CPU
time of each variant) and dnc_training.png (training loss, mean over seeds). With --tables it also prints the
memory tables (bytes and largest p per variant, a planning step's bytes by allocation site) and the
result tables of docs/dnc.md (markdown): per task and size, each budget's accuracy over seeds as mean ± standard
deviation [min, max], and which budget is ahead where the seeds' ranges do not overlap.
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
            ax.set_xlabel("test-time p / n (dotted: the training p)")
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
        ax.set_ylim(0, ax.get_ylim()[1] * 1.25)  # room for the legend above the bars
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8, loc="upper left", ncol=2)
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


def stats(values):
    m = sum(values) / len(values)
    sd = (sum((v - m) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else float("nan")
    return m, sd, min(values), max(values)


def fmt(values):
    m, sd, lo, hi = stats(values)
    if len(values) == 1:
        return f"{m:.2f} (one seed)"
    return f"{m:.2f} ± {sd:.2f} [{lo:.2f}, {hi:.2f}]"


def verdict(a, b, name_a, name_b):
    """Which of two configurations is ahead, stated only when every seed of one beats every seed of the other."""
    if len(a) < 2 or len(b) < 2:
        return "one seed: none stated"
    if min(a) > max(b):
        return f"**{name_a}**"
    if min(b) > max(a):
        return f"**{name_b}**"
    return "overlap"


def budget_table(budget):
    print("\n| task (n at the largest training size) | variant | bytes per step | bytes at p = 0 | largest p (held) |"
          " largest p (peak) | CPU s / iteration at p = n | vs full | CPU s / iteration at its largest p |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for task, title in TASKS:
        for b in [b for b in budget if b["task"] == task]:
            n = int(b["budget_unit"])
            print(f"| {title.split(' (')[0]} (n = {n}) | {b['variant']} | {int(b['bytes_per_step']):,} |"
                  f" {int(b['bytes_at_p0']):,} | {b['p_max']} = {float(b['k_max']):.2f} n |"
                  f" {b['p_max_peak']} = {float(b['k_max_peak']):.2f} n | {float(b['cpu_s_at_n']):.4f} |"
                  f" {float(b['time_vs_full_at_n']):.2f} | {float(b['cpu_s_at_p_max']):.4f} |")


def breakdown_table(budget):
    """Bytes of one planning step by where they were allocated (measured by the byte counter's sites)."""
    print("\n| task | variant | bytes per step | linear-layer inputs | controller (LSTM, layer outputs) | memory step |")
    print("|---|---|---:|---:|---:|---:|")
    for task, title in TASKS:
        for b in [b for b in budget if b["task"] == task and b["variant"] in VARIANTS]:
            total = int(b["bytes_per_step"])
            cells = [f"{int(b[k]):,} ({100 * int(b[k]) / total:.1f}%)" for k in
                     ("linear_input_bytes_per_step", "controller_bytes_per_step", "memory_step_bytes_per_step")]
            print(f"| {title.split(' (')[0]} | {b['variant']} | {total:,} | " + " | ".join(cells) + " |")


def tables(results, pcurve_rows):
    for task, title in TASKS:
        rows = [r for r in results if r["task"] == task]
        if not rows:
            continue
        acc, first = by_seed(rows, lambda r: int(r["size"]), lambda r: float(r["accuracy"]))
        labels = sorted(acc, key=lambda l: first[l]["budget"])  # const first
        sizes = sorted({int(r["size"]) for r in rows})
        print(f"\n{title}: solved exactly, mean ± sd [min, max] over seeds\n")
        print("| size | n | " + " | ".join(f"{l} (p)" for l in labels) + " | ahead |")
        print("|---:|---:|" + "---|" * len(labels) + "---|")
        for size in sizes:
            beyond = any(r["beyond_training"] == "1" for r in rows if int(r["size"]) == size)
            n = next(r["budget_unit"] for r in rows if int(r["size"]) == size)
            cells = []
            for l in labels:
                p = next(r["planning"] for r in rows if r["label"] == l and int(r["size"]) == size)
                cells.append(f"{fmt(acc[l][size])} ({p})")
            ahead = verdict(acc[labels[0]][size], acc[labels[-1]][size], labels[0], labels[-1]) \
                if len(labels) == 2 else ""
            size_cell = f"**{size}**" if beyond else str(size)
            print(f"| {size_cell} | {n} | " + " | ".join(cells) + f" | {ahead} |")
        prow = [r for r in pcurve_rows if r["task"] == task]
        for size in sorted({int(r["size"]) for r in prow}):
            sel = [r for r in prow if int(r["size"]) == size]
            pacc, pfirst = by_seed(sel, lambda r: int(r["planning"]), lambda r: float(r["accuracy"]))
            ps = sorted({int(r["planning"]) for r in sel})
            n = sel[0]["budget_unit"]
            print(f"\n{title.split(' (')[0]}, size {size} (n = {n}): solved exactly at test-time p, mean [min, max]\n")
            print("| model | " + " | ".join(f"p = {p}" for p in ps) + " |")
            print("|---|" + "---|" * len(ps))
            for l in sorted(pacc, key=lambda l: pfirst[l]["budget"]):
                cells = []
                for p in ps:
                    v = pacc[l].get(p)
                    if not v:
                        cells.append("")
                        continue
                    m, _, lo, hi = stats(v)
                    mark = "*" if p == int(pfirst[l]["trained_planning"]) else ""
                    cells.append(f"{m:.2f}{mark} [{lo:.2f}, {hi:.2f}]")
                print(f"| {l} | " + " | ".join(cells) + " |")


def main():
    data, out = sys.argv[1], sys.argv[2]
    if "--tables" in sys.argv[3:]:
        budget = read(f"{data}/budget.csv")
        if budget and "k_max_peak" in budget[0]:
            budget_table(budget)
        if budget and "memory_step_bytes_per_step" in budget[0]:
            breakdown_table(budget)
        tables(read(f"{data}/results.csv"), read(f"{data}/pcurve.csv"))
    generalization(read(f"{data}/results.csv"), f"{out}/dnc_generalization.png")
    pcurve(read(f"{data}/pcurve.csv"), f"{out}/dnc_pcurve.png")
    memory(read(f"{data}/memory.csv"), read(f"{data}/budget.csv"), f"{out}/dnc_memory.png")
    training(read(f"{data}/curves.csv"), f"{out}/dnc_training.png")


if __name__ == "__main__":
    main()
