# SPDX-License-Identifier: MIT
"""Prints device_check's short table from LOG_DIR/bench.json (Google Benchmark) and LOG_DIR/torch.json, then the
issue-12 targets: dense sketch / cuBLAS with a stored P at B = 4096 (<= 1.10) and SRHT sketch / copy bandwidth
(>= 0.60), both as measured in this run, next to the copy bandwidth itself."""
import json
import os
import sys

logs = sys.argv[1]
bench, torch_rows = [], {}
try:
    with open(os.path.join(logs, "bench.json")) as f:
        bench = json.load(f)["benchmarks"]
except (OSError, ValueError, KeyError):
    pass
try:
    with open(os.path.join(logs, "torch.json")) as f:
        for row in json.load(f)["rows"]:
            torch_rows[(row["batch"], row["n"], row["r"])] = row
except (OSError, ValueError, KeyError):
    pass

by_name = {}
print(f"{'benchmark (bf16)':46} {'time us':>9} {'baseline':>22} {'ratio':>7} {'torch randn+mm us':>18}")
for b in bench:
    name = b["name"].replace("/manual_time", "")
    by_name[name] = b
    t = b["real_time"]
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
    parts = name.split("/")
    if name.startswith("BM_Sketch_Cuda_Gaussian/") and len(parts) == 4:
        row = torch_rows.get(tuple(int(p) for p in parts[1:]))
        if row:
            torch_col = f"{row['randn_matmul_us']:.1f} ({t / row['randn_matmul_us']:.2f}x)"
    print(f"{name:46} {t:9.1f} {base:>22} {ratio:>7} {torch_col:>18}")


def counter(name, key):
    b = by_name.get(name)
    return f"{b[key]:.3f}" if b and key in b else "not measured"


print("targets, measured in this run (B = 4096, n = 4096, r = 1024, bf16):")
print("  dense sketch / cuBLAS with a stored P (target <= 1.10):"
      f" regenerated {counter('BM_Sketch_Cuda_Gaussian/4096/4096/1024', 'ratio_vs_gemm')},"
      f" overlapped {counter('BM_Sketch_Cuda_Gaussian_Overlap/4096/4096/1024', 'ratio_vs_gemm')};"
      f" window of 8 sketches + 1 unsketch_grad: regenerated"
      f" {counter('BM_Window_Cuda_Gaussian/4096/4096/1024/0', 'ratio_vs_gemm')},"
      f" MaterializedP {counter('BM_Window_Cuda_Gaussian/4096/4096/1024/1', 'ratio_vs_gemm')}")
copy = by_name.get("BM_CopyBandwidth_Cuda/33554432")
copy_text = f"{copy['GB/s']:.0f} GB/s" if copy and "GB/s" in copy else "not measured"
print("  SRHT sketch / copy bandwidth (target >= 0.60):"
      f" {counter('BM_Sketch_Cuda_Srht/4096/4096/1024', 'fraction_of_copy_bw')};"
      f" copy bandwidth (32 MiB device to device, read + write) {copy_text}")
