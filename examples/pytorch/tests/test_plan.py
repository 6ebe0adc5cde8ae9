# SPDX-License-Identifier: MIT
"""compact_torch.plan: the peak memory traced on the meta device equals the tracker's measurement of the same step on
the CPU, byte for byte and category by category, for every traced configuration on small LLaMA and RoBERTa models;
the modelled configurations follow their documented rules; the command line and its errors."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

TORCH_2_1 = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 1)
needs_plan = pytest.mark.skipif(not TORCH_2_1, reason="compact_torch.plan needs torch >= 2.1 (meta kernels of the "
                                                      "training step, TorchDispatchMode)")
pytest.importorskip("transformers", reason="compact_torch.plan builds Hugging Face models (transformers)")

from compact_torch import plan as P  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CATEGORIES = ("weights", "gradients", "optimizer", "activations", "temporaries", "total", "phase", "phase_peaks")

TRACED = [
    "llama:full:fp32", "llama:ckpt:fp32", "llama:compact:fp32", "llama:compact-ckpt:fp32",
    "llama:compact-linears:fp32", "llama:compact-loss:fp32", "llama:compact-activations:fp32",
    "llama:compact-all:fp32", "llama:compact-all-exact:fp32",
    "llama:compact-all-ckpt:fp32", "llama:full:bf16", "llama:compact:bf16", "llama:compact-all-ckpt:bf16",
    "roberta:full:fp32", "roberta:ckpt:fp32", "roberta:compact:fp32", "roberta:compact-ckpt:fp32",
    "roberta:compact-all:fp32", "roberta:compact-all-exact:fp32", "roberta:compact-all-ckpt:fp32", "roberta:full:bf16",
    "roberta:compact-all:bf16",
    # CompressedAdamW(layerwise=True): traced, by name or as +layerwise on a compact method
    "llama:compact-all-lw:fp32", "llama:compact-all-lw-ckpt:fp32", "llama:compact-all-ckpt+layerwise:bf16",
    "roberta:compact-all-lw:fp32",
    # CompressedAdamW(moments="8bit", full_rank_moments="8bit"): traced, by name or as +8bit on a compact method. At
    # the default rank every compressed layer's m x r moments are under MIN_8BIT_NUMEL (4096) values and stay fp32, so
    # most rows use rank 64 (":64"), where q, o, gate, up, down and the head hold theirs in 8 bits and k, v (32 x 64)
    # do not.
    "llama:compact-all-8bit:fp32", "llama:compact-all:fp32:64", "llama:compact-all-8bit:fp32:64",
    "llama:compact-all-8bit:bf16:64", "llama:compact-all-8bit-ckpt:fp32:64", "llama:compact-all-8bit-lw:bf16:64",
    "llama:compact-all-8bit-lw-ckpt:fp32:64", "llama:compact-all-ckpt+8bit+layerwise:bf16:64",
    "llama:compact+8bit:fp32:64", "roberta:compact-all-8bit:fp32:64", "roberta:compact-all-8bit-lw:bf16:64",
]
try:
    import peft  # noqa: F401

    TRACED += ["llama:lora:fp32", "llama:lora-compact:fp32", "roberta:lora:fp32", "llama:lora-compact+8bit:fp32"]
except ImportError:  # the LoRA methods need peft; the rest is tested without it
    pass
# Modelled: the modifiers on torch.optim.AdamW (full, ckpt, lora), which has no 8-bit or layer-wise form in code.
MODELLED = ["llama:full+8bit:fp32", "llama:ckpt+8bit:bf16", "llama:full+layerwise:fp32",
            "llama:ckpt+8bit+layerwise:fp32"]


def env():
    e = dict(os.environ, OMP_NUM_THREADS="1")
    e["PYTHONPATH"] = os.pathsep.join([os.path.dirname(P.__file__).rsplit(os.sep, 1)[0], e.get("PYTHONPATH", "")])
    return e


@pytest.fixture(scope="module")
def rows():
    """Every configuration, planned and measured, in one process of its own (the planner installs the tracker's
    allocator hooks for the rest of its process)."""
    if not TORCH_2_1:
        pytest.skip("compact_torch.plan needs torch >= 2.1")
    out = subprocess.run([sys.executable, os.path.join(HERE, "_plan_worker.py"), *TRACED, *MODELLED],
                         capture_output=True, text=True, env=env(), timeout=1200)
    assert out.returncode == 0, out.stderr[-4000:]
    return {r["spec"]: r for r in map(json.loads, out.stdout.splitlines())}


@needs_plan
@pytest.mark.parametrize("spec", TRACED)
def test_the_plan_equals_the_tracker_byte_for_byte(rows, spec):
    r = rows[spec]
    planned, measured = r["meta"], r["cpu"]
    assert planned["kind"] == "traced"
    assert {k: planned[k] for k in CATEGORIES} == {k: measured[k] for k in CATEGORIES}
    # The plan leaves out allocations made and freed inside one kernel call (op_level); the tracker's own peak can
    # only be higher, by at most the scratch of the kernel running at its peak (the op-level curve at that moment is
    # the tracker's peak minus that scratch, and the op-level peak is at least that).
    gap = measured["tracker_total"] - measured["total"]
    assert 0 <= gap <= measured["scratch_at_tracker_peak"], (gap, measured["kernel_at_tracker_peak"])
    assert planned["total"] == sum(planned[k] for k in P.REPORTED) > 0


@needs_plan
def test_the_traced_methods_differ_where_they_should(rows):
    # A check that the comparison above compares something: checkpointing and compression lower the activations.
    full, ckpt, compact = (rows[f"llama:{m}:fp32"]["meta"] for m in ("full", "ckpt", "compact"))
    assert ckpt["activations"] < full["activations"] and compact["activations"] < full["activations"]
    assert compact["optimizer"] < full["optimizer"]


@needs_plan
def test_8bit_moments_take_one_byte_per_value_and_a_scale_per_256(rows):
    r = rows["llama:full+8bit:fp32"]
    traced, planned = r["meta_traced"], r["meta"]
    # AdamW's state: exp_avg and exp_avg_sq of each parameter (fp32) and a 4-byte step; 8-bit keeps the steps.
    numels = r["param_numels"]
    assert traced["optimizer"] == sum(2 * 4 * n + 4 for n in numels)
    assert planned["optimizer"] == sum(2 * P.q8_bytes(n) + 4 for n in numels)
    assert planned["total"] == traced["total"] - (traced["optimizer"] - planned["optimizer"])
    assert planned["phase"] == traced["phase"] and planned["kind"] == "modelled 8bit"
    assert P.q8_bytes(256) == 260 and P.q8_bytes(257) == 265


@needs_plan
def test_traced_8bit_moments_hold_one_byte_per_value_and_a_scale_per_256(rows):
    # The traced 8-bit step against the fp32 one at the same rank: each moment pair CompressedAdamW keeps in 8 bits
    # (q8_numels: the values of each, from a real CPU step; compressed layers' m x r and full-rank parameters alike)
    # takes 2 n + 2 * 4 * ceil(n / 256) bytes instead of 2 * 4 * n; nothing else in the optimizer state changes.
    fp32, q8 = rows["llama:compact-all:fp32:64"]["meta"], rows["llama:compact-all-8bit:fp32:64"]
    numels = q8["q8_numels"]
    assert 4096 in numels and 256 * 64 in numels  # a compressed q (64 x 64) and the embedding (256 x 64)
    saved = sum(8 * n - (2 * n + 8 * -(-n // 256)) for n in numels)
    assert fp32["optimizer"] - q8["meta"]["optimizer"] == saved > 0
    assert q8["meta"]["kind"] == "traced" and q8["meta"]["total"] < fp32["total"]
    # +8bit on a compact method is the same optimizer as the -8bit method
    assert rows["llama:compact-all-ckpt+8bit+layerwise:bf16:64"]["meta"]["optimizer"] == \
        rows["llama:compact-all-8bit:bf16:64"]["meta"]["optimizer"]


@needs_plan
def test_traced_layerwise_updates_free_every_gradient_in_backward(rows):
    plain, lw = rows["llama:compact-all-ckpt:fp32"]["meta"], rows["llama:compact-all-lw-ckpt:fp32"]["meta"]
    assert plain["gradients"] > 0 and lw["gradients"] == 0  # a freed gradient is no .grad at the end: temporaries
    assert lw["total"] < plain["total"]


@needs_plan
def test_layerwise_keeps_at_most_one_gradient(rows):
    for spec in ("llama:full+layerwise:fp32", "llama:ckpt+8bit+layerwise:fp32"):
        r = rows[spec]
        assert r["meta"]["gradients"] <= max(r["param_bytes"])
        assert r["meta"]["kind"] == {"llama:full+layerwise:fp32": "modelled layerwise"}.get(
            spec, "modelled 8bit+layerwise")
        assert {k: r["meta"][k] for k in CATEGORIES} == {k: r["cpu"][k] for k in CATEGORIES}  # same rule, same log
    both = rows["llama:ckpt+8bit+layerwise:fp32"]
    assert both["meta"]["total"] < both["meta_traced"]["total"]


@needs_plan
def test_the_command_line_prints_a_table(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
                                  "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 64,
                                  "max_position_embeddings": 64, "tie_word_embeddings": False}))
    out = subprocess.run([sys.executable, "-m", "compact_torch.plan", "--model", str(config), "--batch", "2",
                          "--seq", "8", "--dtype", "fp32", "--method", "full+8bit,compact+8bit", "--markdown"],
                         capture_output=True, text=True, env=env(), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| method | weights") and len(lines) == 3
    assert lines[1].startswith("| full+8bit |") and "modelled 8bit" in lines[1]  # torch's AdamW: modelled
    assert lines[2].startswith("| compact+8bit |") and "| traced |" in lines[2]  # CompressedAdamW: traced


@needs_plan
def test_the_command_line_measures_on_the_cpu_for_the_cross_check(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
                                  "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 64,
                                  "max_position_embeddings": 64, "tie_word_embeddings": False}))
    rows = {}
    for device in ("meta", "cpu"):
        out = subprocess.run([sys.executable, "-m", "compact_torch.plan", "--model", str(config), "--batch", "2",
                              "--seq", "8", "--dtype", "fp32", "--method", "compact-all", "--device", device,
                              "--json"], capture_output=True, text=True, env=env(), timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        rows[device] = json.loads(out.stdout)
    assert {k: rows["meta"][k] for k in CATEGORIES} == {k: rows["cpu"][k] for k in CATEGORIES}
    assert rows["cpu"]["tracker_rise"] > 0 and "rss_rise" in rows["cpu"] and "tracker_rise" not in rows["meta"]


@needs_plan
@pytest.mark.parametrize("args, message", [
    (["--model", "gpt-17"], "unknown model 'gpt-17'"),
    (["--model", "/nonexistent/config.json"], "does not exist"),
    (["--method", "full,fancy"], "unknown method 'fancy'"),
    (["--method", "full+4bit"], "unknown modifier '4bit'"),
    (["--batch", "0"], "batch = 0 must be a positive integer"),
    (["--seq", "-3"], "seq = -3 must be a positive integer"),
    (["--dtype", "fp8"], "--dtype 'fp8' must be one of fp32, bf16"),
    (["--method", "compact-all-lw+layerwise"], "'compact-all-lw' already has layerwise"),
    (["--method", "compact-all-8bit-ckpt+8bit"], "'compact-all-8bit-ckpt' already has 8bit"),
])
def test_the_command_line_refuses_bad_arguments(args, message, capsys):
    # In this process (main() fails before building a model or installing the tracker's hooks); the exit status of
    # `python -m` is the next test's.
    assert P.main(args) == 2
    out = capsys.readouterr()
    assert message in out.err and out.out == "", out.err[-2000:]


@needs_plan
def test_the_command_line_exits_2_on_bad_arguments():
    out = subprocess.run([sys.executable, "-m", "compact_torch.plan", "--batch", "0"], capture_output=True, text=True,
                         env=env(), timeout=300)
    assert out.returncode == 2 and "batch = 0 must be a positive integer" in out.stderr, out.stderr[-2000:]
    assert out.stdout == ""


@needs_plan
@pytest.mark.parametrize("kwargs, message", [
    (dict(model="llama-7b", batch=1.5, seq=8), "batch = 1.5"),
    (dict(model="llama-7b", batch=1, seq=True), "seq = True"),
    (dict(model="llama-7b", batch=1, seq=8, dtype="fp16"), "dtype = 'fp16'"),
    (dict(model="llama-7b", batch=1, seq=8, method="compact", rank=0), "rank = 0"),
    (dict(model="llama-7b", batch=1, seq=8, device="cuda"), "device = 'cuda'"),
    (dict(model=7, batch=1, seq=8), "model = 7"),
    (dict(model="llama-7b", batch=1, seq=8, method=""), "method = ''"),
    (dict(model="llama-7b", batch=1, seq=8, method="full+8bit+8bit"), "repeats a modifier"),
])
def test_plan_refuses_bad_arguments_before_building_anything(kwargs, message):
    with pytest.raises(P.PlanError, match=message.replace("(", r"\(").replace("+", r"\+")):
        P.plan(**kwargs)


def test_plan_says_which_torch_it_needs(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "1.13.1")
    with pytest.raises(P.PlanError, match=r"needs torch >= 2.1 .* this is torch 1.13.1"):
        P.plan("llama-7b", 1, 8)
