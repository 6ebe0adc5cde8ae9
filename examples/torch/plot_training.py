#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Plots compact_demo's CSVs: validation-loss curves per configuration and saved linear-input bytes per configuration.

usage: examples/torch/plot_training.py [RESULTS_DIR] [OUTPUT_PNG]
       (defaults: docs/training_data, docs/training.png; RESULTS_DIR holds results.csv and curves.csv)
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    results_dir = sys.argv[1] if len(sys.argv) > 1 else "docs/training_data"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/training.png"
    with open(f"{results_dir}/results.csv", newline="") as f:
        results = list(csv.DictReader(f))
    # Several seeds per configuration are averaged: one curve and one bar per configuration.
    sums = {}
    with open(f"{results_dir}/curves.csv", newline="") as f:
        for row in csv.DictReader(f):
            acc = sums.setdefault(row["config"], {}).setdefault(float(row["step"]), [0.0, 0])
            acc[0] += float(row["val_loss"])
            acc[1] += 1
    curves = {c: sorted((step, s / n) for step, (s, n) in pts.items()) for c, pts in sums.items()}
    merged = {}
    for r in results:
        m = merged.setdefault(r["config"], dict(r, vals=[]))
        m["vals"].append(float(r["final_val_loss"]))
    for m in merged.values():
        m["final_val_loss"] = str(sum(m["vals"]) / len(m["vals"]))
    results = list(merged.values())

    fig, (ax_loss, ax_mem) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [1.2, 1]})
    styles = {"shared": "-", "per-layer": "--", "-": "-"}
    colors = {"0": "black", "2": "tab:blue", "4": "tab:orange", "8": "tab:green"}
    markers = {"gaussian": "o", "srht": "s", "-": None}
    for r in results:
        pts = curves.get(r["config"], [])
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax_loss.plot(xs, ys, styles.get(r["sharing"], "-"), color=colors.get(r["rank_div"], "gray"),
                     marker=markers.get(r["dist"]), markersize=3, linewidth=2.5 if r["config"] == "full" else 1.2,
                     label=r["config"])
    ax_loss.set_xlabel("optimizer step")
    ax_loss.set_ylabel("validation loss (nats/char)")
    ax_loss.set_title("Validation loss (same init, same batches)")
    ax_loss.grid(alpha=0.3)
    ax_loss.legend(fontsize=7, ncol=2)
    finals = [float(r["final_val_loss"]) for r in results]
    if finals:
        lo, hi = min(finals), max(float(p[1]) for c in curves.values() for p in c[len(c) // 3:])
        ax_loss.set_ylim(lo - 0.05, hi + 0.05)

    full = next((r for r in results if r["config"] == "full"), None)
    base = float(full["saved_block_linear_bytes"]) if full else 1.0
    names = [r["config"] for r in results]
    ratios = [100.0 * float(r["saved_block_linear_bytes"]) / base for r in results]
    bars = ax_mem.barh(names, ratios, color=[colors.get(r["rank_div"], "gray") for r in results])
    for bar, r, v in zip(bars, results, ratios):
        ax_mem.text(bar.get_width() + 1, bar.get_y() + bar.get_height() / 2,
                    f"{v:.0f}%  ({float(r['saved_block_linear_bytes']) / 2**20:.2f} MiB, val {float(r['final_val_loss']):.3f})",
                    va="center", fontsize=7)
    ax_mem.axvline(60, color="red", linestyle=":", label="60% of full rank")
    ax_mem.set_xlabel("saved linear-layer inputs in the decoder blocks, % of full rank")
    ax_mem.set_xlim(0, 150)
    ax_mem.invert_yaxis()
    ax_mem.tick_params(axis="y", labelsize=7)
    ax_mem.legend(fontsize=7)
    ax_mem.set_title("Activation memory of linear layers (counted)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
