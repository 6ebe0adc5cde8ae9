# SPDX-License-Identifier: MIT
"""FSDP2 (fully_shard) with two gloo processes: Ghat is reduce-scattered like any gradient (each rank holds the rows
of Ghat that match its rows of W) and CompressedAdamW updates each rank's row shard of W through P; the trajectory is
bitwise the single-process one on the averaged halves (see test_ddp.py for why that equality is exact)."""
import os

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this torch has no gloo backend", allow_module_level=True)
try:
    from torch.distributed.fsdp import fully_shard  # noqa: F401  (FSDP2, public in torch >= 2.6)
except Exception as e:  # ImportError; torch 1.13's FSDP module does not even import under Python 3.11 (ValueError)
    pytest.skip(f"torch {torch.__version__} has no torch.distributed.fsdp.fully_shard (FSDP2, torch >= 2.6): "
                f"{type(e).__name__}: {e}", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

import _ddp_worker as ddp_worker  # noqa: E402
import _fsdp_worker as worker  # noqa: E402
import compact_torch as ct  # noqa: E402
from test_ddp import WORLD, free_port, halves_step  # noqa: E402


@pytest.fixture(scope="module")
def fsdp_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp")
    mp.spawn(worker.main, args=(WORLD, free_port(), str(out)), nprocs=WORLD, join=True)
    return [torch.load(os.path.join(out, f"rank{rank}.pt")) for rank in range(WORLD)]


def test_ghat_and_w_are_sharded_by_the_same_rows(fsdp_runs):
    for run in fsdp_runs:
        local = run["log"][0]["local"]
        assert local["weight"] == (64, 128) and local["ghat_grad"] == (64, 32)  # q_proj: m = 128, n = 128, r = 32
        assert local["ghat_shard_dims"] == [0]  # Shard(0): rows


def test_fsdp2_trajectory_is_bitwise_the_averaged_halves_trajectory(fsdp_runs):
    torch.set_num_threads(1)
    model, opt = ddp_worker.build(True)
    for step in range(ddp_worker.STEPS):
        halves_step(model, step)
        mine = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        for rank, run in enumerate(fsdp_runs):
            got = run["log"][step]["grads"]
            assert got.keys() == mine.keys()
            for name in mine:
                assert torch.equal(got[name], mine[name]), (step, rank, name)
        opt.step()
        opt.zero_grad(set_to_none=True)
    for rank, run in enumerate(fsdp_runs):
        assert run["steps"] == [ddp_worker.STEPS]
        for name, p in model.named_parameters():
            if ct.owner_of(p) is None:
                assert torch.equal(run["final"][name], p.detach()), (rank, name)
