# SPDX-License-Identifier: MIT
"""The Hugging Face Trainer with compressed models, on the pinned transformers and accelerate (CPU, tiny stock LLaMA,
nothing downloaded): CompressedAdamW passed in, resume_from_checkpoint, gradient accumulation, gradient
checkpointing, bf16, a PEFT LoRA model, the logged learning rate and gradient norm, the error when the Trainer builds
its own optimizer, and data parallelism through torchrun (two gloo processes, torch's own DDP as accelerate builds
it)."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="compact_torch needs torch (Debian: apt-get install python3-torch)")
transformers = pytest.importorskip("transformers", reason="the Trainer tests need transformers (and torch >= 2)")
pytest.importorskip("accelerate", reason="the Trainer needs accelerate (pip install -c constraints.txt accelerate)")

import compact_torch as ct  # noqa: E402

VOCAB, T = 64, 16
HERE = os.path.dirname(os.path.abspath(__file__))


class Tokens(torch.utils.data.Dataset):
    """n fixed random sequences of T tokens (labels = inputs: the model shifts them)."""

    def __init__(self, n=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (n, T), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, k):
        return {"input_ids": self.ids[k], "labels": self.ids[k]}


def llama(seed=0, dtype=torch.float32, peft=False):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, max_position_embeddings=32, use_cache=False)
    model = transformers.LlamaForCausalLM(config).to(dtype)
    if peft:
        import peft as peft_lib

        model = peft_lib.get_peft_model(model, peft_lib.LoraConfig(r=8, lora_alpha=16, target_modules=[
            "q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj"], init_lora_weights=False))
    return ct.compress(model, rank=0.5, period=2, seed=3)


def args(tmp_path, **kw):
    base = dict(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=4, learning_rate=1e-2,
                logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, seed=0, data_seed=0,
                dataloader_num_workers=0, lr_scheduler_type="linear", disable_tqdm=True)
    base.update(kw)
    return transformers.TrainingArguments(**base)


def trainer(model, training_args, data=None, **kw):
    opt = ct.CompressedAdamW(model.parameters(), lr=training_args.learning_rate, weight_decay=0.0)
    return transformers.Trainer(model=model, args=training_args, train_dataset=data if data is not None else Tokens(),
                                optimizers=(opt, None), **kw)


def losses(t):
    return [h["loss"] for h in t.state.log_history if "loss" in h]


def test_the_trainer_trains_a_compressed_model_and_logs_its_learning_rate_and_gradient_norm(tmp_path):
    t = trainer(llama(), args(tmp_path, max_steps=8), data=Tokens(n=4))  # one batch, seen every step: it is learnt
    t.train()
    logs = [h for h in t.state.log_history if "loss" in h]
    assert len(logs) == 8 and logs[-1]["loss"] < logs[0]["loss"]
    # The linear schedule, as the Trainer logs it (the rate the step used).
    assert [h["learning_rate"] for h in logs] == pytest.approx([1e-2 * (8 - k) / 8 for k in range(8)])
    # The gradient norm covers the compressed gradients Ghat: E||G P||^2 = ||G||^2 for P with E[P P^T] = I, so it
    # estimates the full gradient's norm; it is never 0 (GaLore's layer-wise mode logs 0).
    assert all(h["grad_norm"] > 0 for h in logs)


def test_resuming_from_a_checkpoint_gives_the_uninterrupted_run_bit_for_bit(tmp_path):
    straight = trainer(llama(), args(tmp_path / "a", max_steps=6))
    straight.train()
    first = trainer(llama(), args(tmp_path / "b", max_steps=6, save_strategy="steps", save_steps=3))
    first.train()
    resumed_model = llama(seed=9)  # other weights: the checkpoint must restore everything
    resumed = trainer(resumed_model, args(tmp_path / "b", max_steps=6))
    resumed.train(resume_from_checkpoint=str(tmp_path / "b" / "checkpoint-3"))
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert [layer.step for layer in ct.compact_layers(resumed_model)] == [6] * len(ct.compact_layers(resumed_model))


def test_gradient_accumulation_equals_the_larger_batch(tmp_path):
    """Batch 4 in one step against 2 + 2 accumulated: the Trainer divides the summed token losses by the step's token
    count either way, so the gradients differ only by the order of their sums: in float64, relative to the sum of
    magnitudes, within gamma_64 ~ 7e-15 per sum; 1e-11 leaves room for the few dependent sums before them."""
    grads = []

    class Capture(transformers.TrainerCallback):
        def on_pre_optimizer_step(self, a, state, control, model=None, **kw):
            grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})

    for batch, accum in ((4, 1), (2, 2)):
        t = trainer(llama(dtype=torch.float64), args(tmp_path / f"{accum}", max_steps=1,
                                                       per_device_train_batch_size=batch,
                                                       gradient_accumulation_steps=accum), callbacks=[Capture()])
        t.train()
    big, small = grads
    assert big.keys() == small.keys()
    for name in big:
        scale = big[name].abs().max().clamp_min(1e-300)
        assert ((big[name] - small[name]).abs().max() / scale) < 1e-11, name


def test_gradient_checkpointing_gives_the_same_first_loss_and_trains(tmp_path):
    plain = trainer(llama(), args(tmp_path / "p", max_steps=2))
    plain.train()
    ckpt = trainer(llama(), args(tmp_path / "c", max_steps=2, gradient_checkpointing=True))
    ckpt.train()
    assert losses(plain)[0] == losses(ckpt)[0]
    assert all(torch.isfinite(torch.tensor(losses(ckpt))))


def test_bf16_autocast_trains(tmp_path):
    t = trainer(llama(), args(tmp_path, max_steps=4, bf16=True))
    t.train()
    assert all(torch.isfinite(torch.tensor(losses(t))))


def test_a_peft_lora_model_trains_under_the_trainer_and_its_frozen_weights_stay(tmp_path):
    pytest.importorskip("peft")
    model = llama(peft=True)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters()
              if not p.requires_grad and "lora_A" not in n}
    t = trainer(model, args(tmp_path, max_steps=4), data=Tokens(n=4))
    t.train()
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n
    assert losses(t)[-1] < losses(t)[0]


@pytest.mark.skipif(not hasattr(torch.Tensor, "register_post_accumulate_grad_hook"),
                    reason=f"layer-wise updates need torch >= 2.1; this is torch {torch.__version__}")
def test_a_layerwise_optimizer_with_accumulation_gives_the_plain_trainer_run_bit_for_bit(tmp_path):
    """optimizers=(CompressedAdamW(layerwise=True, accumulation_steps=2), None) with gradient_accumulation_steps=2 and
    max_grad_norm=0: the parameters are stepped inside the second backward pass of each step, with the learning rate
    the scheduler set; the Trainer's step() and zero_grad() find nothing left to do. With clipping on, the Trainer
    stops at its first optimizer step with the reason."""
    runs = []
    for layerwise in (False, True):
        model = llama()
        a = args(tmp_path / str(layerwise), max_steps=4, per_device_train_batch_size=2, gradient_accumulation_steps=2,
                 max_grad_norm=0.0)
        kw = dict(layerwise=True, accumulation_steps=2) if layerwise else {}
        opt = ct.CompressedAdamW(model.parameters(), lr=a.learning_rate, weight_decay=0.0, **kw)
        t = transformers.Trainer(model=model, args=a, train_dataset=Tokens(), optimizers=(opt, None))
        t.train()
        runs.append((model, [h for h in t.state.log_history if "loss" in h]))
    (plain, plain_logs), (lw, lw_logs) = runs
    for (name, x), y in zip(plain.state_dict().items(), lw.state_dict().values()):
        assert torch.equal(x, y), name
    for key in ("loss", "learning_rate"):
        assert [h[key] for h in plain_logs] == [h[key] for h in lw_logs], key
    # The Trainer computes the logged norm from .grad (through accelerate), which the layer-wise steps freed.
    assert [h["grad_norm"] for h in lw_logs] == [0.0] * 4 and all(h["grad_norm"] > 0 for h in plain_logs)
    assert len({h["learning_rate"] for h in lw_logs}) == 4  # the scheduler moved the rate the steps used

    model = llama()
    opt = ct.CompressedAdamW(model.parameters(), lr=1e-2, layerwise=True, accumulation_steps=2)
    t = transformers.Trainer(model=model, args=args(tmp_path / "clip", max_steps=1, per_device_train_batch_size=2,
                                                    gradient_accumulation_steps=2, max_grad_norm=1.0),
                             train_dataset=Tokens(), optimizers=(opt, None))
    with pytest.raises(ct.CompactError, match="max_grad_norm = 1.0.*cannot clip by the global norm.*max_grad_norm=0"):
        t.train()


@pytest.mark.skipif(not hasattr(torch.Tensor, "register_post_accumulate_grad_hook"),
                    reason=f"layer-wise updates need torch >= 2.1; this is torch {torch.__version__}")
def test_a_layerwise_optimizer_under_gradient_checkpointing_gives_the_plain_run(tmp_path):
    """gradient_checkpointing=True (non-reentrant, transformers' default) recomputes each block inside the same
    backward pass, before its parameters get their gradients: the same weights bit for bit."""
    finals = []
    for layerwise in (False, True):
        model = llama()
        a = args(tmp_path / str(layerwise), max_steps=3, max_grad_norm=0.0, gradient_checkpointing=True)
        opt = ct.CompressedAdamW(model.parameters(), lr=a.learning_rate, weight_decay=0.0, layerwise=layerwise)
        transformers.Trainer(model=model, args=a, train_dataset=Tokens(), optimizers=(opt, None)).train()
        finals.append(model.state_dict())
    for (name, x), y in zip(finals[0].items(), finals[1].values()):
        assert torch.equal(x, y), name


def test_the_trainer_building_its_own_optimizer_raises_a_clear_error(tmp_path):
    import torch.optim.optimizer as optimizer_module

    if not hasattr(optimizer_module, "register_optimizer_step_pre_hook"):
        pytest.skip("torch without global optimizer hooks")
    t = transformers.Trainer(model=llama(), args=args(tmp_path, max_steps=1), train_dataset=Tokens())
    with pytest.raises(ct.CompactError, match="optimizers=.*CompressedAdamW"):
        t.train()


def test_data_parallel_through_torchrun_and_accelerate(tmp_path):
    """Two gloo processes under torchrun: the Trainer (accelerate) builds torch's own DistributedDataParallel around
    the compressed model; both ranks end with the same weights, and they moved."""
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("no gloo")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE] + sys.path), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           os.path.join(HERE, "_trainer_ddp.py"), str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    states = [torch.load(os.path.join(tmp_path, f"rank{r}.pt")) for r in range(2)]
    for (name, a), b in zip(states[0]["final"].items(), states[1]["final"].values()):
        assert torch.equal(a, b), name
    assert any(not torch.equal(a, b) for a, b in zip(states[0]["final"].values(), states[0]["initial"].values()))
    info = json.load(open(os.path.join(tmp_path, "rank0.json")))
    assert info["ddp"] == "DistributedDataParallel" and info["world"] == 2
