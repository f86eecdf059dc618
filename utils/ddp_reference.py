"""What DDP's processes train, in one process: the sampler's batches and their union.

Written in chapter 6 (06_pytorch_dp_ddp.ipynb), in its cells marked `# @save`: edit them
there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import torch
from torch import nn
from torch.utils.data import DistributedSampler

from utils.pytorch_ddp import make_model


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


def global_batches(n, world_size, per_rank_batch, epoch, seed):
    """For each step, the indices of all ranks' batches together."""
    per_rank = [rank_indices(n, world_size, r, epoch, seed) for r in range(world_size)]
    steps = len(per_rank[0]) // per_rank_batch
    return [
        [
            i
            for indices in per_rank
            for i in indices[s * per_rank_batch : (s + 1) * per_rank_batch]
        ]
        for s in range(steps)
    ]


def train_one_process(
    data,
    *,
    world_size,
    per_rank_batch,
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
        for batch in global_batches(len(data), world_size, per_rank_batch, epoch, seed):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images[batch]), labels[batch]).backward()
            optimizer.step()
    return model
