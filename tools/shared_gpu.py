"""Several processes of a chapter's worker on one GPU, over gloo (tools/chapter_workers.py).

NCCL needs a GPU of its own for every process; gloo takes CUDA tensors for the collectives
it implements on them. So on a machine with one GPU, the workers' multi-process code paths on
CUDA tensors (DDP's buckets, FSDP2's all-gathers and reduce-scatters, DTensor's random
numbers, Distributed Checkpoint) can run where gloo has the collective; a run records which:
`OnSharedGpu(worker)` is the worker with `ddp_device` answering GPU 0 and gloo for every
process (the CPU and gloo where there is no GPU: a dry run). It says nothing of several
GPUs' speed: the processes take turns on one GPU.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass
class OnSharedGpu:
    """`worker(rank, *arguments)`, every process on GPU 0 with gloo. An importable
    module's object, so `run_ranks` and `mp.spawn` can send it to new processes."""

    worker: object

    def __call__(self, rank, *arguments):
        import torch

        from utils import ddp_reference

        original_ddp_device = ddp_reference.ddp_device

        def gpu_0_over_gloo(local_rank, local_world_size, gpu_count=None):
            original_ddp_device(local_rank, local_world_size, gpu_count)  # its argument checks
            gpu = torch.cuda.is_available()  # a CPU's dry run: the same path, on the CPU
            return torch.device("cuda", 0) if gpu else torch.device("cpu"), "gloo"

        for module in list(sys.modules.values()):  # every module that imported it
            if getattr(module, "ddp_device", None) is original_ddp_device:
                module.ddp_device = gpu_0_over_gloo
        self.worker(rank, *arguments)
