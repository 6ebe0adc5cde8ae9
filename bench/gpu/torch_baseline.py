# SPDX-License-Identifier: MIT
"""The reference method of the original CompAct code on the GPU: P = torch.randn(n, r) / sqrt(r), then x @ P (bf16).

Times, with CUDA events, (a) randn + scale + matmul, as the original regenerates P, and (b) matmul alone with a
stored P, for the shapes bench_cuda measures; writes a JSON list to argv[1]. Exits 77 when torch has no CUDA device.
"""
import json
import math
import sys

import torch


def time_ms(fn, warmup=3, reps=20):
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / reps


def main():
    if not torch.cuda.is_available():
        print("torch_baseline: torch sees no CUDA device (exit 77)")
        sys.exit(77)
    out = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    for batch in (256, 4096):
        for n in (1024, 4096):
            for r in (n // 8, n // 4, n // 2):
                x = torch.randn(batch, n, device="cuda", dtype=torch.bfloat16)
                p = torch.randn(n, r, device="cuda", dtype=torch.bfloat16) / math.sqrt(r)

                def regenerate():
                    q = torch.randn(n, r, device="cuda", dtype=torch.bfloat16, generator=gen) / math.sqrt(r)
                    return x @ q

                out.append({"batch": batch, "n": n, "r": r, "randn_matmul_us": 1e3 * time_ms(regenerate),
                            "matmul_us": 1e3 * time_ms(lambda: x @ p)})
                print(out[-1], flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
