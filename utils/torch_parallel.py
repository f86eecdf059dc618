"""PyTorch counterparts for the comparison chapter (chapter 7): the same small CNN, the
batches `DistributedSampler` gives each rank, and a DistributedDataParallel worker.

The worker lives in this importable module because `torch.multiprocessing.spawn` pickles the
function it starts: a function defined in a notebook cannot be found by the new processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class TorchSmallCNN(nn.Module):
    """`utils.small_cnn` in PyTorch: two 3x3 convolutions with max pooling, then logits."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 5 * 5, 10),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.layers(images)


def make_model(seed: int, dtype: torch.dtype = torch.float32) -> TorchSmallCNN:
    """A TorchSmallCNN whose initial weights depend only on `seed`."""
    torch.manual_seed(seed)
    return TorchSmallCNN().to(dtype)


def to_tensors(images: np.ndarray, labels: np.ndarray, dtype=torch.float32) -> TensorDataset:
    """NHWC arrays from `load_mnist_subset` as an NCHW `TensorDataset`."""
    x = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2))).to(dtype)
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


def rank_indices(n: int, world_size: int, rank: int, epoch: int, seed: int) -> list[int]:
    """The example indices `DistributedSampler` gives `rank` in `epoch` (shuffled, drop_last)."""
    sampler = DistributedSampler(
        range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True
    )
    sampler.set_epoch(epoch)
    return list(sampler)


def global_batches(n: int, world_size: int, per_rank_batch: int, epoch: int, seed: int):
    """For each step, the indices of all ranks' batches together: one process's equivalent."""
    per_rank = [rank_indices(n, world_size, r, epoch, seed) for r in range(world_size)]
    steps = len(per_rank[0]) // per_rank_batch
    return [
        [i for indices in per_rank for i in indices[s * per_rank_batch:(s + 1) * per_rank_batch]]
        for s in range(steps)
    ]


def train_one_process(data: TensorDataset, *, world_size: int, per_rank_batch: int,
                      epochs: int, lr: float, seed: int, dtype=torch.float32) -> nn.Module:
    """Single-process SGD on exactly the global batches the DDP ranks see together."""
    model = make_model(seed, dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    images, labels = data.tensors
    for epoch in range(epochs):
        for batch in global_batches(len(data), world_size, per_rank_batch, epoch, seed):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images[batch]), labels[batch]).backward()
            optimizer.step()
    return model


def ddp_worker(rank: int, world_size: int, data: TensorDataset, out_dir: str, epochs: int,
               per_rank_batch: int, lr: float, seed: int, dtype_name: str = "float32",
               accumulation_steps: int = 1) -> None:
    """One DDP process on the CPU (gloo backend): trains, then saves weights and timings.

    Start it with `torch.multiprocessing.spawn(ddp_worker, args=(world_size, ...),
    nprocs=world_size)`. Rank r writes `rank{r}.pt` and `rank{r}.json` into `out_dir`.
    With `accumulation_steps=k` (chapter 11), each optimizer step uses k micro-batches of
    `per_rank_batch`: the first k-1 run under `model.no_sync()` (no all-reduce), and a last
    group of fewer than k micro-batches in an epoch is dropped, as `drop_last` does.
    """
    if isinstance(accumulation_steps, bool) or not isinstance(accumulation_steps, int) or (
        accumulation_steps < 1
    ):
        raise ValueError(f"accumulation_steps must be an int of at least 1; got {accumulation_steps!r}.")
    torch.set_num_threads(1)  # the ranks share the machine's cores
    out = Path(out_dir)
    dist.init_process_group(
        "gloo", init_method=f"file://{out / 'rendezvous'}", rank=rank, world_size=world_size
    )
    try:
        model = DistributedDataParallel(make_model(seed, getattr(torch, dtype_name)))
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        sampler = DistributedSampler(
            data, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True
        )
        loader = DataLoader(data, batch_size=per_rank_batch, sampler=sampler, drop_last=True)
        steps = len(loader) // accumulation_steps
        epoch_seconds, losses = [], []
        for epoch in range(epochs):
            sampler.set_epoch(epoch)  # a new order every epoch, the same on every rank
            start = time.perf_counter()
            for index, (images, labels) in enumerate(loader):
                if index == steps * accumulation_steps:
                    break  # an incomplete last group
                last = (index + 1) % accumulation_steps == 0
                with contextlib.nullcontext() if last else model.no_sync():
                    loss = nn.functional.cross_entropy(model(images), labels)
                    (loss / accumulation_steps).backward()  # DDP averages across ranks if `last`
                if last:
                    optimizer.step()
                    optimizer.zero_grad()
                losses.append(loss.item())
            epoch_seconds.append(time.perf_counter() - start)
        torch.save(model.module.state_dict(), out / f"rank{rank}.pt")
        report = {"epoch_seconds": epoch_seconds, "losses": losses,
                  "steps_per_epoch": steps, "pid": os.getpid()}
        (out / f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()
