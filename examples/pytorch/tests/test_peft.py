# SPDX-License-Identifier: MIT
"""compress() on PEFT LoRA models (peft's get_peft_model on a tiny stock Hugging Face LLaMA, nothing downloaded):
each adapter's A becomes a CompactLinear that stores one sketch per shared input, the frozen base layers stay frozen
and input-free everywhere (compress, training, decompress, save and load), and a frozen nn.Linear is never compressed.
"""
import sys

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")
transformers = pytest.importorskip("transformers", reason="the PEFT tests need transformers (and torch >= 2)")
peft = pytest.importorskip("peft", reason="the PEFT tests need peft (pip install -c constraints.txt peft)")

import compact_torch as ct  # noqa: E402
from conftest import SavedTensorBytes  # noqa: E402

VOCAB, T = 64, 16
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def lora_llama(seed=0, hidden=64, inter=160, dropout=0.0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=inter,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                      max_position_embeddings=64, use_cache=False)
    model = transformers.LlamaForCausalLM(config)
    lora = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=dropout, target_modules=TARGETS, init_lora_weights=False)
    return peft.get_peft_model(model, lora)


def batch(seed=1, b=2):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (b, T), generator=g)
    return {"input_ids": ids, "labels": ids}


def trainable(model):
    return {n: p.requires_grad for n, p in model.named_parameters()}


def test_compress_takes_a_lora_model_without_arguments_and_compresses_each_adapters_A():
    model = lora_llama()
    flags = trainable(model)
    ct.compress(model)
    layers = {n: m for n, m in model.named_modules() if isinstance(m, ct.CompactLinear)}
    # The paper's layers of the family (not o_proj), each through its adapter's A.
    assert len(layers) == 2 * 6
    assert all(".lora_A.default" in n for n in layers)
    assert not any(n.endswith("o_proj.lora_A.default") for n in layers)
    for name, module in model.named_modules():
        if name.endswith(".base_layer"):
            assert type(module) is torch.nn.Linear and not module.weight.requires_grad
    # Nothing frozen became trainable: the base weights, embeddings, norms and head stay frozen; A's weight is now
    # updated through its compressed gradient (weight_ghat), as every CompactLinear's.
    after = trainable(model)
    for n, was in flags.items():
        if not was:
            assert after.get(n, False) is False, n


def test_a_compressed_lora_model_trains_and_leaves_every_frozen_weight_bit_for_bit():
    model = lora_llama()
    ct.compress(model)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    lora_B = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_B" in n}
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(6):
        loss = model(**batch(1)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    for n, p in model.named_parameters():
        if n in frozen and "lora_A" not in n:  # A's weight is updated by the optimizer through Ghat
            assert torch.equal(p, frozen[n]), f"frozen {n} changed"
    assert any(not torch.equal(p, lora_B[n]) for n, p in model.named_parameters() if n in lora_B)


def test_decompress_and_a_state_dict_round_trip_keep_frozen_weights_frozen():
    model = lora_llama()
    flags = trainable(model)
    ct.compress(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ct.decompress(model)
    assert not any(isinstance(m, ct.CompactLinear) for m in model.modules())
    assert trainable(model) == flags
    again = lora_llama(seed=5)
    ct.compress(again)
    again.load_state_dict(state)
    for n, p in again.named_parameters():
        if not p.requires_grad and n in state:
            assert torch.equal(p, state[n])


def test_a_compressed_lora_model_saves_sketches_instead_of_the_adapters_inputs():
    """Plain LoRA saves each adapted layer's input for A's gradient (the base layers, frozen, save none). Compressed
    with saved="linear" (the paper's layers, r = n/4, shared inputs), each block's three distinct inputs of compressed
    adapters -- the attention's input (q, k, v), the MLP's input (gate, up) and down's input -- are stored once each
    as a sketch of a quarter of their width, and nothing else changes: exactly 3/4 of those bytes are saved."""
    hidden, inter, b = 128, 320, 4
    plain = lora_llama(hidden=hidden, inter=inter)
    compressed = lora_llama(hidden=hidden, inter=inter)
    ct.compress(compressed, saved="linear")
    sizes = []
    for model in (plain, compressed):
        with SavedTensorBytes(model) as saved:
            model(**batch(3, b=b)).loss.backward()
        sizes.append(saved.bytes)
    inputs = 2 * b * T * (hidden + hidden + inter) * 4  # two blocks, fp32
    assert sizes[0] - sizes[1] == inputs - inputs // 4, sizes


def test_the_default_on_a_lora_causal_lm_adds_the_chunked_loss_head_in_forward_grad_mode(monkeypatch):
    """The default on a PEFT causal LM is saved="linear" plus the "loss" piece: the N x V log-softmax that
    cross_entropy saves is gone, and the frozen head's chunked loss keeps only dH (N x d) from its forward. So the
    saved bytes differ from saved="linear"'s by N V 4 - N d 4, up to the int64 targets cross_entropy saves (8 B a
    token) against the chunked loss's scalar count; losses and gradients agree to fp32 rounding."""
    monkeypatch.setattr(sys.modules[__name__], "VOCAB", 1024)
    hidden, b = 64, 4
    sizes, losses, grads = [], [], []
    for saved in ({"saved": "linear"}, {}):
        model = lora_llama(hidden=hidden)
        ct.compress(model, **saved)
        with SavedTensorBytes(model) as counter:
            loss = model(**batch(3, b=b)).loss
            loss.backward()
        sizes.append(counter.bytes)
        losses.append(loss.detach())
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    assert getattr(model, "_compact_pieces", {}) == {"loss": True}
    n = b * T
    assert abs((sizes[0] - sizes[1]) - (n * VOCAB * 4 - n * hidden * 4)) <= 8 * n, sizes
    # The loss sums n terms of size ~log V in a different order: |diff| <= gamma_n * sum |terms|.
    assert abs(float(losses[0] - losses[1])) <= 2 * n * 2.0**-24 * float(losses[0]) * 2
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-5, atol=1e-6, msg=name)


def test_frozen_linears_are_never_compressed_and_the_error_says_why():
    model = lora_llama()
    with pytest.raises(ct.CompactError, match="frozen .*saves no input for its weight"):
        ct.compress(model, include=["*.base_layer"])
    plain = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4))
    plain.requires_grad_(False)
    with pytest.raises(ct.CompactError, match="frozen"):
        ct.compress(plain)


def test_patterns_that_match_nothing_name_what_the_lora_model_has():
    model = lora_llama()
    with pytest.raises(ct.CompactError, match="PEFT LoRA model.*self_attn.q_proj"):
        ct.compress(model, include=["*.attn.c_attn"])


def test_lora_with_dropout_shares_nothing_but_still_trains():
    """With lora_dropout > 0 each adapter reads its own dropped-out copy of x: one sketch per adapter."""
    model = lora_llama(dropout=0.1)
    ct.compress(model)
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2)
    model.train()
    loss = model(**batch(2)).loss
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)


def test_saved_all_on_a_lora_model_patches_the_inner_causal_lm_and_decompress_undoes_it():
    from compact_torch.loss import is_patched

    model = lora_llama()
    ct.compress(model, saved="all")
    inner = model.get_base_model()
    assert is_patched(inner)  # the chunked loss on the Hugging Face model inside the PEFT wrapper
    assert "forward" in inner.model.__dict__  # the codec's hooks around its decoder, not around the head
    out = model(**batch(1))
    assert out.logits is None and torch.isfinite(out.loss)
    out.loss.backward()
    ct.decompress(model)
    assert not is_patched(inner) and "forward" not in inner.model.__dict__
    assert model(**batch(1)).logits is not None
