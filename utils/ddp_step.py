"""Inside one DDP step (chapter 14): gradients all-reduced one tensor at a time, in
buckets, and in buckets launched from hooks during the backward pass; DDP's own knobs;
compression hooks; a timeline of a few steps; and an all-reduce bandwidth test.

The workers run in new processes (`utils.pytorch_ddp.run_ranks`), so they live in this
importable module. Each writes what it measured as JSON into its output folder.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from utils.checks import check_int
from utils.compare import max_abs_difference
from utils.pytorch_ddp import join_process_group, load_data, make_model
from utils.sharding import collectives, rank_part, step_batches

MODES = ("one tensor at a time", "buckets after backward", "buckets during backward")


def make_buckets(sizes: Sequence[int], capacity: int) -> list[list[int]]:
    """Group tensors into buckets of at most `capacity` elements, as DDP does: in reverse
    order (the last layer's gradients are ready first), a new bucket whenever the next
    tensor would not fit. Returns the tensors' indices per bucket.

    Introduced in chapter 14.
    """
    check_int("make_buckets: capacity", capacity)
    for index, size in enumerate(sizes):
        if size > capacity:
            raise ValueError(
                f"make_buckets: tensor {index} has {size} elements, more than a bucket of "
                f"{capacity}; make the bucket at least as large as the largest tensor."
            )
    buckets, filled = [], capacity
    for index in reversed(range(len(sizes))):
        if filled + sizes[index] > capacity:
            buckets.append([])
            filled = 0
        buckets[-1].append(index)
        filled += sizes[index]
    return buckets


class _BucketsFromHooks:
    """All-reduce each bucket asynchronously as soon as its last gradient is ready
    (`register_post_accumulate_grad_hook`), and wait for all of them before the update."""

    def __init__(
        self, weights: list[nn.Parameter], buckets: list[list[int]], log: list
    ):
        self.weights, self.buckets, self.log = weights, buckets, log
        self.bucket_of = {i: b for b, indices in enumerate(buckets) for i in indices}
        self.handles = {}
        self.ready = [set() for _ in buckets]
        for index, weight in enumerate(weights):
            weight.register_post_accumulate_grad_hook(
                lambda _, index=index: self._ready(index)
            )

    def _ready(self, index: int) -> None:
        bucket = self.bucket_of[index]
        self.ready[bucket].add(index)
        self.log.append(f"gradient {index} ready")
        if len(self.ready[bucket]) == len(self.buckets[bucket]):
            flat = torch.cat(
                [self.weights[i].grad.flatten() for i in self.buckets[bucket]]
            )
            self.log.append(f"all-reduce bucket {bucket} starts ({flat.numel():,})")
            self.handles[bucket] = (flat, dist.all_reduce(flat, async_op=True))

    def finish(self, world_size: int) -> None:
        for bucket, (flat, handle) in sorted(self.handles.items()):
            handle.wait()
            _unflatten(
                flat / world_size, [self.weights[i] for i in self.buckets[bucket]]
            )
        self.handles, self.ready = {}, [set() for _ in self.buckets]


def _unflatten(flat: torch.Tensor, weights: Sequence[nn.Parameter]) -> None:
    start = 0
    for weight in weights:
        weight.grad.copy_(flat[start : start + weight.numel()].view_as(weight))
        start += weight.numel()


def all_reduce_worker(
    rank: int,
    world_size: int,
    port: int,
    data_file: str,
    out_dir: str,
    global_batch: int,
    steps: int,
    lr: float,
    bucket_elements: int,
) -> None:
    """Train the book's CNN with SGD four ways on the same batches: the gradients
    all-reduced one tensor at a time after the backward pass, in buckets of at most
    `bucket_elements` after it, in buckets launched from hooks during it, and by DDP.

    Introduced in chapter 14. Rank 0 writes `all_reduce.json`: per way, what happened in
    the first step, in order (the all-reduce calls, and for hooks when each gradient was
    ready), and the largest weight difference from DDP.
    """
    out, data = Path(out_dir), load_data(data_file)
    device = join_process_group(rank, world_size, port)
    try:
        batches = step_batches(len(data), global_batch, steps)
        images, labels = (tensor.to(device) for tensor in data.tensors)
        results, trained = {}, {}
        for mode in (*MODES, "DDP"):
            model = make_model(0, torch.float64).to(device)
            weights = list(model.parameters())
            buckets = make_buckets([w.numel() for w in weights], bucket_elements)
            log: list[str] = []
            hooks = (
                _BucketsFromHooks(weights, buckets, log) if mode == MODES[2] else None
            )
            net = DistributedDataParallel(model) if mode == "DDP" else model
            optimizer = torch.optim.SGD(model.parameters(), lr=lr)
            for step, batch in enumerate(batches):
                part = rank_part(batch, rank, world_size)
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(net(images[part]), labels[part])
                loss.backward()
                if mode == MODES[0]:
                    for index, weight in enumerate(weights):
                        log.append(f"all-reduce gradient {index} ({weight.numel():,})")
                        dist.all_reduce(weight.grad)
                        weight.grad /= world_size
                elif mode == MODES[1]:
                    for number, indices in enumerate(buckets):
                        flat = torch.cat([weights[i].grad.flatten() for i in indices])
                        log.append(f"all-reduce bucket {number} ({flat.numel():,})")
                        dist.all_reduce(flat)
                        _unflatten(flat / world_size, [weights[i] for i in indices])
                elif hooks is not None:
                    hooks.finish(world_size)
                optimizer.step()
                if step == 0:
                    results[mode] = {"first step": list(log)}
            trained[mode] = [w.detach().cpu() for w in weights]
        for mode in MODES:
            results[mode]["difference from DDP"] = max_abs_difference(
                trained[mode], trained["DDP"]
            )
        if rank == 0:
            (out / "all_reduce.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


class _Branches(nn.Module):
    """The book's CNN with a second head that only some steps use."""

    def __init__(self) -> None:
        super().__init__()
        self.cnn, self.spare = make_model(0, torch.float64), nn.Linear(10, 10).double()

    def forward(self, images: torch.Tensor, use_spare: bool = False) -> torch.Tensor:
        logits = self.cnn(images)
        return self.spare(logits) if use_spare else logits


def ddp_knobs_worker(
    rank: int, world_size: int, port: int, data_file: str, out_dir: str, batch: int
) -> None:
    """One step of DDP under each knob, and what it changed. Introduced in chapter 14.

    Rank 0 writes `knobs.json`: the all-reduces of one step for several `bucket_cap_mb`
    (from the profiler); whether a gradient is a view into DDP's bucket with
    `gradient_as_bucket_view`; and the first line of the error a model with a parameter
    that a step does not use gets without `find_unused_parameters=True`, and its steps
    with it.
    """
    out, data = Path(out_dir), load_data(data_file)
    device = join_process_group(rank, world_size, port)
    images, labels = data.tensors
    part = rank_part(torch.arange(batch), rank, world_size)
    x, y = images[part].to(device), labels[part].to(device)
    report = {}
    try:
        for megabytes in (25, 0.05, 0.01):
            ddp = DistributedDataParallel(
                make_model(0, torch.float64).to(device), bucket_cap_mb=megabytes
            )
            nn.functional.cross_entropy(ddp(x), y).backward()  # DDP's first step
            ddp.zero_grad()  # rebuilds its buckets after it: measure the second
            with torch.profiler.profile(record_shapes=True) as trace:
                nn.functional.cross_entropy(ddp(x), y).backward()
            report[f"bucket_cap_mb={megabytes}"] = collectives(trace.events())
        for as_view in (False, True):
            ddp = DistributedDataParallel(
                make_model(0, torch.float64).to(device), gradient_as_bucket_view=as_view
            )
            for _ in range(2):
                ddp.zero_grad()
                nn.functional.cross_entropy(ddp(x), y).backward()
            report[f"gradient_as_bucket_view={as_view}"] = all(
                w.grad._base is not None for w in ddp.parameters()
            )
        for find_unused in (False, True):
            ddp = DistributedDataParallel(
                _Branches().to(device), find_unused_parameters=find_unused
            )
            try:
                for use_spare in (True, False, True):
                    ddp.zero_grad()
                    loss = nn.functional.cross_entropy(ddp(x, use_spare=use_spare), y)
                    loss.backward()
                outcome = "3 steps, one without the spare head"
            except RuntimeError as err:
                outcome = f"RuntimeError: {str(err).splitlines()[0]}"
            report[f"find_unused_parameters={find_unused}"] = outcome
        if rank == 0:
            (out / "knobs.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


@contextlib.contextmanager
def counting_all_reduce(calls: list[tuple[int, int]]):
    """Record (elements, bytes) of every `dist.all_reduce` while the block runs. DDP's
    communication hooks call it through the module, so this sees what they send; DDP's
    built-in all-reduce (no hook) runs in C++ and is not seen, which is why the baseline
    registers `allreduce_hook`."""
    original = dist.all_reduce

    def counted(tensor, *args, **kwargs):
        calls.append((tensor.numel(), tensor.numel() * tensor.element_size()))
        return original(tensor, *args, **kwargs)

    dist.all_reduce = counted
    try:
        yield calls
    finally:
        dist.all_reduce = original


def compression_worker(
    rank: int,
    world_size: int,
    port: int,
    data_file: str,
    out_dir: str,
    global_batch: int,
    steps: int,
    lr: float,
) -> None:
    """Train in float32 with DDP under communication hooks: plain all-reduce, float16 and
    bfloat16 compression, and PowerSGD of rank 1 (after two uncompressed steps:
    `start_powerSGD_iter=2`).

    Introduced in chapter 14. Rank 0 writes `compression.json`: per hook, the bytes its
    all-reduces sent per step after the first (counted), and the largest weight difference
    from the plain all-reduce.
    """
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    out, data = Path(out_dir), load_data(data_file)
    device = join_process_group(rank, world_size, port)
    images, labels = data.tensors
    try:
        hooks = {
            "all-reduce (float32)": (None, default_hooks.allreduce_hook),
            "float16 compression": (None, default_hooks.fp16_compress_hook),
            "bfloat16 compression": (None, default_hooks.bf16_compress_hook),
            "PowerSGD, matrix rank 1": (
                lambda: powerSGD_hook.PowerSGDState(
                    process_group=None,
                    matrix_approximation_rank=1,
                    start_powerSGD_iter=2,
                    min_compression_rate=1,
                ),
                powerSGD_hook.powerSGD_hook,
            ),
        }
        report, trained = {}, {}
        for name, (make_state, hook) in hooks.items():
            model = make_model(0).to(device)  # float32: what compression is for
            ddp = DistributedDataParallel(model)
            optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
            sent: list[list[tuple[int, int]]] = []
            try:
                ddp.register_comm_hook(make_state() if make_state else None, hook)
                for batch in step_batches(len(data), global_batch, steps):
                    part = rank_part(batch, rank, world_size)
                    optimizer.zero_grad()
                    with counting_all_reduce([]) as calls:
                        loss = nn.functional.cross_entropy(
                            ddp(images[part].float().to(device)),
                            labels[part].to(device),
                        )
                        loss.backward()
                    sent.append(calls)
                    optimizer.step()
            except TypeError as err:  # bfloat16's hook: refused by builds without CUDA
                # and NCCL >= 2.10 (or XPU and XCCL), whatever the backend; gloo itself
                # all-reduces bfloat16
                report[name] = {"refused": str(err)}
                continue
            trained[name] = [w.detach().cpu() for w in model.parameters()]
            report[name] = {"bytes per step": sum(b for _, b in sent[-1])}
        for name in trained:
            report[name]["difference"] = max_abs_difference(
                trained[name], trained["all-reduce (float32)"]
            )
        if rank == 0:
            (out / "compression.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def timeline_worker(
    rank: int,
    world_size: int,
    port: int,
    data_file: str,
    out_dir: str,
    batch: int,
    bucket_cap_mb: float,
) -> None:
    """Profile three DDP steps and keep when each backward computation and each
    all-reduce ran, on one clock. Introduced in chapter 14.

    Each rank writes `timeline{r}.json` (intervals in ms from its own first profiled step;
    the ranks' clocks are not aligned) and `trace{r}.json`, the profiler's Chrome trace for
    Perfetto or chrome://tracing. "backward" is every function autograd's engine ran.
    """
    out, data = Path(out_dir), load_data(data_file)
    device = join_process_group(rank, world_size, port)
    images, labels = data.tensors
    part = rank_part(torch.arange(batch), rank, world_size)
    x, y = images[part].to(device), labels[part].to(device)
    try:
        ddp = DistributedDataParallel(  # small buckets: several all-reduces per step
            make_model(0, torch.float64).to(device), bucket_cap_mb=bucket_cap_mb
        )
        ddp.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()  # buckets rebuilt after it
        with torch.profiler.profile() as trace:
            for _ in range(3):
                ddp.zero_grad()
                with torch.profiler.record_function("step"):
                    nn.functional.cross_entropy(ddp(x), y).backward()
        trace.export_chrome_trace(str(out / f"trace{rank}.json"))
        events = trace.events()
        start = min(e.time_range.start for e in events)

        def interval(event):
            return [
                (event.time_range.start - start) / 1e3,
                event.time_range.elapsed_us() / 1e3,
            ]

        timeline = {
            "step": [interval(e) for e in events if e.name == "step"],
            "backward": [
                interval(e)
                for e in events
                if e.name.startswith("autograd::engine::evaluate_function")
            ],
            "all-reduce": [
                interval(e) for e in events if e.name.endswith(":all_reduce")
            ],
        }
        (out / f"timeline{rank}.json").write_text(json.dumps(timeline))
    finally:
        dist.destroy_process_group()


def bandwidth_worker(
    rank: int,
    world_size: int,
    port: int,
    out_dir: str,
    sizes: Sequence[int],
    repeats: int,
) -> None:
    """Time `dist.all_reduce` of float32 tensors of each of `sizes` bytes: the median of
    `repeats` calls, after one to warm up. Introduced in chapter 14. Rank 0 writes
    `bandwidth.json`."""
    for size in sizes:
        check_int("bandwidth_worker: a message size in bytes", size)
    out = Path(out_dir)
    device = join_process_group(rank, world_size, port)
    try:
        seconds = []
        for size in sizes:
            tensor = torch.ones(max(1, size // 4), device=device)
            dist.all_reduce(tensor)
            times = []
            for _ in range(repeats):
                dist.barrier()
                begin = time.perf_counter()
                dist.all_reduce(tensor)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - begin)
            seconds.append(float(np.median(times)))
        if rank == 0:
            report = {
                "sizes": list(sizes),
                "seconds": seconds,
                "world size": world_size,
            }
            (out / "bandwidth.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def fit_latency_and_bandwidth(
    sizes: Sequence[float], seconds: Sequence[float], world_size: int
) -> tuple[float, float]:
    """Fit chapter 10's ring model, t = 2(n-1) x (S / (n B) + alpha), to measured
    all-reduce times of messages of `sizes` bytes: returns (alpha in seconds, B in
    bytes/s). Introduced in chapter 14."""
    check_int("fit_latency_and_bandwidth: world_size", world_size, least=2)
    if len(sizes) != len(seconds) or len(set(sizes)) < 2 or min(sizes) <= 0:
        raise ValueError(
            "fit_latency_and_bandwidth: give one time per size, for at least two "
            "different message sizes, each larger than 0 bytes."
        )
    seconds = np.asarray(seconds, float)  # weighted by 1/t: each size counts alike
    slope, intercept = np.polyfit(np.asarray(sizes, float), seconds, 1, w=1 / seconds)
    steps = 2 * (world_size - 1)
    return intercept / steps, steps / (world_size * slope)
