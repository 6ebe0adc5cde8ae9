#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Plots of the DNC planning-budget study (docs/dnc.md) from the CSVs dnc_study writes.

Usage: plot_dnc.py DATA_DIR PNG_DIR. Reads results.csv, curves.csv, memory.csv and budget.csv; writes
dnc_generalization.png (accuracy per problem size, per run), dnc_memory.png (held bytes against the planning
budget, with the memory budget and the per-step composition) and dnc_training.png (training loss).
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TASKS = [("associative_recall", "Associative Recall (size = items)"),
         ("shortest_path", "Graph Shortest Path (size = nodes)")]


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def generalization(results, png):
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for col, (task, title) in enumerate(TASKS):
        runs = defaultdict(list)
        for r in results:
            if r["task"] == task:
                runs[r["label"]].append(r)
        for label, rows in runs.items():
            rows.sort(key=lambda r: int(r["size"]))
            sizes = [int(r["size"]) for r in rows]
            style = "--" if rows[0]["rank_div"] != "0" else "-"
            axes[0][col].plot(sizes, [float(r["accuracy"]) for r in rows], style, marker="o", label=label)
            axes[1][col].plot(sizes, [float(r["unit_accuracy"]) for r in rows], style, marker="o", label=label)
        if runs:
            train_max = max(int(r["size"]) for r in results if r["task"] == task and r["beyond_training"] == "0")
            for row in axes:
                row[col].axvline(train_max + 0.5, color="grey", lw=0.8)
        axes[0][col].set_title(title)
        axes[0][col].set_ylabel("solved exactly")
        axes[1][col].set_ylabel("bits right" if task == "associative_recall" else "path edges right")
        axes[1][col].set_xlabel("problem size (grey line: largest training size)")
        axes[0][col].legend(fontsize=8)
        for row in axes:
            row[col].set_ylim(-0.02, 1.02)
            row[col].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def memory(mem, budget, png):
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for col, (task, title) in enumerate(TASKS):
        ax = axes[col]
        lines = defaultdict(list)
        for r in mem:
            if r["task"] == task:
                lines[r["variant"]].append((int(r["planning"]), int(r["held_bytes"]) / 2**20))
        for variant, pts in lines.items():
            pts.sort()
            ax.plot([p for p, _ in pts], [b for _, b in pts], marker="o", label=variant)
        rows = [b for b in budget if b["task"] == task]
        if rows:
            ax.axhline(int(rows[0]["budget_bytes"]) / 2**20, color="k", lw=0.8, ls=":",
                       label="budget: full rank at p = n")
        ax.set_title(title.split(" (")[0] + f" (largest training size, batch {rows[0]['batch'] if rows else '?'})")
        ax.set_xlabel("planning steps p")
        ax.set_ylabel("bytes held by autograd after forward (MiB)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    # Composition of one planning step (associative recall).
    ax = axes[2]
    rows = [b for b in budget if b["task"] == "associative_recall"]
    names = [r["variant"] for r in rows]
    lin = [int(r["linear_input_bytes_per_step"]) / 1024 for r in rows]
    ops = [int(r["memory_op_bytes_per_step"]) / 1024 for r in rows]
    rest = [int(r["bytes_per_step"]) / 1024 - a - b for r, a, b in zip(rows, lin, ops)]
    ax.bar(names, ops, label="memory operations and state")
    ax.bar(names, rest, bottom=ops, label="LSTM gates/cell, interface")
    ax.bar(names, lin, bottom=[a + b for a, b in zip(ops, rest)], label="linear-layer inputs (x or z)")
    ax.set_ylabel("KiB per planning step (batch 32)")
    ax.set_title("Associative Recall: one planning step")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def training(curves, png):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for col, (task, title) in enumerate(TASKS):
        runs = defaultdict(list)
        for r in curves:
            if r["task"] == task:
                runs[r["label"]].append((int(r["iteration"]), float(r["loss"])))
        for label, pts in runs.items():
            axes[col].plot([i for i, _ in pts], [v for _, v in pts], label=label)
        axes[col].set_title(title.split(" (")[0])
        axes[col].set_xlabel("iteration")
        axes[col].set_ylabel("training loss (mean over 250 iterations)")
        axes[col].set_yscale("log")
        axes[col].grid(alpha=0.3)
        axes[col].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    data, out = sys.argv[1], sys.argv[2]
    generalization(read(f"{data}/results.csv"), f"{out}/dnc_generalization.png")
    memory(read(f"{data}/memory.csv"), read(f"{data}/budget.csv"), f"{out}/dnc_memory.png")
    training(read(f"{data}/curves.csv"), f"{out}/dnc_training.png")


if __name__ == "__main__":
    main()
