# SPDX-License-Identifier: MIT
"""The CUDA backend of the extension against the CPU one (skipped without a GPU or without a CUDA build; a test
parametrized by device also runs its CPU case, which checks its shapes and reference everywhere)."""
import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from conftest import gamma, tiny_llama  # noqa: E402

if not torch.cuda.is_available():
    needs_cuda = pytest.mark.skip(reason="no CUDA device (torch.cuda.is_available() is False)")
elif not ct.has_cuda():
    needs_cuda = pytest.mark.skip(reason="compact_torch was built without its CUDA backend (torch without CUDA, or "
                                         "no nvcc)")
else:
    needs_cuda = pytest.mark.skipif(False, reason="a CUDA device and a CUDA build")

DISTS = ["gaussian", "rademacher", "srht"]


@needs_cuda
@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_p_is_bitwise_the_cpu_p_rounded_to_the_element_type(dist, dtype):
    cpu = ct.materialize(300, 40, 3, 1, 2, dist, dtype=torch.float32)
    gpu = ct.materialize(300, 40, 3, 1, 2, dist, dtype=dtype, device="cuda")
    assert torch.equal(gpu.cpu(), cpu.to(dtype))


@needs_cuda
@pytest.mark.parametrize("dist", DISTS)
def test_sketch_unsketch_and_compressed_grad_agree_with_the_cpu(dist):
    torch.manual_seed(0)
    n, r, b, m = 256, 64, 96, 48
    x, g, dy = torch.randn(b, n), torch.randn(m, r), torch.randn(b, m)
    p = ct.materialize(n, r, 5, 2, 1, dist, dtype=torch.float64)
    z = ct.sketch(x.cuda(), r, 5, 2, 1, dist).cpu().double()
    assert ((z - x.double() @ p).abs() <= gamma(n + 1, torch.float32) * (x.double().abs() @ p.abs())).all()
    out = torch.zeros(m, n, device="cuda")
    ct.unsketch_grad_(out, g.cuda(), 1.0, 0.0, 5, 2, 1, dist)
    want = g.double() @ p.T
    assert ((out.cpu().double() - want).abs() <= gamma(r + 1, torch.float32) * (g.double().abs() @ p.abs().T)).all()
    gh = ct.compressed_grad(dy.cuda(), x[:, :r].contiguous().cuda()).cpu().double()
    want = dy.double().T @ x[:, :r].double()
    assert ((gh - want).abs() <= gamma(b, torch.float32) * (dy.double().abs().T @ x[:, :r].double().abs())).all()


@needs_cuda
def test_a_compressed_model_trains_on_the_gpu_with_bf16_autocast():
    model = ct.compress(tiny_llama(), rank=0.25, dist="srht").cuda()
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2)
    ids = torch.randint(0, 40, (4, 16), device="cuda")
    losses = []
    for _ in range(10):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(ids, ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0]
    q = model.model.layers[0].self_attn.q_proj
    assert q.weight.dtype == torch.float32 and q.weight_ghat.stride() == (0, 0)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_cuda)])
@pytest.mark.parametrize("dist", ["gaussian", "rademacher"])
def test_fp32_sketches_stay_fp32_when_torch_allows_tf32(dist, device):
    """torch puts its cuBLAS handle in TF32 mode when allow_tf32 is on; compact's fp32 GEMMs on that handle pin fp32
    math (issue 19). A short reduction (n = 32) makes the fp32 bound gamma_33 far tighter than TF32's 10-bit inputs
    (a relative error up to 2^-11 per product), so a sketch that ran in TF32 fails it. The CPU case holds the same
    bound and checks the shapes (r <= n) where no GPU is."""
    torch.manual_seed(1)
    n, r, b = 32, 16, 1024
    x = torch.randn(b, n)
    p = ct.materialize(n, r, 5, 2, 1, dist, dtype=torch.float64)
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        z = ct.sketch(x.to(device), r, 5, 2, 1, dist).cpu().double()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    assert ((z - x.double() @ p).abs() <= gamma(n + 1, torch.float32) * (x.double().abs() @ p.abs())).all()
