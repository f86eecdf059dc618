"""utils.pytorch_ddp: the model, the devices and run_ranks' errors; the DDP workers chapters 6
and 13 write on their pages (2 CPU processes == one process); chapter 9's programs, which
stand alone and build the same model. Chapter 19's straggler_worker and mismatch_worker are
asserted in the chapter's own cells (under nbval, and again in its second run)."""

import ast
import json
import os

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from tests.helpers import import_chapter_files, stderr_lines_started_alone
from tools.format_written import write_chapter_files
from utils.ddp_reference import ddp_device, train_one_process
from utils.launch import free_ports
from utils.pytorch_ddp import make_model, run_ranks, to_tensors


def test_model_is_seeded_and_shapes_match_the_tf_model():
    a, b = make_model(0), make_model(0)
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    assert a(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert sum(p.numel() for p in a.parameters()) == 12810  # as utils.small_cnn


def test_to_tensors_makes_nchw():
    data = to_tensors(np.zeros((3, 28, 28, 1), np.float32), np.array([1, 2, 3]))
    assert data.tensors[0].shape == (3, 1, 28, 28) and data.tensors[1].dtype == torch.int64


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


def _chapter_module(chapter, name, folder, monkeypatch):
    """The module that `chapter` writes as `name`.py."""
    return import_chapter_files(f"chapters/{chapter}.ipynb", folder, monkeypatch)(name)


def _random_digits(count, seed):
    rng = np.random.default_rng(seed)
    images = rng.random((count, 28, 28, 1), dtype=np.float32)
    return to_tensors(images, rng.integers(0, 10, count), dtype=torch.float64)


def test_chapter6_ddp_worker_on_two_cpu_processes_equals_one_process(tmp_path, monkeypatch):
    worker = _chapter_module("06_pytorch_dp_ddp", "ddp_worker", tmp_path, monkeypatch)
    data, out = _random_digits(96, seed=0), tmp_path / "run"
    out.mkdir()
    args = (2, data, str(out), 2, 8, 0.1, 0, "float64")
    mp.spawn(worker.ddp_worker, args=args, nprocs=2, join=True)
    ranks = [torch.load(out / f"rank{r}.pt") for r in range(2)]
    single = train_one_process(
        data, world_size=2, batch_per_device=8, epochs=2, lr=0.1, seed=0, dtype=torch.float64
    ).state_dict()
    for name in single:
        assert torch.equal(ranks[0][name], ranks[1][name]), name  # bit-identical ranks
        assert (ranks[0][name] - single[name]).abs().max() < 1e-12, name
    report = json.loads((out / "rank0.json").read_text())
    assert report["steps_per_epoch"] == 6 and len(report["epoch_seconds"]) == 2
    assert (report["device"], report["backend"]) == ("cpu", "gloo")  # no GPU here


def test_chapter13_no_sync_accumulation_equals_one_process_with_larger_batches(
    tmp_path, monkeypatch
):
    """2 ranks x 2 micro-batches of 4, accumulated under no_sync() == 1 process, batches of
    16; the ninth micro-batch of a rank (an incomplete step) changes nothing."""
    worker = _chapter_module("13_precision_and_accumulation", "accumulate", tmp_path, monkeypatch)
    data = _random_digits(72, seed=1)
    args = (2, free_ports(1)[0], data, str(tmp_path), 4, 2, 0.1)
    mp.spawn(worker.accumulating_worker, args=args, nprocs=2, join=True)
    accumulated = torch.load(tmp_path / "rank0.pt")
    single = train_one_process(
        data, world_size=2, batch_per_device=8, epochs=1, lr=0.1, seed=0, dtype=torch.float64
    ).state_dict()
    assert all((accumulated[k] - single[k]).abs().max() < 1e-12 for k in single)


#: Chapter 9's programs for servers: a reader copies each alone, so it imports nothing from
#: the book, and it builds the book's model and data itself.
CHAPTER9_PROGRAMS = ["ddp_train.py", "accelerate_train.py"]


@pytest.fixture(scope="module")
def chapter9_programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chapter9")
    return write_chapter_files("chapters/09_processes_and_machines.ipynb", folder)


@pytest.mark.parametrize("name", CHAPTER9_PROGRAMS)
def test_chapter9_programs_import_nothing_from_the_book(chapter9_programs, name):
    text = chapter9_programs[name].read_text()
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported.isdisjoint({"utils", "tools", "recipes", "tests"}), imported
    assert "PYTHONPATH" not in text  # it runs from any folder


@pytest.mark.parametrize("name", CHAPTER9_PROGRAMS)
def test_chapter9_programs_build_the_book_s_model_and_data(chapter9_programs, name):
    """The program's make_model and to_tensors (its imports and definitions run alone, not
    its training) give utils.pytorch_ddp's layers, initial weights and tensors."""
    tree = ast.parse(chapter9_programs[name].read_text())
    kept = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    tree.body = [node for node in tree.body if isinstance(node, kept)]
    program = {}
    exec(compile(tree, name, "exec"), program)
    for seed, dtype in [(0, torch.float32), (0, torch.float64), (3, torch.float32)]:
        theirs, ours = program["make_model"](seed, dtype), make_model(seed, dtype)
        assert repr(theirs) == repr(ours.layers)  # the same layers, in the same order
        weights = zip(theirs.state_dict().values(), ours.state_dict().values(), strict=True)
        assert all(torch.equal(a, b) for a, b in weights)
    rng = np.random.default_rng(0)
    images, labels = rng.random((5, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 5)
    theirs = program["to_tensors"](images, labels, dtype=torch.float64).tensors
    ours = to_tensors(images, labels, dtype=torch.float64).tensors
    assert all(torch.equal(a, b) and a.is_contiguous() for a, b in zip(theirs, ours))


def test_chapter9s_program_started_without_torchrun_says_how_in_one_line(chapter9_programs):
    """`python ddp_train.py ...`, what a newcomer types first: one line, no traceback."""
    program = chapter9_programs["ddp_train.py"]
    flags = ("--data", "digits.npz", "--out", "run")
    assert stderr_lines_started_alone(program, *flags, cwd=program.parent) == (
        1,
        ["Start it with torchrun: the command is at the top of ddp_train.py"],
    )


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


def test_a_rank_that_returned_ends_without_the_interpreter_s_teardown():
    """Its output is flushed, and nothing registered for the teardown runs (utils.pytorch_ddp:
    library threads torn down there can abort a finished rank)."""
    assert run_ranks(_prints_then_registers_a_teardown, 2) == ["0 done", "1 done"]


def test_run_ranks_names_the_rank_that_failed():
    with pytest.raises(
        RuntimeError, match="^rank 1 exited with code 1: ValueError: rank one is broken$"
    ):
        run_ranks(_fails_on_rank_one, 2)


def test_run_ranks_names_a_rank_that_exited():
    with pytest.raises(RuntimeError, match="^rank 0 exited with code 3"):
        run_ranks(_exits_on_rank_zero, 2)


def test_run_ranks_stops_a_hung_group_and_leaves_no_process(tmp_path):
    import time

    start = time.monotonic()
    # 15 s: long enough for rank 0 to start and end on a busy machine, as it must
    with pytest.raises(TimeoutError, match=r"^rank 1 still running after 15 s"):
        run_ranks(_hangs_on_rank_one, 2, (str(tmp_path),), timeout_s=15)
    assert time.monotonic() - start < 60
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
