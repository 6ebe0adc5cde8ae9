# SPDX-License-Identifier: MIT
"""Bad input raises CompactError (a ValueError) carrying compact's message, and nothing is written."""
import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402


def test_compact_error_is_a_value_error_with_compacts_prefix():
    assert issubclass(ct.CompactError, ValueError)
    with pytest.raises(ct.CompactError, match=r"^compact: Projector: rank r = 9 must satisfy 1 <= r <= n = 8$"):
        ct.sketch(torch.randn(2, 8), 9, 0, 0, 0)


@pytest.mark.parametrize("rank,match", [
    (0, r"rank = 0 must be > 0"), (-2, r"rank = -2 must be > 0"), (1.5, r"rank = 1.5 is >= 1, so it must be an integer"),
    (65, r"Projector: rank r = 65 must satisfy 1 <= r <= n = 64"), ("half", r"must be a finite number"),
    (float("nan"), r"must be a finite number"), (True, r"must be a finite number")])
def test_bad_ranks(rank, match):
    with pytest.raises(ct.CompactError, match=match):
        ct.CompactLinear(64, 8, rank=rank)


def test_bad_distribution_and_period():
    with pytest.raises(ct.CompactError, match=r"dist = 'normal' is not one of 'gaussian', 'rademacher', 'srht'"):
        ct.CompactLinear(8, 8, rank=4, dist="normal")
    with pytest.raises(ct.CompactError, match=r"period = -1 must be >= 0"):
        ct.CompactLinear(8, 8, rank=4, period=-1)


def test_wrong_input_shape_dtype_and_device():
    layer = ct.CompactLinear(16, 4, rank=4)
    with pytest.raises(ct.CompactError, match=r"input has shape \(3, 15\), expected \(\.\.\., in_features = 16\)"):
        layer(torch.randn(3, 15))
    with pytest.raises(ct.CompactError, match=r"input has dtype torch.float64 but the weight has dtype torch.float32"):
        layer(torch.randn(3, 16, dtype=torch.float64))
    with pytest.raises(ct.CompactError, match=r"sketch: argument x has dtype Int; the CPU backend supports float32 "
                                              r"and float64"):
        ct.sketch(torch.ones(3, 16, dtype=torch.int32), 4, 0, 0, 0)
    with pytest.raises(ct.CompactError, match=r"input is on meta but the weight is on cpu"):
        layer(torch.empty(3, 16, device="meta"))


def test_ops_check_shapes_dtypes_and_devices_before_writing():
    out = torch.ones(4, 10)
    with pytest.raises(ct.CompactError, match=r"Projector: rank r = 11 must satisfy 1 <= r <= n = 10"):
        ct.unsketch_grad_(out, torch.ones(4, 11), 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ct.CompactError, match=r"argument g has dtype Double but argument out has dtype Float"):
        ct.unsketch_grad_(out, torch.ones(4, 3, dtype=torch.float64), 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ct.CompactError, match=r"Projector::unsketch_grad: argument out has 4 rows, expected g.rows = 5"):
        ct.unsketch_grad_(out, torch.ones(5, 3), 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ct.CompactError, match=r"unit column stride"):
        ct.unsketch_grad_(torch.ones(10, 4).T, torch.ones(4, 3), 1.0, 0.0, 0, 0, 0)
    assert torch.equal(out, torch.ones(4, 10))  # nothing written by any failed call
    with pytest.raises(ct.CompactError, match=r"argument z has 3 rows, expected dy.rows = 5"):
        ct.compressed_grad(torch.ones(5, 2), torch.ones(3, 4))
    if ct._ext.HAS_FAKE_KERNELS:  # the fake kernel serves meta tensors: shapes only
        assert ct.sketch(torch.empty(2, 8, device="meta"), 4, 0, 0, 0).shape == (2, 4)
    else:
        with pytest.raises(NotImplementedError, match=r"compact::sketch"):
            ct.sketch(torch.empty(2, 8, device="meta"), 4, 0, 0, 0)
    with pytest.raises(ct.CompactError, match=r"argument x must be 2-D, got 3-D|at least 1 dimension"):
        torch.ops.compact.sketch(torch.ones(2, 2, 2), 1, torch.zeros(4, dtype=torch.int64), "gaussian")


def test_weight_must_not_require_grad():
    layer = ct.CompactLinear(8, 4, rank=2)
    layer.requires_grad_(True)
    with pytest.raises(ct.CompactError, match=r"CompactLinear.weight must not require grad"):
        layer(torch.randn(2, 8))


def test_optimizer_checkpoint_of_another_rank_is_refused_before_anything_changes():
    a, b = ct.CompactLinear(8, 4, rank=2), ct.CompactLinear(8, 4, rank=4)
    opt_a, opt_b = ct.CompressedAdamW(a.parameters()), ct.CompressedAdamW(b.parameters())
    a(torch.randn(3, 8)).sum().backward()
    opt_a.step()
    b.step = 5
    with pytest.raises(ct.CompactError, match=r"checkpoint has rank = 2, dist = 'gaussian' for a layer that has "
                                              r"rank = 4"):
        opt_b.load_state_dict(opt_a.state_dict())
    assert b.step == 5 and not opt_b.state


def test_ops_raise_compact_error_through_torch_ops():
    with pytest.raises(ct.CompactError, match=r"^compact: Projector: rank r = 9 must satisfy 1 <= r <= n = 8$"):
        torch.ops.compact.sketch(torch.randn(2, 8), 9, torch.zeros(4, dtype=torch.int64), "gaussian")
    with pytest.raises(ct.CompactError, match=r"argument state must be a CPU int64 tensor of 4 entries"):
        torch.ops.compact.sketch(torch.randn(2, 8), 4, torch.zeros(3, dtype=torch.int64), "gaussian")
    with pytest.raises(ct.CompactError, match=r"period = -1 and step = 0; both must be >= 0"):
        torch.ops.compact.sketch(torch.randn(2, 8), 4, torch.tensor([0, 0, -1, 0]), "gaussian")
