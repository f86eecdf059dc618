"""Train a small CNN (or, with --model transformer, the small transformer) with its weights,
gradients and optimizer state sharded over the processes by PyTorch FSDP2 (`fully_shard`),
with sharded checkpoints written by Distributed Checkpoint. A recipe to copy, with
`torch_ddp.py` (it trains the same way and this file changes only what FSDP does
differently), `data.py` and `transformer.py`, to a machine with GPUs:

    # 1 GPU
    torchrun --standalone --nproc_per_node=1 torch_fsdp.py --epochs 5
    # 8 GPUs on one machine
    torchrun --standalone --nproc_per_node=8 torch_fsdp.py --epochs 5
    # 2 machines with 8 GPUs each: this command on both, HOST being the first machine's
    # address; --out on a filesystem both machines see (each rank writes its own shards)
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \
        --rdzv-id=digits-run-1 --max-restarts=3 torch_fsdp.py --epochs 5 --out /shared/run1

Where the book explains each part:
- fully_shard on each layer and on the whole model, bfloat16 weights in the forward and
  backward passes (MixedPrecisionPolicy), Distributed Checkpoint: chapter 15
- everything else (torchrun and machines, checkpoints and SIGTERM, the learning-rate rule
  and warm-up): as in torch_ddp.py, chapters 6, 8, 9 and 12

Checkpoints are folders `OUT/checkpoint-STEPS-epochE-S` (steps in all, then the epoch
and the step in it); `OUT/latest` names the newest complete one. A run started again with
the same --out resumes from it: exactly where it stopped with the same number of processes;
with another, Distributed Checkpoint splits the state anew and the epoch runs from its first
step. Rank 0 also writes the whole trained weights to `OUT/model.pt`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch_ddp import DDPTraining, _atomic_write, make_parser, run


class FSDPTraining(DDPTraining):
    """Sharding, mixed precision and checkpoints for FSDP2."""

    recipe = "torch_fsdp"

    def wrap(self, model: nn.Module) -> nn.Module:
        """Each layer with weights (the transformer: each block) becomes one unit of
        sharding (its weights gathered just before it runs and freed after), then the
        whole model (the rest); in bf16, the gathered
        weights are bfloat16 and gradients are averaged in float32."""
        mesh = init_device_mesh(self.device.type, (dist.get_world_size(),))
        policy = MixedPrecisionPolicy()
        if self.precision == "bf16":
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if hasattr(model, "blocks"):  # the transformer: one unit per block, as is usual
            units = list(model.blocks)
        else:
            units = [
                layer
                for layer in model.modules()
                if layer is not model and any(True for _ in layer.parameters(recurse=False))
            ]
        for unit in units:
            fully_shard(unit, mesh=mesh, mp_policy=policy)
        return fully_shard(model, mesh=mesh, mp_policy=policy)

    def autocast(self):
        """No autocast: the MixedPrecisionPolicy of `wrap` casts instead."""
        return contextlib.nullcontext()

    def save(self, model, optimizer, scheduler, progress: dict) -> None:
        """Every rank writes its shards into a new folder; once all have, rank 0 points
        `latest` at it (an atomic rename) and removes the older folders."""
        # the steps in all only grow, so a new checkpoint never overwrites the last one
        name = f"checkpoint-{progress['global_step']}-epoch{progress['epoch']}-{progress['step']}"
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {
            "model": model_state,
            "optimizer": optimizer_state,
            "scheduler": scheduler.state_dict(),
            "progress": progress,
        }
        dcp.save(state, checkpoint_id=self.out / name)  # returns when all ranks have written
        if self.rank == 0:
            _atomic_write(self.out / "latest", lambda file: file.write(name.encode()))
            for old in self.out.glob("checkpoint-*"):
                if old.name != name:
                    shutil.rmtree(old, ignore_errors=True)
        dist.barrier()

    def latest(self) -> str | None:
        """The checkpoint folder `OUT/latest` names, if there is one."""
        latest = self.out / "latest"
        return latest.read_text().strip() if latest.exists() else None

    def restore(self, model, optimizer, scheduler) -> dict:
        """Each rank reads its shards of the checkpoint `latest` names."""
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {
            "model": model_state,
            "optimizer": optimizer_state,
            "scheduler": scheduler.state_dict(),
            "progress": {"epoch": 0, "step": 0, "global_step": 0, "world_size": 0},
        }
        dcp.load(state, checkpoint_id=self.out / self.latest())
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
        )
        scheduler.load_state_dict(state["scheduler"])
        return state["progress"]

    def whole_weights(self, model) -> dict[str, torch.Tensor]:
        """The whole weights, gathered from the shards onto rank 0's CPU (every rank must
        call this; the others get an empty dict)."""
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_model_state_dict(model, options=options)


@record  # torchrun's failure summary then shows the failing rank's traceback
def main(argv: list[str] | None = None) -> None:
    parser = make_parser("torch_fsdp", "Sharded data-parallel training with PyTorch FSDP2.")
    run(parser.parse_args(argv), FSDPTraining, "torch_fsdp.py")


if __name__ == "__main__":
    main()
    # Leave now: in Python's teardown, a gloo thread freeing a finished
    # collective can abort the process (pytorch/pytorch#117762).
    sys.stdout.flush()
    os._exit(0)
