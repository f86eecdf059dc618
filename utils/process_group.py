"""Joining a PyTorch process group at a TCP port: the workers from chapter 13 on.

Written in chapter 13 (13_precision_and_accumulation.ipynb), in its cells marked `# @save`:
edit them there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import torch
import torch.distributed as dist

from utils.ddp_reference import ddp_device


def join_process_group(rank, world_size, port):
    """Join the process group at a store rank 0 hosts on `port`; return this process's
    device: a GPU and NCCL when there are enough, else the CPU and gloo (chapter 6)."""
    device, backend = ddp_device(rank, world_size)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)  # the processes share the cores
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",  # rank 0 listens, the others connect
        rank=rank,
        world_size=world_size,
    )
    return device
