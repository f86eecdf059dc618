"""Sharded data parallelism (chapter 13): what each device holds under ZeRO's stages, ZeRO-1
written by hand, PyTorch's FSDP2 with its collectives counted and its sharded checkpoint,
and what recomputing activations saves.

The workers run in new processes (`utils.pytorch_ddp.run_ranks`), so they live in this
importable module. All of them train in float64, so that only the order of additions can
tell a sharded run from one process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import TensorDataset

from utils.checks import check_int
from utils.pytorch_ddp import join_process_group, load_data, make_model

#: What each device keeps, from ZeRO's paper (Rajbhandari et al., 2020): mixed-precision Adam
#: holds 16-bit weights and gradients (2 bytes each per parameter) and, in float32, a master
#: copy of the weights, Adam's two moments (12 bytes).
MIXED_PRECISION_ADAM = {"weights": 2, "gradients": 2, "optimizer state": 12}

#: Which of the three kinds of state each stage splits over the devices.
SHARDED = {
    "replicated": (),
    "ZeRO-1": ("optimizer state",),
    "ZeRO-2": ("optimizer state", "gradients"),
    "ZeRO-3 / FSDP": ("optimizer state", "gradients", "weights"),
}


def bytes_per_device(
    parameters: int,
    devices: int,
    stage: str,
    bytes_per_parameter: dict[str, float] = MIXED_PRECISION_ADAM,
) -> dict[str, float]:
    """The bytes of weights, gradients and optimizer state one device holds when a model of
    `parameters` parameters is trained on `devices` devices under `stage` (a key of
    `SHARDED`); activations and buffers come on top.

    Introduced in chapter 13. A sharded kind takes 1/devices of its bytes on each device.
    """
    check_int("bytes_per_device: parameters", parameters)
    check_int("bytes_per_device: devices", devices)
    if stage not in SHARDED:
        raise ValueError(
            f"bytes_per_device: stage {stage!r} is not one of {', '.join(SHARDED)}."
        )
    return {
        kind: parameters * size / (devices if kind in SHARDED[stage] else 1)
        for kind, size in bytes_per_parameter.items()
    }


def step_batches(examples: int, global_batch: int, steps: int) -> list[torch.Tensor]:
    """The example indices of each step's global batch: consecutive, in order, so a sharded
    run and one process see the same batches. Introduced in chapter 13."""
    check_int("step_batches: global_batch", global_batch)
    check_int("step_batches: steps", steps)
    if global_batch * steps > examples:
        raise ValueError(
            f"step_batches: {steps} steps of {global_batch} need {global_batch * steps} "
            f"examples, and there are {examples}; lower the steps or the batch."
        )
    return [
        torch.arange(s * global_batch, (s + 1) * global_batch) for s in range(steps)
    ]


def rank_part(batch: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank `rank`'s equal part of a global batch. Introduced in chapter 13."""
    check_int("rank_part: world_size", world_size)
    if len(batch) % world_size:
        raise ValueError(
            f"rank_part: a global batch of {len(batch)} does not split into {world_size} "
            "equal parts; make it a multiple of the number of processes."
        )
    size = len(batch) // world_size
    return batch[rank * size : (rank + 1) * size]


def _loss(model: nn.Module, data: TensorDataset, indices, device) -> torch.Tensor:
    images, labels = data.tensors
    return nn.functional.cross_entropy(
        model(images[indices].to(device)), labels[indices].to(device)
    )


def train_adam_one_process(
    data: TensorDataset, *, global_batch: int, steps: int, lr: float, seed: int
) -> nn.Module:
    """One process, Adam, float64, on the batches of `step_batches`: the reference the
    sharded runs of chapter 13 are compared with."""
    model = make_model(seed, torch.float64)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for batch in step_batches(len(data), global_batch, steps):
        optimizer.zero_grad()
        _loss(model, data, batch, "cpu").backward()
        optimizer.step()
    return model


def _state_elements(optimizer: torch.optim.Optimizer) -> int:
    """The elements of the optimizer's per-parameter tensors on this process (Adam's two
    moments; the step counters are scalars and left out)."""
    return sum(
        _local(value).numel()
        for state in optimizer.state.values()
        for value in state.values()
        if torch.is_tensor(value) and value.dim() > 0
    )


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """The part of a (possibly sharded) tensor that lives on this process."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def zero1_worker(
    rank: int,
    world_size: int,
    port: int,
    data_file: str,
    out_dir: str,
    global_batch: int,
    steps: int,
    lr: float,
    seed: int,
) -> None:
    """ZeRO stage 1 by hand: every process keeps the whole model and all-reduces the
    gradients as DDP does, but holds Adam's state for one slice of the weights only,
    updates that slice, and all-gathers the slices into the whole model.

    Introduced in chapter 13. Rank 0 writes `zero1.pt` (the weights) and each rank
    `zero1_rank{r}.json` (the elements of weights and optimizer state it holds).
    """
    out, data = Path(out_dir), load_data(data_file)
    device = join_process_group(rank, world_size, port)
    try:
        model = make_model(seed, torch.float64).to(device)
        weights = list(model.parameters())
        flat = nn.utils.parameters_to_vector(weights)
        size = -(-flat.numel() // world_size)  # the slice, padded to divide
        padded = torch.zeros(size * world_size, dtype=flat.dtype, device=device)
        padded[: flat.numel()] = flat
        mine = nn.Parameter(padded[rank * size : (rank + 1) * size].clone())
        optimizer = torch.optim.Adam([mine], lr=lr)  # state for my slice only
        for batch in step_batches(len(data), global_batch, steps):
            model.zero_grad()
            _loss(model, data, rank_part(batch, rank, world_size), device).backward()
            gradient = torch.zeros_like(padded)
            gradient[: flat.numel()] = nn.utils.parameters_to_vector(
                [w.grad for w in weights]
            )
            dist.all_reduce(gradient)  # the sum over the ranks, as DDP
            mine.grad = gradient[rank * size : (rank + 1) * size] / world_size
            optimizer.step()  # Adam on my slice
            with torch.no_grad():
                all_gather(padded, mine)  # everyone's slices
                nn.utils.vector_to_parameters(padded[: flat.numel()], weights)
        report = {
            "weights": sum(w.numel() for w in weights),
            "optimizer state": _state_elements(optimizer),
        }
        (out / f"zero1_rank{rank}.json").write_text(json.dumps(report))
        if rank == 0:
            torch.save(
                {k: v.cpu() for k, v in model.state_dict().items()}, out / "zero1.pt"
            )
    finally:
        dist.destroy_process_group()


#: `all_gather_single` in PyTorch 2.13, which deprecates `all_gather_into_tensor`; the
#: older name where the newer does not exist.
all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

#: The collectives the profiler records, as c10d names them, with the argument whose size
#: counts: an all-gather's output (the whole tensor), a reduce-scatter's input.
_GATHER_SCATTER = {
    "c10d::_allgather_base_": ("all-gather", 0),
    "c10d::_reduce_scatter_base_": ("reduce-scatter", 1),
}


def collectives(events) -> list[tuple[str, int]]:
    """The collectives among a `torch.profiler` run's `events()`, in the order they ran, as
    (kind, elements of the whole tensor). Introduced in chapter 13.

    c10d records an all-reduce of a list of tensors without their shapes; the backend's own
    event (`gloo:all_reduce`, `nccl:all_reduce`) has them. That event can start after the
    next all-reduce was launched (gloo runs it on a thread of its own), so each one is
    matched with the oldest all-reduce still waiting; one with none waiting is gloo's work
    inside a reduce-scatter."""
    found, waiting = [], 0
    for event in events:
        if event.name in _GATHER_SCATTER:
            kind, argument = _GATHER_SCATTER[event.name]
            found.append((kind, torch.Size(event.input_shapes[argument]).numel()))
        elif event.name == "c10d::allreduce_":
            waiting += 1
        elif waiting and event.name.endswith(":all_reduce"):
            found.append(("all-reduce", torch.Size(event.input_shapes[0]).numel()))
            waiting -= 1
    return found


def shard_with_fsdp(model: nn.Module, mesh) -> nn.Module:
    """FSDP2: each layer with weights becomes one unit of sharding (gathered just before
    it runs, freed after), then the whole model. Introduced in chapter 13."""
    from torch.distributed.fsdp import fully_shard

    for layer in model.modules():
        if layer is not model and any(True for _ in layer.parameters(recurse=False)):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def fsdp_worker(
    rank: int,
    world_size: int,
    port: int,
    data_file: str,
    out_dir: str,
    global_batch: int,
    steps: int,
    lr: float,
    seed: int,
) -> None:
    """PyTorch FSDP2 (`fully_shard`) on the same batches as `train_adam_one_process`.

    Introduced in chapter 13. Each rank writes `fsdp_rank{r}.json`: the elements of
    weights, gradients and Adam's state it holds (read from the tensors), and the
    collectives of one DDP step and of one FSDP step, recorded by the profiler. Rank 0
    writes the whole trained weights to `fsdp.pt`; all ranks save the sharded model and
    optimizer with PyTorch Distributed Checkpoint into `checkpoint/`.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile

    out, data = Path(out_dir), load_data(data_file)
    device = join_process_group(rank, world_size, port)
    try:
        batches = step_batches(len(data), global_batch, steps)
        first = rank_part(batches[0], rank, world_size)
        ddp = DistributedDataParallel(
            make_model(seed, torch.float64).to(device),
            device_ids=[device.index] if device.type == "cuda" else None,
        )
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as trace:
            _loss(ddp, data, first, device).backward()
        ddp_collectives = collectives(trace.events())

        mesh = init_device_mesh(device.type, (world_size,))
        model = shard_with_fsdp(make_model(seed, torch.float64).to(device), mesh)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        for step, batch in enumerate(batches):
            optimizer.zero_grad()
            with profile(
                activities=[ProfilerActivity.CPU], record_shapes=True
            ) as trace:
                _loss(
                    model, data, rank_part(batch, rank, world_size), device
                ).backward()
            if step == 0:
                fsdp_collectives = collectives(trace.events())
                gradients = sum(_local(w.grad).numel() for w in model.parameters())
            optimizer.step()
        report = {
            "weights": sum(_local(w).numel() for w in model.parameters()),
            "whole model": sum(w.numel() for w in model.parameters()),
            "gradients": gradients,
            "optimizer state": _state_elements(optimizer),
            "DDP step": ddp_collectives,
            "FSDP step": fsdp_collectives,
        }
        (out / f"fsdp_rank{rank}.json").write_text(json.dumps(report))
        whole = {name: w.full_tensor().cpu() for name, w in model.state_dict().items()}
        if rank == 0:
            torch.save(whole, out / "fsdp.pt")
        model_state, optimizer_state = get_state_dict(model, optimizer)
        dcp.save(
            {"model": model_state, "optimizer": optimizer_state},
            checkpoint_id=out / "checkpoint",
        )
    finally:
        dist.destroy_process_group()


def fsdp_restore_worker(
    rank: int, world_size: int, port: int, out_dir: str, seed: int
) -> None:
    """Load the checkpoint `fsdp_worker` saved into an FSDP2 model sharded over another
    number of processes, and write the whole weights (rank 0, `restored{world_size}.pt`).
    Introduced in chapter 13."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        set_model_state_dict,
    )
    from torch.distributed.device_mesh import init_device_mesh

    out = Path(out_dir)
    device = join_process_group(rank, world_size, port)
    try:
        mesh = init_device_mesh(device.type, (world_size,))
        model = shard_with_fsdp(make_model(seed + 1, torch.float64).to(device), mesh)
        state = {"model": get_model_state_dict(model)}
        dcp.load(state, checkpoint_id=out / "checkpoint")  # each rank reads its shards
        set_model_state_dict(model, state["model"])
        whole = {name: w.full_tensor().cpu() for name, w in model.state_dict().items()}
        if rank == 0:
            torch.save(whole, out / f"restored{world_size}.pt")
    finally:
        dist.destroy_process_group()


def saved_activations_and_flops(
    blocks: Sequence[nn.Module], x: torch.Tensor, *, recompute: bool
) -> tuple[int, int, list[torch.Tensor]]:
    """One forward and backward pass through `blocks` in sequence: the bytes of activations
    autograd saves for the backward pass (weights left out), the floating-point operations
    counted by PyTorch's FlopCounterMode, and the gradients. With `recompute`, each block
    runs under `torch.utils.checkpoint`, which saves only its input and runs its forward
    again during the backward pass. Introduced in chapter 13."""
    from torch.utils.checkpoint import checkpoint
    from torch.utils.flop_counter import FlopCounterMode

    if not blocks:
        raise ValueError("saved_activations_and_flops: give at least one block.")
    weights = {w.data_ptr() for block in blocks for w in block.parameters()}
    saved = []

    def pack(tensor):
        if tensor.data_ptr() not in weights:
            saved.append(tensor.numel() * tensor.element_size())
        return tensor

    for block in blocks:
        block.zero_grad()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with FlopCounterMode(display=False) as flops:
            h = x
            for block in blocks:
                h = checkpoint(block, h, use_reentrant=False) if recompute else block(h)
            h.square().mean().backward()
    gradients = [w.grad.clone() for block in blocks for w in block.parameters()]
    return sum(saved), flops.get_total_flops(), gradients
