"""PyTorch plumbing for the chapters: the same small CNN as the Keras chapters, the data as
tensors, consecutive batches and a process's part of one, the collectives a profiler
recorded, and a launcher that cannot hang (`run_ranks`). The chapters write the workers
they teach into files of their own (`%%writefile`), and where a DDP process trains
(`ddp_device`) on chapter 6's page.
"""

from __future__ import annotations

import base64
import pickle
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

from utils.checks import check_int
from utils.launch import run_processes


class TorchSmallCNN(nn.Module):
    """`utils.small_cnn` in PyTorch: two 3x3 convolutions with max pooling, then logits."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 5 * 5, 10),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.layers(images)


def make_model(seed: int, dtype: torch.dtype = torch.float32) -> TorchSmallCNN:
    """A TorchSmallCNN whose initial weights depend only on `seed`."""
    torch.manual_seed(seed)
    return TorchSmallCNN().to(dtype)


def to_tensors(
    images: np.ndarray, labels: np.ndarray, dtype=torch.float32
) -> TensorDataset:
    """NHWC arrays from `load_mnist_subset` as an NCHW `TensorDataset`."""
    x = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2))).to(dtype)
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


def save_data(data: TensorDataset, path: str | Path) -> str:
    """Write the images and labels for the workers to read (a process's arguments cannot
    hold a dataset); returns the path. Introduced in chapter 14."""
    torch.save(data.tensors, path)
    return str(path)


def load_data(data_file: str) -> TensorDataset:
    """What `save_data` wrote. Introduced in chapter 14."""
    return TensorDataset(*torch.load(data_file))


def step_batches(examples: int, global_batch: int, steps: int) -> list[torch.Tensor]:
    """The example indices of each step's global batch: consecutive, in order, so a sharded
    run and one process see the same batches. Used in chapters 14, 15 and 17."""
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
    """Rank `rank`'s equal part of a global batch. Used in chapters 14, 15 and 17."""
    check_int("rank_part: world_size", world_size)
    if len(batch) % world_size:
        raise ValueError(
            f"rank_part: a global batch of {len(batch)} does not split into {world_size} "
            "equal parts; make it a multiple of the number of processes."
        )
    size = len(batch) // world_size
    return batch[rank * size : (rank + 1) * size]


#: The collectives the profiler records, as c10d names them, with the argument whose size
#: counts: an all-gather's output (the whole tensor), a reduce-scatter's input.
_GATHER_SCATTER = {
    "c10d::_allgather_base_": ("all-gather", 0),
    "c10d::_reduce_scatter_base_": ("reduce-scatter", 1),
}


def collectives(events) -> list[tuple[str, int]]:
    """The collectives among a `torch.profiler` run's `events()`, in the order they started, as
    (kind, elements of the whole tensor). Used in chapters 15 and 17. All-reduces that gloo
    runs at once, on two of its threads, may start in either order: compare their sizes as
    a multiset, not as a sequence.

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


# A rank whose function returned ends at once (os._exit, after flushing its output), without
# the interpreter's teardown: there a gloo worker thread that frees a finished collective
# launched from a backward pass (its saved thread-local state holds a Python object) asks for
# the GIL, is ended by the finalizing interpreter inside a C++ destructor, and std::terminate
# aborts the process ("terminate called without an active exception", exit -6;
# pytorch/pytorch#117762; CONTRIBUTING.md). The rank's files are written and its process
# group destroyed before this point.
_RUN_RANK = (
    "import base64, os, pickle, sys; "
    "fn, args = pickle.loads(base64.b64decode(sys.argv[1])); "
    "fn(int(sys.argv[2]), *args); "
    "sys.stdout.flush(); sys.stderr.flush(); os._exit(0)"
)


def run_ranks(
    fn, world_size: int, args: tuple = (), *, timeout_s: float = 120.0
) -> list[str]:
    """Run `fn(rank, *args)` in `world_size` new Python processes and return each rank's
    output, waiting at most `timeout_s` seconds.

    Introduced in chapter 14 (chapter 19 shows the hang it guards against). Unlike a
    bare `mp.spawn(..., join=True)`, a hung group cannot hang the caller: the ranks are
    started by `utils.launch.run_processes`, which at the deadline kills every rank
    still running and raises a TimeoutError naming them, and when a rank fails stops the
    others and raises a RuntimeError with the rank's error. As with `spawn`, `fn` must
    be importable: defined in a .py file, not in a notebook."""
    check_int("run_ranks: world_size", world_size)
    if getattr(fn, "__module__", "__main__") == "__main__":
        raise ValueError(
            f"run_ranks: {getattr(fn, '__name__', fn)!s} is defined in the notebook (or "
            "script) itself, which the new processes cannot import; define it in a .py "
            "file next to the notebook and import it from there."
        )
    payload = base64.b64encode(pickle.dumps((fn, tuple(args)))).decode()
    return run_processes(
        [
            [sys.executable, "-c", _RUN_RANK, payload, str(rank)]
            for rank in range(world_size)
        ],
        names=[f"rank {rank}" for rank in range(world_size)],
        timeout_s=timeout_s,
    )
