# SPDX-License-Identifier: MIT
"""The 8-bit AdamW step against the fp32 one, side by side on this machine (docs/pytorch.md, "8-bit moments").

For a tensor of n values: the optimizer's fp32 update (CompressedAdamW._compressed_update's torch ops for a compressed
layer's N, _dense_update's for a dense parameter: torch.optim.AdamW's single-tensor step) and
torch.ops.compact.adamw8_step on 8-bit state, plus a copy of the fp32 moments (8 bytes per value, torch's clone: what
the fp32 step must at least move) as a memory-bound yardstick. Median of --repeat timings after a warm-up, each
configuration in turn in the same process. With --cpu-time (one thread only) the timings are the calling thread's CPU
time (time.thread_time), which a loaded machine disturbs far less than wall time.

    python examples/pytorch/bench_moment8.py --threads 1 2 --log-n 20 22
"""
import argparse
import math
import statistics
import time

import torch

import compact_torch  # noqa: F401 - registers torch.ops.compact


def median_seconds(fn, repeat, clock=time.perf_counter):
    fn()
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1])
    p.add_argument("--log-n", type=int, nargs="+", default=[20, 22])
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--cpu-time", action="store_true", help="the thread's CPU time instead of wall time (threads 1)")
    args = p.parse_args()
    if args.cpu_time and args.threads != [1]:
        p.error("--cpu-time measures the calling thread: use it with --threads 1")
    clock = time.thread_time if args.cpu_time else time.perf_counter
    lr, b1, b2, eps, wd, t = 1e-3, 0.9, 0.999, 1e-8, 0.01, 10
    print(f"torch {torch.__version__}, compact cpu_isa {compact_torch.cpu_isa()}, "
          f"{'thread CPU time' if args.cpu_time else 'wall time'}")
    print("| n | threads | kind | fp32 step ms | 8-bit step ms | 8-bit / fp32 | copy of fp32 moments ms |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for log_n in args.log_n:
        n = 1 << log_n
        g = torch.randn(n)
        m, v = torch.randn(n) * 1e-3, torch.rand(n) * 1e-6
        nb = (n + 255) // 256
        mq, ms = torch.zeros(n, dtype=torch.int8), torch.zeros(nb)
        vq, vs = torch.zeros(n, dtype=torch.uint8), torch.zeros(nb)
        for _ in range(3):  # realistic codes
            torch.ops.compact.adamw8_step(g, mq, ms, vq, vs, None, torch.empty(n), lr, b1, b2, eps, wd, 1)
        out = torch.empty(n)
        param = torch.randn(n)

        def fp32_compressed():
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v / (1 - b2**t)).sqrt_().add_(eps)
            return torch.div(m, 1 - b1**t).div_(denom)

        def fp32_dense():
            param.mul_(1 - lr * wd)
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v.sqrt() / math.sqrt(1 - b2**t)).add_(eps)
            param.addcdiv_(m, denom, value=-lr / (1 - b1**t))

        def q8_compressed():
            torch.ops.compact.adamw8_step(g, mq, ms, vq, vs, None, out, lr, b1, b2, eps, wd, t)

        def q8_dense():
            torch.ops.compact.adamw8_step(g, mq, ms, vq, vs, param, None, lr, b1, b2, eps, wd, t)

        def copy_moments():
            return m.clone(), v.clone()

        for threads in args.threads:
            torch.set_num_threads(threads)
            copy_s = median_seconds(copy_moments, args.repeat, clock)
            for kind, f32, q8 in (("N (compressed)", fp32_compressed, q8_compressed),
                                  ("dense param", fp32_dense, q8_dense)):
                a, b = median_seconds(f32, args.repeat, clock), median_seconds(q8, args.repeat, clock)
                print(f"| 2^{log_n} | {threads} | {kind} | {a * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.2f} | "
                      f"{copy_s * 1e3:.2f} |", flush=True)


if __name__ == "__main__":
    main()
