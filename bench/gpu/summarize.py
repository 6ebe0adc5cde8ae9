# SPDX-License-Identifier: MIT
"""Prints device_check's short table from LOG_DIR/bench.json (Google Benchmark) and LOG_DIR/torch.json."""
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

print(f"{'benchmark (bf16)':44} {'time us':>9} {'baseline':>22} {'ratio':>7} {'torch randn+mm us':>18}")
for b in bench:
    name = b["name"].replace("/manual_time", "")
    t = b["real_time"]
    if "ratio_vs_gemm" in b:
        base, ratio = f"cuBLAS stored P {b['gemm_us']:.1f}us", f"{b['ratio_vs_gemm']:.3f}"
    elif "fraction_of_copy_bw" in b:
        base, ratio = f"copy {b['copy_GB/s']:.0f} GB/s", f"{b['fraction_of_copy_bw']:.3f}"
    elif "ratio_vs_bf16_out" in b:
        base, ratio = f"bf16 g {b['bf16_out_us']:.1f}us", f"{b['ratio_vs_bf16_out']:.3f}"
    elif "entries/s" in b:
        base, ratio = f"{b['entries/s'] / 1e9:.1f} G entries/s", ""
    else:
        base, ratio = "", ""
    torch_col = ""
    parts = name.split("/")
    if name.startswith("BM_Sketch_Cuda_Gaussian") and len(parts) == 4:
        row = torch_rows.get(tuple(int(p) for p in parts[1:]))
        if row:
            torch_col = f"{row['randn_matmul_us']:.1f} ({t / row['randn_matmul_us']:.2f}x)"
    print(f"{name:44} {t:9.1f} {base:>22} {ratio:>7} {torch_col:>18}")
print("targets: sketch ratio_vs_gemm <= 1.10; SRHT fraction of copy bandwidth >= 0.60")
