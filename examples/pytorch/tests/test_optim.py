# SPDX-License-Identifier: MIT
"""CompressedAdamW: the compressed update against a naive reference, plain AdamW elsewhere, bit-exact resume,
clipping, accumulation and LR schedulers."""
import io
import math

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from conftest import gamma, tiny_llama  # noqa: E402


@pytest.mark.parametrize("dist", ["gaussian", "rademacher", "srht"])
def test_compressed_update_matches_naive_reference_with_materialized_p(dist):
    torch.manual_seed(0)
    m, n, r, lr, wd, alpha, b1, b2, eps = 6, 40, 10, 0.01, 0.1, 0.25, 0.9, 0.99, 1e-8
    layer = ct.CompactLinear(n, m, bias=False, rank=r, dist=dist, seed=4, stream=2, period=2, dtype=torch.float64)
    opt = ct.CompressedAdamW(layer.parameters(), lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, alpha=alpha)
    w = layer.weight.detach().clone()
    mom, vel = torch.zeros(m, r, dtype=torch.float64), torch.zeros(m, r, dtype=torch.float64)
    bound = torch.zeros(m, n, dtype=torch.float64)
    for t in range(1, 6):  # period 2: windows 0, 0, 1, 1, 2
        p = layer.projection()
        x, dy = torch.randn(7, n, dtype=torch.float64), torch.randn(7, m, dtype=torch.float64)
        layer(x).backward(dy)
        g = dy.T @ (x @ p)
        mom = b1 * mom + (1 - b1) * g
        vel = b2 * vel + (1 - b2) * g * g
        upd = (mom / (1 - b1**t)) / ((vel / (1 - b2**t)).sqrt() + eps)
        w = (1 - lr * wd) * w - lr * alpha * upd @ p.T
        # The library forms upd P^T inside unsketch_grad (a length-r sum) where the reference uses torch's GEMM:
        # each within gamma_{r+2} (lr alpha |upd| |P^T| + |w|) of the exact step; Ghat's own difference (a length-7
        # then length-n sum, in two orders) reaches upd through Adam's normalization, whose gain is at most
        # 1 / (sqrt(v) + eps) per unit of |Ghat| difference; folded in through gamma_{7+n} |dy^T| |x| |P| / sqrt(v).
        dg = 2 * gamma(7 + n, torch.float64) * (dy.abs().T @ x.abs() @ p.abs())
        dupd = 3 * dg / (vel / (1 - b2**t)).sqrt().add(eps)
        bound = (1 - lr * wd) * bound + gamma(r + 2, torch.float64) * (lr * alpha * upd.abs() @ p.abs().T + w.abs()) \
            + lr * alpha * dupd @ p.abs().T
        opt.step()
        opt.zero_grad()
        assert layer.step == t
        assert ((layer.weight - w).abs() <= bound).all(), float((layer.weight - w).abs().max())


def test_dense_parameters_get_torch_adamw_exactly():
    torch.manual_seed(1)
    a, b = torch.nn.Linear(8, 5), torch.nn.Linear(8, 5)
    b.load_state_dict(a.state_dict())
    opt_a = ct.CompressedAdamW(a.parameters(), lr=0.02, weight_decay=0.05)
    opt_b = torch.optim.AdamW(b.parameters(), lr=0.02, weight_decay=0.05, foreach=False)
    for _ in range(4):
        x = torch.randn(3, 8)
        for model, opt in ((a, opt_a), (b, opt_b)):
            model(x).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
    for pa, pb in zip(a.parameters(), b.parameters()):
        if torch.__version__.startswith("1.13"):
            assert torch.equal(pa, pb)  # the same operations in the same order as torch 1.13's AdamW
        else:
            # Later torch versions use lerp for the first moment: a few ulps per step on an Adam step, which is at
            # most (1 - b1) / sqrt(1 - b2) lr < 4 lr per coordinate (Kingma & Ba, 2.1).
            atol = 4 * 16 * 2**-24 * 4 * 0.02 + 4 * 2**-24 * float(pb.detach().abs().max())
            assert torch.allclose(pa, pb, rtol=0, atol=atol)


def batch(step, b=4, t=16, vocab=40):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, vocab, (b, t), generator=g)


def make_compact(seed=0):
    model = ct.compress(tiny_llama(seed=seed), rank=0.25, dist="srht", period=3, seed=11)
    opt = ct.CompressedAdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    return model, opt


def train(model, opt, steps, accum=1):
    for s in steps:
        for k in range(accum):
            ids = batch(10 * s + k)
            (model(ids, ids) / accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def test_state_dict_resume_is_bit_exact_across_a_window_change():
    model, opt = make_compact()
    train(model, opt, range(2))
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    train(model, opt, range(2, 6))  # steps 2..5 cross the window change at step 3

    buf.seek(0)
    ckpt = torch.load(buf)
    resumed, resumed_opt = make_compact(seed=123)  # different initial weights: everything must come from the file
    resumed.load_state_dict(ckpt["model"])
    resumed_opt.load_state_dict(ckpt["opt"])
    train(resumed, resumed_opt, range(2, 6))
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b) if torch.is_tensor(a) else a == b, name
    for sa, sb in zip(opt.state.values(), resumed_opt.state.values()):
        assert sa["step"] == sb["step"] and torch.equal(sa["exp_avg"], sb["exp_avg"])
        assert torch.equal(sa["exp_avg_sq"], sb["exp_avg_sq"])


def test_gradient_accumulation_advances_p_once_per_optimizer_step():
    model, opt = make_compact()
    train(model, opt, range(4), accum=3)
    assert {layer.step for layer in ct.compact_layers(model)} == {4}
    assert {layer.window for layer in ct.compact_layers(model)} == {1}


def test_clip_grad_norm_sees_the_compressed_gradients():
    model, _ = make_compact()
    ids = batch(0)
    model(ids, ids).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert any(g.shape == (128, 32) for g in grads)  # a Ghat of q_proj (m = 128, r = 32)
    want = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))
    before = [g.clone() for g in grads]
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=want / 2))
    assert abs(norm - want) <= 1e-5 * want  # fp32 sums of squares over ~10^5 entries: relative error ~1e-6
    scale = (want / 2) / (norm + 1e-6)  # clip_grad_norm_'s own coefficient
    for g, g0 in zip(grads, before):
        assert torch.allclose(g, g0 * scale, rtol=4 * 2**-24, atol=0)


def test_lr_scheduler_drives_compressed_and_dense_updates():
    model, opt = make_compact()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.0 if step == 0 else 1.0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = batch(0)
    model(ids, ids).backward()
    opt.step()  # lr = 0: nothing moves (decoupled weight decay is scaled by lr too)
    sched.step()
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    assert opt.param_groups[0]["lr"] == pytest.approx(3e-3)
    opt.zero_grad()
    model(ids, ids).backward()
    opt.step()
    q = model.model.layers[0].self_attn.q_proj
    assert not torch.equal(q.weight, before["model.layers.0.self_attn.q_proj.weight"])


def test_loss_falls_with_compressed_adamw():
    model, opt = make_compact()
    ids = batch(0)
    first = float(model(ids, ids).detach())
    for _ in range(15):
        model(ids, ids).backward()
        opt.step()
        opt.zero_grad()
    assert float(model(ids, ids).detach()) < 0.8 * first


def test_bad_hyperparameters_are_refused():
    params = torch.nn.Linear(2, 2).parameters()
    with pytest.raises(ct.CompactError, match="lr = -1"):
        ct.CompressedAdamW(params, lr=-1)
    with pytest.raises(ct.CompactError, match="betas"):
        ct.CompressedAdamW(torch.nn.Linear(2, 2).parameters(), betas=(1.0, 0.9))
