"""Measure the all-reduce of a machine (or of several) and fit chapter 9's ring model to it:
one file to copy to a server, which imports nothing beside it. Start it with torchrun, one
process per GPU (the same commands with 0 GPUs measure CPU processes, over gloo):

    # 8 GPUs on one machine
    torchrun --standalone --nproc_per_node=8 all_reduce_bandwidth.py
    # messages up to 1 GiB only, the fitted numbers saved
    torchrun --standalone --nproc_per_node=8 all_reduce_bandwidth.py --largest 1GiB \
        --out bandwidth.json
    # 2 machines with 8 GPUs each: this command on both, HOST the first one's address
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \
        --rdzv-id=bandwidth-1 all_reduce_bandwidth.py

Every process all-reduces float32 tensors of growing sizes (--smallest, then 4 times more
each time, up to --largest: by default 4 GiB on GPUs of 30 GB or more, where NCCL reaches
its peak bandwidth, 256 MiB on smaller GPUs, 16 MiB on CPUs), in place: one call to warm
up (all_reduce_perf runs 5), then --repeats calls, each after a barrier (so that all
processes start it together) and, on GPUs, timed to torch.cuda.synchronize() (NCCL returns
before the GPU has finished). A call lasts until its slowest process has finished: the
processes leave the barrier at different instants, so each call's time is the longest of
the processes' own times (an all-reduce with MAX, outside the timed region). It keeps the
fastest call per size: whatever else the machine runs can only make a call slower.

Rank 0 then fits the ring model of chapter 9, t = 2(n-1) x (S/(nB) + alpha) for S bytes over
n processes, by least squares on the times weighted by their inverse (so that small
messages count as much as large ones), and prints, per size, the measured and the model's
time and nccl-tests' two bandwidths: algbw = S/t and busbw = algbw x 2(n-1)/n, what each
link of the ring carries, comparable with `all_reduce_perf`'s in-place busbw (the mean of
20 calls launched back to back, without the per-call overhead these times include). The
largest messages fix B, the smallest alpha. Across several machines NCCL often picks a
tree for small messages, whose latency grows with the logarithm of the number of machines:
there the ring model overestimates. Chapter 9 explains the model, chapter 17 DDP's buckets
(the messages your training all-reduces).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

KIB, MIB, GIB = 2**10, 2**20, 2**30
UNITS = {"": 1, "B": 1, "KIB": KIB, "MIB": MIB, "GIB": GIB}


# ---- command line -----------------------------------------------------------------------


def message_bytes(text: str) -> int:
    """A message size: bytes, or a number with KiB, MiB or GiB; a multiple of 4 (float32)."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]iB|B)?\s*", text, flags=re.I)
    if not match:
        raise argparse.ArgumentTypeError(f"expected bytes, as 4096, 64KiB or 4GiB; got {text!r}")
    size = int(match[1]) * UNITS[(match[2] or "").upper()]
    if size < 4 or size % 4:
        raise argparse.ArgumentTypeError(
            f"must be a multiple of 4 bytes (float32), at least 4; got {size}"
        )
    return size


def at_least(least: int):
    """An argparse type: a whole number, `least` or more."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number; got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}; got {value}")
        return value

    return parse


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """--help with the defaults, except those that are None (their help says them)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        return action.help if action.default is None else super()._get_help_string(action)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="torchrun --nproc_per_node=N all_reduce_bandwidth.py",
        description="Time all-reduces of growing messages and fit the ring model's latency "
        "and bandwidth (chapter 9).",
        formatter_class=_Help,
    )
    add = parser.add_argument
    add("--smallest", type=message_bytes, default=4 * KIB, help="the first message, in bytes")
    add(
        "--largest",
        type=message_bytes,
        help="the largest message, in bytes (default: 4GiB on GPUs of 30 GB or more, 256MiB "
        "on smaller GPUs, 16MiB on CPUs); the sizes grow by powers of 4 from --smallest up to "
        "it",
    )
    add("--repeats", type=at_least(1), default=20, help="timed calls per size; the fastest counts")
    add("--out", metavar="FILE", help="write the times and the fitted numbers here, as JSON")
    return parser.parse_args(argv)


def message_sizes(smallest: int, largest: int, default_on: str | None = None) -> list[int]:
    """smallest, 4 x smallest, 16 x smallest, ... up to largest; at least two sizes.
    `default_on` names the device when largest is the default, not a flag the user gave."""
    sizes = [smallest]
    while sizes[-1] * 4 <= largest:
        sizes.append(sizes[-1] * 4)
    if len(sizes) < 2:
        given = (
            f"the largest message, {largest} bytes (the default on {default_on}; set --largest),"
            if default_on
            else f"--largest {largest}"
        )
        raise SystemExit(
            f"{given} must be at least 4 x --smallest {smallest}: the fit needs two message "
            "sizes or more."
        )
    return sizes


def default_largest(gpu_memory: int | None) -> int:
    """The largest message when --largest is not given, for a GPU of `gpu_memory` bytes
    (None: CPU processes). NCCL's bandwidth still grows past 256 MiB (it peaks at 2-4 GB
    messages, where nccl-tests' published numbers are measured), so 4 GiB on GPUs of 30 GB
    or more; 256 MiB on smaller GPUs, 16 MiB over gloo, which peaks far earlier."""
    if gpu_memory is None:
        return 16 * MIB
    return 4 * GIB if gpu_memory >= 30e9 else 256 * MIB


# ---- processes and devices -------------------------------------------------------------------


def processes(script: str) -> tuple[int, int, int, int]:
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, which torchrun sets; refused for
    one process, which has nothing to all-reduce with."""
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise SystemExit(
            f"{script}: start it with torchrun --nproc_per_node=N {script} ... "
            f"(N: the GPUs of this machine); {', '.join(missing)} not set."
        )
    rank, world_size, local_rank, local_world_size = (int(os.environ[n]) for n in names)
    if world_size < 2:
        raise SystemExit(
            f"{script}: 1 process has nothing to all-reduce with: the fit needs 2 processes "
            "or more (torchrun --nproc_per_node=2 or more, or several machines)."
        )
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
            "(CUDA_VISIBLE_DEVICES=) to measure CPU processes."
        )
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    return device


# ---- measure and fit --------------------------------------------------------------------------


def slowest_process(seconds: float, device: torch.device) -> float:
    """The longest of the processes' `seconds`: an all-reduce with MAX of one number (on the
    GPU for NCCL, which reduces only GPU tensors). Every process calls it, and gets it."""
    longest = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(longest, op=dist.ReduceOp.MAX)
    return longest.item()


def time_all_reduces(sizes: list[int], repeats: int, device: torch.device) -> list[float]:
    """The fastest of `repeats` all-reduces of a float32 tensor of each size, in seconds,
    after one to warm up; each call's time is its slowest process's, since the processes
    leave the barrier at different instants (the fastest of one process's own times would
    pick the call it joined last). Every process calls it, and gets the same times."""
    cuda = device.type == "cuda"
    fastest = []
    for size in sizes:
        # zeros: summed in place call after call, ones would grow n-fold each call, to inf
        tensor = torch.zeros(size // 4, device=device)
        dist.all_reduce(tensor)  # the warm-up: connections, buffers, kernels
        times = []
        for _ in range(repeats):
            if cuda:
                torch.cuda.synchronize()
            dist.barrier()  # every process starts the call together
            begin = time.perf_counter()
            dist.all_reduce(tensor)
            if cuda:
                torch.cuda.synchronize()  # NCCL returns before the GPU has finished
            elapsed = time.perf_counter() - begin
            times.append(slowest_process(elapsed, device))  # outside the timed region
        fastest.append(min(times))
        del tensor
    return fastest


def fit_latency_and_bandwidth(sizes, seconds, world_size: int) -> tuple[float, float]:
    """Fit t = 2(n-1) x (S / (n B) + alpha) to the times of messages of `sizes` bytes:
    returns (alpha in seconds per ring step, B in bytes/s). The model is a line in S, with
    slope 2(n-1)/(nB) and intercept 2(n-1) alpha; each time is weighted by its inverse."""
    if world_size < 2:
        raise ValueError(
            f"fit_latency_and_bandwidth: world_size must be at least 2; got {world_size}"
        )
    if len(sizes) != len(seconds) or len(set(sizes)) < 2 or min(sizes) <= 0 or min(seconds) <= 0:
        raise ValueError(
            "fit_latency_and_bandwidth: give one time (above 0 s) per size, for at least two "
            "different message sizes, each larger than 0 bytes."
        )
    seconds = np.asarray(seconds, float)
    slope, intercept = np.polyfit(np.asarray(sizes, float), seconds, 1, w=1 / seconds)
    steps = 2 * (world_size - 1)
    return float(intercept / steps), float(steps / (world_size * slope))


def model_seconds(size: float, world_size: int, alpha: float, bandwidth: float) -> float:
    """The ring model's time for an all-reduce of `size` bytes."""
    return 2 * (world_size - 1) * (size / (world_size * bandwidth) + alpha)


def report(sizes, seconds, world_size: int, alpha: float, bandwidth: float) -> str:
    """The table rank 0 prints: per size, the measured and model times and nccl-tests'
    algbw and busbw; then the fitted alpha and B."""
    lines = [
        f"{'bytes':>13} {'measured ms':>12} {'model ms':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}"
    ]
    for size, fastest in zip(sizes, seconds):
        algbw = size / fastest
        busbw = algbw * 2 * (world_size - 1) / world_size
        model = model_seconds(size, world_size, alpha, bandwidth)
        lines.append(
            f"{size:>13,} {fastest * 1e3:>12.3f} {model * 1e3:>10.3f} {algbw / 1e9:>11.2f} "
            f"{busbw / 1e9:>11.2f}"
        )
    lines.append(
        f"fitted: alpha {alpha * 1e6:.1f} us per ring step, B {bandwidth / 1e9:.2f} GB/s "
        f"({world_size} processes, {2 * (world_size - 1)} ring steps)"
    )
    if alpha <= 0:
        lines.append("alpha at or below 0: the small messages' times were too noisy to fit it")
    return "\n".join(lines)


# ---- the program --------------------------------------------------------------------------


@record  # torchrun's failure summary then shows the failing rank's traceback
def main(argv: list[str] | None = None) -> None:
    """Check the launch, join the process group, measure, and always leave the group."""
    script = "all_reduce_bandwidth.py"
    args = parse_args(argv)
    if args.largest:  # bad sizes are refused before the processes connect
        message_sizes(args.smallest, args.largest)
    rank, world_size, local_rank, local_world_size = processes(script)
    device = choose_device(local_rank, local_world_size)
    cuda = device.type == "cuda"
    if args.largest:
        sizes = message_sizes(args.smallest, args.largest)
    else:
        memory = torch.cuda.get_device_properties(device).total_memory if cuda else None
        sizes = message_sizes(args.smallest, default_largest(memory), "GPUs" if cuda else "CPUs")
    backend = "nccl" if cuda else "gloo"  # NCCL between GPUs, gloo between CPU processes
    dist.init_process_group(backend, device_id=device if cuda else None)
    try:
        seconds = time_all_reduces(sizes, args.repeats, device)
        if rank == 0:
            alpha, bandwidth = fit_latency_and_bandwidth(sizes, seconds, world_size)
            print(
                f"all-reduce of float32 over {world_size} processes ({backend}, "
                f"{device.type}), the fastest of {args.repeats} calls per size, each "
                "timed on its slowest process:"
            )
            print(report(sizes, seconds, world_size, alpha, bandwidth), flush=True)
            if args.out:
                result = {
                    "world_size": world_size,
                    "backend": backend,
                    "device": torch.cuda.get_device_name(device) if cuda else "cpu",
                    "sizes_bytes": sizes,
                    "fastest_seconds": seconds,
                    "repeats": args.repeats,
                    "alpha_s": alpha,
                    "bandwidth_bytes_per_s": bandwidth,
                }
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
                print(f"written to {args.out}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave now: in Python's teardown, a gloo thread freeing a finished
    # collective can abort the process (pytorch/pytorch#117762).
    sys.stdout.flush()
    os._exit(0)
