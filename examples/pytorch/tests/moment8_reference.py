# SPDX-License-Identifier: MIT
"""A pure-torch reference of the moment8 codec and the 8-bit AdamW step (docs/spec.md, "The moment8 codec and the
8-bit AdamW step"), written independently of the C++: the nearest code by a search over the table (float64, exact),
every fp32 operation a separate torch op on full fp32 tensors (CPU: IEEE, correctly rounded). The tests compare
torch.ops.compact.adamw8_step with it bit for bit; tests/spec/moment8_golden.hpp holds its hashes."""
import math

import torch

BLOCK = 256
BIAS_M, BIAS_V = 15, 31


def table(bias):
    """The magnitudes of codes 0 .. 8 bias as float64 (exact)."""
    return torch.tensor([math.ldexp(k, -bias - 2) if k < 8 else math.ldexp(8 + k % 8, k // 8 - bias - 3)
                         for k in range(8 * bias + 1)], dtype=torch.float64)


def code_of(r, bias):
    """Nearest code to r (fp32 tensor in [0, 1]), ties to the even code."""
    t = table(bias)
    r64 = r.to(torch.float64)
    hi = torch.searchsorted(t, r64).clamp(max=len(t) - 1)
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = (r64 - t[lo]).abs(), (t[hi] - r64).abs()
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    return torch.where(pick_hi, hi, lo)


def block_scales(x):
    """One scale per block of 256: amax, NaN where a value is non-finite."""
    n = x.numel()
    nb = (n + BLOCK - 1) // BLOCK
    pad = torch.zeros(nb * BLOCK, dtype=torch.float32)
    pad[:n] = x.abs()
    blocks = pad.view(nb, BLOCK)
    amax = blocks.max(dim=1).values
    bad = ~torch.isfinite(blocks).all(dim=1)
    return torch.where(bad, torch.full_like(amax, float("nan")), amax)


def expand(scales, n):
    return scales.repeat_interleave(BLOCK)[:n]


def encode(x, bias, signed):
    s = block_scales(x)
    se = expand(s, x.numel())
    ok = se > 0
    r = torch.where(ok, x.abs() / torch.where(ok, se, torch.ones_like(se)), torch.zeros_like(x))
    k = torch.where(ok, code_of(r, bias), torch.zeros_like(r, dtype=torch.int64))
    if signed:
        k = torch.where(torch.signbit(x), -k, k)
        return k.to(torch.int8), s
    return k.to(torch.uint8), s


def decode(q, s, bias):
    t = table(bias).to(torch.float32)
    k = q.to(torch.int64)
    mag = t[k.abs()] * expand(s, q.numel())
    return torch.where(k < 0, -mag, mag)


def sqrt(x):
    """Correctly rounded fp32 sqrt (torch.sqrt on fp32 CPU tensors is not: it is off by an ulp for some inputs); the
    double's square root rounded to fp32 is (53 >= 2 * 24 + 2 bits)."""
    return torch.sqrt(x.to(torch.float64)).to(torch.float32)


def full(x, like):
    return torch.full_like(like, float(x), dtype=torch.float32)


def step(grad, m_q, m_s, v_q, v_s, param, lr, b1, b2, eps, wd, t):
    """One step; returns (m_q, m_s, v_q, v_s, result): result = N (param None) or the new parameter."""
    g = grad.reshape(-1).to(torch.float32)
    m = decode(m_q, m_s, BIAS_M)
    v = decode(v_q, v_s, BIAS_V)
    m = m * full(b1, m) + g * full(1 - b1, g)
    v = v * full(b2, v) + (g * full(1 - b2, g)) * g
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    if param is None:
        denom = sqrt(v / full(bc2, v)) + full(eps, v)
        result = (m / full(bc1, m)) / denom
    else:
        p = param.reshape(-1)
        pd = (p.to(torch.float32) * full(1 - lr * wd, m)).to(p.dtype).to(torch.float32)
        denom = sqrt(v) / full(math.sqrt(bc2), v) + full(eps, v)
        result = (pd + (full(-(lr / bc1), m) * m) / denom).to(p.dtype)
    mq, ms = encode(m, BIAS_M, True)
    vq, vs = encode(v, BIAS_V, False)
    return mq, ms, vq, vs, result


# -- golden cases (tests/spec/moment8_golden.hpp) ---------------------------------------------------------------------

def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def golden_uniform(i):
    w = splitmix64(i) >> 40
    return float((w - (1 << 23)) * 2.0 ** -23)


def golden_cases():
    """Case N: 700 values (two blocks and a ragged one of 188), compressed (N out), 3 steps; block 0 u_i, block 1
    u_i 2^-20 with every third value 0, block 2 u_i 10^3. Case D: 300 values, a dense fp32 parameter
    p_i = u_(1000 + i), grad u_i / 100, 3 steps, lr 1e-2, wd 0.1."""
    g = []
    for i in range(700):
        u = golden_uniform(i)
        b = i // 256
        g.append(u if b == 0 else (0.0 if i % 3 == 0 else math.ldexp(u, -20)) if b == 1 else u * 1000.0)
    n = dict(name="N", grad=torch.tensor(g, dtype=torch.float32), param=None, steps=3, lr=1e-3, wd=0.0)
    d = dict(name="D", grad=torch.tensor([golden_uniform(i) / 100 for i in range(300)], dtype=torch.float32),
             param=torch.tensor([golden_uniform(1000 + i) for i in range(300)], dtype=torch.float32), steps=3,
             lr=1e-2, wd=0.1)
    return [n, d]


def fnv1a(t):
    h = 0xCBF29CE484222325
    for byte in t.contiguous().view(torch.uint8).tolist():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def run_golden(case, op=None):
    """(m_q, m_scales, v_q, v_scales, result) after the case's steps, by `op` (default: this reference)."""
    grad = case["grad"]
    n = grad.numel()
    nb = (n + BLOCK - 1) // BLOCK
    mq, ms = torch.zeros(n, dtype=torch.int8), torch.zeros(nb)
    vq, vs = torch.zeros(n, dtype=torch.uint8), torch.zeros(nb)
    param = None if case["param"] is None else case["param"].clone()
    result = None
    for t in range(1, case["steps"] + 1):
        if op is None:
            mq, ms, vq, vs, result = step(grad, mq, ms, vq, vs, param, case["lr"], 0.9, 0.999, 1e-8, case["wd"], t)
            if param is not None:
                param = result
        else:
            result = op(grad, mq, ms, vq, vs, param, case["lr"], 0.9, 0.999, 1e-8, case["wd"], t)
    return mq, ms, vq, vs, result


if __name__ == "__main__":
    for case in golden_cases():
        mq, ms, vq, vs, res = run_golden(case)
        print(case["name"], *(hex(fnv1a(x)) for x in (mq, vq, ms, vs, res)))
