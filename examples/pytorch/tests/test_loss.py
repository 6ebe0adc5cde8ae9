# SPDX-License-Identifier: MIT
"""chunked_lm_loss (the LM head and cross-entropy in chunks of tokens) against the unfused F.cross_entropy(h W^T + b)
and exact arithmetic, within bounds derived from the operations' rounding; patch_causal_lm on stock Hugging Face
models (loss and every parameter gradient of the stock model, tied embedding, kwargs, eval, unpatch); and the bytes
autograd saves (no batch x sequence x vocabulary tensor)."""
import copy
import inspect

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")
F = torch.nn.functional

import compact_torch as ct  # noqa: E402
from compact_torch import loss as ctloss  # noqa: E402
from conftest import UNIT_ROUNDOFF, SavedTensorBytes, gamma  # noqa: E402

MODES = ctloss.MODES
BF16_UNIT_ROUNDOFF = 2.0**-8


def shifted(labels, ignore_index=-100):
    """HF's ForCausalLMLoss shift: pad(labels, (0, 1), value=ignore_index)[..., 1:]."""
    return F.pad(labels, (0, 1), value=ignore_index)[..., 1:]


def unfused(h, w, labels, b=None, *, reduction="mean", shift=True, softcap=None, ignore_index=-100):
    """The reference: the full logits, upcast as HF does, and torch's cross_entropy."""
    z = F.linear(h, w, b).float() if h.dtype != torch.float64 else F.linear(h, w, b)
    if softcap is not None:
        z = softcap * torch.tanh(z / softcap)
    y = shifted(labels, ignore_index) if shift else labels
    return F.cross_entropy(z.reshape(-1, w.shape[0]), y.reshape(-1), ignore_index=ignore_index, reduction=reduction)


def head_bounds(h, w, labels, b=None, *, reduction="mean", softcap=None, compute_roundoff=None, ignore_index=-100):
    """Exact (fp64) loss and gradients of the head + cross-entropy at the given inputs, and bounds on the error of
    any evaluation that forms the logits in a dtype of unit roundoff u_c and the rest in fp32 (u; fp64 for fp64
    inputs), in any summation order. labels are already shifted. The derivation (Higham's gamma_k = k u / (1 - k u)
    bounds a sum of k terms by gamma_k times the sum of their absolute values, conftest.gamma):

    - logits: z_iv = sum_k h_ik W_vk + b_v has d + 1 terms, so its error is delta_i <= gamma_{d+1} A_i + u_c |z_i|max,
      A_i = max_v (sum_k |h_ik W_vk| + |b_v|) (the second term: rounding the product to the compute dtype). Under
      the soft-cap z <- c tanh(z / c) (derivative <= 1), the error passes through and the division, tanh and product
      add at most 4 u c.
    - token loss lse_i - z_iy: lse is 1-Lipschitz in the max-norm of the logits (its gradient is a probability
      vector), so the logits contribute 2 delta_i; computing it (subtracting the max, V exponentials each within a
      few ulps, their sum of V terms, the log and adding the max back) adds at most gamma_{V+8} (1 + |lse_i| +
      2 |z_i|max). Call the sum E_i; it also bounds the relative error of p_iv = exp(z_iv - lse_i).
    - G = s (P - onehot(y)) (s the reduction's scale, 1 or 1 / count; rows of ignored tokens 0): its error is at
      most (E_i + u_c) S_iv with S = s (P + onehot) >= |G| (E_i from p, u_c from rounding G to the compute dtype);
      under the cap G is multiplied by 1 - t^2 (t = z / c), whose error 2 |t| |dt| + 3 u <= 2 delta_i / c + 4 u adds
      to the relative error.
    - dH = G W (sums of V terms), dW = G^T H and db = sum_i G_i (sums of n terms): the error of G times |W|, |H|
      or 1, plus (gamma_k + 2 u_c) times the same products of S (the sum's rounding, the product rounded to the
      compute dtype, and dW rounded once more from its fp32 accumulator to the parameter's dtype).
    - the loss: sum_i E_i plus gamma_n sum_i |loss_i| for the sum of n token losses; the mean divides by the count
      (one more rounding: u |mean|).
    """
    acc = torch.float64 if h.dtype == torch.float64 else torch.float32
    u = UNIT_ROUNDOFF[acc]
    uc = u if compute_roundoff is None else compute_roundoff
    d, V = h.shape[-1], w.shape[0]
    h64 = h.detach().double().reshape(-1, d)
    w64 = w.detach().double()
    b64 = None if b is None else b.detach().double()
    y = labels.reshape(-1)
    valid = y != ignore_index
    n = h64.shape[0]
    A = h64.abs() @ w64.abs().t()
    z = h64 @ w64.t()
    if b64 is not None:
        A, z = A + b64.abs(), z + b64
    zmax = z.abs().amax(1)
    delta = gamma(d + 1, acc) * A.amax(1) + uc * zmax
    dcap = None
    if softcap is not None:
        t = torch.tanh(z / softcap)
        z, dcap = softcap * t, 1 - t * t
        delta = delta + 4 * u * softcap
        zmax = z.abs().amax(1)
    lse = torch.logsumexp(z, 1)
    ysafe = torch.where(valid, y, torch.zeros_like(y))
    zy = z.gather(1, ysafe[:, None])[:, 0]
    loss_i = torch.where(valid, lse - zy, torch.zeros_like(lse))
    E = torch.where(valid, 2 * delta + gamma(V + 8, acc) * (1 + lse.abs() + 2 * zmax), torch.zeros_like(lse))
    count = int(valid.sum())
    s = 1.0 / max(count, 1) if reduction == "mean" else 1.0
    P = torch.softmax(z, 1)
    onehot = F.one_hot(ysafe, V).double()
    keep = valid[:, None].double()
    G = s * (P - onehot) * keep
    S = s * (P + onehot) * keep
    relG = (E + uc)[:, None].expand(n, V)
    if dcap is not None:
        G = G * dcap
        relG = relG + (2 * delta / softcap + 4 * u)[:, None]
    eG = relG * S
    total = loss_i.sum()
    loss = total / count if reduction == "mean" else total
    bound_loss = E.sum() + gamma(n, acc) * loss_i.abs().sum()
    if reduction == "mean":
        bound_loss = bound_loss / max(count, 1) + u * abs(float(loss))
    exact = {"loss": loss, "h": (G @ w64).reshape(h.shape), "w": G.t() @ h64, "b": G.sum(0)}
    bounds = {"loss": float(bound_loss),
              "h": (eG @ w64.abs() + (gamma(V, acc) + 2 * uc) * (S @ w64.abs())).reshape(h.shape),
              "w": eG.t() @ h64.abs() + (gamma(n, acc) + 2 * uc) * (S.t() @ h64.abs()),
              "b": eG.sum(0) + (gamma(n, acc) + 2 * uc) * S.sum(0)}
    return exact, bounds


def assert_within(got, exact, bound, what):
    err = (got.detach().double() - exact).abs()
    worst = float((err - bound).max()) if err.numel() else 0.0
    assert worst <= 0, f"{what}: error exceeds the bound by {worst:.3g} (max error {float(err.max()):.3g})"


def make(B=2, T=8, d=24, V=60, bias=False, dtype=torch.float32, seed=0, ignore=()):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, d, generator=g, dtype=torch.float64).to(dtype).requires_grad_()
    w = (torch.randn(V, d, generator=g, dtype=torch.float64) * d**-0.5).to(dtype).requires_grad_()
    b = (torch.randn(V, generator=g, dtype=torch.float64) * 0.1).to(dtype).requires_grad_() if bias else None
    labels = torch.randint(0, V, (B, T), generator=g)
    for i, t in ignore:
        labels[i, t] = -100
    return h, w, b, labels


def grads_of(loss, h, w, b):
    params = [h, w] + ([b] if b is not None else [])
    return dict(zip("hwb", torch.autograd.grad(loss, params)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunk", [3, 4, 16, 100])  # 16 tokens: chunks that do not divide, divide, one, more
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shift", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_loss_and_gradients_equal_the_unfused_within_fp32_rounding(mode, chunk, bias, shift, reduction):
    h, w, b, labels = make(bias=bias, ignore=[(0, 1), (1, 5)])
    y = shifted(labels) if shift else labels
    exact, bound = head_bounds(h, w, y, b, reduction=reduction)
    ours = ct.chunked_lm_loss(h, w, labels, b, chunk_tokens=chunk, shift=shift, reduction=reduction, mode=mode)
    ref = unfused(h, w, labels, b, reduction=reduction, shift=shift)
    assert ours.dtype == torch.float32 and ours.shape == ()
    # Each is within the bound of the exact value, so they are within twice the bound of each other.
    for name, got in (("chunked", ours), ("unfused", ref)):
        assert abs(float(got.detach()) - float(exact["loss"])) <= bound["loss"], name
    g_ours, g_ref = grads_of(ours, h, w, b), grads_of(ref, h, w, b)
    for k in g_ours:
        assert g_ours[k].dtype == torch.float32 and g_ours[k].shape == g_ref[k].shape
        assert_within(g_ours[k], exact[k], bound[k], f"chunked d{k}")
        assert_within(g_ref[k], exact[k], bound[k], f"unfused d{k}")
    # The bounds are tight enough to mean something: far below the gradients' size.
    assert float(bound["w"].max()) < 1e-4 * float(exact["w"].abs().max())


@pytest.mark.parametrize("mode", MODES)
def test_chunks_whose_tokens_are_all_ignored_contribute_nothing(mode):
    # Tokens 0-7 of 16 ignored (after the shift): with chunks of 4, two chunks have no kept token.
    h, w, b, labels = make(ignore=[(0, t) for t in range(1, 8)] + [(0, 0)])
    exact, bound = head_bounds(h, w, shifted(labels), b)
    ours = ct.chunked_lm_loss(h, w, labels, chunk_tokens=4, mode=mode)
    assert abs(float(ours.detach()) - float(exact["loss"])) <= bound["loss"]
    g = grads_of(ours, h, w, None)
    assert torch.equal(g["h"][0, :7], torch.zeros_like(g["h"][0, :7]))  # no gradient reaches ignored tokens
    for k in g:
        assert_within(g[k], exact[k], bound[k], f"d{k}")


@pytest.mark.parametrize("mode", MODES)
def test_all_tokens_ignored_gives_torchs_nan_mean_zero_sum_and_zero_gradients(mode):
    h, w, b, labels = make(bias=True)
    labels[:] = -100
    for reduction in ("mean", "sum"):
        ours = ct.chunked_lm_loss(h, w, labels, b, chunk_tokens=5, reduction=reduction, mode=mode)
        ref = unfused(h, w, labels, b, reduction=reduction)
        # torch's mean over no tokens is 0 / 0 = NaN with zero gradients; the sum is 0.
        assert torch.isnan(ref) == torch.isnan(ours) and (reduction == "mean") == bool(torch.isnan(ours))
        for k, g in grads_of(ours, h, w, b).items():
            assert torch.equal(g, torch.zeros_like(g)), k
        for k, g in grads_of(ref, h, w, b).items():
            assert torch.equal(g, torch.zeros_like(g)), k


def test_reduction_none_is_torchs_per_token_loss_and_its_gradient():
    h, w, b, labels = make(bias=True, ignore=[(1, 2)])
    ours = ct.chunked_lm_loss(h, w, labels, b, chunk_tokens=5, reduction="none", mode="recompute")
    ref = unfused(h, w, labels, b, reduction="none").view(labels.shape)
    assert ours.shape == labels.shape and float(ours[1, 1].detach()) == 0.0 and float(ours[0, -1].detach()) == 0.0
    # Each token's loss is within E_i <= the bound of the sum of the exact one (head_bounds), for ours and torch's.
    # A per-token incoming gradient g_i in [0, 1) scales G's rows by g_i <= 1: the bounds of "sum" still hold.
    exact, bound = head_bounds(h, w, shifted(labels), b, reduction="sum")
    assert float((ours.detach().double() - ref.detach().double()).abs().max()) <= 2 * bound["loss"]
    weights = torch.rand(labels.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64).float()
    g_ours = torch.autograd.grad(ours, [h, w, b], weights)
    g_ref = torch.autograd.grad(ref, [h, w, b], weights)
    for k, go, gr in zip("hwb", g_ours, g_ref):
        assert_within(go, gr.double(), 2 * bound[k], f"d{k}")
    with pytest.raises(ValueError, match="no reduction 'none'"):
        ct.chunked_lm_loss(h, w, labels, reduction="none", mode="forward_grad")


@pytest.mark.parametrize("mode", MODES)
def test_num_items_in_batch_divides_the_sum_as_hf(mode):
    h, w, b, labels = make(ignore=[(0, 3)])
    n = torch.tensor(40)
    ours = ct.chunked_lm_loss(h, w, labels, num_items_in_batch=n, chunk_tokens=6, mode=mode)
    ref = unfused(h, w, labels, reduction="sum") / n  # HF's fixed_cross_entropy
    exact, bound = head_bounds(h, w, shifted(labels), reduction="sum")
    # The sum's bound, divided by n (exactly representable) with one more rounding of the quotient.
    tol = (bound["loss"] + UNIT_ROUNDOFF[torch.float32] * abs(float(exact["loss"]))) / 40
    for got in (ours, ref):
        assert abs(float(got.detach()) - float(exact["loss"]) / 40) <= tol
    g = grads_of(ours, h, w, None)
    for k in g:
        assert_within(g[k] * 40, exact[k], bound[k] + UNIT_ROUNDOFF[torch.float32] * exact[k].abs(), f"d{k}")
    with pytest.raises(ValueError, match="num_items_in_batch"):
        ct.chunked_lm_loss(h, w, labels, num_items_in_batch=n, reduction="sum")


@pytest.mark.parametrize("mode", MODES)
def test_logit_softcap_in_fp64(mode):
    h, w, b, labels = make(bias=True, dtype=torch.float64, ignore=[(1, 1)])
    with torch.no_grad():
        w.mul_(8)  # logits of a few units, so the cap c = 2 bites
    exact, bound = head_bounds(h, w, shifted(labels), b, softcap=2.0)
    ours = ct.chunked_lm_loss(h, w, labels, b, chunk_tokens=5, logit_softcap=2.0, mode=mode)
    ref = unfused(h, w, labels, b, softcap=2.0)
    assert ours.dtype == torch.float64
    for name, got in (("chunked", ours), ("unfused", ref)):
        assert abs(float(got.detach()) - float(exact["loss"])) <= bound["loss"], name
    for k, g in grads_of(ours, h, w, b).items():
        assert_within(g, exact[k], bound[k], f"d{k}")
    for k, g in grads_of(ref, h, w, b).items():
        assert_within(g, exact[k], bound[k], f"unfused d{k}")


@pytest.mark.parametrize("mode", MODES)
def test_bf16_autocast_logits_in_bf16_loss_in_fp32_gradients_in_the_parameters_dtype(mode):
    h, w, b, labels = make(bias=True, ignore=[(0, 2)])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = ct.chunked_lm_loss(h, w, labels, b, chunk_tokens=5, mode=mode)
        ref = unfused(h, w, labels, b)
    assert ours.dtype == torch.float32
    # Both see the same bf16-rounded inputs (autocast casts h, W and b); from there the bounds hold with u_c the
    # bf16 unit roundoff for the rounding of products to bf16 (the logits, dH, and dW from its fp32 accumulator).
    hb, wb, bb = (t.detach().bfloat16().float() for t in (h, w, b))
    exact, bound = head_bounds(hb, wb, shifted(labels), bb, compute_roundoff=BF16_UNIT_ROUNDOFF)
    for name, got in (("chunked", ours), ("unfused", ref)):
        assert abs(float(got.detach()) - float(exact["loss"])) <= bound["loss"], name
    g_ours, g_ref = grads_of(ours, h, w, b), grads_of(ref, h, w, b)
    for k in g_ours:
        assert g_ours[k].dtype == torch.float32
        assert_within(g_ours[k], exact[k], bound[k], f"chunked d{k}")
        assert_within(g_ref[k], exact[k], bound[k], f"unfused d{k}")


@pytest.mark.parametrize("mode", MODES)
def test_bf16_inputs_give_an_fp32_loss_and_bf16_gradients(mode):
    h, w, b, labels = make(bias=True, dtype=torch.bfloat16)
    ours = ct.chunked_lm_loss(h, w, labels, b, chunk_tokens=5, mode=mode)
    assert ours.dtype == torch.float32
    exact, bound = head_bounds(h.float(), w.float(), shifted(labels), b.float(),
                               compute_roundoff=BF16_UNIT_ROUNDOFF)
    assert abs(float(ours.detach()) - float(exact["loss"])) <= bound["loss"]
    for k, g in grads_of(ours, h, w, b).items():
        assert g.dtype == torch.bfloat16
        assert_within(g, exact[k], bound[k], f"d{k}")


def test_both_modes_compute_the_same_loss_bit_for_bit_and_need_no_graph_under_no_grad():
    h, w, b, labels = make(bias=True)
    losses = [ct.chunked_lm_loss(h, w, labels, b, chunk_tokens=5, mode=m) for m in MODES]
    assert torch.equal(losses[0], losses[1])
    with torch.no_grad(), SavedTensorBytes() as saved:
        nograd = ct.chunked_lm_loss(h, w, labels, b, chunk_tokens=5, mode="forward_grad")
    assert torch.equal(nograd, losses[0]) and nograd.grad_fn is None and saved.bytes == 0


def test_recompute_backward_runs_twice_forward_grad_refuses():
    h, w, b, labels = make()
    loss = ct.chunked_lm_loss(h, w, labels, mode="recompute")
    (g1,) = torch.autograd.grad(loss, [w], retain_graph=True)
    (g2,) = torch.autograd.grad(loss, [w])
    assert torch.equal(g1, g2)
    loss = ct.chunked_lm_loss(h, w, labels, mode="forward_grad")
    torch.autograd.grad(loss, [w], retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward"):
        torch.autograd.grad(loss, [w])


def test_the_default_mode_forms_a_frozen_heads_gradient_in_the_forward():
    """mode=None: "forward_grad" (one backward only) when the head's weight and bias need no gradient, else
    "recompute" (backward runs twice); reduction "none" always "recompute"."""
    h, w, b, labels = make(bias=True)
    loss = ct.chunked_lm_loss(h, w, labels, b)
    torch.autograd.grad(loss, [h], retain_graph=True)
    torch.autograd.grad(loss, [h])  # recompute: a trained head
    w.requires_grad_(False)
    b.requires_grad_(False)
    loss = ct.chunked_lm_loss(h, w, labels, b)
    torch.autograd.grad(loss, [h], retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward"):
        torch.autograd.grad(loss, [h])
    loss = ct.chunked_lm_loss(h, w, labels, b, reduction="none")
    torch.autograd.grad(loss.sum(), [h], retain_graph=True)
    torch.autograd.grad(loss.sum(), [h])


def test_frozen_inputs_get_no_gradient_work():
    h, w, b, labels = make(bias=True)
    w.requires_grad_(False)
    for mode in MODES:
        loss = ct.chunked_lm_loss(h, w, labels, b, mode=mode)
        gh, gb = torch.autograd.grad(loss, [h, b])
        ref = torch.autograd.grad(unfused(h, w, labels, b), [h, b])
        exact, bound = head_bounds(h, w, shifted(labels), b)
        assert_within(gh, exact["h"], bound["h"], "dh")
        assert_within(gb, exact["b"], bound["b"], "db")
        assert_within(ref[0], exact["h"], bound["h"], "unfused dh")


@pytest.mark.parametrize("mode", MODES)
def test_a_head_tied_to_the_embedding_gets_both_gradients(mode):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(30, 16)
    ids = torch.randint(0, 30, (2, 9))
    grads = []
    for f in (lambda h: ct.chunked_lm_loss(h, emb.weight, ids, chunk_tokens=4, mode=mode),
              lambda h: unfused(h, emb.weight, ids)):
        emb.weight.grad = None
        h = torch.tanh(emb(ids))
        f(h).backward()
        grads.append(emb.weight.grad.clone())
    # The head's part differs within the head bound; the embedding's part is the gradient flowing back through
    # tanh and the lookup: |d tanh| <= 1 and the lookup adds rows of dH (at most B T terms), so its error is at most
    # (1 + gamma_{BT}) times the sum of the dH bounds of the tokens of each row, doubled (two evaluations).
    h = torch.tanh(emb(ids)).detach()
    exact, bound = head_bounds(h, emb.weight, shifted(ids), None)
    per_row = torch.zeros(30, 16, dtype=torch.float64).index_add_(0, ids.reshape(-1), bound["h"].reshape(-1, 16))
    tol = 2 * (bound["w"] + (1 + gamma(18, torch.float32)) * per_row)
    assert float(((grads[0] - grads[1]).double().abs() - tol).max()) <= 0
    assert float(grads[0][ids.reshape(-1)].abs().sum()) > 0


def test_arguments_are_checked():
    h, w, b, labels = make()
    with pytest.raises(ValueError, match="mode"):
        ct.chunked_lm_loss(h, w, labels, mode="fused")
    with pytest.raises(ValueError, match="reduction"):
        ct.chunked_lm_loss(h, w, labels, reduction="max")
    with pytest.raises(ValueError, match="chunk_tokens"):
        ct.chunked_lm_loss(h, w, labels, chunk_tokens=0)
    with pytest.raises(ValueError, match="labels"):
        ct.chunked_lm_loss(h, w, labels[:, :-1])
    with pytest.raises(ValueError, match="hidden"):
        ct.chunked_lm_loss(h, w[:, :-1], labels)
    with pytest.raises(ValueError, match="integers"):
        ct.chunked_lm_loss(h, w, labels.float())


def test_autograd_saves_no_token_by_vocabulary_tensor():
    # V large against d: the unfused loss saves the log-probabilities (N x V); the chunked one saves lse (N) and
    # the labels, and forward_grad dH (N x d) and dW (V x d, the parameter's size).
    h, w, b, labels = make(B=2, T=64, d=16, V=2000)
    full = 2 * 64 * 2000 * 4
    with SavedTensorBytes() as ref:
        unfused(h, w, labels)
    assert max(ref.ptrs.values()) >= full
    for mode in MODES:
        with SavedTensorBytes() as saved:
            ct.chunked_lm_loss(h, w, labels, mode=mode)
        assert max(saved.ptrs.values()) < full / 2, mode


# ---- Hugging Face models ---------------------------------------------------------------------------------------

def hf():
    return pytest.importorskip("transformers", reason="the Hugging Face tests need transformers (pip install "
                                                      "transformers; it needs torch >= 2)")


def tiny_hf_llama(tie=False, vocab=100, seed=0):
    t = hf()
    torch.manual_seed(seed)
    config = t.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                           tie_word_embeddings=tie)
    return t.LlamaForCausalLM(config).train()


def run(model, ids, labels, **kwargs):
    """loss, parameter gradients and dH (the gradient at the decoder's output) of one forward and backward."""
    captured = {}

    def hook(module, args, output):
        output.last_hidden_state.register_hook(lambda g: captured.__setitem__("dH", g))
        captured["H"] = output.last_hidden_state.detach()

    handle = model.model.register_forward_hook(hook)
    try:
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=labels, **kwargs)
        out.loss.backward()
    finally:
        handle.remove()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return out, grads, captured


def propagated_bound(model, ids, bound_h):
    """sum_j |d H_j / d theta| bound_h_j for each parameter theta (H the decoder's output, one backward per element):
    the most a change of at most bound_h_j in each dH_j can move theta's gradient J^T dH."""
    H = model.model(input_ids=ids).last_hidden_state.reshape(-1)
    b = bound_h.reshape(-1)
    named = list(model.named_parameters())
    out = {n: torch.zeros(p.shape, dtype=torch.float64) for n, p in named}
    for j in range(H.numel()):
        gs = torch.autograd.grad(H[j], [p for _, p in named], retain_graph=True, allow_unused=True)
        for (n, _), g in zip(named, gs):
            if g is not None:
                out[n] += g.double().abs() * float(b[j])
    return out


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_patched_llama_gives_the_stock_loss_and_parameter_gradients(tie, mode):
    model = tiny_hf_llama(tie=tie)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (2, 6), generator=g)
    labels = ids.clone()
    labels[0, 2] = -100
    stock_out, stock, cap_s = run(model, ids, labels)
    ct.patch_causal_lm(model, chunk_tokens=5, mode=mode)
    out, patched, cap_p = run(model, ids, labels)
    assert out.logits is None and stock_out.logits.shape == (2, 6, 100)
    # The decoder ran the same operations on the same inputs: the head's input is identical.
    assert torch.equal(cap_s["H"], cap_p["H"])
    H, W = cap_s["H"], model.lm_head.weight
    exact, bound = head_bounds(H, W, shifted(labels))
    # Loss and dH: each evaluation within the head bound of the exact value.
    for got in (out.loss, stock_out.loss):
        assert abs(float(got.detach()) - float(exact["loss"])) <= bound["loss"]
    for got in (cap_p["dH"], cap_s["dH"]):
        assert_within(got, exact["h"], bound["h"], "dH")
    # Every parameter: its gradient is J^T dH (+ the head's dW for lm_head.weight, tied or not), J = dH/dtheta.
    # The two runs' dH differ by at most 2 bound_dH, which moves J^T dH by at most |J|^T (2 bound_dH) element by
    # element (propagated_bound); lm_head.weight adds twice the head's dW bound. What remains is each run's own
    # rounding in the decoder's backward (same operations, on dH that agree to ~7 digits): we allow twice the stock
    # model's, measured as the norm of its fp32 gradient's difference from the same step in fp64.
    ref64 = copy.deepcopy(model).double()
    ctloss.unpatch_causal_lm(ref64)
    _, grads64, _ = run(ref64, ids, labels)
    explained = propagated_bound(model, ids, 2 * bound["h"])
    for name, gp in patched.items():
        if name == "lm_head.weight" or (tie and name == "model.embed_tokens.weight"):
            explained[name] = explained[name] + 2 * bound["w"]
        rest = ((gp.double() - stock[name].double()).abs() - explained[name]).clamp(min=0).norm()
        r = (stock[name].double() - grads64[name]).norm()
        assert float(rest) <= 2 * float(r), f"{name}: {float(rest):.3g} beyond the head's bound > 2 x {float(r):.3g}"
    if tie:
        assert model.lm_head.weight is model.model.embed_tokens.weight


def test_patch_keeps_the_stock_paths_kwargs_and_can_be_undone():
    t = hf()
    model = tiny_hf_llama()
    ids = torch.randint(0, 100, (2, 7), generator=torch.Generator().manual_seed(2))
    stock_sig = inspect.signature(model.forward)
    with torch.no_grad():
        stock_eval = model.eval()(input_ids=ids, labels=ids)
        stock_nolabels = model.train()(input_ids=ids)
    ct.patch_causal_lm(model)
    assert ctloss.is_patched(model) and inspect.signature(model.forward) == stock_sig
    with torch.no_grad():
        # Without labels, and in eval mode, the stock forward: full logits.
        assert torch.equal(model(input_ids=ids).logits, stock_nolabels.logits)
        ev = model.eval()(input_ids=ids, labels=ids)
        assert torch.equal(ev.logits, stock_eval.logits) and torch.equal(ev.loss, stock_eval.loss)
        model.train()
        out = model(input_ids=ids, labels=ids)
        assert isinstance(out, t.modeling_outputs.CausalLMOutputWithPast) and out.logits is None
        assert abs(float(out.loss) - float(stock_eval.loss)) < 1e-5  # the head bound is ~1e-6 here
        # return_dict=False: HF's to_tuple leaves the None logits out.
        tup = model(ids, labels=ids, return_dict=False)
        assert isinstance(tup, tuple) and torch.equal(tup[0], out.loss)
        # num_items_in_batch reaches the loss as in the stock forward.
        n = torch.tensor(50)
        stock_n = ctloss.unpatch_causal_lm(model)(input_ids=ids, labels=ids, num_items_in_batch=n).loss
        ct.patch_causal_lm(model, in_eval=False)
        got_n = model(input_ids=ids, labels=ids, num_items_in_batch=n).loss
        assert abs(float(got_n) - float(stock_n)) < 1e-5
        # logits_to_keep with shift_labels of the kept positions, as the stock forward takes them.
        shift = ids[:, -3:].clone()
        stock_k = ctloss.unpatch_causal_lm(model)(input_ids=ids, labels=ids, logits_to_keep=3, shift_labels=shift)
        ct.patch_causal_lm(model)
        got_k = model(input_ids=ids, labels=ids, logits_to_keep=3, shift_labels=shift)
        assert got_k.logits is None and abs(float(got_k.loss) - float(stock_k.loss)) < 1e-5
        # in_eval=True: the chunked loss in eval mode too.
        ct.patch_causal_lm(model, in_eval=True)
        assert model.eval()(input_ids=ids, labels=ids).logits is None
        model.train()
        # A deep copy is patched on itself.
        clone = copy.deepcopy(model)
        assert clone.forward.__self__ is clone and ctloss.is_patched(clone)
    ct.unpatch_causal_lm(model)
    assert "forward" not in model.__dict__ and not ctloss.is_patched(model)
    with torch.no_grad():
        assert model(input_ids=ids, labels=ids).logits.shape == (2, 7, 100)
    assert ct.unpatch_causal_lm(model) is model  # not patched: unchanged


def test_patch_refuses_forwards_it_would_change():
    t = hf()
    cohere = t.CohereForCausalLM(t.CohereConfig(vocab_size=50, hidden_size=32, intermediate_size=64,
                                                num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2))
    with pytest.raises(ValueError, match="logit_scale"):
        ct.patch_causal_lm(cohere)
    model = tiny_hf_llama()
    model.loss_function = lambda *a, **k: None
    with pytest.raises(ValueError, match="ForCausalLMLoss"):
        ct.patch_causal_lm(model)
    model = tiny_hf_llama()
    model.lm_head.register_forward_hook(lambda *a: None)
    with pytest.raises(ValueError, match="without hooks"):
        ct.patch_causal_lm(model)


def test_patched_gemma2_applies_the_final_softcap():
    t = hf()
    torch.manual_seed(0)
    config = t.Gemma2Config(vocab_size=80, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=8, final_logit_softcapping=0.5)
    model = t.Gemma2ForCausalLM(config).train()
    ids = torch.randint(0, 80, (2, 6), generator=torch.Generator().manual_seed(4))
    stock_out, _, cap = run(model, ids, ids)
    ct.patch_causal_lm(model)
    out, _, _ = run(model, ids, ids)
    exact, bound = head_bounds(cap["H"], model.lm_head.weight, shifted(ids), softcap=0.5)
    for got in (out.loss, stock_out.loss):
        assert abs(float(got.detach()) - float(exact["loss"])) <= bound["loss"]


def test_patched_llama_saves_no_token_by_vocabulary_tensor():
    model = tiny_hf_llama(vocab=2000)
    ids = torch.randint(0, 2000, (2, 64), generator=torch.Generator().manual_seed(5))
    full = 2 * 64 * 2000 * 4
    with SavedTensorBytes(model) as stock:
        model(input_ids=ids, labels=ids)
    assert max(stock.ptrs.values()) >= full  # the stock model saves the log-probabilities
    for mode in MODES:
        ct.patch_causal_lm(model, mode=mode)
        with SavedTensorBytes(model) as saved:
            model(input_ids=ids, labels=ids)
        ct.unpatch_causal_lm(model)
        assert max(saved.ptrs.values()) < full / 2, mode
