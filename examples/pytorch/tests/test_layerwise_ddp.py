# SPDX-License-Identifier: MIT
"""Layer-wise CompressedAdamW under data parallelism (two gloo processes): attached to compact's or torch's DDP it
steps each parameter on the averaged gradient and gives plain DDP's trajectory bit for bit; without attach_ddp it
refuses before stepping. The arguments for bitwise equality are test_ddp.py's."""
import os

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this torch has no gloo backend", allow_module_level=True)
if not hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
    pytest.skip(f"layer-wise updates need torch >= 2.1 (register_post_accumulate_grad_hook); this is torch "
                f"{torch.__version__}", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

import _ddp_worker as worker  # noqa: E402
import compact_torch as ct  # noqa: E402
from test_ddp import WORLD, free_port, halves_step  # noqa: E402


def test_layerwise_ddp_steps_on_the_averaged_gradients_as_plain_ddp_does(tmp_path):
    """A layer-wise CompressedAdamW attached to the DDP steps each bucket's parameters in the comm hook's callback,
    on the averaged gradient: the trajectory is plain DDP's bit for bit (compact_torch's DDP and torch's own, whose
    Ghat the layers average at the end of backward; also with gradient_as_bucket_view=True), and so, by test_ddp.py's argument, one process's stepping
    layer-wise on the ranks' halves with the loss halved (checked here; the concatenated batch differs from that by
    the order of sums over tokens, test_reduced_gradient_equals_concatenated_batch_gradient). With two micro-batches
    per rank (no_sync) it is the plain optimizer's with the same accumulation. The counting hook inside sees the same
    payload."""
    mp.spawn(worker.layerwise_main, args=(WORLD, free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    model, _ = worker.build(True)
    elt = 8  # float64
    compressed = sum(p.numel() * elt for p in model.parameters() if ct.owner_of(p) is not None)
    for rank in range(WORLD):
        runs = {name: torch.load(os.path.join(tmp_path, f"layerwise_{name}{rank}.pt"))
                for name in worker.LAYERWISE_RUNS}
        pairs = [("ct", runs["ct-plain"]), ("torch", runs["ct-plain"]), ("ct-view", runs["ct-plain"]),
                 ("ct-accum", runs["ct-accum-plain"])]
        for name, want in pairs:
            for (key, a), b in zip(runs[name]["final"].items(), want["final"].values()):
                assert torch.equal(a, b) if torch.is_tensor(a) else a == b, (name, key)
        assert [c for _, c in runs["ct"]["payload"]] == [compressed] * worker.STEPS
        assert runs["ct-accum"]["payload"] == runs["ct-accum-plain"]["payload"]
        assert [c for _, c in runs["torch"]["payload"]] == [0] * worker.STEPS  # torch's DDP leaves Ghat to the layers
    norm = "model.norm.weight"
    assert not torch.equal(runs["ct-accum"]["final"][norm], runs["ct"]["final"][norm])  # k matters
    # One process, layer-wise with two micro-batches: the ranks' halves with the loss halved (the argument at the top).
    torch.set_num_threads(1)
    model, _ = worker.build(True)
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, weight_decay=0.01, layerwise=True,  # noqa: F841 (hooks)
                             accumulation_steps=WORLD)
    for step in range(worker.STEPS):
        halves_step(model, step)
    for (key, a), b in zip(model.state_dict().items(), runs["ct"]["final"].values()):
        assert torch.equal(a, b) if torch.is_tensor(a) else a == b, key


def test_layerwise_ddp_without_attach_ddp_raises_before_stepping(tmp_path):
    mp.spawn(worker.unattached_main, args=(WORLD, free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        with open(os.path.join(tmp_path, f"unattached{rank}.txt")) as f:
            unchanged, message = f.read().split("\n", 1)
        assert unchanged == "True"
        assert "process group of 2 ranks without attach_ddp()" in message and "attach_ddp(ddp_model)" in message
