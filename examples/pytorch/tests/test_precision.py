# SPDX-License-Identifier: MIT
"""Mixed precision: CPU and CUDA autocast (bf16; fp16 with GradScaler) and bf16/fp16 weights, each against the exact
result with a bound derived from the roundings involved. Ghat is accumulated and kept in fp32, as compact's C++
optimizers keep it; z is stored in the autocast (activation) dtype, as autocast would store x."""
import copy
import warnings

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from conftest import gamma  # noqa: E402

UNIT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}


def devices():
    out = ["cpu"]
    if torch.cuda.is_available() and ct.has_cuda():
        out.append("cuda")
    return out


def g32(k):
    return gamma(k, torch.float32)


def representable(shape, dtype, seed, device):
    """Random values exactly representable in ``dtype``, as float32 (so that casting to dtype is exact)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype).float().to(device)


def autocast_supported(device, dtype):
    """Whether torch has ``dtype`` autocast on ``device`` (torch 1.13 warns and disables it for CPU float16)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            with torch.autocast(device, dtype=dtype):
                pass
            return True
        except (RuntimeError, AssertionError, UserWarning):
            return False


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("amp", [torch.bfloat16, torch.float16])
def test_autocast_forward_and_dx_are_nn_linears_and_ghat_is_fp32_within_the_derived_bound(device, amp):
    if not autocast_supported(device, amp):
        pytest.skip(f"torch {torch.__version__} has no {amp} autocast on {device}")
    torch.manual_seed(0)
    b, n, m, r = 24, 96, 40, 24
    ref = torch.nn.Linear(n, m).to(device)
    layer = ct.CompactLinear.from_module(copy.deepcopy(ref), rank=r, seed=7, stream=3)
    x = representable((b, n), amp, 1, device).requires_grad_(True)
    x_ref = x.detach().clone().requires_grad_(True)
    with torch.autocast(device, dtype=amp):
        y, y_ref = layer(x), ref(x_ref)
    assert y.dtype == amp and torch.equal(y, y_ref)  # the same F.linear under autocast
    dy = representable((b, m), amp, 2, device).to(amp)
    y.backward(dy)
    y_ref.backward(dy)
    # dx = dy W_c (W rounded to amp by autocast in both) in the same GEMM: nn.Linear's backward and ours.
    assert torch.equal(x.grad, x_ref.grad)
    ghat = layer.weight_ghat.grad
    assert ghat.dtype == torch.float32 and ghat.shape == (m, r)
    # The exact value: Ghat* = dy^T (x P), in float64 (x and dy are representable in amp, so autocast's casts are
    # exact; P's entries are fp32 numbers, the same in both). The computed value rounds three times:
    #   z = amp(fl32(x P)):  |z - xP| <= (gamma_n + u (1 + gamma_n)) |x||P| =: e_z |x||P|   (fp32 sum, then amp)
    #   Ghat = fl32(dy^T z):  |Ghat - dy^T z| <= gamma_b |dy|^T |z| <= gamma_b (1 + e_z) |dy|^T |x||P|
    # (products of two amp numbers are exact in fp32), so |Ghat - Ghat*| <= (e_z + gamma_b (1 + e_z)) |dy|^T |x||P|.
    u = UNIT[amp]
    p = layer.projection(dtype=torch.float64, device="cpu")
    xd, dyd = x.detach().double().cpu(), dy.double().cpu()
    exact = dyd.T @ (xd @ p)
    scale = dyd.abs().T @ xd.abs() @ p.abs()
    e_z = g32(n) + u * (1 + g32(n))
    bound = (e_z + g32(b) * (1 + e_z)) * scale
    err = (ghat.double().cpu() - exact).abs()
    assert (err <= bound).all(), float((err / scale).max())
    # And the bound is not vacuous: fp32 activations (no autocast) land within gamma_{b+n} of the same exact value,
    # while rounding z to amp moves Ghat by about u relative.
    layer.weight_ghat.grad = None
    layer(x.detach()).backward(dy.float())
    err32 = (layer.weight_ghat.grad.double().cpu() - exact).abs()
    assert (err32 <= 2 * g32(b + n) * scale).all()
    assert float((err / scale).max()) > 4 * float((err32 / scale).max())


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_weights_keep_ghat_and_moments_in_fp32_and_round_w_once(device, dtype):
    if device == "cpu" and dtype == torch.float16 and torch.__version__.startswith("1."):
        pytest.skip("torch 1.x has no float16 matmul on the CPU")
    torch.manual_seed(0)
    b, n, m, r, lr, wd = 16, 64, 24, 16, 0.05, 0.1
    layer = ct.CompactLinear(n, m, bias=False, rank=r, seed=3, stream=1).to(device=device, dtype=dtype)
    assert layer.weight.dtype == dtype and layer.weight_ghat.dtype == torch.float32
    assert layer.weight_ghat.stride() == (0, 0)
    opt = ct.CompressedAdamW(layer.parameters(), lr=lr, weight_decay=wd)
    x = representable((b, n), dtype, 1, device).to(dtype)
    dy = representable((b, m), dtype, 2, device).to(dtype)
    w0 = layer.weight.detach().double().cpu()
    p = layer.projection(dtype=torch.float64, device="cpu")
    layer(x).backward(dy)
    g = layer.weight_ghat.grad
    assert g.dtype == torch.float32
    opt.step()
    st = opt.state[layer.weight_ghat]
    assert st["exp_avg"].dtype == torch.float32 and st["exp_avg_sq"].dtype == torch.float32
    # One AdamW step (t = 1) from the fp32 Ghat, in float64: N = g / (|g| + eps) up to the bias corrections.
    gd = g.double().cpu()
    mom, vel = 0.1 * gd, 0.001 * gd * gd
    upd = (mom / 0.1) / ((vel / 0.001).sqrt() + 1e-8)
    exact = (1 - lr * wd) * w0 - lr * upd @ p.T
    # The library: N in fp32 (about 8 roundings of relative u32: two moments, two bias corrections, a sqrt, eps, a
    # division), W widened to fp32 (exact), W <- beta W + alpha N P^T in fp32 (gamma_{r+2}), rounded once to the weight
    # dtype (u). On CUDA N is first rounded to the weight dtype, as compact's CUDA optimizer stores it (u |N| more).
    u, u32 = UNIT[dtype], UNIT[torch.float32]
    d_n = (8 * u32 + (u if device == "cuda" else 0)) * upd.abs()
    inner = g32(r + 2) * (lr * upd.abs() @ p.abs().T + (1 - lr * wd) * w0.abs()) + lr * d_n @ p.abs().T
    bound = u * exact.abs() + (1 + u) * inner
    err = (layer.weight.double().cpu() - exact).abs()
    assert (err <= bound).all(), float((err - bound).max())
    assert layer.step == 1


def grad_scaler(device, **kw):
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        try:
            return torch.amp.GradScaler(device, **kw)
        except (TypeError, RuntimeError, AssertionError):
            pass
    if device == "cuda":
        return torch.cuda.amp.GradScaler(**kw)
    pytest.skip(f"torch {torch.__version__} has no GradScaler for {device}")


@pytest.mark.parametrize("device", devices())
def test_fp16_autocast_with_grad_scaler(device):
    if not autocast_supported(device, torch.float16):
        pytest.skip(f"torch {torch.__version__} has no float16 autocast on {device}")
    torch.manual_seed(0)
    n, m, r = 64, 32, 16
    layer = ct.CompactLinear(n, m, rank=r, seed=1, stream=0).to(device)
    opt = ct.CompressedAdamW(layer.parameters(), lr=1e-2)
    x = representable((8, n), torch.float16, 1, device)

    def loss_of():
        with torch.autocast(device, dtype=torch.float16):
            y = layer(x)
        return 4 * (y.float() ** 2).sum()

    # Unscaled reference gradient (dy = 8 y: every dy of this step is a normal fp16 number, checked below).
    dy_seen = []
    loss = loss_of()
    loss.backward()
    plain = layer.weight_ghat.grad.clone()
    layer.weight_ghat.grad = None
    layer.bias.grad = None
    # Loss scaling by 2^10 multiplies dy by a power of two: exact in fp16 barring overflow or underflow, and the fp32
    # accumulation of Ghat commutes with it, as does unscale_'s multiplication by 2^-10. So the unscaled gradient is
    # the reference bit for bit.
    with torch.no_grad():
        with torch.autocast(device, dtype=torch.float16):
            y = layer(x)
        dy_seen.append((8 * y.float()).to(torch.float16))
    assert (dy_seen[0].abs()[dy_seen[0] != 0] >= 2.0**-14).all()
    scaler = grad_scaler(device, init_scale=2.0**10)
    w0 = layer.weight.detach().clone()
    scaler.scale(loss_of()).backward()
    scaler.unscale_(opt)
    assert torch.equal(layer.weight_ghat.grad, plain)
    scaler.step(opt)
    scaler.update()
    assert layer.step == 1 and not torch.equal(layer.weight, w0)
    # An overflowing scale: Ghat becomes inf, GradScaler skips the step; W and the sketch step stay.
    opt.zero_grad(set_to_none=True)
    scaler = grad_scaler(device, init_scale=2.0**40)
    w1 = layer.weight.detach().clone()
    scaler.scale(loss_of()).backward()
    scaler.step(opt)
    scaler.update()
    assert torch.equal(layer.weight, w1) and layer.step == 1 and scaler.get_scale() < 2.0**40
