# SPDX-License-Identifier: MIT
"""train_llama.py --bench-step: full rank and CompAct stepped side by side in one process, with the phase breakdown
of docs/benchmarks.md ("Training step time"). What is checked is the report (every configuration, its phases adding
up to the step, the ratio line), not a speed: a timed test would only measure the machine's load."""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import train_llama  # noqa: E402


@pytest.fixture
def corpus(tmp_path):
    # load_corpus reads every file without a dot in its name; 40 KiB of text (36 train, 4 validation chunks).
    text = b"".join(b"the quick brown fox %d jumps over the lazy dog.\n" % i for i in range(900))
    (tmp_path / "text").write_bytes(text)
    return str(tmp_path)


def parse_table(out):
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 11 and cells[0] not in ("config",):
            rows[cells[0]] = cells
    return rows


@pytest.mark.parametrize("sharing", ["per-layer", "shared"])
def test_bench_step_reports_full_rank_and_compact_with_phases(corpus, capsys, sharing):
    argv = ["--bench-step", "--config", "llama-tiny", "--batch", "2", "--context", "32", "--rank", "0.25",
            "--sharing", sharing, "--data-dir", corpus, "--bench-rounds", "3", "--bench-warmup", "1"]
    assert train_llama.main(argv) == 0
    out = capsys.readouterr().out
    rows = parse_table(out)
    assert set(rows) == {"full", f"compact-{sharing}-srht", f"compact-{sharing}-gaussian"}, out
    assert "64 tokens per step" in out and "medians of 3 rounds" in out
    for name, cells in rows.items():
        step, tok_s, ratio, fwd, sketch, bwd, ghat, opt, upd, other = cells[1:]
        # tokens/s is tokens / median step; the printed step is rounded to 0.1 ms (relative error 0.05 / step),
        # tokens/s to 1.
        want = 64e3 / float(step)
        assert abs(float(tok_s) - want) <= 0.5 + want * 0.05 / float(step)
        assert float(ratio) > 0
        for phase in (fwd, bwd, opt):
            assert 0 <= float(phase) <= float(step) * 1.5  # medians of phases need not add up exactly
        if name == "full":
            assert (sketch, ghat, upd) == ("-", "-", "-") and ratio == "1.000"
        else:
            # compact's parts are inside their phase in every round, so their medians are at most the phase's.
            assert 0 <= float(sketch) <= float(fwd) and 0 <= float(ghat) <= float(bwd)
            assert 0 <= float(upd) <= float(opt)
            assert f"{name}: {ratio}x full rank's tokens/s" in out


def test_timed_step_splits_the_step_into_phases_and_times_compacts_parts(corpus):
    args = train_llama.parse(["--config", "llama-tiny", "--batch", "2", "--context", "32", "--rank", "0.25",
                              "--sharing", "per-layer", "--dist", "srht", "--opt", "compact", "--data-dir", corpus])
    train, _, vocab = train_llama.load_corpus(corpus)
    model, _ = train_llama.build_model(args, vocab)
    opt = train_llama.build_optimizer(args, model)
    timer = train_llama.PhaseTimer()
    total = train_llama.timed_step(model, opt, args, train, 0, torch.device("cpu"), timer)
    t = timer.t
    assert t["total"] == total > 0
    assert t["forward"] + t["backward"] + t["optimizer"] + t["other"] == pytest.approx(total, rel=1e-9)
    # The wrapped operators ran (every compressed layer sketches, forms Ghat and is updated) inside their phases.
    assert 0 < t["sketch"] <= t["forward"] and 0 < t["ghat"] <= t["backward"]
    assert 0 < t["compressed_update"] <= t["optimizer"]
    # Nothing stays wrapped after the step.
    from compact_torch import _ext, optim
    assert _ext.ops is torch.ops.compact
    assert optim.CompressedAdamW._compressed_update.__name__ != "timed"
