# SPDX-License-Identifier: MIT
"""torch.compile(fullgraph=True) on compressed models: the operators trace through their fake kernels, siblings keep
one sketch in the compiled graph, the saved tensors are the sketches, and advancing the step does not recompile."""
import copy

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")

import compact_torch as ct  # noqa: E402
from conftest import tiny_llama  # noqa: E402

if not ct._ext.HAS_FAKE_KERNELS:
    pytest.skip(f"torch {torch.__version__} has neither torch.library.register_fake (2.4) nor impl_abstract (2.1): "
                "the operators run eagerly only", allow_module_level=True)

from torch._dynamo.backends.common import aot_autograd  # noqa: E402
from torch._functorch.partitioners import min_cut_rematerialization_partition  # noqa: E402


class Capture:
    """An aot_eager backend that keeps the forward and backward graphs and counts compilations. It partitions with
    inductor's min-cut partitioner, which runs the common-subexpression elimination that merges siblings' sketches."""

    def __init__(self):
        self.graphs, self.compiles = {}, 0

    def backend(self):
        def fw(gm, example_inputs):
            self.graphs["fw"] = gm
            self.compiles += 1
            return gm.forward

        def bw(gm, example_inputs):
            self.graphs["bw"] = gm
            return gm.forward

        from functorch.compile import make_boxed_func

        return aot_autograd(fw_compiler=lambda gm, ex: make_boxed_func(fw(gm, ex)),
                            bw_compiler=lambda gm, ex: make_boxed_func(bw(gm, ex)),
                            partition_fn=min_cut_rematerialization_partition)

    def calls(self, which, op):
        return [n for n in self.graphs[which].graph.nodes if n.op == "call_function" and str(n.target) == op]

    def saved(self):
        out = next(n for n in self.graphs["fw"].graph.nodes if n.op == "output")
        return [a for a in out.args[0] if hasattr(a, "meta")]


def llama_and_batch(dtype=torch.float32):
    model = ct.compress(tiny_llama(dtype=dtype), rank=0.25, period=2)
    ids = torch.randint(0, 40, (2, 16), generator=torch.Generator().manual_seed(0))
    return model, (ids, ids)


def hf_models():
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    torch.manual_seed(0)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32)).eval().double()
    roberta = transformers.RobertaForSequenceClassification(transformers.RobertaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=40, num_labels=3, pad_token_id=1)).eval()
    ids = torch.randint(3, 64, (2, 12), generator=torch.Generator().manual_seed(0))
    return {"llama": (llama, {"input_ids": ids, "labels": ids}),
            "roberta": (roberta.double(), {"input_ids": ids, "labels": torch.tensor([0, 2])})}


def loss_of(out):
    return out if torch.is_tensor(out) else out.loss


@pytest.mark.parametrize("which", ["ours", "hf-llama", "hf-roberta"])
def test_fullgraph_compile_merges_sibling_sketches_and_saves_only_them(which):
    if which == "ours":
        model, args = llama_and_batch(torch.float64)
        kwargs = {}
    else:
        model, kwargs = hf_models()[which[3:]]
        ct.compress(model, rank=0.25, period=2)
        args = ()
    loss_of(model(*args, **kwargs)).backward()  # the eager first forward decides which layers share a sketch
    eager = copy.deepcopy(model)
    for m in (model, eager):
        m.zero_grad(set_to_none=True)
    cap = Capture()
    compiled = torch.compile(model, fullgraph=True, backend=cap.backend())
    loss = loss_of(compiled(*args, **kwargs))
    loss.backward()
    want = loss_of(eager(*args, **kwargs))
    want.backward()
    # In float64: aot_eager runs eager's aten operations after functionalization and decomposition, and on the CPU
    # these give eager's bits.
    assert torch.equal(loss, want)
    layers = ct.compact_layers(model)
    groups = {id(layer._state) for layer in layers}
    sketches = cap.calls("fw", "compact.sketch.default")
    assert len(sketches) == len(groups) < len(layers)  # q/k/v (and gate/up) share one sketch in the graph
    assert len(cap.calls("bw", "compact.compressed_grad.default")) == len(layers)
    saved = cap.saved()
    assert all(s in saved for s in sketches)  # every z is saved for backward ...
    compressed_inputs = {n.args[0] for n in sketches}
    assert not compressed_inputs & set(saved)  # ... and no compressed layer's input is
    for a, b in zip(ct.compact_layers(model), ct.compact_layers(eager)):
        assert torch.equal(a.weight_ghat.grad, b.weight_ghat.grad)


def test_advancing_the_step_across_windows_does_not_recompile():
    model, args = llama_and_batch()
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-3)
    model(*args).backward()
    opt.zero_grad(set_to_none=True)
    cap = Capture()
    compiled = torch.compile(model, fullgraph=True, backend=cap.backend())
    for _ in range(5):  # period 2: windows 0, 0, 1, 1, 2 -- the state tensor is a graph input, read when run
        compiled(*args).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    assert cap.compiles == 1
    assert {layer.step for layer in ct.compact_layers(model)} == {5}


def test_compiling_before_the_sharing_is_decided_says_so():
    model, args = llama_and_batch()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception) as info:
        compiled(*args)
    chain = [info.value, info.value.__cause__, info.value.__context__]
    assert any("run one training forward before torch.compile" in str(e) for e in chain if e is not None)


def test_inductor_compiles_a_compressed_decoder_block():
    # The real backend, on one block of the LLaMA-style model (a few seconds of C++ compilation when cold).
    model, args = llama_and_batch(torch.float64)
    model(*args).backward()
    model.zero_grad(set_to_none=True)
    block = model.model.layers[0]
    eager = copy.deepcopy(block)
    x = torch.randn(2, 16, 128, generator=torch.Generator().manual_seed(1), dtype=torch.float64, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_(True)
    compiled = torch.compile(block, fullgraph=True)
    y, y_eager = compiled(x), eager(x_eager)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y.backward(dy)
    y_eager.backward(dy)
    # Inductor fuses and reorders the block's pointwise work and reductions (RMSNorm, softmax, the GEMMs' K loops).
    # In float64 a reordered length-K sum moves by at most 2 gamma_K of its absolute terms (Higham 3.1), 2 gamma_352
    # = 7.8e-14 for the longest (d_ff = 352); the block chains about ten such steps with condition numbers of order
    # 10 each, so differences stay below 1e-10 of the values' scale. A wrong P, z or missing term is O(1).
    tol = lambda t: 1e-10 * float(t.detach().abs().max())  # noqa: E731
    assert (y - y_eager).abs().max() <= tol(y_eager)
    assert (x.grad - x_eager.grad).abs().max() <= tol(x_eager.grad)
    for a, b in zip(ct.compact_layers(block), ct.compact_layers(eager)):
        assert (a.weight_ghat.grad - b.weight_ghat.grad).abs().max() <= tol(b.weight_ghat.grad)
