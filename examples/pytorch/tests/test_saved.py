# SPDX-License-Identifier: MIT
"""compact_torch.saved: everything else autograd saves, through compact's sr8 codec (8-bit with stochastic rounding)
and masks as bits; and compress(saved=...), which puts the pieces together on Hugging Face models."""
import math

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from compact_torch import _ext, saved  # noqa: E402


def test_the_ops_round_trip_within_one_step_of_each_block_and_match_their_shapes():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 130, generator=g) * torch.logspace(-3, 3, 130)  # blocks of very different scales
    q, scales = _ext.ops.sr8_encode(x, 1, 2, 3)
    assert q.dtype == torch.int8 and q.shape == (x.numel(),) and scales.shape == (math.ceil(x.numel() / 64),)
    y = _ext.ops.sr8_decode(q, scales).view_as(x)
    step = scales.repeat_interleave(64)[: x.numel()].view_as(x)  # amax / 127 of each value's block
    assert ((y - x).abs() <= step).all()  # one rounding step at most (docs/spec.md)
    again = _ext.ops.sr8_encode(x, 1, 2, 3)
    assert torch.equal(again[0], q) and torch.equal(again[1], scales)  # a pure function of (state, x)
    other = _ext.ops.sr8_encode(x, 1, 2, 4)
    assert not torch.equal(other[0], q)  # another window: other uniforms


def test_16_bit_inputs_widen_exactly_and_bad_input_is_refused():
    x = torch.randn(300).to(torch.bfloat16)
    q, s = _ext.ops.sr8_encode(x, 0, 0, 0)
    q32, s32 = _ext.ops.sr8_encode(x.float(), 0, 0, 0)
    assert torch.equal(q, q32) and torch.equal(s, s32)
    assert _ext.ops.sr8_decode(q, s, torch.bfloat16).dtype == torch.bfloat16
    with pytest.raises(ct.CompactError, match="argument x must be float32, float16 or bfloat16, got Long"):
        _ext.ops.sr8_encode(torch.arange(10), 0, 0, 0)
    with pytest.raises(ct.CompactError, match="scales has 1 values; 130 values of q need 3"):
        _ext.ops.sr8_decode(torch.zeros(130, dtype=torch.int8), torch.zeros(1))
    empty_q, empty_s = _ext.ops.sr8_encode(torch.zeros(0), 0, 0, 0)
    assert empty_q.numel() == 0 and empty_s.numel() == 0


def test_a_non_finite_block_decodes_to_nan_and_leaves_the_other_blocks_alone():
    x = torch.randn(192)
    x[70] = float("inf")
    x[150] = float("nan")
    y = _ext.ops.sr8_decode(*_ext.ops.sr8_encode(x, 0, 0, 0))
    assert torch.isnan(y[64:192]).all()  # blocks 1 and 2 hold the inf and the NaN
    assert torch.isfinite(y[:64]).all()


def test_the_codec_is_unbiased_through_a_backward_pass():
    """dW of y = x W^T with x saved through the codec, averaged over K codec seeds, against the exact dW.

    Per element the decoded x is x + s (B - f) with B ~ Bernoulli(f) (f the fraction of x / s): mean 0 up to the
    2^-16 s bias of 16-bit uniforms, variance s^2 f (1 - f) <= s^2 / 4. dW[o, i] = sum_t dy[t, o] x[t, i] then has
    variance <= sum_t dy[t, o]^2 s_t^2 / 4 per seed, and the mean over K independent seeds has a standard deviation of
    sqrt of that / K. The test allows 6 of those plus the bias bound sum_t |dy[t, o]| s_t 2^-16: a round-to-nearest
    codec (no noise, a systematic error of up to s / 2) fails it on this input, whose values sit at 0.3 of a step."""
    g = torch.Generator().manual_seed(0)
    tokens, n, m, K = 64, 256, 8, 400
    base = torch.randint(-100, 100, (tokens, n), generator=g).float()
    base[:, 0] = 127  # every block's largest magnitude is 127 + 0.3: steps of (127.3 / 127)
    x = (base + 0.3).requires_grad_()
    w = torch.randn(m, n, generator=g)
    dy = torch.randn(tokens, m, generator=g)
    exact = dy.T @ x.detach()
    s = x.detach().abs().view(tokens, -1, 64).amax(-1) / 127  # per token and block
    s_per = s.repeat_interleave(64, dim=1)
    std = torch.sqrt((dy.T**2) @ (s_per**2 / 4)) / math.sqrt(K)
    bias = dy.abs().T @ s_per * 2.0**-16
    total = torch.zeros_like(exact)
    for seed in range(K):
        codec = saved.SavedCodec(seed=seed, min_numel=1)
        wp = w.clone().requires_grad_()
        with codec.hooks():
            y = torch.nn.functional.linear(x * 1.0, wp)  # x * 1.0: a non-leaf, as an activation is
        y.backward(dy)
        total += wp.grad
    mean = total / K
    assert ((mean - exact).abs() <= 6 * std + bias).all()
    rtn = dy.T @ (torch.round(x.detach() / s_per) * s_per)  # round to nearest: biased on this input
    assert not ((rtn - exact).abs() <= 6 * std + bias).all()


def test_a_tensor_saved_by_several_ops_is_encoded_once_and_masks_become_bits():
    codec = saved.SavedCodec(min_numel=1)
    x = torch.randn(64, 64, requires_grad=True)
    with codec.hooks():
        h = x * 2.0
        y = (h.sin() + h.cos() + h * h).sum()  # h saved by sin, cos and mul
    assert codec.raw_bytes == h.numel() * 4  # one record for h (x itself is a leaf: kept)
    y.backward()
    h = 2 * x.detach()
    want = 2.0 * (torch.cos(h) - torch.sin(h) + 2 * h)
    # h decodes within one step s of its block (amax / 127); cos - sin is sqrt(2)-Lipschitz and 2h moves by 2 s,
    # and dh/dx = 2: each gradient is within 2 (sqrt(2) + 2) s of the exact one.
    s_per = (h.abs().view(-1, 64).amax(-1) / 127).repeat_interleave(64).view_as(h)
    assert ((x.grad - want).abs() <= 2 * (math.sqrt(2) + 2) * s_per * 1.0001).all()
    mask = torch.rand(1000) > 0.5
    packed = saved.pack_bits(mask)
    assert packed.dtype == torch.uint8 and packed.numel() == 125
    assert torch.equal(saved.unpack_bits(packed, 1000), mask)


def test_parameters_leaves_small_and_integer_tensors_are_kept_as_they_are():
    codec = saved.SavedCodec(min_numel=1000)
    w = torch.nn.Parameter(torch.randn(64, 64))
    small = torch.randn(10, 10, requires_grad=True) * 1.0
    for t in (w, torch.randn(64, 64), small, torch.arange(5000)):
        assert codec.pack(t) is t


def test_bad_arguments_are_refused():
    with pytest.raises(ct.CompactError, match="attention = 'fast' is not one of"):
        saved.SavedCodec(attention="fast")
    with pytest.raises(ct.CompactError, match="min_numel = 0 must be >= 1"):
        saved.SavedCodec(min_numel=0)


transformers = None
try:
    import transformers  # noqa: F401
except ImportError:
    pass
needs_hf = pytest.mark.skipif(transformers is None, reason="needs transformers (and torch >= 2)")


def tiny_hf_llama(seed=0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=320, num_hidden_layers=2,
                                      num_attention_heads=4, max_position_embeddings=64, use_cache=False)
    return transformers.LlamaForCausalLM(config)


def saved_bytes(model, ids):
    """Distinct storages autograd saves (parameters left out), also those a codec keeps: its hooks are the innermost
    pair, so it reports them to its observers."""
    from conftest import SavedTensorBytes

    counter = SavedTensorBytes(model)
    saved.OBSERVERS.append(counter._pack)
    try:
        with counter:
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
    finally:
        saved.OBSERVERS.remove(counter._pack)
    return counter.bytes, out


@needs_hf
def test_compress_saved_all_stores_far_less_and_trains():
    ids = torch.randint(0, 512, (4, 128), generator=torch.Generator().manual_seed(1))  # 4 x 128 x 128: compressed
    plain, _ = saved_bytes(tiny_hf_llama(), ids)
    paper = tiny_hf_llama()
    ct.compress(paper, rank=0.25)
    paper_bytes, _ = saved_bytes(paper, ids)
    model = tiny_hf_llama()
    ct.compress(model, rank=0.25, saved="all")
    all_bytes, out = saved_bytes(model, ids)
    assert out.logits is None  # the chunked loss head: no batch x sequence x vocabulary logits
    print(f"saved bytes: plain {plain}, paper's layers {paper_bytes}, saved='all' {all_bytes}")
    assert all_bytes < 0.5 * paper_bytes < plain
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0] and all(math.isfinite(v) for v in losses)


@needs_hf
def test_saved_all_compresses_every_linear_and_round_trips_through_its_configuration():
    model = tiny_hf_llama()
    ct.compress(model, saved="all", seed=4)
    names = {n for n, m in model.named_modules() if isinstance(m, ct.CompactLinear)}
    assert "model.layers.0.self_attn.o_proj" in names and len(names) == 2 * 7
    record = ct.sketch_config(model)
    assert record["saved"] == {"linears": True, "loss": True, "activations": {"seed": 4, "attention": "compressed"}}
    again = tiny_hf_llama()
    ct.compress(again, config=record)
    assert again._compact_pieces == model._compact_pieces
    ct.decompress(again)
    assert not hasattr(again, "_compact_pieces") and not hasattr(again, "_compact_saved")
    ids = torch.randint(0, 512, (2, 16))
    assert again(input_ids=ids, labels=ids).logits is not None  # the stock forward again


@needs_hf
def test_saved_pieces_are_checked_before_anything_changes():
    model = tiny_hf_llama()
    with pytest.raises(ct.CompactError, match=r"names \['everything'\], which are not pieces"):
        ct.compress(model, saved=["loss", "everything"])
    with pytest.raises(ct.CompactError, match="attention = 'fast'"):
        ct.compress(model, saved="activations", attention="fast")
    assert not any(isinstance(m, ct.CompactLinear) for m in model.modules())


@needs_hf
def test_exact_attention_compresses_nothing_saved_inside_attention_modules():
    model = tiny_hf_llama()
    codec = saved.SavedCodec(min_numel=1, attention="exact")
    handle = saved.install(model, codec)
    seen = []
    real = codec._encode

    def spy(t, kind, value=None):
        seen.append(codec.exact_depth())
        return real(t, kind, value)

    codec._encode = spy
    ids = torch.randint(0, 512, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    assert seen and all(depth == 0 for depth in seen)
    handle.remove()
    assert "forward" not in model.model.__dict__


@needs_hf
def test_the_swiglu_mlp_saves_gate_and_up_only_and_keeps_the_stock_bits():
    """With the codec installed but compressing nothing (min_numel above every tensor), the only change is the MLP's
    silu(gate) * up through _SiluMul: forward and every gradient equal the stock model's bit for bit, and the saved
    bytes drop by exactly one MLP-wide tensor per block (silu(gate), now recomputed)."""
    ids = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(3))
    stock, fused = tiny_hf_llama(), tiny_hf_llama()
    handle = saved.install(fused, saved.SavedCodec(min_numel=1 << 40))
    (a_bytes, a), (b_bytes, b) = saved_bytes(stock, ids), saved_bytes(fused, ids)
    assert torch.equal(a.loss, b.loss)
    for (name, p), q in zip(stock.named_parameters(), fused.parameters()):
        assert torch.equal(p.grad, q.grad), name
    assert a_bytes - b_bytes == 2 * (2 * 32 * 320 * 4)  # two blocks, batch 2 x 32 tokens, intermediate 320, fp32
    handle.remove()
    assert "forward" not in fused.model.layers[0].mlp.__dict__


def test_the_cpus_float_dropout_mask_is_stored_as_bits_and_comes_back_exactly():
    """The CPU's dropout multiplies by a float mask {0, 1/(1-p)} computed without autograd and saves it: the codec
    keeps it as bits and the one value, and the gradient is the uncompressed one bit for bit."""
    codec = saved.SavedCodec(min_numel=1)
    torch.manual_seed(0)
    x = torch.randn(256, 256, requires_grad=True)
    with codec.hooks():
        torch.manual_seed(5)
        y = torch.nn.functional.dropout(x * 1.0, p=0.1, training=True)
    y.sum().backward()
    got = x.grad.clone()
    x.grad = None
    torch.manual_seed(5)
    torch.nn.functional.dropout(x * 1.0, p=0.1, training=True).sum().backward()
    assert torch.equal(got, x.grad)
    mask = (torch.rand(100, 100) > 0.3).float() * 1.25
    packed = codec.pack(mask)
    assert packed is not mask and torch.equal(codec.unpack(packed), mask)
    for other in (torch.randn(100, 100), torch.full((100, 100), 2.0)):  # not a mask (no zero): kept as it is
        assert codec.pack(other) is other
