# SPDX-License-Identifier: MIT
"""CompressedAdamW(layerwise=True): each parameter stepped inside backward equals step() after backward, bit for bit
(with and without gradient accumulation, with parameters that skip micro-batches, across a window change and a
checkpoint resume); gradients are freed; step()/zero_grad()/clip_grad_norm_ behave as documented; the Hugging Face
Trainer runs it. DDP: test_ddp.py."""
import io
import re

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")
if not hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
    pytest.skip(f"layer-wise updates need torch >= 2.1 (register_post_accumulate_grad_hook); this is torch "
                f"{torch.__version__}", allow_module_level=True)

import torch.utils.checkpoint  # noqa: E402

import compact_torch as ct  # noqa: E402
from conftest import tiny_llama  # noqa: E402


def batch(step, b=4, t=16, vocab=40):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, vocab, (b, t), generator=g)


def make(layerwise, accum=1, seed=0, dtype=torch.float32, moments="fp32"):
    model = ct.compress(tiny_llama(seed=seed, dtype=dtype), rank=0.25, dist="srht", period=3, seed=11)
    kw = dict(layerwise=True, accumulation_steps=accum) if layerwise else {}
    return model, ct.CompressedAdamW(model.parameters(), lr=3e-3, weight_decay=0.01, moments=moments,
                                     full_rank_moments=moments, **kw)


def train(model, opt, steps, accum=1, call_step=True):
    for s in steps:
        for k in range(accum):
            ids = batch(10 * s + k)
            (model(ids, ids) / accum).backward()
        if call_step:
            opt.step()
            opt.zero_grad(set_to_none=True)


def assert_same(a, b):
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y) if torch.is_tensor(x) else x == y, name
    assert ct.optim.sketch_states(a) == ct.optim.sketch_states(b)


@pytest.mark.parametrize("moments", ["fp32", "8bit"])
@pytest.mark.parametrize("accum", [1, 3])
def test_layerwise_steps_equal_step_after_backward_bit_for_bit(accum, moments):
    # Each parameter's update reads only its own gradient, its own moments, its group's lr and its layer's P, which
    # are the same values in both runs; so the two trajectories agree exactly, across the window change at step 3.
    ref, ref_opt = make(False, moments=moments)
    lw, lw_opt = make(True, accum, moments=moments)
    train(ref, ref_opt, range(5), accum)
    train(lw, lw_opt, range(5), accum, call_step=False)  # the loop's step() is not needed
    assert_same(ref, lw)
    quantized = [st for st in lw_opt.state.values() if "exp_avg_q" in st]
    assert bool(quantized) == (moments == "8bit")  # the 8-bit step ran (the embeddings have >= 4096 values)
    for p, q in zip(ref.parameters(), lw.parameters()):  # the state in parameter order (stepped in another order)
        a, b = ref_opt.state.get(p, {}), lw_opt.state.get(q, {})
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k]
                                            for k in a)
    assert {layer.step for layer in ct.compact_layers(lw)} == {5}


def test_gradients_are_freed_as_the_parameters_are_stepped():
    model, opt = make(True, accum=2)
    params = [p for p in model.parameters() if p.requires_grad]
    live = []

    def count(_):
        live.append(sum(p.grad is not None for p in params))

    ids = batch(0)
    model(ids, ids).backward()  # micro-batch 1 of 2: the gradients are the accumulators, they stay
    assert all(p.grad is not None for p in params)
    handles = [p.register_post_accumulate_grad_hook(count) for p in params]  # runs after the optimizer's hook
    model(ids, ids).backward()
    assert all(p.grad is None for p in params)
    for h in handles:
        h.remove()
    # The second pass: each hook freed its own gradient, so the count falls as backward proceeds.
    assert live[-1] == 0 and live[0] < len(params)


class Branches(torch.nn.Module):
    """A trunk used by every micro-batch and two branches (one compressed) used only when asked."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.trunk = ct.CompactLinear(12, 12, rank=4, seed=1, period=2, stream=0)
        self.a = torch.nn.Linear(12, 3)
        self.b = ct.CompactLinear(12, 3, rank=4, seed=2, period=2, stream=0)

    def forward(self, x, use):
        h = self.trunk(x).tanh()
        out = h.sum()
        if "a" in use:
            out = out + self.a(h).pow(2).sum()
        if "b" in use:
            out = out + self.b(h).pow(2).sum()
        return out


def test_a_parameter_skipping_micro_batches_steps_with_the_window():
    # Window of 3 micro-batches; branch a is used only in the first micro-batch of window 0, then only in the last of
    # window 1, then never, then in the middle; b the other way round. Counted per parameter, a would reach its 3rd
    # backward in the middle of window 2; counted by backward passes it steps at the end of each window in which it
    # got a gradient, exactly as step() after the window does.
    uses = [["ab", "", ""], ["", "", "a"], ["b", "", ""], ["", "ab", "b"]]

    def run(layerwise):
        model = Branches()
        kw = dict(layerwise=True, accumulation_steps=3) if layerwise else {}
        opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, **kw)
        for w, window in enumerate(uses):
            for k, use in enumerate(window):
                x = torch.randn(5, 12, generator=torch.Generator().manual_seed(10 * w + k))
                model(x, use).backward()
            if not layerwise:
                opt.step()
            opt.zero_grad(set_to_none=True)
        return model

    ref, lw = run(False), run(True)
    for (name, x), y in zip(ref.state_dict().items(), lw.state_dict().values()):
        assert torch.equal(x, y), name
    assert ref.b.step == lw.b.step == len(uses)  # every layer's P advances once per window, used or not


def test_sketch_groups_advance_after_every_member_stepped():
    model, opt = make(True)
    ids = batch(0)
    model(ids, ids).backward()  # the first forward decides the sharing
    attn = model.model.layers[0].self_attn
    assert attn.q_proj._state is attn.k_proj._state is attn.v_proj._state  # q/k/v share one sketch state
    seen = []
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
        proj.weight_ghat.register_post_accumulate_grad_hook(lambda p, proj=proj: seen.append(proj.step))
    model(ids, ids).backward()
    assert seen == [1, 1, 1] and attn.q_proj.step == 2


def test_state_dict_resume_is_bit_exact():
    model, opt = make(True)
    train(model, opt, range(2))
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    train(model, opt, range(2, 6))
    buf.seek(0)
    ckpt = torch.load(buf)
    resumed, resumed_opt = make(True, seed=123)
    resumed.load_state_dict(ckpt["model"])
    resumed_opt.load_state_dict(ckpt["opt"])  # replaces the param groups: the hooks must find the new ones
    train(resumed, resumed_opt, range(2, 6))
    assert_same(model, resumed)
    buf.seek(0)
    ckpt = torch.load(buf)  # afresh: load_state_dict adopts the file's moment tensors, which training changed
    plain, plain_opt = make(False, seed=123)  # the same checkpoint resumes a non-layer-wise optimizer identically
    plain.load_state_dict(ckpt["model"])
    plain_opt.load_state_dict(ckpt["opt"])
    train(plain, plain_opt, range(2, 6))
    assert_same(model, plain)


def test_lr_scheduler_acts_on_the_layerwise_updates():
    model, opt = make(True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.0 if step == 0 else 1.0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = batch(0)
    model(ids, ids).backward()  # lr = 0: nothing moves
    opt.step()
    sched.step()
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    model(ids, ids).backward()
    q = model.model.layers[0].self_attn.q_proj
    assert not torch.equal(q.weight, before["model.layers.0.self_attn.q_proj.weight"])


def test_step_and_zero_grad_mid_window_and_a_mismatched_loop_raise():
    model, opt = make(True, accum=2)
    ids = batch(0)
    model(ids, ids).backward()
    with pytest.raises(ct.CompactError, match="after 1 of the window's 2 backward passes"):
        opt.step()
    with pytest.raises(ct.CompactError, match="zero_grad.*would discard"):
        opt.zero_grad()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)  # nothing discarded
    model(ids, ids).backward()
    opt.step()  # once per window: fine
    for _ in range(4):
        model(ids, ids).backward()
    with pytest.raises(ct.CompactError, match="2 windows of 2 backward passes"):
        opt.step()


def test_clip_grad_norm_refuses_and_inf_returns_the_windows_norm():
    ref, ref_opt = make(False)
    lw, lw_opt = make(True)
    ids = batch(0)
    ref(ids, ids).backward()
    lw(ids, ids).backward()
    want = torch.nn.utils.clip_grad_norm_(ref.parameters(), float("inf"))
    got = torch.nn.utils.clip_grad_norm_(lw.parameters(), float("inf"))
    # Both: the 2-norm of the stacked per-tensor 2-norms of the same gradients, in the same order.
    assert torch.equal(got, want)
    with pytest.raises(ct.CompactError, match=r"max_norm = 1.0.*cannot clip by the global norm"):
        torch.nn.utils.clip_grad_norm_(lw.parameters(), 1.0)
    other = torch.nn.Linear(2, 2)  # parameters of no layer-wise optimizer: torch's own function
    other(torch.ones(1, 2)).sum().backward()
    assert float(torch.nn.utils.clip_grad_norm_(other.parameters(), 1.0)) > 0


def test_bad_arguments_are_refused():
    params = list(torch.nn.Linear(2, 2).parameters())
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ct.CompactError, match="accumulation_steps"):
            ct.CompressedAdamW(params, layerwise=True, accumulation_steps=bad)
    with pytest.raises(ct.CompactError, match="accumulation_steps = 2 needs layerwise=True"):
        ct.CompressedAdamW(params, accumulation_steps=2)
    with pytest.raises(ct.CompactError, match="attach_ddp is for layerwise=True"):
        ct.CompressedAdamW(params).attach_ddp(None)
    with pytest.raises(ct.CompactError, match="not a torch.nn.parallel.DistributedDataParallel"):
        ct.CompressedAdamW(params, layerwise=True).attach_ddp(torch.nn.Linear(2, 2))


def test_old_torch_gets_a_clear_error(monkeypatch):
    monkeypatch.delattr(torch.Tensor, "register_post_accumulate_grad_hook")
    with pytest.raises(ct.CompactError, match=f"needs torch >= 2.1.*this is torch {re.escape(torch.__version__)}"):
        ct.CompressedAdamW(torch.nn.Linear(2, 2).parameters(), layerwise=True)
    ct.CompressedAdamW(torch.nn.Linear(2, 2).parameters())  # the default needs no hook


class Checkpointed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.first = torch.nn.Linear(12, 12)
        self.last = ct.CompactLinear(12, 2, rank=4, seed=1, period=2, stream=0)

    def forward(self, x, reentrant):
        # The segment holds the last layer: with use_reentrant=True its parameters get their gradients in the nested
        # backward pass, before any other parameter.
        h = self.first(x).tanh()
        return torch.utils.checkpoint.checkpoint(lambda t: self.last(t).pow(2).sum(), h, use_reentrant=reentrant)


def test_non_reentrant_checkpointing_matches_and_reentrant_checkpointing_raises():
    # Non-reentrant checkpointing recomputes the segment inside the same backward pass: the same steps bit for bit.
    # A reentrant checkpoint runs a backward pass inside the outer one; its end is not the micro-batch's: refused.
    runs = []
    for layerwise in (False, True):
        model = Checkpointed()
        opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, layerwise=layerwise)
        for step in range(3):
            x = torch.randn(5, 12, generator=torch.Generator().manual_seed(step))
            model(x, reentrant=False).backward()
            opt.step()
            opt.zero_grad()
        runs.append(model)
    for (name, a), b in zip(runs[0].state_dict().items(), runs[1].state_dict().values()):
        assert torch.equal(a, b), name
    model = Checkpointed()
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, layerwise=True)  # noqa: F841 (its hooks act)
    x = torch.randn(5, 12)
    with pytest.raises(ct.CompactError, match="nested in another.*use_reentrant=False"):
        model(x, reentrant=True).backward()


def test_a_backward_pass_that_raised_does_not_stop_later_windows():
    model, opt = make(True)
    q = model.model.layers[0].self_attn.q_proj
    ids = batch(0)
    handle = model.model.embed_tokens.weight.register_hook(lambda g: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        model(ids, ids).backward()  # its window-end callback never runs
    handle.remove()
    opt.zero_grad()
    before, step = q.weight.detach().clone(), q.step
    model(ids, ids).backward()
    assert q.step == step + 1 and not torch.equal(q.weight, before)
    assert all(p.grad is None for p in model.parameters())


def test_a_param_group_added_later_is_stepped_layerwise_with_its_own_rate():
    finals = []
    for layerwise in (False, True):
        torch.manual_seed(5)
        a, b = torch.nn.Linear(6, 6), torch.nn.Linear(6, 1)
        opt = ct.CompressedAdamW(a.parameters(), lr=1e-2, layerwise=layerwise)
        opt.add_param_group({"params": b.parameters(), "lr": 3e-2})
        for step in range(3):
            x = torch.randn(4, 6, generator=torch.Generator().manual_seed(step))
            b(a(x).tanh()).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
        finals.append([p.detach().clone() for p in (*a.parameters(), *b.parameters())])
    assert all(torch.equal(x, y) for x, y in zip(*finals))


@pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                    reason="this torch has no gloo backend")
def test_attach_ddp_refuses_find_unused_parameters_and_a_second_attach(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        model = torch.nn.Linear(3, 3)
        opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, layerwise=True)
        with pytest.raises(ct.CompactError, match="find_unused_parameters=True is not supported"):
            opt.attach_ddp(torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt.attach_ddp(ddp)
        with pytest.raises(ct.CompactError, match="already attached"):
            opt.attach_ddp(ddp)
        before = model.weight.detach().clone()
        ddp(torch.ones(2, 3)).sum().backward()  # one rank: the comm hook steps on its own gradient
        assert not torch.equal(model.weight, before)
        del ddp
    finally:
        dist.destroy_process_group()
