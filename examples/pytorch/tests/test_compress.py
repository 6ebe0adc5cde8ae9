# SPDX-License-Identifier: MIT
"""compress() on a model written like Hugging Face's LLaMA: which layers, shared sketches, saved bytes, errors."""
import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from conftest import SavedTensorBytes, tiny_llama  # noqa: E402

COMPRESSED = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj",
              "mlp.down_proj"}


def batch(vocab=40, b=3, t=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (b, t), generator=g)


def test_defaults_compress_every_block_linear_but_o_proj_and_leave_head_and_embeddings():
    model = tiny_llama()
    ids = batch()
    with torch.no_grad():
        before = model(ids)
    assert ct.compress(model, rank=0.5) is model
    names = {n for n, m in model.named_modules() if isinstance(m, ct.CompactLinear)}
    assert names == {f"model.layers.{i}.{s}" for i in range(2) for s in COMPRESSED}
    assert type(model.lm_head) is torch.nn.Linear and type(model.model.layers[0].self_attn.o_proj) is torch.nn.Linear
    assert type(model.model.embed_tokens) is torch.nn.Embedding
    with torch.no_grad():
        assert torch.equal(model(ids), before)  # same weights, the forward is exact
    loss = model(ids, ids)
    assert torch.equal(loss.detach(), torch.nn.functional.cross_entropy(before.reshape(-1, 40), ids.reshape(-1)))


def test_siblings_reading_one_input_share_a_stream_and_one_stored_z():
    model = tiny_llama()
    ct.compress(model, rank=0.25, share_inputs=True)
    model(batch(), batch()).backward()
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        assert a.q_proj.stream == a.k_proj.stream == a.v_proj.stream
        assert m.gate_proj.stream == m.up_proj.stream != a.q_proj.stream
        assert m.down_proj.stream not in (a.q_proj.stream, m.gate_proj.stream)
    streams = [layer.stream for layer in ct.compact_layers(model)]
    assert len(set(streams)) == 6  # 3 groups per block, 2 blocks

    per_layer = tiny_llama()
    ct.compress(per_layer, rank=0.25, share_inputs=False)
    per_layer(batch(), batch()).backward()
    assert len({layer.stream for layer in ct.compact_layers(per_layer)}) == 12


@pytest.mark.parametrize("rank", [0.5, 0.25, 0.125])
@pytest.mark.parametrize("share", [True, False])
def test_saved_activation_bytes_drop_by_exactly_the_compressed_inputs(rank, share):
    # Full rank saves each distinct linear input x (B tokens x n, once for q/k/v and once for gate/up, which read
    # the same tensor); CompAct saves z (B x r) instead: once per shared group, once per layer otherwise. Every other
    # saved tensor (norms, attention, SiLU) is the same in both models.
    ids = batch()
    tokens, d, f = ids.numel(), 128, 352
    full = tiny_llama()
    with SavedTensorBytes(full) as saved_full:
        full(ids, ids)
    model = ct.compress(tiny_llama(), rank=rank, share_inputs=share)
    model(ids, ids).backward()  # the first forward settles the sharing
    with SavedTensorBytes(model) as saved:
        model(ids, ids)
    r_d, r_f = max(1, round(rank * d)), max(1, round(rank * f))
    stored_z = (2 * r_d if share else 5 * r_d) + r_f  # per block: q/k/v and gate/up groups, down
    per_block = tokens * 4 * ((d + d + f) - stored_z)
    assert saved_full.bytes - saved.bytes == 2 * per_block


def test_siblings_share_one_stored_z_from_the_first_forward_on():
    # The first forward decides the sharing; the layer that adopts a sibling's stream must also find its z then,
    # not compute and store a second copy.
    ids = batch()
    model = ct.compress(tiny_llama(), rank=0.25)
    with SavedTensorBytes(model) as first:
        model(ids, ids).backward()
    with SavedTensorBytes(model) as second:
        model(ids, ids).backward()
    assert first.bytes == second.bytes


def test_include_and_exclude_patterns():
    model = tiny_llama()
    ct.compress(model, include=["*.mlp.*"], exclude=["*.down_proj"])
    names = {n for n, m in model.named_modules() if isinstance(m, ct.CompactLinear)}
    assert names == {f"model.layers.{i}.mlp.{s}" for i in range(2) for s in ("gate_proj", "up_proj")}


def test_tied_weights_stay_ordinary_linears():
    model = tiny_llama()
    model.lm_head.weight = model.model.embed_tokens.weight  # tie
    ct.compress(model, include=["*"], exclude=[])
    assert type(model.lm_head) is torch.nn.Linear
    assert type(model.model.layers[0].self_attn.o_proj) is ct.CompactLinear


def test_errors_leave_the_model_untouched():
    model = tiny_llama()
    with pytest.raises(ct.CompactError, match="no nn.Linear matched"):
        ct.compress(model, include=["nothing.*"])
    with pytest.raises(ct.CompactError, match=r"rank r = 200 must satisfy 1 <= r <= n = 128"):
        ct.compress(model, rank=200)
    assert not ct.compact_layers(model)
