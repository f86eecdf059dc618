"""Where a DDP process trains, and what the processes train, replayed in one process.

Written in chapter 6 (06_pytorch_dp_ddp.ipynb), in its cells marked `# @save`: edit them
there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import torch
from torch import nn
from torch.utils.data import DistributedSampler

from utils.checks import check_int
from utils.pytorch_ddp import make_model


def ddp_device(local_rank, local_world_size, gpu_count=None):
    """Where DDP process `local_rank` of the `local_world_size` on this machine trains,
    and its backend. `gpu_count`: by default the GPUs this process sees."""
    check_int("ddp_device: local_world_size", local_world_size)
    check_int("ddp_device: local_rank", local_rank, least=0)
    if local_rank >= local_world_size:
        raise ValueError(
            f"ddp_device: local_rank {local_rank} is not below local_world_size "
            f"{local_world_size}."
        )
    gpus = torch.cuda.device_count() if gpu_count is None else gpu_count
    if gpus >= local_world_size:  # NCCL needs a GPU of its own for every process
        return torch.device("cuda", local_rank), "nccl"
    return torch.device("cpu"), "gloo"


def rank_indices(n, world_size, rank, epoch, seed):
    """The example indices DistributedSampler gives `rank` in `epoch` (shuffled,
    drop_last), for a dataset of `n` examples."""
    sampler = DistributedSampler(
        range(n),
        num_replicas=world_size,
        rank=rank,
        shuffle=True,
        seed=seed,
        drop_last=True,
    )
    sampler.set_epoch(epoch)
    return list(sampler)


def global_batches(n, world_size, batch_per_device, epoch, seed):
    """For each step, the indices of all ranks' batches together."""
    per_rank = [rank_indices(n, world_size, r, epoch, seed) for r in range(world_size)]
    steps = len(per_rank[0]) // batch_per_device
    return [
        [
            i
            for indices in per_rank
            for i in indices[s * batch_per_device : (s + 1) * batch_per_device]
        ]
        for s in range(steps)
    ]


def train_one_process(
    data,
    *,
    world_size,
    batch_per_device,
    epochs,
    lr,
    seed,
    dtype=torch.float32,
    momentum=0.0,
):
    """SGD in one process on exactly the global batches the DDP ranks see together."""
    model = make_model(seed, dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    images, labels = data.tensors
    for epoch in range(epochs):
        for batch in global_batches(
            len(data), world_size, batch_per_device, epoch, seed
        ):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images[batch]), labels[batch]).backward()
            optimizer.step()
    return model
