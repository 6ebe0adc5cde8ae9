# SPDX-License-Identifier: MIT
"""CompactLinear: exact forward, dx and db; Ghat = dy^T (x P); only z is saved; module plumbing."""
import copy
import io

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from conftest import SavedTensorBytes, gamma  # noqa: E402

DISTS = ["gaussian", "rademacher", "srht"]


def make_pair(n=48, m=20, rank=12, dist="gaussian", bias=True, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    ref = torch.nn.Linear(n, m, bias=bias).to(dtype)
    layer = ct.CompactLinear.from_linear(copy.deepcopy(ref), rank=rank, dist=dist, seed=3, stream=1)
    return ref, layer


@pytest.mark.parametrize("dist", DISTS)
def test_forward_dx_db_equal_nn_linear_and_ghat_is_projected_weight_gradient(dist):
    ref, layer = make_pair(dist=dist)
    x = torch.randn(2, 5, 48, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    y, y_ref = layer(x), ref(x_ref)
    assert torch.equal(y, y_ref)  # the same F.linear call
    dy = torch.randn_like(y)
    y.backward(dy)
    y_ref.backward(dy)
    # dx = dy W (a length-m = 20 sum per entry) and db = sum of dy over the B = 10 tokens, exact up to the order of
    # those sums: each side within gamma_k |terms| of the exact value.
    dx_bound = 2 * gamma(20, torch.float64) * (dy.abs() @ ref.weight.abs())
    assert ((x.grad - x_ref.grad).abs() <= dx_bound).all()
    db_bound = 2 * gamma(10, torch.float64) * dy.abs().sum((0, 1))
    assert ((layer.bias.grad - ref.bias.grad).abs() <= db_bound).all()
    assert layer.weight.grad is None  # no m x n gradient is ever formed
    # Naive reference: P regenerated, Ghat = (dy^T x) P, i.e. the full weight gradient projected. Computed in two
    # association orders, each within gamma_{B+n} |dy^T| |x| |P| of the exact product (B = 10 tokens, n = 48).
    p = layer.projection()
    g_full = ref.weight.grad
    want = g_full @ p
    dy2, x2 = dy.reshape(-1, 20), x.detach().reshape(-1, 48)
    bound = 2 * gamma(10 + 48, torch.float64) * (dy2.abs().T @ x2.abs() @ p.abs())
    assert ((layer.weight_ghat.grad - want).abs() <= bound).all()
    assert layer.weight_ghat.grad.shape == (20, 12)


def test_gradcheck_dx_and_db_in_double():
    # dx and db of CompactLinear's own autograd Function (not F.linear's) against finite differences. gradcheck
    # perturbs the bias in place, and the layer reads that very tensor; the placeholder requires grad, so the forward
    # goes through the Function. Ghat is not a derivative of y (the placeholder does not enter y): it is checked
    # against the projected full gradient in test_forward_dx_db_equal_nn_linear_and_ghat_is_projected_weight_gradient.
    _, layer = make_pair(n=10, m=6, rank=4)
    x = torch.randn(3, 10, dtype=torch.float64, requires_grad=True)
    assert layer.weight_ghat.requires_grad and layer.bias.requires_grad
    assert type(layer(x).grad_fn).__name__ == "_CompactLinearFunctionBackward"
    assert torch.autograd.gradcheck(lambda inp, bias: layer(inp), (x, layer.bias))
    # The same with a batch dimension (dx reshaped back, db summed over both leading dimensions).
    x3 = torch.randn(2, 3, 10, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda inp, bias: layer(inp), (x3, layer.bias))


@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_only_z_is_saved_for_backward(dist, dtype):
    _, layer = make_pair(n=64, m=32, rank=16, dist=dist, dtype=dtype)
    x = torch.randn(4, 8, 64, dtype=dtype, requires_grad=True)
    with SavedTensorBytes(layer) as saved:
        y = layer(x)
    # B tokens x r x element size, nothing else (the weight is referenced, not saved).
    assert saved.bytes == 4 * 8 * 16 * x.element_size()
    y.sum().backward()


def test_accumulated_micro_batches_equal_one_batch():
    _, layer = make_pair(rank=12)
    x, dy = torch.randn(8, 48, dtype=torch.float64), torch.randn(8, 20, dtype=torch.float64)
    layer(x[:3]).backward(dy[:3])
    layer(x[3:]).backward(dy[3:])
    split = layer.weight_ghat.grad.clone()
    layer.weight_ghat.grad = None
    layer(x).backward(dy)
    bound = 2 * gamma(8, torch.float64) * (dy.abs().T @ (x.abs() @ layer.projection().abs()))
    assert ((split - layer.weight_ghat.grad).abs() <= bound).all()


class _CountingOps:
    """torch.ops.compact with its sketch calls counted."""

    def __init__(self, ops):
        self._ops, self.sketches = ops, 0

    def __getattr__(self, name):
        return getattr(self._ops, name)

    def sketch(self, *args, **kwargs):
        self.sketches += 1
        return self._ops.sketch(*args, **kwargs)


def test_eval_and_no_grad_are_a_plain_linear_and_save_nothing(monkeypatch):
    ref, layer = make_pair()
    ops = _CountingOps(ct.linear._ext.ops)
    monkeypatch.setattr(ct.linear._ext, "ops", ops)
    x = torch.randn(5, 48, dtype=torch.float64)
    # Training with autograd (the control): one sketch, z (5 x 12 doubles) saved.
    with SavedTensorBytes(layer) as saved:
        y = layer(x)
    assert ops.sketches == 1 and saved.bytes == 5 * 12 * 8 and y.grad_fn is not None
    # Evaluation: eval() and no_grad give F.linear's bits, no sketch, nothing saved, no graph.
    layer.eval()
    with torch.no_grad(), SavedTensorBytes(layer) as saved:
        y = layer(x)
    assert torch.equal(y, ref(x))
    assert ops.sketches == 1 and saved.bytes == 0 and y.grad_fn is None


def test_placeholder_holds_no_memory_and_survives_to_deepcopy_and_state_dict():
    _, layer = make_pair()
    assert layer.weight_ghat.stride() == (0, 0) and layer.weight_ghat.shape == (20, 12)
    twin = copy.deepcopy(layer)
    assert twin.weight_ghat.stride() == (0, 0) and ct.owner_of(twin.weight_ghat) is twin
    converted = copy.deepcopy(layer).float()
    assert converted.weight_ghat.stride() == (0, 0) and converted.weight_ghat.dtype == torch.float32
    assert ct.owner_of(converted.weight_ghat) is converted
    sd = layer.state_dict()
    assert list(sd) == ["weight", "bias"]  # exactly nn.Linear's keys: no placeholder, no extra state
    buf = io.BytesIO()
    torch.save(layer.state_dict(), buf)
    buf.seek(0)
    fresh = ct.CompactLinear(48, 20, rank=12, dtype=torch.float64)
    names = [n for n, _ in fresh.named_parameters()]
    fresh.load_state_dict(torch.load(buf), strict=True)
    assert [n for n, _ in fresh.named_parameters()] == names
    assert torch.equal(fresh.weight, layer.weight) and torch.equal(fresh.bias, layer.bias)
    assert fresh.weight_ghat.stride() == (0, 0)


def test_state_dict_loads_strictly_both_ways_between_plain_and_compact_layers():
    ref, layer = make_pair()
    plain = torch.nn.Linear(48, 20).double()
    plain.load_state_dict(layer.state_dict(), strict=True)
    assert torch.equal(plain.weight, layer.weight)
    other = ct.CompactLinear(48, 20, rank=12, dtype=torch.float64)
    other.load_state_dict(ref.state_dict(), strict=True)
    assert torch.equal(other.weight, ref.weight) and torch.equal(other.bias, ref.bias)


def test_deepcopy_keeps_siblings_on_one_state_tensor():
    a = ct.CompactLinear(16, 4, rank=4)
    b = ct.CompactLinear(16, 4, rank=4)
    b._share_state_with(a._state)
    pair = copy.deepcopy(torch.nn.ModuleList([a, b]))
    assert pair[0]._state is pair[1]._state and pair[0]._state is not a._state


def test_window_follows_step_and_period():
    layer = ct.CompactLinear(16, 4, rank=4, period=3)
    p0 = layer.projection()
    layer.step = 2
    assert torch.equal(layer.projection(), p0)
    layer.step = 3
    assert layer.window == 1 and not torch.equal(layer.projection(), p0)
    never = ct.CompactLinear(16, 4, rank=4, period=0)
    never.step = 10**6
    assert never.window == 0


@pytest.mark.parametrize("rank,n,want", [(0.5, 352, 176), (0.25, 128, 32), (0.125, 352, 44), (1e-9, 64, 1),
                                         (64, 64, 64), (1, 5, 1), (3.0, 8, 3)])
def test_rank_fraction_or_absolute(rank, n, want):
    assert ct.resolve_rank(rank, n) == want


def test_an_input_reused_over_many_steps_is_sketched_with_each_steps_p_and_kept_once():
    from compact_torch import linear

    layer = ct.CompactLinear(16, 4, rank=4, period=1, dtype=torch.float64)
    x = torch.randn(3, 16, dtype=torch.float64)
    for step in range(4):  # period 1: a new P every step
        layer.step = step
        layer.weight_ghat.grad = None
        layer(x).backward(torch.ones(3, 4, dtype=torch.float64))
        z = ct.sketch(x, 4, layer.seed, layer.stream, step)
        assert torch.equal(layer.weight_ghat.grad, ct.compressed_grad(torch.ones(3, 4, dtype=torch.float64), z))
    assert len(linear._cache.entry(x).sketches) == 1  # the latest window's z only
