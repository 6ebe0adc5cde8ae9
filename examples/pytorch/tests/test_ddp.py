# SPDX-License-Identifier: MIT
"""Two-process gloo DDP equals single-process training on the concatenated batch, and all-reduces Ghat (m x r).

Exact part: DDP averages the ranks' gradients as g_a / 2 + g_b / 2 (DDP divides by the world size, gloo sums).
Halving is exact in binary floating point and every backward operation is linear in the loss gradient, so one
process that runs backward on each half with the loss halved and lets autograd accumulate computes the same sum,
bit for bit; with the same CompressedAdamW update on every rank the whole trajectory is then bitwise identical.
Tolerance part: that average differs from the gradient of the concatenated batch only by the order of the sums
over tokens; see test_reduced_gradient_equals_concatenated_batch_gradient for the bound.
"""
import os
import socket

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

import _ddp_worker as worker  # noqa: E402
import compact_torch as ct  # noqa: E402
from conftest import gamma  # noqa: E402

WORLD = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    port = free_port()
    mp.spawn(worker.spawn_main, args=(WORLD, port, str(out)), nprocs=WORLD, join=True)
    return {(rank, compact): torch.load(os.path.join(out, f"rank{rank}_{int(compact)}.pt"))
            for rank in range(WORLD) for compact in (False, True)}


def halves_step(model, step):
    """The gradient DDP forms, in one process: backward on each rank's half with the loss halved."""
    ids = worker.global_batch(step)
    per = worker.GLOBAL_BATCH // WORLD
    for rank in range(WORLD):
        part = ids[rank * per:(rank + 1) * per]
        (model(part, part) / WORLD).backward()


@pytest.mark.parametrize("compact", [False, True], ids=["full", "compact"])
def test_ddp_trajectory_is_bitwise_the_averaged_halves_trajectory(ddp_runs, compact):
    torch.set_num_threads(1)
    model, opt = worker.build(compact)
    for step in range(worker.STEPS):
        halves_step(model, step)
        for rank in range(WORLD):
            got = ddp_runs[(rank, compact)]["log"][step]["grads"]
            mine = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
            assert got.keys() == mine.keys()
            for name in mine:
                assert torch.equal(got[name], mine[name]), (step, rank, name)
        opt.step()
        opt.zero_grad(set_to_none=True)
    for rank in range(WORLD):
        final = ddp_runs[(rank, compact)]["final"]
        for (name, a), b in zip(model.state_dict().items(), final.values()):
            assert torch.equal(a, b) if torch.is_tensor(a) else a == b, name


@pytest.mark.parametrize("compact", [False, True], ids=["full", "compact"])
def test_reduced_gradient_equals_concatenated_batch_gradient(ddp_runs, compact):
    # At the parameters DDP had at each step, compare DDP's reduced gradient (bitwise the averaged halves, see
    # above) with the single-process gradient of the concatenated batch. Every parameter gradient is a sum over the
    # K = 64 tokens of a product a_k b_k of per-token factors (dy and x for a weight, dy and z for Ghat, dy and the
    # one-hot token for the embedding, dy and the normalized input for an RMSNorm weight). Summed in two different
    # orders, each is within gamma_K sum_k |a_k b_k| of exact (Higham 3.1); and the factors themselves, computed by
    # batched kernels of different sizes, may differ in their last bits between the runs (measured here as da, db).
    # So |g_concat - g_ddp| <= 2 gamma_K (|a| + |da|)^T (|b| + |db|) + |da|^T |b| + |a|^T |db| + |da|^T |db|, entry
    # by entry: what reordering explains. A wrong reduction (a missing average, a rank's P differing) breaks it by
    # orders of magnitude.
    torch.set_num_threads(1)
    tokens = worker.GLOBAL_BATCH * worker.CONTEXT
    for step in range(worker.STEPS):
        log = ddp_runs[(0, compact)]["log"][step]
        runs = []
        for split in (False, True):
            model, _ = worker.build(compact)
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if p.stride() != (0, 0):
                        p.copy_(log["params"][name])
            for layer in ct.compact_layers(model):
                layer.step = step
            factors = capture_factors(model)
            if split:
                halves_step(model, step)
            else:
                ids = worker.global_batch(step)
                model(ids, ids).backward()
            runs.append((model, {name: f() for name, f in factors.items()}))
        (concat, fa), (_, fb) = runs
        g = gamma(tokens, torch.float64)
        for name, p in concat.named_parameters():
            if p.grad is None:
                continue
            a, b = fa[name]
            da, db = (fb[name][0] - a).abs(), (fb[name][1] - b).abs()
            a, b = a.abs(), b.abs()
            bound = (2 * g * (a + da).T @ (b + db) + da.T @ b + a.T @ db + da.T @ db).reshape(p.shape)
            diff = (p.grad - log["grads"][name]).abs()
            assert (diff <= bound).all(), (step, name, float(diff.max()), float(bound.max()))
            # Control: a reduction that forgot to average (sum of the ranks' gradients) is far outside the bound.
            assert not ((p.grad - WORLD * log["grads"][name]).abs() <= bound).all(), name


def capture_factors(model):
    """For every parameter with a gradient, a callable giving per-token factors (a, b), K x m and K x n, with the
    gradient = a^T b = sum over tokens k of a_k^T b_k. Factors of several backward passes (the two halves) are
    concatenated in token order."""
    from compact_torch.llama import LlamaRMSNorm

    kinds = (torch.nn.Linear, ct.CompactLinear, torch.nn.Embedding, LlamaRMSNorm)
    store = {}

    def attach(prefix, module):
        # Forward hooks and tensor hooks on the outputs observe without changing the graph (a full backward hook
        # would insert a node and change the order in which the output's gradient contributions are added).
        store[prefix] = {"x": [], "dy": []}

        def fwd(mod, inputs, output):
            store[prefix]["x"].append(inputs[0].detach())
            if output.requires_grad:
                output.register_hook(lambda grad: store[prefix]["dy"].append(grad.detach()))

        module.register_forward_hook(fwd)

    factors = {}
    for mod_name, module in model.named_modules():
        if not isinstance(module, kinds):
            continue
        attach(mod_name, module)
        prefix = mod_name + "."

        def make(mod_name=mod_name, module=module):
            x = torch.cat([t.reshape(-1, t.shape[-1]) if t.dim() > 1 else t.reshape(-1, 1)
                           for t in store[mod_name]["x"]])
            dy = torch.cat([t.reshape(-1, t.shape[-1]) for t in store[mod_name]["dy"]])
            if isinstance(module, ct.CompactLinear):
                return dy, ct.sketch(x, module.rank, *module.sketch_state(), module.dist)
            if isinstance(module, torch.nn.Linear):
                return dy, x
            if isinstance(module, torch.nn.Embedding):
                return torch.nn.functional.one_hot(x.reshape(-1), module.num_embeddings).to(dy.dtype), dy
            xhat = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + module.eps)  # RMSNorm: grad = sum dy * xhat
            return dy * xhat, torch.ones(x.shape[0], 1, dtype=x.dtype)  # a^T b is n x 1

        key = prefix + ("weight_ghat" if isinstance(module, ct.CompactLinear) else "weight")
        factors[key] = make
    return factors


def test_all_reduce_carries_ghat_not_the_weight(ddp_runs):
    model_full, _ = worker.build(False)
    model_compact, _ = worker.build(True)
    elt = 8  # float64
    layers = ct.compact_layers(model_compact)
    ghat_bytes = sum(layer.out_features * layer.rank * elt for layer in layers)
    weight_bytes = sum(layer.out_features * layer.in_features * elt for layer in layers)
    dense_bytes = sum(p.numel() * elt for p in model_compact.parameters()
                      if p.requires_grad and ct.owner_of(p) is None)
    full_bytes = sum(p.numel() * elt for p in model_full.parameters())
    assert full_bytes == dense_bytes + weight_bytes
    for step in range(worker.STEPS):
        for rank in range(WORLD):
            full_log = ddp_runs[(rank, False)]["log"][step]
            log = ddp_runs[(rank, True)]["log"][step]
            assert full_log["total_bytes"] == full_bytes and full_log["compressed_bytes"] == 0
            assert log["compressed_bytes"] == ghat_bytes  # r/n of the compressed layers' m x n: here 1/4
            assert log["total_bytes"] == dense_bytes + ghat_bytes
    assert ghat_bytes * 4 == weight_bytes


def test_ranks_that_disagree_on_a_sketch_state_raise_before_reducing(tmp_path):
    mp.spawn(worker.mismatch_main, args=(WORLD, free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        message = open(os.path.join(tmp_path, f"mismatch{rank}.txt")).read()
        assert "ranks disagree on the sketch state of layer 'model.layers.1.mlp.down_proj'" in message, message
        assert "rank 0: seed 5, stream 11, period 2, step 0, r = 88" in message, message
        assert "rank 1: seed 5, stream 11, period 2, step 7, r = 88" in message, message


def test_torch_own_ddp_trains_a_compressed_model_as_compact_ddp_does(ddp_runs, tmp_path):
    """The frameworks build torch.nn.parallel.DistributedDataParallel themselves: on a compress()ed model its
    constructor must not write into the zero-stride placeholders, and CompressedAdamW's own all-reduce of Ghat must
    give compact_torch.DistributedDataParallel's trajectory bit for bit (both divide by the world size, then sum)."""
    mp.spawn(worker.torch_ddp_main, args=(WORLD, free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    model, _ = worker.build(True)
    elt = 8  # float64
    dense_bytes = sum(p.numel() * elt for p in model.parameters() if p.requires_grad and ct.owner_of(p) is None)
    for rank in range(WORLD):
        got = torch.load(os.path.join(tmp_path, f"torch_ddp{rank}.pt"))
        want = ddp_runs[(rank, True)]["final"]
        for (name, a), b in zip(got["final"].items(), want.values()):
            assert torch.equal(a, b) if torch.is_tensor(a) else a == b, name
        assert [entry["total_bytes"] for entry in got["log"]] == [dense_bytes] * worker.STEPS  # dense only
