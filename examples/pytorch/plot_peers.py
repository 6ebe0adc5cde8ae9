# SPDX-License-Identifier: MIT
"""The figure of docs/peers.md: total peak memory against step time, both relative to full-rank AdamW, one panel per
model shape, from peer_memory.py's results.csv (methods that ran at that shape, with both a memory and a time row).

    /usr/bin/python3 examples/pytorch/plot_peers.py docs/peers_data/results.csv --out docs/peers.png
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def points(rows):
    """{(model, shape): {method: (time ratio, memory ratio)}}."""
    mem, tim = {}, {}
    for r in rows:
        if r["status"] != "ok":
            continue
        key = (r["model"], f"{r['batch']} x {r['seq']}")
        if r["measure"] == "memory" and r.get("vs_full"):
            mem.setdefault(key, {})[r["method"]] = float(r["vs_full"])
        if r["measure"] == "time" and r.get("time_vs_full"):
            tim.setdefault(key, {})[r["method"]] = float(r["time_vs_full"])
    return {k: {m: (tim[k][m], v) for m, v in mem[k].items() if m in tim.get(k, {})} for k in mem}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results")
    p.add_argument("--out", default="peers.png")
    args = p.parse_args()
    with open(args.results) as f:
        data = points(list(csv.DictReader(f)))
    keys = sorted((k for k in data if data[k]), key=lambda k: (k[0] != "llama", k))  # shapes with time rows
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 4.0), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for method, (t, m) in sorted(data[key].items()):
            ours = "compact" in method
            ax.scatter([t], [m], marker="o" if ours else "s", color="tab:red" if ours else "tab:blue", s=28)
            ax.annotate(method, (t, m), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.axvline(1.0, color="grey", lw=0.5)
        ax.set_title(f"{key[0]} {key[1]}", fontsize=10)
        ax.set_xlabel("step time / full rank")
        ax.set_ylabel("total peak / full rank")
        ax.set_ylim(0, 1.1)
    fig.suptitle("compact (red) and the peers (blue): same model, batch and exact CPU tracker", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
