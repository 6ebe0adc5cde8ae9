# SPDX-License-Identifier: MIT
"""8-bit moments (torch.ops.compact.adamw8_step, CompressedAdamW(moments="8bit", full_rank_moments="8bit")): the op
against the independent pure-torch reference of the spec bit for bit (moment8_reference.py), its errors, the golden
hashes, the optimizer against fp32 moments, bit-exact resume (fp32 and bf16 parameters) and refused checkpoints."""
import io

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
import moment8_reference as ref  # noqa: E402
from compact_torch import CompactError  # noqa: E402


def op(grad, mq, ms, vq, vs, param, lr, b1, b2, eps, wd, t):
    """The op with the reference's calling convention: returns N (param None) or the parameter."""
    out = None if param is not None else torch.empty(grad.shape, dtype=torch.float32)
    torch.ops.compact.adamw8_step(grad, mq, ms, vq, vs, param, out, lr, b1, b2, eps, wd, t)
    return param if param is not None else out


def grads(n, step, seed):
    """Gradients that exercise the code: normal values, a block of zeros, tiny values (subnormal codes), large ones."""
    g = torch.Generator().manual_seed(seed * 1000 + step)
    x = torch.randn(n, generator=g)
    x = x * torch.exp2(torch.randint(-30, 4, (n,), generator=g).float())  # magnitudes spread over 2^34
    if n > 600:
        x[256:512] = 0.0
        x[512:600] *= 2.0 ** -100
    return x


def states(n):
    nb = (n + 255) // 256
    return (torch.zeros(n, dtype=torch.int8), torch.zeros(nb), torch.zeros(n, dtype=torch.uint8), torch.zeros(nb))


@pytest.mark.parametrize("n", [1, 255, 256, 257, 5000])
@pytest.mark.parametrize("mode", ["out", "fp32", "bf16", "fp16"])
def test_op_matches_the_reference_bit_for_bit(n, mode):
    lr, b1, b2, eps, wd = 3e-3, 0.9, 0.999, 1e-8, 0.1
    mq, ms, vq, vs = states(n)
    rq = [t.clone() for t in (mq, ms, vq, vs)]
    dtype = {"out": torch.float32, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[mode]
    param = None if mode == "out" else torch.randn(n).to(dtype)
    rparam = None if param is None else param.clone()
    for t in range(1, 5):
        g = grads(n, t, n)
        if dtype == torch.float16:
            g = g.clamp(-60000, 60000)  # in fp32: torch 1.13 has no fp16 clamp on the CPU
        g = g.to(dtype)
        got = op(g, mq, ms, vq, vs, param, lr, b1, b2, eps, wd, t)
        rq[0], rq[1], rq[2], rq[3], want = ref.step(g, *rq, rparam, lr, b1, b2, eps, wd, t)
        if rparam is not None:
            rparam = want
        for a, b in zip((mq, ms, vq, vs), rq):
            assert torch.equal(a.view(torch.uint8) if a.dtype == torch.int8 else a.view(torch.int32) if a.is_floating_point() else a,
                               b.view(torch.uint8) if b.dtype == torch.int8 else b.view(torch.int32) if b.is_floating_point() else b), t
        bits = torch.int16 if got.dtype != torch.float32 else torch.int32
        assert torch.equal(got.view(bits), want.view(bits)), t


def test_golden_hashes_of_the_spec():
    # The hashes tests/spec/moment8_golden.hpp checks in C++: the reference and the op give them.
    want = {"N": (0xa7f03a1c6dd1846b, 0xb735d877519e3bd4, 0x8e08bc8177a18781, 0xa4d0f79f78443a79, 0xf3e38e9fba83a820),
            "D": (0x702ed9a1fd8ded54, 0x5cf3a9cfa3966905, 0x86e8cfaba625628f, 0x9a435a03dc7921f8, 0x77e867ffdd99f2f0)}
    for case in ref.golden_cases():
        for fn in (None, op):
            mq, ms, vq, vs, result = ref.run_golden(case, fn)
            assert tuple(ref.fnv1a(x) for x in (mq, vq, ms, vs, result)) == want[case["name"]], (case["name"], fn)


def test_non_finite_gradients_make_their_block_nan_and_leave_others():
    n = 600
    mq, ms, vq, vs = states(n)
    g = torch.ones(n)
    g[300] = float("inf")
    out = op(g, mq, ms, vq, vs, None, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1)
    assert torch.isnan(ms[1]) and torch.isnan(vs[1]) and torch.isfinite(ms[[0, 2]]).all()
    assert (mq[256:512] == 0).all()
    out = op(torch.ones(n), mq, ms, vq, vs, None, 1e-3, 0.9, 0.999, 1e-8, 0.0, 2)
    assert torch.isnan(out[256:512]).all() and torch.isfinite(out[:256]).all() and torch.isfinite(out[512:]).all()


def test_bad_arguments_name_themselves_and_write_nothing():
    n = 300
    g = torch.randn(n)
    mq, ms, vq, vs = states(n)
    mq.fill_(5)
    out = torch.full((n,), 7.0)
    calls = {
        "exactly one of the arguments param and out": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms, vq, vs, None, None, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "argument m_q must be int8": lambda: torch.ops.compact.adamw8_step(
            g, vq.clone(), ms, vq, vs, None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "argument v_q must be uint8": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms, mq.clone(), vs, None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "argument v_scales must be float32": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms, vq, vs.double(), None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "arguments m_scales and v_scales must have ceil(300 / 256) = 2": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms[:1], vq, vs, None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "arguments m_q and v_q must have grad's 300 values": lambda: torch.ops.compact.adamw8_step(
            g, mq[:299], ms, vq, vs, None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "argument grad must be contiguous": lambda: torch.ops.compact.adamw8_step(
            torch.randn(n, 2)[:, 0], mq, ms, vq, vs, None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "argument grad must be float32, float16 or bfloat16": lambda: torch.ops.compact.adamw8_step(
            g.double(), mq, ms, vq, vs, None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "argument param has dtype BFloat16; expected grad's Float": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms, vq, vs, torch.zeros(n, dtype=torch.bfloat16), None, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "argument out must be float32": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms, vq, vs, None, out.double(), 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
        "argument step = 0 must be >= 1": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms, vq, vs, None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 0),
        "constant eps = inf must be finite": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms, vq, vs, None, out, 1e-3, 0.9, 0.999, float("inf"), 0.0, 1),
        "output out overlaps input grad": lambda: torch.ops.compact.adamw8_step(
            g, mq, ms, vq, vs, None, g, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1),
    }
    for message, call in calls.items():
        with pytest.raises(CompactError, match=message.replace("(", r"\(").replace(")", r"\)")):
            call()
    assert (mq == 5).all() and (ms == 0).all() and (vq == 0).all() and (out == 7.0).all()


# -- the optimizer ----------------------------------------------------------------------------------------------------

def make_model(dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        ct.CompactLinear(96, 128, bias=True, rank=48, dist="srht", seed=3, stream=5, period=3,
                         dtype=dtype),  # Ghat 128 x 48
        torch.nn.Tanh(), torch.nn.Linear(128, 64, dtype=dtype), torch.nn.Tanh(), torch.nn.Linear(64, 4, dtype=dtype))
    return model


def train(model, opt, steps, dtype=torch.float32):
    for k in steps:
        g = torch.Generator().manual_seed(k)
        x = torch.randn(16, 96, generator=g).to(dtype)
        y = torch.randn(16, 4, generator=g).to(dtype)
        loss = (model(x) - y).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return float(loss.detach())


def make_opt(model, kind="8bit"):
    return ct.CompressedAdamW(model.parameters(), lr=1e-2, weight_decay=0.01, moments=kind, full_rank_moments=kind)


def test_which_parameters_get_8bit_state_and_fp32_stays_the_default():
    model = make_model()
    opt = make_opt(model)
    train(model, opt, range(2))
    ghat, bias = model[0].weight_ghat, model[0].bias
    assert set(opt.state[ghat]) >= {"exp_avg_q", "exp_avg_scale", "exp_avg_sq_q", "exp_avg_sq_scale", "step"}
    assert opt.state[ghat]["exp_avg_q"].dtype == torch.int8 and opt.state[ghat]["exp_avg_sq_q"].dtype == torch.uint8
    assert opt.state[ghat]["exp_avg_scale"].shape == (128 * 48 // 256,)
    assert "exp_avg_q" in opt.state[model[2].weight]  # 8192 values
    assert "exp_avg" in opt.state[bias] and "exp_avg" in opt.state[model[4].weight]  # below 4096 values: fp32
    default = ct.CompressedAdamW(make_model().parameters())
    assert default._moments == "fp32" and default._full_rank_moments == "fp32"
    with pytest.raises(CompactError, match="argument moments = 'int8' must be 'fp32' or '8bit'"):
        ct.CompressedAdamW(model.parameters(), moments="int8")


def test_8bit_moments_train_close_to_fp32_moments():
    # Each encode moves a moment by at most 2^-4 of itself (half a step of 3 mantissa bits) above the subnormal codes,
    # so one step's update N differs from fp32's by at most about 2^-4 (m) + 2^-5 (sqrt v) = 0.094 relative, and the
    # parameters' distance from the fp32 run by at most about that fraction of their path (measured: 0.02 - 0.05);
    # 0.15 leaves room for the errors compounding through the EMA and the diverging gradients, and is far below the
    # ~1.4 of two unrelated runs (a different P gives that: the test failed so before the streams were pinned).
    a, b = make_model(), make_model()
    start = [p.detach().clone() for p in a.parameters()]
    la = train(a, make_opt(a, "fp32"), range(20))
    lb = train(b, make_opt(b, "8bit"), range(20))
    for p0, pa, pb in zip(start, a.parameters(), b.parameters()):
        moved = (pa - p0).norm()
        if pa is a[0].weight_ghat:  # the placeholder never moves
            continue
        assert moved > 0
        assert (pa - pb).norm() <= 0.15 * moved, (float((pa - pb).norm()), float(moved))
    assert abs(la - lb) <= 0.1 * abs(la)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_resume_is_bit_exact(dtype):
    model = make_model(dtype)
    opt = make_opt(model)
    train(model, opt, range(3), dtype)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    train(model, opt, range(3, 7), dtype)  # crosses the window change at step 3 (period 3)
    buf.seek(0)
    ckpt = torch.load(buf)
    resumed = make_model(dtype, seed=123)
    resumed_opt = make_opt(resumed)
    resumed.load_state_dict(ckpt["model"])
    resumed_opt.load_state_dict(ckpt["opt"])
    for p in resumed.parameters():  # torch's cast would have rounded the scales to bf16: they are back as saved
        st = resumed_opt.state[p]
        if "exp_avg_scale" in st:
            assert st["exp_avg_scale"].dtype == torch.float32 and st["exp_avg_q"].dtype == torch.int8
    train(resumed, resumed_opt, range(3, 7), dtype)
    for (name, x), y in zip(model.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(x, y) if torch.is_tensor(x) else x == y, name
    for sa, sb in zip(opt.state.values(), resumed_opt.state.values()):
        for key in sa:
            if torch.is_tensor(sa[key]):
                assert sa[key].dtype == sb[key].dtype and torch.equal(sa[key], sb[key]), key


def test_a_checkpoint_of_the_other_moment_kind_is_refused():
    model = make_model()
    opt32 = make_opt(model, "fp32")
    train(model, opt32, range(1))
    opt8 = make_opt(model, "8bit")
    with pytest.raises(CompactError, match=r"the checkpoint has fp32 moments for parameter 2 \(shape \(128, 48\)\), but this optimizer keeps 8-bit moments for it \(moments = .8bit."):
        opt8.load_state_dict(opt32.state_dict())
    train(model, opt8, range(1))
    with pytest.raises(CompactError, match=r"the checkpoint has 8-bit moments for parameter 2 \(shape \(128, 48\)\), but this optimizer keeps fp32 moments"):
        make_opt(model, "fp32").load_state_dict(opt8.state_dict())


@pytest.mark.skipif(not ct._ext.HAS_FAKE_KERNELS, reason="torch.compile of compact's ops needs torch >= 2.1")
def test_torch_compile_traces_the_op_with_its_fake_kernel():
    n = 1000

    def f(g, mq, ms, vq, vs, out):
        torch.ops.compact.adamw8_step(g * 2, mq, ms, vq, vs, None, out, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1)
        return out + 1

    g = torch.randn(n)
    eager, compiled = states(n) + (torch.empty(n),), states(n) + (torch.empty(n),)
    want = f(g, *eager)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(g, *compiled)
    assert torch.equal(got, want)
    for a, b in zip(compiled, eager):
        assert torch.equal(a, b)  # the in-place updates of the state happened in the compiled graph too
