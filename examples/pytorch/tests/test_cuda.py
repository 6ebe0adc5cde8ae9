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


@needs_cuda
def test_an_srht_projector_is_set_up_once_per_state_and_kept_for_later_calls():
    """The SRHT's setup (sample and signs, about 26 launches) runs on the first call of a (state, n, r, dtype,
    device) only; later sketches and unsketch_grads of that state, on any stream, reuse it with the same bits. A new
    window is a new state; dense projectors have no setup and are not kept."""
    ct.projector_cache_clear()
    start = ct.projector_cache_info()
    x = torch.randn(64, 512, device="cuda")
    g = torch.randn(32, 128, device="cuda")
    z1 = ct.sketch(x, 128, 1, 2, 3, "srht")
    info = ct.projector_cache_info()
    assert info["builds"] == start["builds"] + 1 and info["entries"] == 1 and info["bytes"] > 0
    z2 = ct.sketch(x, 128, 1, 2, 3, "srht")
    out = torch.empty(32, 512, device="cuda")
    ct.unsketch_grad_(out, g, 1.0, 0.0, 1, 2, 3, "srht")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        z3 = ct.sketch(x, 128, 1, 2, 3, "srht")
    torch.cuda.current_stream().wait_stream(side)
    info = ct.projector_cache_info()
    assert info["builds"] == start["builds"] + 1 and info["hits"] == start["hits"] + 3
    assert torch.equal(z1, z2) and torch.equal(z1, z3)
    p = ct.materialize(512, 128, 1, 2, 3, "srht", dtype=torch.float64)
    xd = x.cpu().double()
    assert ((z1.cpu().double() - xd @ p).abs() <= gamma(513, torch.float32) * (xd.abs() @ p.abs())).all()
    gd = g.cpu().double()
    assert ((out.cpu().double() - gd @ p.T).abs() <= gamma(129, torch.float32) * (gd.abs() @ p.abs().T)).all()
    ct.sketch(x, 128, 1, 2, 4, "srht")  # window 4: another P
    ct.sketch(x, 128, 1, 2, 3, "gaussian")
    info = ct.projector_cache_info()
    assert info["builds"] == start["builds"] + 2 and info["entries"] == 2
    ct.projector_cache_clear()
    assert ct.projector_cache_info()["entries"] == 0
    assert torch.equal(ct.sketch(x, 128, 1, 2, 3, "srht"), z1)  # rebuilt after the clear, same bits
