"""Starting a run: the variables torchrun sets, a GPU per process (or the CPU), the
precision, the process group (NCCL between GPUs, gloo between CPU processes), and leaving
it at the end whatever happened."""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from data import datasets
from flags import check_model_flags
from training import StopFlag, fit


def launch_environment(script: str) -> tuple[int, int, int, int]:
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, which torchrun sets."""
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise SystemExit(
            f"{script}: start it with torchrun --nproc_per_node=N {script} ... "
            f"(N: the GPUs of this machine); {', '.join(missing)} not set."
        )
    rank, world_size, local_rank, local_world_size = (int(os.environ[n]) for n in names)
    return rank, world_size, local_rank, local_world_size


def choose_device(local_rank: int, local_world_size: int) -> torch.device:
    """GPU LOCAL_RANK when the machine has a GPU for each of its processes, else the CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    gpus = torch.cuda.device_count()
    if local_world_size > gpus:
        raise SystemExit(
            f"--nproc_per_node={local_world_size} but this machine has {gpus} GPU(s): start "
            f"at most {gpus} processes per machine (one per GPU), or hide the GPUs "
            "(CUDA_VISIBLE_DEVICES=) to train on the CPU."
        )
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    return device


def choose_precision(requested: str, device: torch.device) -> str:
    """bf16 (autocast) where the GPU computes in bfloat16 in hardware; fp32 elsewhere."""
    in_hardware = device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
    if requested == "auto":
        return "bf16" if in_hardware else "fp32"
    if requested == "bf16" and device.type == "cuda" and not in_hardware:
        raise SystemExit(
            "--precision bf16: this GPU has no bfloat16 in hardware (NVIDIA Ampere or "
            "newer has); use --precision fp32 or auto."
        )
    return requested


def run(args: argparse.Namespace, strategy_class: type, script: str) -> None:
    """Check the launch, join the process group, train, and always leave the group."""
    stop = StopFlag()  # first: a signal during start-up is remembered too
    args = check_model_flags(args)
    rank, world_size, local_rank, local_world_size = launch_environment(script)
    device = choose_device(local_rank, local_world_size)
    precision = choose_precision(args.precision, device)
    train, test = datasets(args, world_size)
    cuda = device.type == "cuda"
    # NCCL between GPUs, gloo between CPU processes
    dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    try:
        fit(args, strategy_class(args, device, precision, rank), train, test, stop)
    finally:
        dist.destroy_process_group()
