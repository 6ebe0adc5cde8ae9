# SPDX-License-Identifier: MIT
"""Prints device_check's short table from LOG_DIR/bench.json (Google Benchmark) and LOG_DIR/torch.json, then the
issue-12 targets: dense sketch / cuBLAS with a stored P at B = 4096 (<= 1.10) and SRHT sketch / copy bandwidth
(>= 0.60), both as measured in this run, next to the copy bandwidth itself."""
import json
import os
import sys

# Name parts Google Benchmark appends to a benchmark's name: flags without a value, and "key:value" settings
# (min_time:0.100, min_warmup_time:..., repeats:3, iterations:10, threads:8).
_FLAG_PARTS = {"manual_time", "real_time", "process_time"}


def parse_name(name):
    """(family, args) of a Google Benchmark run name: "BM_X/4096/1024/min_time:0.100/manual_time" gives
    ("BM_X", (4096, 1024)). Settings parts and time-mode flags are dropped wherever they stand; a template
    family ("BM_T<float>") keeps its brackets. An aggregate's suffix ("_median") stays on the last part as Google
    Benchmark writes it, so callers skip aggregates by their run_type instead."""
    parts = name.split("/")
    family, args = parts[0], []
    for part in parts[1:]:
        if part in _FLAG_PARTS or ":" in part:
            continue
        try:
            args.append(int(part))
        except ValueError:
            family += "/" + part  # a named argument or other text: part of the family, kept in order
    return family, tuple(args)


def canonical_name(name):
    """The name without Google Benchmark's settings parts: "BM_X/4096/1024"."""
    family, args = parse_name(name)
    return "/".join([family] + [str(a) for a in args])


def main(logs):
    bench, torch_rows = load(logs)
    print_table(bench, torch_rows)


def load(logs):
    bench, torch_rows = [], {}
    try:
        with open(os.path.join(logs, "bench.json")) as f:
            bench = json.load(f)["benchmarks"]
    except (OSError, ValueError, KeyError):
        pass
    try:
        with open(os.path.join(logs, "torch.json")) as f:
            for row in json.load(f)["rows"]:
                torch_rows[(int(row["batch"]), int(row["n"]), int(row["r"]))] = row
    except (OSError, ValueError, KeyError):
        pass
    return bench, torch_rows


_US_PER_UNIT = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def micros(b):
    """A row's real time in microseconds, whatever its time_unit."""
    return b["real_time"] * _US_PER_UNIT[b.get("time_unit", "ns")]


def rows_by_name(bench):
    """One row per benchmark, keyed by canonical name in the order of the file: the median aggregate where the run
    had repetitions, else the (last) iteration row."""
    rows, medians = {}, {}
    for b in bench:
        name = canonical_name(b.get("run_name", b["name"]))
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = b
        else:
            rows[name] = b
    return {name: medians.get(name, b) for name, b in rows.items()}


def print_table(bench, torch_rows):
    """The table of every benchmark row (aggregates left out), then the targets."""
    by_name = rows_by_name(bench)
    print(f"{'benchmark (bf16)':46} {'time us':>9} {'baseline':>22} {'ratio':>7} {'torch randn+mm us':>18}")
    for name, b in by_name.items():
        family, args = parse_name(name)
        t = micros(b)
        if "ratio_vs_gemm" in b:
            base, ratio = f"cuBLAS stored P {b['gemm_us']:.1f}us", f"{b['ratio_vs_gemm']:.3f}"
        elif "fraction_of_copy_bw" in b:
            base, ratio = f"copy {b['copy_GB/s']:.0f} GB/s", f"{b['fraction_of_copy_bw']:.3f}"
        elif "ratio_vs_bf16_out" in b:
            base, ratio = f"bf16 g {b['bf16_out_us']:.1f}us", f"{b['ratio_vs_bf16_out']:.3f}"
        elif "entries/s" in b:
            base, ratio = f"{b['entries/s'] / 1e9:.1f} G entries/s", ""
        elif "GB/s" in b:
            base, ratio = f"{b['GB/s']:.0f} GB/s (read+write)", ""
        else:
            base, ratio = "", ""
        torch_col = ""
        row = torch_rows.get(args) if family == "BM_Sketch_Cuda_Gaussian" else None
        if row:
            torch_col = f"{row['randn_matmul_us']:.1f} ({t / row['randn_matmul_us']:.2f}x)"
        print(f"{name:46} {t:9.1f} {base:>22} {ratio:>7} {torch_col:>18}")
    for line in targets(by_name):
        print(line)


def targets(by_name):
    """The issue-12 target lines from rows keyed by canonical name."""

    def counter(name, key):
        b = by_name.get(name)
        return f"{b[key]:.3f}" if b and key in b else "not measured"

    copy = by_name.get("BM_CopyBandwidth_Cuda/33554432")
    copy_text = f"{copy['GB/s']:.0f} GB/s" if copy and "GB/s" in copy else "not measured"
    return [
        "targets, measured in this run (B = 4096, n = 4096, r = 1024, bf16):",
        "  dense sketch / cuBLAS with a stored P (target <= 1.10):"
        f" regenerated {counter('BM_Sketch_Cuda_Gaussian/4096/4096/1024', 'ratio_vs_gemm')},"
        f" overlapped {counter('BM_Sketch_Cuda_Gaussian_Overlap/4096/4096/1024', 'ratio_vs_gemm')};"
        " window of 8 sketches + 1 unsketch_grad: regenerated"
        f" {counter('BM_Window_Cuda_Gaussian/4096/4096/1024/0', 'ratio_vs_gemm')},"
        f" MaterializedP {counter('BM_Window_Cuda_Gaussian/4096/4096/1024/1', 'ratio_vs_gemm')}",
        "  SRHT sketch / copy bandwidth (target >= 0.60):"
        f" {counter('BM_Sketch_Cuda_Srht/4096/4096/1024', 'fraction_of_copy_bw')};"
        f" copy bandwidth (32 MiB device to device, read + write) {copy_text}",
    ]


if __name__ == "__main__":
    main(sys.argv[1])
