# SPDX-License-Identifier: MIT
"""compress() on stock Hugging Face transformers models (tiny configurations, random weights, nothing downloaded):
the paper's layers per family, exact forward, Ghat = the projected weight gradient, training under bf16 autocast,
save_pretrained / from_pretrained / safetensors into plain models and back, decompress, gradient checkpointing."""
import copy
import json
import os

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")
transformers = pytest.importorskip("transformers", reason="the Hugging Face tests need transformers (pip install "
                                                          "transformers; it needs torch >= 2)")

import compact_torch as ct  # noqa: E402
from conftest import gamma  # noqa: E402

VOCAB, T = 64, 12


def make(family, seed=0):
    """A tiny randomly initialised model of the family (eval mode: no dropout, so runs compare bit for bit)."""
    t = transformers
    torch.manual_seed(seed)
    decoder = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=32)
    encoder = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   max_position_embeddings=40, num_labels=3)
    if family == "llama":
        model = t.LlamaForCausalLM(t.LlamaConfig(**decoder))
    elif family == "mistral":
        model = t.MistralForCausalLM(t.MistralConfig(**decoder))
    elif family == "qwen2":
        model = t.Qwen2ForCausalLM(t.Qwen2Config(**decoder))
    elif family == "gpt2":
        model = t.GPT2LMHeadModel(t.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=32,
                                               bos_token_id=0, eos_token_id=0))
    elif family == "bert":
        model = t.BertForSequenceClassification(t.BertConfig(**encoder))
    elif family == "roberta":
        model = t.RobertaForSequenceClassification(t.RobertaConfig(pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                                                   **encoder))
    else:
        raise ValueError(family)
    return model.eval()


FAMILIES = ["llama", "mistral", "qwen2", "gpt2", "bert", "roberta"]
EXPECTED = {
    "decoder": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj",
                "mlp.down_proj"),
    "gpt2": ("attn.c_attn", "mlp.c_fc", "mlp.c_proj"),
    "encoder": ("attention.self.query", "attention.self.key", "attention.self.value", "intermediate.dense",
                "output.dense"),
}


def expected_layers(family):
    if family in ("llama", "mistral", "qwen2"):
        return {f"model.layers.{i}.{s}" for i in range(2) for s in EXPECTED["decoder"]}
    if family == "gpt2":
        return {f"transformer.h.{i}.{s}" for i in range(2) for s in EXPECTED["gpt2"]}
    return {f"{family}.encoder.layer.{i}.{s}" for i in range(2) for s in EXPECTED["encoder"]}


def inputs(family, b=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (b, T), generator=g)
    if family in ("bert", "roberta"):
        return {"input_ids": ids, "labels": torch.randint(0, 3, (b,), generator=g)}
    return {"input_ids": ids, "labels": ids}


def compact_names(model):
    return {n for n, m in model.named_modules() if isinstance(m, ct.CompactLinear)}


@pytest.mark.parametrize("family", FAMILIES)
def test_defaults_are_the_papers_layers(family):
    model = ct.compress(make(family), rank=0.25)
    assert compact_names(model) == expected_layers(family)
    assert set(model.config.compact_torch["layers"]) == expected_layers(family)
    for name, m in model.named_modules():  # what stays: attention outputs, heads, poolers
        if name.endswith(("o_proj", "attn.c_proj", "attention.output.dense", "lm_head", "pooler.dense", "classifier",
                          "classifier.dense", "classifier.out_proj")):
            assert not isinstance(m, ct.CompactLinear), name


def test_gpt2_conv1d_keeps_its_transposed_layout():
    plain = make("gpt2")
    model = ct.compress(copy.deepcopy(plain), rank=0.25)
    c_attn = model.transformer.h[0].attn.c_attn
    assert c_attn.transposed and c_attn.weight.shape == (64, 192) and c_attn.in_features == 64
    assert c_attn.weight_ghat.shape == (192, 16)
    assert plain.state_dict().keys() == model.state_dict().keys()


def capture(model, names):
    """Inputs x and output gradients dy of the named modules of ``model`` (forward hooks, tensor hooks)."""
    store = {n: {} for n in names}

    def attach(name, module):
        def hook(mod, args, out):
            store[name]["x"] = args[0].detach().reshape(-1, args[0].shape[-1])
            out.register_hook(lambda g: store[name].__setitem__("dy", g.detach().reshape(-1, g.shape[-1])))
        module.register_forward_hook(hook)

    for n in names:
        attach(n, model.get_submodule(n))
    return store


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_is_exact_and_ghat_is_the_projected_weight_gradient(family):
    plain = make(family)
    model = ct.compress(copy.deepcopy(plain), rank=0.25)
    batch = inputs(family)
    names = sorted(expected_layers(family))
    seen = capture(plain, names)
    out_plain = plain(**batch)
    out = model(**batch)
    assert torch.equal(out.logits, out_plain.logits)  # the same F.linear / addmm calls on the same weights
    assert torch.equal(out.loss, out_plain.loss)
    out_plain.loss.backward()
    out.loss.backward()
    for name in names:
        layer, ref = model.get_submodule(name), plain.get_submodule(name)
        g_full = ref.weight.grad.t() if layer.transposed else ref.weight.grad  # m x n
        p = layer.projection(dtype=torch.float64)
        want = g_full.double() @ p
        # Ghat = dy^T (x P) against (dy^T x) P: the same products summed in two orders, over the B tokens and the n
        # inputs, each within gamma_{B+n} |dy|^T |x| |P| of the exact value (Higham 3.1), plus the rounding of the
        # fp32 G itself (gamma_B |dy|^T |x|, carried through |P|).
        dy, x = seen[name]["dy"].double().abs(), seen[name]["x"].double().abs()
        bound = 3 * gamma(dy.shape[0] + layer.in_features, torch.float32) * (dy.T @ x @ p.abs())
        got = layer.weight_ghat.grad.double()
        assert ((got - want).abs() <= bound).all(), (name, float((got - want).abs().max()), float(bound.max()))
    # Everything else (embeddings, norms, attention outputs, heads) gets the same gradient: dx = dy W is the same
    # product as nn.Linear's backward.
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    for n, p in plain.named_parameters():
        if n in grads:
            assert torch.equal(grads[n], p.grad), n


@pytest.mark.parametrize("family", ["llama", "roberta"])
def test_trains_under_bf16_autocast_and_saves_a_plain_checkpoint(family, tmp_path):
    model = ct.compress(make(family).train(), rank=0.25, dist="srht")
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    batch = inputs(family, b=4)
    losses = []
    for _ in range(12):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    assert all(map(torch.isfinite, map(torch.tensor, losses))) and losses[-1] < 0.7 * losses[0], losses
    q = model.get_submodule(sorted(expected_layers(family))[0])
    assert q.weight.dtype == torch.float32 and q.step == 12

    model.save_pretrained(tmp_path)
    saved = json.load(open(os.path.join(tmp_path, "config.json")))
    assert saved["compact_torch"] == ct.sketch_config(model)
    cls = type(model)
    plain, info = cls.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not ct.compact_layers(plain)
    sd = model.state_dict()
    for k, v in plain.state_dict().items():
        assert torch.equal(v, sd[k]), k
    # compress() restores the saved configuration: the same layers, ranks, streams and sharing, hence the same P.
    again = ct.compress(plain)
    assert ct.sketch_config(again) == {**ct.sketch_config(model)}
    for name in expected_layers(family):
        a, b = again.get_submodule(name), model.get_submodule(name)
        b_step, b.step = b.step, 0  # the step lives in the optimizer state, not in the model
        assert torch.equal(a.projection(), b.projection()), name
        b.step = b_step
    with pytest.raises(ct.CompactError, match=r"carries a saved sketch configuration.*got \['rank'\]"):
        ct.compress(cls.from_pretrained(tmp_path), rank=0.5)


@pytest.mark.parametrize("family", ["llama", "gpt2", "roberta"])
def test_state_dicts_load_strictly_both_ways_and_through_safetensors(family, tmp_path):
    safetensors = pytest.importorskip("safetensors.torch")
    plain = make(family, seed=3)
    model = ct.compress(make(family, seed=4), rank=0.25)
    model.load_state_dict(plain.state_dict(), strict=True)  # a plain checkpoint into a compressed model
    fresh = make(family, seed=5)
    fresh.load_state_dict(model.state_dict(), strict=True)  # a compressed model's weights into a plain one
    for (k, a), b in zip(plain.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), k
    path = os.path.join(tmp_path, "model.safetensors")
    safetensors.save_model(model, path)  # shared (tied) tensors are written once
    other = make(family, seed=6)
    missing, unexpected = safetensors.load_model(other, path, strict=True)
    assert not missing and not unexpected
    batch = inputs(family)
    with torch.no_grad():
        assert torch.equal(other(**batch).logits, plain(**batch).logits)


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
def test_decompress_gives_back_the_plain_modules_with_the_same_weights(family):
    plain = make(family)
    model = ct.compress(copy.deepcopy(plain), rank=0.25)
    weights = {n: m.weight for n, m in model.named_modules() if isinstance(m, ct.CompactLinear)}
    assert ct.decompress(model) is model
    assert not ct.compact_layers(model) and not hasattr(model.config, "compact_torch")
    for name, w in weights.items():
        m = model.get_submodule(name)
        assert type(m) is type(plain.get_submodule(name))
        assert m.weight is not None and m.weight.data_ptr() == w.data_ptr() and m.weight.requires_grad
    batch = inputs(family)
    assert torch.equal(model(**batch).logits, plain(**batch).logits)
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in plain.named_parameters()]


def test_hf_gradient_checkpointing_keeps_siblings_shared():
    model = make("llama").train()
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    ct.compress(model, rank=0.25)
    model(**inputs("llama")).loss.backward()
    for i in range(2):
        a = model.model.layers[i].self_attn
        m = model.model.layers[i].mlp
        assert a.q_proj.stream == a.k_proj.stream == a.v_proj.stream != m.gate_proj.stream == m.up_proj.stream
        rec = model.config.compact_torch["layers"]
        assert rec[f"model.layers.{i}.self_attn.k_proj"]["stream"] == a.q_proj.stream
        assert rec[f"model.layers.{i}.self_attn.k_proj"]["sharing_decided"]


def test_gpt2_conv1d_update_matches_the_exact_adamw_step(monkeypatch):
    # The transposed weight is updated through blocks of rows of W^T (here 50 of c_attn's 192 output rows per block,
    # to cross block boundaries): W^T <- beta W^T + alpha N P^T, each block widened, updated by unsketch_grad and
    # copied back. Against the exact step from the same fp32 Ghat, in float64: N carries about 8 fp32 roundings
    # (moments, bias corrections, sqrt, eps, division), the update gamma_{r+2} of |alpha N P^T| + |beta W|.
    from compact_torch import linear

    monkeypatch.setattr(linear, "UPDATE_BLOCK_ELEMENTS", 64 * 50)
    model = ct.compress(make("gpt2"), rank=0.25)
    layer = model.transformer.h[0].attn.c_attn
    lr, wd = 0.01, 0.1
    opt = ct.CompressedAdamW(model.parameters(), lr=lr, weight_decay=wd)
    w0 = layer.weight.detach().double().clone()  # n x m
    p = layer.projection(dtype=torch.float64)
    model(**inputs("gpt2")).loss.backward()
    g = layer.weight_ghat.grad.double()
    opt.step()
    upd = (0.1 * g / 0.1) / ((0.001 * g * g / 0.001).sqrt() + 1e-8)
    exact = (1 - lr * wd) * w0 - lr * (upd @ p.T).T
    u32 = 2.0**-24
    bound = (gamma(16 + 2, torch.float32) * (lr * upd.abs() @ p.abs().T + (1 - lr * wd) * w0.abs().T)
             + lr * (8 * u32 * upd.abs()) @ p.abs().T).T
    err = (layer.weight.double() - exact).abs()
    assert (err <= bound).all(), float((err - bound).max())
    assert not torch.equal(layer.weight.double(), w0)
