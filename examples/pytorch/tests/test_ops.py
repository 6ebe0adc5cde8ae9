# SPDX-License-Identifier: MIT
"""The extension's operations against a naive reference that materializes P."""
import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from conftest import gamma  # noqa: E402

DISTS = ["gaussian", "rademacher", "srht"]
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sketch_equals_x_times_materialized_p(dist, dtype):
    torch.manual_seed(1)
    n, r = 100, 24
    x = torch.randn(3, 7, n, dtype=dtype)  # leading dimensions are flattened
    z = ct.sketch(x, r, seed=5, stream=2, window=1, dist=dist)
    p = ct.materialize(n, r, 5, 2, 1, dist, dtype=torch.float64)
    want = x.double() @ p
    # Entry-wise forward error of a length-n dot product: |fl(x P) - x P| <= gamma_n |x| |P| (plus the rounding of
    # P's own entries to dtype, at most u |P|, folded into gamma_{n+1}).
    bound = gamma(n + 1, dtype) * (x.double().abs() @ p.abs())
    assert z.shape == (3, 7, r) and z.dtype == dtype
    assert ((z.double() - want).abs() <= bound).all()


@pytest.mark.parametrize("dist", DISTS)
def test_sketch_reads_row_strided_input_in_place(dist):
    torch.manual_seed(2)
    big = torch.randn(9, 80)
    x = big[:, 10:74]  # 64 columns with row stride 80
    assert x.stride() == (80, 1)
    assert torch.equal(ct.sketch(x, 16, 1, 0, 0, dist), ct.sketch(x.contiguous(), 16, 1, 0, 0, dist))


@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_unsketch_grad_accumulates_alpha_g_pt_plus_beta_out(dist, dtype):
    torch.manual_seed(3)
    m, n, r = 12, 90, 30
    g = torch.randn(m, r, dtype=dtype)
    out = torch.randn(m, n, dtype=dtype)
    before = out.clone()
    ct.unsketch_grad_(out, g, -0.5, 0.75, 9, 4, 2, dist)
    p = ct.materialize(n, r, 9, 4, 2, dist, dtype=torch.float64)
    want = -0.5 * (g.double() @ p.T) + 0.75 * before.double()
    bound = gamma(r + 3, dtype) * (0.5 * (g.double().abs() @ p.abs().T) + 0.75 * before.double().abs())
    assert ((out.double() - want).abs() <= bound).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_compressed_grad_is_dy_transpose_z_and_accumulates(dtype):
    torch.manual_seed(4)
    b, m, r = 33, 10, 6
    dy, z = torch.randn(b, m, dtype=dtype), torch.randn(b, r, dtype=dtype)
    g = ct.compressed_grad(dy, z)
    want = dy.double().T @ z.double()
    bound = gamma(b, dtype) * (dy.double().abs().T @ z.double().abs())
    assert ((g.double() - want).abs() <= bound).all()
    acc = g.clone()
    ct.compressed_grad(dy, z, acc, beta=1.0)
    bound2 = gamma(b + 1, dtype) * 2 * (dy.double().abs().T @ z.double().abs())
    assert ((acc.double() - 2 * want).abs() <= bound2).all()


def test_p_depends_on_every_field_of_the_state_and_nothing_else():
    base = ct.materialize(64, 8, 1, 2, 3)
    assert torch.equal(base, ct.materialize(64, 8, 1, 2, 3))
    for other in [(0, 2, 3), (1, 0, 3), (1, 2, 0)]:
        assert not torch.equal(base, ct.materialize(64, 8, *other))


def test_gaussian_p_has_unit_expected_gram_diagonal():
    # E[(P P^T)_ii] = r * (1/r) = 1; over n = 4096 rows the mean of the diagonal has variance 2 / (n r) (each
    # entry^2 r ~ chi^2_1 with variance 2), so 5 standard deviations are 5 sqrt(2 / (4096 * 32)) = 0.039.
    n, r = 4096, 32
    p = ct.materialize(n, r, 7, 0, 0, "gaussian", dtype=torch.float64)
    assert abs(float((p * p).sum(1).mean()) - 1.0) < 5 * (2 / (n * r)) ** 0.5


def test_the_operators_are_registered_with_the_dispatcher():
    for name in ("sketch", "unsketch_grad_", "materialize", "compressed_grad", "compressed_grad_"):
        assert hasattr(torch.ops.compact, name)
    state = torch.tensor([5, 2, 1, 1])  # (seed, stream, period, step): window 1
    x = torch.randn(4, 32)
    assert torch.equal(torch.ops.compact.sketch(x, 8, state, "gaussian"), ct.sketch(x, 8, 5, 2, 1))


def test_the_window_is_step_over_period_read_when_the_operator_runs():
    x = torch.randn(3, 16)
    state = torch.tensor([1, 0, 4, 3])  # period 4, step 3: window 0
    z0 = torch.ops.compact.sketch(x, 4, state, "rademacher")
    state[3] = 4  # window 1
    assert torch.equal(torch.ops.compact.sketch(x, 4, state, "rademacher"), ct.sketch(x, 4, 1, 0, 1, "rademacher"))
    assert not torch.equal(z0, ct.sketch(x, 4, 1, 0, 1, "rademacher"))
    state[2] = 0  # period 0: never resampled
    assert torch.equal(torch.ops.compact.sketch(x, 4, state, "rademacher"), z0)


def test_unsketch_grad_bumps_the_version_counter():
    out = torch.zeros(4, 16)
    version = out._version
    ct.unsketch_grad_(out, torch.ones(4, 4), 1.0, 0.0, 0, 0, 0)
    assert out._version > version


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cpu_16_bit_inputs_are_sketched_in_fp32_and_rounded_once(dtype):
    if dtype == torch.float16 and torch.__version__.startswith("1."):
        pytest.skip("torch 1.x cannot convert float16 on this path")
    torch.manual_seed(5)
    x = torch.randn(6, 40).to(dtype)
    z = ct.sketch(x, 10, 3, 1, 0)
    assert z.dtype == dtype
    assert torch.equal(z, ct.sketch(x.float(), 10, 3, 1, 0).to(dtype))
    assert torch.equal(ct.materialize(40, 10, 3, 1, 0, dtype=dtype), ct.materialize(40, 10, 3, 1, 0).to(dtype))
    dy = torch.randn(6, 7).to(dtype)
    g = ct.compressed_grad(dy, z, dtype=torch.float32)
    assert g.dtype == torch.float32 and torch.equal(g, ct.compressed_grad(dy.float(), z.float()))


@pytest.mark.skipif(not ct._ext.HAS_FAKE_KERNELS, reason="fake kernels need torch >= 2.1")
def test_fake_kernels_give_the_output_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(12, 48)
        state = torch.zeros(4, dtype=torch.int64)
        z = torch.ops.compact.sketch(x, 16, state, "srht")
        g = torch.ops.compact.compressed_grad(torch.empty(12, 20, dtype=torch.bfloat16),
                                              torch.empty(12, 16, dtype=torch.bfloat16), torch.float32)
        p = torch.ops.compact.materialize(48, 16, state, "gaussian", torch.empty(0, dtype=torch.float64))
    assert z.shape == (12, 16) and g.shape == (20, 16) and g.dtype == torch.float32
    assert p.shape == (48, 16) and p.dtype == torch.float64
