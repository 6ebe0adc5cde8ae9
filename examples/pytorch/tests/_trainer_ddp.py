# SPDX-License-Identifier: MIT
"""One rank of test_trainer.py's data-parallel test, run under torchrun: the Hugging Face Trainer on CPU with gloo
(accelerate builds torch's own DistributedDataParallel around the compressed model) for a few steps; saves the
initial and final weights and which wrapper the Trainer used."""
import json
import os
import sys

import torch

import compact_torch as ct
from test_trainer import Tokens, args, llama


def main(out_dir):
    rank = int(os.environ["RANK"])
    model = llama()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    training_args = args(out_dir, max_steps=3, per_device_train_batch_size=2, ddp_backend="gloo")
    opt = ct.CompressedAdamW(model.parameters(), lr=training_args.learning_rate, weight_decay=0.0)
    import transformers

    trainer = transformers.Trainer(model=model, args=training_args, train_dataset=Tokens(), optimizers=(opt, None))
    trainer.train()
    wrapped = trainer.model_wrapped
    torch.save({"initial": initial, "final": model.state_dict()}, os.path.join(out_dir, f"rank{rank}.pt"))
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"ddp": type(wrapped).__name__, "world": torch.distributed.get_world_size()}, f)


if __name__ == "__main__":
    main(sys.argv[1])
