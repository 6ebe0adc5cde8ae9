# SPDX-License-Identifier: MIT
"""The byte-exact CPU allocation tracker (a measuring tool outside the package's runtime) and the peak-memory
breakdown of a training step."""
import gc
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from compact_torch import memory  # noqa: E402
import conftest  # noqa: E402
from conftest import tiny_llama  # noqa: E402

tracker = memory.CpuMemoryTracker()  # before any tensor of these tests is made


def test_the_package_never_loads_the_tracker():
    # In a fresh process: import compact_torch, compress, train a step; torch's CPU allocator is never replaced.
    code = """
import sys, torch, compact_torch as ct
sys.path.insert(0, %r)
from conftest import tiny_llama
model = ct.compress(tiny_llama(), rank=0.25)
opt = ct.CompressedAdamW(model.parameters())
ids = torch.randint(0, 40, (2, 16))
model(ids, ids).backward()
opt.step()
assert "compact_torch._memtrack" not in sys.modules and "compact_torch.memory" not in sys.modules, sys.modules.keys()
assert not [n for n in dir(ct._ext._C) if "tracker" in n]
print("ok")
""" % conftest.__file__.rsplit("/", 1)[0]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_tracker_counts_exact_bytes_and_finds_the_peak():
    keep = torch.empty(250, dtype=torch.float64)  # 2000 bytes, live before recording: weights below
    base = tracker.live_bytes()  # includes keep and whatever other tests left alive
    tracker.start()
    a = torch.empty(1000)  # 4000
    b = torch.empty(300, dtype=torch.int16)  # 600
    del a
    c = torch.empty(900)  # 3600: live = base + 600 + 3600 < base + 4000 + 600
    report = tracker.stop({"weights": [keep], "gradients": [], "optimizer": [c]})
    assert report["peak"] == base + 4600
    # a (made and freed in the step) and b (made in the step, in no category) are temporaries; nothing was saved
    # for backward.
    assert report["weights"] == 2000 and report["temporaries"] == 4600 and report["other"] == base - 2000
    assert report["activations"] == 0 and report["optimizer"] == 0  # c did not exist at the peak
    assert report["end"]["optimizer"] == 3600
    del b, c, keep


def test_tensors_from_before_the_tracker_are_refused():
    with pytest.raises(RuntimeError, match="before the tracker was installed"):
        tracker.start()
        tracker.stop({"weights": [conftest.EARLY_TENSOR]})


def train_step(model, opt, batch=4):
    # The batch is made inside the step: it is an input of this step (an activation), not persistent state.
    ids = torch.randint(0, 40, (batch, 16), generator=torch.Generator().manual_seed(0))
    model(ids, ids).backward()
    opt.step()


@pytest.mark.parametrize("compact", [False, True], ids=["full", "compact"])
def test_breakdown_of_a_training_step_sums_to_the_peak(compact):
    model = tiny_llama()
    if compact:
        ct.compress(model, rank=0.25)
    opt = (ct.CompressedAdamW if compact else torch.optim.AdamW)(model.parameters(), lr=1e-3)
    train_step(model, opt)  # optimizer state exists from now on
    opt.zero_grad(set_to_none=True)
    before = memory.category_bytes(memory.model_tensors(model, opt))
    foreign = tracker.live_bytes() - before["weights"] - before["optimizer"]  # left alive by other tests
    tracker.start()
    train_step(model, opt)
    report = tracker.stop(memory.model_tensors(model, opt))
    sizes = memory.category_bytes(memory.model_tensors(model, opt))
    assert sum(report[c] for c in memory.CATEGORIES) == report["peak"] == report["total"] + report["other"]
    assert report["weights"] == sizes["weights"] and report["optimizer"] == sizes["optimizer"]
    assert 0 <= report["gradients"] <= sizes["gradients"]
    assert report["other"] == foreign and report["activations"] > 0 and report["temporaries"] > 0
    assert report["end"]["activations"] == 0  # backward released every saved tensor
    n_weights = sum(p.numel() for p in model.parameters() if p.stride() != (0, 0))
    dense = sum(p.numel() for p in model.parameters() if p.requires_grad and ct.owner_of(p) is None)
    ghat = sum(p.numel() for p in model.parameters() if ct.owner_of(p) is not None)
    # exp_avg and exp_avg_sq (fp32) per trainable parameter; torch's AdamW also keeps its step as a tensor.
    steps = sum(st["step"].numel() * st["step"].element_size() for st in opt.state.values() if torch.is_tensor(st["step"]))
    assert sizes["optimizer"] == 2 * 4 * (dense + ghat) + steps
    assert sizes["gradients"] == 4 * (dense + ghat)
    if compact:
        assert ghat * 4 == n_weights - dense  # r = n/4 of every compressed weight


def _trained(seed=0):
    torch.manual_seed(seed)
    model = ct.compress(tiny_llama(), rank=0.25)
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-3)
    train_step(model, opt)  # optimizer state exists from now on
    opt.zero_grad(set_to_none=True)
    return model, opt


def test_tracked_step_measures_what_the_step_written_out_measures_and_places_the_peak():
    ids = torch.randint(0, 40, (4, 16), generator=torch.Generator().manual_seed(1))
    model, opt = _trained()
    gc.collect()
    gc.disable()  # no other object's tensors freed inside the steps
    try:
        tracker.start()
        loss = model(ids, ids)
        hand_marks = {"forward": tracker.seq()}
        loss.backward()
        hand_marks["backward"] = tracker.seq()
        opt.step()
        by_hand = tracker.stop(memory.model_tensors(model, opt))
        del loss
        model, opt = _trained()
        gc.collect()
        report, marks = memory.tracked_step(tracker, lambda: model(ids, ids), model, opt)
    finally:
        gc.enable()
    assert not tracker.recording
    for c in ("weights", "gradients", "optimizer", "activations", "temporaries", "total"):
        assert report[c] == by_hand[c], (c, report[c], by_hand[c])
    assert list(marks) == list(memory.PHASES)
    assert tracker.start_seq < marks["forward"] < marks["backward"] < marks["optimizer"]
    assert memory.peak_phase(by_hand["peak_seq"], hand_marks) == report["phase"]
    assert report["phase"] == memory.peak_phase(report["peak_seq"], marks) in memory.PHASES
    assert report["end"]["activations"] == 0


def test_tracked_step_refuses_bad_arguments_before_running_and_stops_the_tracker_when_the_step_fails():
    model, opt = _trained()
    before = [p.detach().clone() for p in model.parameters()]
    ids = torch.randint(0, 40, (2, 16))
    with pytest.raises(TypeError, match="argument tracker must be a CpuMemoryTracker, got str"):
        memory.tracked_step("tracker", lambda: model(ids, ids), model, opt)
    with pytest.raises(TypeError, match="argument loss_fn must be callable, got int"):
        memory.tracked_step(tracker, 3, model, opt)
    with pytest.raises(TypeError, match="argument model must be a torch.nn.Module, got dict"):
        memory.tracked_step(tracker, lambda: model(ids, ids), {}, opt)
    with pytest.raises(TypeError, match="argument optimizer must be an optimizer .*, got NoneType"):
        memory.tracked_step(tracker, lambda: model(ids, ids), model, None)
    tracker.start()
    with pytest.raises(RuntimeError, match="argument tracker is already recording"):
        memory.tracked_step(tracker, lambda: model(ids, ids), model, opt)
    tracker.cancel()
    assert not tracker.recording
    with pytest.raises(ValueError, match=r"argument loss_fn must return a one-element loss tensor, got \(2, 16\)"):
        memory.tracked_step(tracker, lambda: torch.zeros(2, 16), model, opt)
    assert not tracker.recording

    def failing():
        raise KeyError("the batch")

    with pytest.raises(KeyError, match="the batch"):
        memory.tracked_step(tracker, failing, model, opt)
    assert not tracker.recording
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))  # no step was taken
    with pytest.raises(TypeError, match="argument around must be callable or None, got int"):
        memory.tracked_step(tracker, lambda: model(ids, ids), model, opt, around=5)
    with pytest.raises(RuntimeError, match="argument around returned without running the step"):
        memory.tracked_step(tracker, lambda: model(ids, ids), model, opt, around=lambda step: None)
    assert not tracker.recording
    with pytest.raises(RuntimeError, match=r"stop\(\) without start\(\)"):
        tracker.stop(memory.model_tensors(model, opt))
    # The tracker works on after each of them.
    report, _ = memory.tracked_step(tracker, lambda: model(ids, ids), model, opt)
    assert report["total"] > 0 and report["around"] is None


def test_tracked_step_runs_the_step_through_around_and_returns_what_it_returns():
    model, opt = _trained()
    ids = torch.randint(0, 40, (2, 16))
    calls = []

    def around(step):
        calls.append(tracker.recording)
        step()
        return "measured"

    report, marks = memory.tracked_step(tracker, lambda: model(ids, ids), model, opt, around=around)
    assert calls == [True] and report["around"] == "measured" and list(marks) == list(memory.PHASES)
    assert report["activations"] >= 0 and report["total"] > 0


def test_peak_phase_places_a_sequence_number_among_the_marks_and_names_missing_ones():
    marks = {"forward": 10, "backward": 20, "optimizer": 30}
    assert [memory.peak_phase(s, marks) for s in (5, 10, 11, 20, 21, 30)] == \
        ["forward", "forward", "backward", "backward", "optimizer", "optimizer"]
    with pytest.raises(ValueError, match="argument marks = {'forward': 10} lacks backward"):
        memory.peak_phase(5, {"forward": 10})


def test_compact_peak_is_below_full_rank_for_the_same_model_and_batch():
    peaks = {}
    for compact in (False, True):
        model = tiny_llama()
        if compact:
            ct.compress(model, rank=0.25)
        opt = (ct.CompressedAdamW if compact else torch.optim.AdamW)(model.parameters(), lr=1e-3)
        train_step(model, opt, batch=8)
        opt.zero_grad(set_to_none=True)
        tracker.start()
        train_step(model, opt, batch=8)
        peaks[compact] = tracker.stop(memory.model_tensors(model, opt))
    assert peaks[True]["optimizer"] * 2 < peaks[False]["optimizer"]
    assert peaks[True]["activations"] < peaks[False]["activations"]
    assert peaks[True]["total"] < peaks[False]["total"]


def test_activations_are_the_saved_tensors_of_a_single_linear():
    # One full-rank linear layer, forward only: autograd saves x (B x n) and nothing else that is new (the weight is
    # a parameter); the output y is a temporary. For the compact layer it saves z (B x r).
    for compact in (False, True):
        torch.manual_seed(0)
        layer = ct.CompactLinear(64, 32, rank=16) if compact else torch.nn.Linear(64, 32)
        tracker.start()
        x = torch.randn(8, 64, requires_grad=True)
        y = layer(x)
        report = tracker.stop(memory.model_tensors(layer))
        saved = 8 * (16 if compact else 64) * 4
        assert report["activations"] == saved, (compact, report)
        # x (the input, a leaf made in the step) and y are temporaries; x is an activation only for the full-rank
        # layer. The compact layer's peak is inside its sketch, where the panel of P (n x r = 64 x 16, a torch tensor
        # fed to torch's GEMM) is live instead of y: x + P.
        expected = 8 * 64 * 4 + 64 * 16 * 4 if compact else 8 * 32 * 4
        assert report["temporaries"] == expected, (compact, report)
        del x, y


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.profiler's allocation events need torch >= 2.1")
def test_profiler_agrees_with_the_tracker_on_a_training_step():
    model = ct.compress(tiny_llama(), rank=0.25)
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-3)
    train_step(model, opt)
    opt.zero_grad(set_to_none=True)
    base = tracker.live_bytes()
    tracker.start()
    prof = memory.profiler_peak(lambda: train_step(model, opt))
    report = tracker.stop(memory.model_tensors(model, opt))
    # The profiler reports the peak above its start of the bytes allocated while it records; nothing allocated
    # before the step is freed in it (gradients were set to None before), so the two are the same number. Its own
    # bookkeeping allocates no tensor inside the step.
    assert prof == report["peak"] - base, (prof, report["peak"] - base)
