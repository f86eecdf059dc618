"""utils.pytorch_ddp: the model and its tensors, the devices, the batches of a step, the
collectives the profiler records, and run_ranks: what it returns and how it fails. The DDP
workers chapters 6 and 13 write, and chapter 9's programs, are their chapters' tests
(tests/chapters/)."""

import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from utils.ddp_reference import ddp_device
from utils.pytorch_ddp import (
    collectives,
    make_model,
    rank_part,
    run_ranks,
    step_batches,
    to_tensors,
)


def test_model_is_seeded_and_shapes_match_the_tf_model():
    a, b = make_model(0), make_model(0)
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    assert a(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert sum(p.numel() for p in a.parameters()) == 12810  # as utils.small_cnn


def test_to_tensors_makes_nchw():
    data = to_tensors(np.zeros((3, 28, 28, 1), np.float32), np.array([1, 2, 3]))
    assert data.tensors[0].shape == (3, 1, 28, 28) and data.tensors[1].dtype == torch.int64


def test_batches_are_consecutive_and_split_equally():
    batches = step_batches(10, 4, 2)
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert rank_part(batches[1], 1, 2).tolist() == [6, 7]
    with pytest.raises(ValueError, match="need 12 examples, and there are 10"):
        step_batches(10, 4, 3)
    with pytest.raises(ValueError, match="does not split into 3 equal parts"):
        rank_part(batches[0], 0, 3)


def test_collectives_are_read_with_the_size_of_the_whole_tensor():
    def event(name, *shapes):
        return SimpleNamespace(name=name, input_shapes=list(shapes))

    events = [
        event("c10d::_allgather_base_", [8], [4], []),
        event("gloo:all_gather", [4]),
        event("c10d::_reduce_scatter_base_", [4], [8], []),
        event("gloo:all_reduce", [8]),  # gloo's work inside the reduce-scatter
        event("c10d::allreduce_", [], []),
        event("gloo:all_reduce", [12]),
        event("c10d::allreduce_", [], []),  # gloo's thread starts it after the next one
        event("c10d::allreduce_", [], []),
        event("gloo:all_reduce", [5]),
        event("gloo:all_reduce", [3]),
    ]
    assert collectives(events) == [
        ("all-gather", 8),
        ("reduce-scatter", 8),
        ("all-reduce", 12),
        ("all-reduce", 5),
        ("all-reduce", 3),
    ]


@pytest.mark.parametrize(
    "rank, ranks, gpus, expected",
    [
        (0, 2, 8, ("cuda:0", "nccl")),  # an 8-GPU server: a GPU for every rank
        (1, 2, 2, ("cuda:1", "nccl")),
        (7, 8, 8, ("cuda:7", "nccl")),
        (1, 2, 1, ("cpu", "gloo")),  # Colab: one GPU for two ranks
        (0, 2, 0, ("cpu", "gloo")),  # a laptop
    ],
)
def test_ddp_device_gives_every_rank_a_gpu_and_nccl_or_all_the_cpu_and_gloo(
    rank, ranks, gpus, expected
):
    device, backend = ddp_device(rank, ranks, gpu_count=gpus)
    assert (str(device), backend) == expected


def test_ddp_device_counts_the_gpus_this_process_sees(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert ddp_device(3, 4) == (torch.device("cuda", 3), "nccl")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert ddp_device(0, 1) == (torch.device("cpu"), "gloo")


@pytest.mark.parametrize(
    "rank, ranks, match",
    [
        (2, 2, "local_rank 2 is not below"),
        (-1, 2, "local_rank must be an int"),
        (0, 0, "local_world_size must be an int"),
    ],
)
def test_ddp_device_rejects_a_rank_outside_the_group(rank, ranks, match):
    with pytest.raises(ValueError, match=match):
        ddp_device(rank, ranks)


def _fails_on_rank_one(rank):
    if rank == 1:
        raise ValueError("rank one is broken")


def _hangs_on_rank_one(rank, pid_folder):
    import time
    from pathlib import Path

    Path(pid_folder, f"rank{rank}.pid").write_text(str(os.getpid()))
    if rank == 1:
        time.sleep(600)


def _exits_on_rank_zero(rank):

    if rank == 0:
        os._exit(3)


def _prints_then_registers_a_teardown(rank):
    import atexit

    atexit.register(print, "teardown ran")
    print(rank, "done", end="")  # no newline: only a flush writes it


def test_run_ranks_returns_what_each_rank_printed():
    assert [out.strip() for out in run_ranks(print, 2, ("ready",))] == ["0 ready", "1 ready"]


@pytest.mark.full  # starts Python programs: the full proof's
def test_a_rank_that_returned_ends_without_the_interpreter_s_teardown():
    """Its output is flushed, and nothing registered for the teardown runs (utils.pytorch_ddp:
    library threads torn down there can abort a finished rank)."""
    assert run_ranks(_prints_then_registers_a_teardown, 2) == ["0 done", "1 done"]


@pytest.mark.full  # starts Python programs: the full proof's
def test_run_ranks_names_the_rank_that_failed():
    with pytest.raises(
        RuntimeError, match="^rank 1 exited with code 1: ValueError: rank one is broken$"
    ):
        run_ranks(_fails_on_rank_one, 2)


@pytest.mark.full  # starts Python programs: the full proof's
def test_run_ranks_names_a_rank_that_exited():
    with pytest.raises(RuntimeError, match="^rank 0 exited with code 3"):
        run_ranks(_exits_on_rank_zero, 2)


@pytest.mark.full  # starts Python programs: the full proof's
def test_run_ranks_stops_a_hung_group_and_leaves_no_process(tmp_path):
    import time

    start = time.monotonic()
    # rank 0 ends once started, which a busy machine can delay past the deadline
    with pytest.raises(TimeoutError, match=r"^(rank 0, )?rank 1 still running after 8 s"):
        run_ranks(_hangs_on_rank_one, 2, (str(tmp_path),), timeout_s=8)
    assert time.monotonic() - start < 30
    for rank in range(2):  # every rank was stopped: none is left
        with pytest.raises(ProcessLookupError):
            os.kill(int((tmp_path / f"rank{rank}.pid").read_text()), 0)


def test_run_ranks_says_where_to_define_the_function():
    def in_the_notebook(rank):
        pass

    in_the_notebook.__module__ = "__main__"
    with pytest.raises(ValueError, match="define it in a .py file"):
        run_ranks(in_the_notebook, 2)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_run_ranks_rejects_bad_world_sizes(bad):
    with pytest.raises(ValueError, match="world_size must be an int of at least 1"):
        run_ranks(_fails_on_rank_one, bad)
