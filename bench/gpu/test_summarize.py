# SPDX-License-Identifier: MIT
"""summarize.py against names as Google Benchmark writes them: run bench/gpu/summarize_names (the target families of
bench_cuda.cu with the same builder calls and fixed counters, no GPU) into a log folder, add a torch.json row, and
check that the table and every target line read the values back (none "not measured", the torch column present).

    python3 bench/gpu/test_summarize.py PATH/TO/summarize_names
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize  # noqa: E402


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)


def main(names_bin):
    # The parser on names written out by hand, as Google Benchmark 1.7 to 1.9 write them.
    cases = {
        "BM_Sketch_Cuda_Gaussian/4096/4096/1024/min_time:0.100/manual_time": ("BM_Sketch_Cuda_Gaussian", (4096, 4096, 1024)),
        "BM_Sketch_Cuda_Gaussian/4096/4096/1024/manual_time": ("BM_Sketch_Cuda_Gaussian", (4096, 4096, 1024)),
        "BM_Window_Cuda_Gaussian/4096/4096/1024/0/min_time:0.100/repeats:3/manual_time": ("BM_Window_Cuda_Gaussian", (4096, 4096, 1024, 0)),
        "BM_CopyBandwidth_Cuda/33554432/min_time:0.100/manual_time": ("BM_CopyBandwidth_Cuda", (33554432,)),
        "BM_Fwht<float>/1024/threads:2": ("BM_Fwht<float>", (1024,)),
        "BM_Plain": ("BM_Plain", ()),
    }
    for name, want in cases.items():
        check(summarize.parse_name(name) == want, f"parse_name({name!r}) = {summarize.parse_name(name)}, want {want}")

    with tempfile.TemporaryDirectory() as logs:
        # Two repetitions: the median aggregate is the row kept.
        subprocess.run([names_bin, f"--benchmark_out={logs}/bench.json", "--benchmark_out_format=json",
                        "--benchmark_repetitions=2"], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(logs, "bench.json")) as f:
            raw = [b["name"] for b in json.load(f)["benchmarks"]]
        check(any("min_time:" in n for n in raw), f"this Google Benchmark writes no min_time part: {raw[:2]}")
        with open(os.path.join(logs, "torch.json"), "w") as f:
            json.dump({"rows": [{"batch": 4096, "n": 4096, "r": 1024, "randn_matmul_us": 400.0, "matmul_us": 90.0}]}, f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            summarize.main(logs)
        text = out.getvalue()
    print(text)
    check("not measured" not in text, "a target printed 'not measured'")
    check("regenerated 1.001, overlapped 1.001" in text, "the dense targets' ratios")
    check("MaterializedP 1.001" in text, "the window target's ratio (four arguments)")
    check("target >= 0.60): 0.625; copy bandwidth (32 MiB device to device, read + write) 3300 GB/s" in text,
          "the SRHT target and the copy bandwidth")
    check("400.0 (0.25x)" in text, "the torch randn + matmul column (100 us against 400 us)")
    table = [line for line in text.splitlines() if line.startswith("BM_")]
    check(len(table) == 6, f"one row per benchmark (medians of two repetitions): {len(table)} rows")
    check(all("min_time" not in line and "manual_time" not in line for line in table), "settings left in a name")
    print("summarize.py: ok")


if __name__ == "__main__":
    main(sys.argv[1])
