"""What DDP and FSDP2 do differently, side by side: how the model is wrapped, where mixed
precision casts, and how checkpoints are written and read. Everything else is the same
loop (training.py).

- DDP (chapter 6): every process holds the whole model; gradients are all-reduced in
  buckets while the backward pass runs (chapter 17); rank 0 writes one checkpoint file.
- FSDP2 (chapter 15): each layer's weights, gradients and optimizer state are sharded over
  the processes, gathered just before the layer runs and freed after; every rank writes
  its own shards with Distributed Checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

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
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def atomic_write(path: Path, write) -> None:
    """`write(file)` into a temporary file, flushed to disk, then renamed to `path`: a crash
    while writing leaves the previous file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


class DDPStrategy:
    """DistributedDataParallel: the whole model on every process."""

    recipe = "torch_ddp"

    def __init__(self, args, device: torch.device, precision: str, rank: int) -> None:
        self.args, self.device, self.precision, self.rank = args, device, precision, rank
        self.out = Path(args.out)
        self.checkpoint = self.out / "checkpoint.pt"

    def compile(self, model: nn.Module) -> None:
        """torch.compile the whole model, in place, before DDP wraps it: TorchDynamo's
        DDPOptimizer splits its graph at the buckets so the all-reduces still overlap."""
        model.compile()

    def wrap(self, model: nn.Module) -> nn.Module:
        """Every process holds the whole model; DDP broadcasts rank 0's weights and
        all-reduces the gradients in buckets while the backward pass runs."""
        return nn.parallel.DistributedDataParallel(
            model,
            device_ids=[self.device.index] if self.device.type == "cuda" else None,
            bucket_cap_mb=self.args.bucket_cap_mb,
        )

    def autocast(self):
        """Where the forward pass computes in bfloat16 (the weights stay float32)."""
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def save(self, model, optimizer, scheduler, progress: dict) -> None:
        """Rank 0 writes a temporary file and renames it over the checkpoint."""
        if self.rank == 0:
            state = {
                "model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "progress": progress,
            }
            atomic_write(self.checkpoint, lambda file: torch.save(state, file))
        dist.barrier()  # every rank knows the checkpoint is complete

    def latest(self) -> str | None:
        """What this rank sees to resume from: the checkpoint's modification time, or None."""
        if not self.checkpoint.exists():
            return None
        return f"{self.checkpoint.name} of {self.checkpoint.stat().st_mtime_ns}"

    def restore(self, model, optimizer, scheduler) -> dict:
        """Load the checkpoint on every rank; return its progress."""
        state = torch.load(self.checkpoint, map_location=self.device, weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        return state["progress"]

    def whole_weights(self, model) -> dict[str, torch.Tensor]:
        """The trained weights (all ranks call this; rank 0 writes them)."""
        return {name: w.cpu() for name, w in model.module.state_dict().items()}

    def write_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """OUT/model.pt, the whole trained weights (rank 0)."""
        atomic_write(self.out / "model.pt", lambda file: torch.save(weights, file))


class FSDPStrategy(DDPStrategy):
    """FSDP2 (`fully_shard`): weights, gradients and optimizer state sharded."""

    recipe = "torch_fsdp"

    def wrap(self, model: nn.Module) -> nn.Module:
        """Each layer with weights (the transformer: each block) becomes one unit of
        sharding (its weights gathered just before it runs and freed after), then the
        whole model (the rest); in bf16, the gathered weights are bfloat16 and gradients
        are averaged in float32."""
        mesh = init_device_mesh(self.device.type, (dist.get_world_size(),))
        policy = MixedPrecisionPolicy()
        if self.precision == "bf16":
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for unit in self.units(model):
            fully_shard(unit, mesh=mesh, mp_policy=policy)
        return fully_shard(model, mesh=mesh, mp_policy=policy)

    @staticmethod
    def units(model: nn.Module) -> list[nn.Module]:
        """The units of sharding below the whole model: the transformer's blocks, as is
        usual, or each layer with weights of its own."""
        if hasattr(model, "blocks"):
            return list(model.blocks)
        return [
            layer
            for layer in model.modules()
            if layer is not model and any(True for _ in layer.parameters(recurse=False))
        ]

    def compile(self, model: nn.Module) -> None:
        """torch.compile each unit's forward before fully_shard wraps it (torchtitan
        compiles each block): FSDP2's hooks, which gather and reduce-scatter, run eagerly
        around it. Not `unit.compile()`: TorchDynamo skips the calls of FSDP2's hooks,
        and with them a torch.nn layer's own forward (the CNN's units)."""
        for unit in self.units(model):
            unit.forward = torch.compile(unit.forward)

    def autocast(self):
        """No autocast: the MixedPrecisionPolicy of `wrap` casts instead."""
        return contextlib.nullcontext()

    def save(self, model, optimizer, scheduler, progress: dict) -> None:
        """Every rank writes its shards into a new folder (`OUT/checkpoint-STEPS-epochE-S`);
        once all have, rank 0 points `OUT/latest` at it (an atomic rename) and removes the
        older folders."""
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
            atomic_write(self.out / "latest", lambda file: file.write(name.encode()))
            for old in self.out.glob("checkpoint-*"):
                if old.name != name:
                    shutil.rmtree(old, ignore_errors=True)
        dist.barrier()

    def latest(self) -> str | None:
        """The checkpoint folder `OUT/latest` names, if there is one."""
        latest = self.out / "latest"
        return latest.read_text().strip() if latest.exists() else None

    def restore(self, model, optimizer, scheduler) -> dict:
        """Each rank reads its shards of the checkpoint `latest` names (with another
        number of processes, Distributed Checkpoint splits the state anew)."""
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
