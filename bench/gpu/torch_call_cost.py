# SPDX-License-Identifier: MIT
"""The per-call cost of compact_torch's CUDA sketch and unsketch_grad (issue 30): for each distribution at shapes of
a LLaMA-60M layer, the median over many calls of (a) the host time of one call (what the Python thread spends
issuing it, the projector's setup included) and (b) the device time of one call, measured with CUDA events around
a loop of calls; beside them torch's own x @ P with a stored P (bf16). Prints one table; JSON to argv[1] if given.

    PYTHONPATH=build-gpu/lib python3 bench/gpu/torch_call_cost.py [OUT.json]
"""
import json
import statistics
import sys
import time

import torch

import compact_torch as ct


def host_and_device_us(fn, calls=200, rounds=5):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    host, device = [], []
    for _ in range(rounds):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        host.append((t1 - t0) / calls * 1e6)
        device.append(start.elapsed_time(stop) / calls * 1e3)
    return statistics.median(host), statistics.median(device)


def main():
    rows = []
    print(f"{'op':10} {'dist':10} {'B x n -> r':22} {'host us/call':>13} {'device us/call':>15} {'torch x@P us':>13}")
    for (b, n, r) in [(1024, 512, 128), (4096, 512, 128), (4096, 1376, 344), (4096, 4096, 1024)]:
        x = torch.randn(b, n, device="cuda", dtype=torch.bfloat16)
        g = torch.randn(b, r, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(b, n, device="cuda", dtype=torch.bfloat16)
        p = torch.randn(n, r, device="cuda", dtype=torch.bfloat16)
        _, mm = host_and_device_us(lambda: x @ p)
        for dist in ("gaussian", "rademacher", "srht"):
            for op, fn in (("sketch", lambda: ct.sketch(x, r, 1, 2, 3, dist)),
                           ("unsketch", lambda: ct.unsketch_grad_(out, g, 1.0, 0.0, 1, 2, 3, dist))):
                h, d = host_and_device_us(fn)
                rows.append({"op": op, "dist": dist, "batch": b, "n": n, "r": r, "host_us": h, "device_us": d,
                             "torch_matmul_us": mm})
                print(f"{op:10} {dist:10} {f'{b} x {n} -> {r}':22} {h:13.1f} {d:15.1f} {mm:13.1f}", flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
