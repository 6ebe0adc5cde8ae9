# SPDX-License-Identifier: MIT
"""Failures that used to be silent: each is now an error or correct, and each test here fails without its fix."""
import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import torch.utils.checkpoint  # noqa: E402

import compact_torch as ct  # noqa: E402
from conftest import tiny_llama  # noqa: E402


def batch(vocab=40, b=3, t=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (b, t), generator=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_optimizer_step_between_forward_and_backward_raises(dtype):
    # A step inside an accumulation window: micro-batch 2's backward would form dx = dy W with the new W. compact
    # writes W through a raw pointer; the operator bumps W's version counter, so autograd's saved-tensor check fires
    # (bfloat16 on the CPU goes through the blocked update, whose copy_ bumps it).
    torch.manual_seed(0)
    layer = ct.CompactLinear(16, 8, rank=4, dtype=dtype)
    opt = ct.CompressedAdamW(layer.parameters(), lr=1e-2)
    x = torch.randn(4, 16, dtype=dtype, requires_grad=True)
    layer(x).sum().backward()
    y = layer(x)
    version = layer.weight._version
    opt.step()
    assert layer.weight._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_the_transposed_weight_update_bumps_the_version_counter_too():
    layer = ct.CompactLinear(16, 8, rank=4)
    layer.transposed = True
    layer.weight = torch.nn.Parameter(layer.weight.data.t().contiguous(), requires_grad=False)
    version = layer.weight._version
    layer._apply_update(torch.ones(8, 4), -0.1, 1.0)
    assert layer.weight._version > version


def test_a_weight_given_without_its_placeholder_is_refused():
    a, b = ct.CompactLinear(16, 8, rank=4), ct.CompactLinear(16, 8, rank=4)
    with pytest.raises(ct.CompactError, match=r"is the weight of a CompactLinear .* but its weight_ghat is not given"):
        ct.CompressedAdamW([a.weight])
    with pytest.raises(ct.CompactError, match=r"weight_ghat is not given"):
        ct.CompressedAdamW([{"params": [a.weight, b.weight_ghat]}, {"params": [a.bias]}])
    opt = ct.CompressedAdamW(a.parameters())  # weight and placeholder together: fine (the weight is skipped)
    with pytest.raises(ct.CompactError, match=r"weight_ghat is not given"):
        opt.add_param_group({"params": [b.weight]})
    opt.add_param_group({"params": [b.weight, b.weight_ghat]})


def test_a_second_compress_continues_the_stream_numbering():
    model = tiny_llama()
    ct.compress(model, include=["*.mlp.*"], share_inputs=False)
    first = {layer.stream for layer in ct.compact_layers(model)}
    ct.compress(model, include=["*.self_attn.*_proj"], exclude=["*.o_proj"], share_inputs=False)
    layers = ct.compact_layers(model)
    assert len(layers) == 12 and len({layer.stream for layer in layers}) == 12
    assert min(layer.stream for layer in layers if layer.stream not in first) == max(first) + 1
    # Unrelated layers of the same shape have different P.
    q = model.model.layers[0].self_attn.q_proj
    gate = model.model.layers[0].mlp.gate_proj
    assert not torch.equal(q.projection()[:, :32], gate.projection()[:, :32])


@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing_keeps_siblings_on_one_sketch(reentrant):
    # Under checkpoint(use_reentrant=False) nothing is saved in the first forward, so q's z used to die before k's
    # forward looked for it: q, k, v each kept their own stream, the wrong grouping was recorded, and the recomputed
    # forward stored three sketches. With reentrant checkpointing the first forward runs without autograd and the
    # recomputation decides. Either way the result must be the unchecked model's, bit for bit.
    ids = batch()
    plain = ct.compress(tiny_llama(), rank=0.25)
    plain(ids, ids).backward()
    checked = ct.compress(tiny_llama(), rank=0.25)
    for block in checked.model.layers:
        block.forward = (lambda f: lambda x: torch.utils.checkpoint.checkpoint(f, x, use_reentrant=reentrant))(
            block.forward)
    checked(ids, ids).backward()
    for block in checked.model.layers:
        a, m = block.self_attn, block.mlp
        assert a.q_proj.stream == a.k_proj.stream == a.v_proj.stream
        assert m.gate_proj.stream == m.up_proj.stream != a.q_proj.stream
        assert a.q_proj._state is a.k_proj._state is a.v_proj._state
    assert ct.sketch_config(checked) == ct.sketch_config(plain)
    for (name, p), q in zip(checked.named_parameters(), plain.parameters()):
        if p.grad is not None:
            assert torch.equal(p.grad, q.grad), name


def test_alpha_defaults_to_one():
    assert ct.CompressedAdamW([torch.nn.Parameter(torch.zeros(1))]).defaults["alpha"] == 1.0
    weights = []
    for alpha in (None, 1.0):
        torch.manual_seed(0)
        layer = ct.CompactLinear(16, 8, rank=4, seed=2, stream=0)
        opt = ct.CompressedAdamW(layer.parameters(), lr=0.1) if alpha is None else \
            ct.CompressedAdamW(layer.parameters(), lr=0.1, alpha=alpha)
        layer(torch.ones(2, 16)).sum().backward()
        opt.step()
        weights.append(layer.weight.clone())
    assert torch.equal(weights[0], weights[1])
