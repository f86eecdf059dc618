"""Your GPUs, your scaling table, in one command: run the PyTorch recipes (recipes/pytorch/)
on 1, 2, 4, ... N GPUs of this machine with the same batch per GPU, DDP and FSDP2, the CNN
and a transformer large enough to keep a GPU busy; print the scaling table (efficiency,
MFU, peak memory), check two of the book's claims on this machine and set a prediction
beside what it measured:

1. N GPUs train the weights one GPU trains on the same global batch (chapter 6): the CNN,
   10 steps in float32 (TF32 off: NVIDIA_TF32_OVERRIDE=0) with deterministic kernels,
   within float32's rounding (a largest difference of at most 1e-4 of the largest weight;
   a lost or doubled gradient is far larger);
2. FSDP2 holds less memory per GPU than DDP from 2 GPUs on (chapter 15; GPUs only);
3. not a check, numbers side by side: whether DDP's all-reduce hides behind the backward
   pass, as chapter 18's ring model predicts from this machine's own all-reduce
   (all_reduce_bandwidth.py, fitted) and the one-GPU step (2/3 of it, at most, is the
   backward pass), beside the measured N-GPU step.

    python recipes/scaling.py                     # 1, 2, 4, ... every GPU of this machine
    python recipes/scaling.py --devices 4         # 1, 2 and 4 GPUs
    python recipes/scaling.py --cpu-processes 2   # no GPU: 1 and 2 CPU processes, tiny sizes

On CPUs the sizes are tiny and the table checks the tool, not the machine. Everything goes
to --out (default runs/scaling): results.jsonl (`python recipes/results_table.py` reads
it), bandwidth.json, and each run's log (each run starts afresh; its checkpoints are
deleted once it has reported); on 8 GPUs, 19 launches one after another. Exit status 1 if
check 1 or 2 fails; a run that fails stops it with its log's last lines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from results_table import add_efficiency, format_table, read_runs  # beside it

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
#: Each model's flags on GPUs and (tiny) on CPUs; the batch per GPU stays as N grows.
SIZES = {
    "cnn": {
        "gpu": "--epochs 5 --batch-per-device 64",
        "cpu": "--epochs 1 --limit-examples 512 --batch-per-device 8 --num-workers 0",
    },
    "transformer": {
        "gpu": "--context 1024 --width 1024 --layers 12 --heads 16 --batch-per-device 16 "
        "--max-steps 100",
        "cpu": "--context 32 --width 64 --layers 2 --heads 2 --text-bytes 40000 "
        "--batch-per-device 8 --max-steps 10 --num-workers 0",
    },
}
WEIGHT_STEPS, WEIGHT_BOUND = 10, 1e-4  # check 1: steps, largest difference / largest weight
COLUMNS = ["recipe", "devices", "global_batch", "step_ms", "efficiency", "mfu", "memory_gib"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--devices", type=int, help="the most GPUs to use, 2 or more (default: all)")
    where.add_argument(
        "--cpu-processes", type=int, metavar="N", help="N CPU processes (2 or more), tiny sizes"
    )
    parser.add_argument("--out", default="runs/scaling", help="folder for results and logs")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds a launch may take before it is ended"
    )
    args = parser.parse_args(argv)
    args.cpu = args.cpu_processes  # None on GPUs
    args.kind = "cpu" if args.cpu is not None else "gpu"
    asked = args.cpu if args.kind == "cpu" else args.devices
    if asked is not None and asked < 2:
        flag = "--cpu-processes" if args.kind == "cpu" else "--devices"
        raise SystemExit(f"scaling.py: {flag} {asked}: scaling needs 2 or more.")
    here = visible_gpus() if args.kind == "gpu" else asked
    if here < 2:
        raise SystemExit(
            f"scaling.py: {here} GPU(s) here: scaling needs 2 or more; on a machine "
            "without GPUs, --cpu-processes 2 runs the tool on two CPU processes."
        )
    args.most = asked or here
    if args.most > here:
        raise SystemExit(f"scaling.py: --devices {args.most}, but this machine shows {here}.")
    return args


def visible_gpus() -> int:
    """The GPUs torch sees here (0 without CUDA), asked in a short child process so that
    this one never initialises CUDA before its launches do."""
    code = "import torch; print(torch.cuda.device_count())"
    command = [sys.executable, "-c", code]
    found = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if found.returncode:
        last = (found.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"scaling.py: PyTorch could not count the GPUs here ({last}).")
    return int(found.stdout)


def counts(most: int) -> list[int]:
    """1, 2, 4, ... below `most`, then `most`."""
    return sorted({2**k for k in range(most.bit_length()) if 2**k < most} | {most})


def launch(args, processes: int, script: str, flags: str, name: str, env=None) -> None:
    """torchrun --standalone --nproc_per_node=PROCESSES SCRIPT FLAGS (`env` added to its
    environment), its output in OUT/NAME.log; stopped after --timeout seconds."""
    log = Path(args.out) / f"{name}.log"
    # on CPUs one thread a process, as torchrun sets for 2 or more: comparable steps
    cpu = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"} if args.cpu else {}
    env = {**os.environ, **cpu, **(env or {})}
    command = [*TORCHRUN, f"--nproc_per_node={processes}", str(script), *flags.split()]
    print(f"  {name}: {processes} process(es) ...", end=" ", flush=True)
    tick = time.monotonic()
    with open(log, "w") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code = process.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            stop(process)
    if code != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        why = f"ended after {args.timeout:g} s" if code is None else f"failed (exit {code})"
        print(f"\n{tail}", file=sys.stderr)
        raise SystemExit(
            f"scaling.py: {name} {why}; its log: {log}. Fix what it says and run the same "
            "command again (every run starts afresh)."
        )
    print(f"{time.monotonic() - tick:.0f} s", flush=True)


def stop(process: subprocess.Popen) -> None:
    """End torchrun if it is still running (a timeout, or Ctrl-C here): SIGTERM, which it
    passes to its workers (they run in sessions of their own), then SIGKILL after 60 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure(args) -> list[dict]:
    """Each recipe, model and device count once; their results rows."""
    results = Path(args.out) / "results.jsonl"
    results.unlink(missing_ok=True)
    for model, sizes in SIZES.items():
        for recipe in ("torch_ddp", "torch_fsdp"):
            for n in counts(args.most):
                name = f"{recipe}-{model}-{n}"
                folder = Path(args.out) / name
                shutil.rmtree(folder, ignore_errors=True)  # never resume an earlier run
                flags = f"--model {model} {sizes[args.kind]} --out {folder} --results {results}"
                launch(args, n, HERE / "pytorch" / f"{recipe}.py", flags, name)
                shutil.rmtree(folder)  # its checkpoints: gigabytes for the transformer
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    if len(rows) != 4 * len(counts(args.most)):
        raise SystemExit(f"scaling.py: {results} has {len(rows)} rows, not one per run.")
    return rows


def same_weights(args) -> tuple[bool, str]:
    """Check 1: N processes with batch b against 1 with batch N x b, the same steps."""
    import torch

    batch, folders = (8 if args.cpu else 64), {}
    (Path(args.out) / "weights.jsonl").unlink(missing_ok=True)
    tiny = "--limit-examples 512 --num-workers 0" if args.cpu else ""
    for processes, per_device in ((1, args.most * batch), (args.most, batch)):
        name = f"weights-{processes}"
        folders[processes] = Path(args.out) / name
        shutil.rmtree(folders[processes], ignore_errors=True)
        flags = f"--precision fp32 --deterministic --max-steps {WEIGHT_STEPS} {tiny}"
        flags += f" --batch-per-device {per_device} --out {folders[processes]}"
        flags += f" --results {Path(args.out) / 'weights.jsonl'}"
        # TF32 off: cuDNN's convolutions use it even in float32 (allow_tf32's default)
        script = HERE / "pytorch" / "torch_ddp.py"
        launch(args, processes, script, flags, name, {"NVIDIA_TF32_OVERRIDE": "0"})
    one, many = (torch.load(folders[n] / "model.pt") for n in (1, args.most))
    for folder in folders.values():
        shutil.rmtree(folder)
    gap = max((one[k] - many[k]).abs().max().item() for k in one)
    scale = max(w.abs().max().item() for w in one.values())
    text = (
        f"{args.most} processes x {batch} and 1 x {args.most * batch}, {WEIGHT_STEPS} steps: "
        f"largest weight difference {gap:.1e} = {gap / scale:.1e} of the largest weight "
        f"(bound {WEIGHT_BOUND:g})"
    )
    return gap <= WEIGHT_BOUND * scale, text


def fsdp_memory(rows: list[dict]) -> list[tuple[bool, str]]:
    """Check 2: FSDP2's peak memory per GPU below DDP's from 2 GPUs on, for the transformer
    (the CNN's 51 KB of weights are too few for sharding to show)."""
    peak = {(r["recipe"], r["world_size"]): r["peak_memory_bytes"] for r in rows}
    checks = []
    for n in sorted({r["world_size"] for r in rows if r["model"] == "transformer"} - {1}):
        ddp, fsdp = peak.get(("torch_ddp", n)), peak.get(("torch_fsdp", n))
        if ddp and fsdp:
            text = f"transformer on {n} GPUs: FSDP2 {fsdp / 2**30:.2f} GiB, DDP "
            checks.append((fsdp < ddp, text + f"{ddp / 2**30:.2f} GiB"))
    return checks


def predicted_step(row: dict, n: int, bandwidth: dict) -> tuple[float, float, float]:
    """Chapter 18's prediction for DDP on n devices from its 1-device row: the all-reduce
    of its float32 gradients by the ring model, the backward pass (4 of a step's 6
    operations per weight: at most 2/3 of the step, which also holds the optimizer and the
    loader), and the step, longer by what does not hide: at least the last bucket (up to
    DDP's 25 MiB), reduced after the backward pass ends; all of it for gradients that fit
    DDP's first bucket (1 MiB)."""
    alpha, bus = max(bandwidth["alpha_s"], 0), bandwidth["bandwidth_bytes_per_s"]

    def ring(size: float) -> float:
        return 2 * (n - 1) * (size / (n * bus) + alpha)

    gradient_bytes = 4 * row["parameters"]
    backward = 2 / 3 * row["mean_step_time_s"]
    if gradient_bytes <= 2**20:
        exposed = ring(gradient_bytes)
    else:
        exposed = max(ring(gradient_bytes) - backward, ring(min(gradient_bytes, 25 * 2**20)))
    return ring(gradient_bytes), backward, row["mean_step_time_s"] + exposed


def hiding(rows: list[dict], bandwidth: dict, most: int) -> list[str]:
    """Check 3: for each model, DDP's predicted and measured step on `most` devices."""
    lines = []
    for model in SIZES:
        by_n = {
            r["world_size"]: r for r in rows if (r["recipe"], r["model"]) == ("torch_ddp", model)
        }
        ring, backward, step = predicted_step(by_n[1], most, bandwidth)
        measured = by_n[most]["mean_step_time_s"]
        if 4 * by_n[1]["parameters"] <= 2**20:
            verdict = "does not hide (one bucket, reduced after the backward pass)"
        else:
            verdict = "hides (but its last bucket)" if ring <= backward else "does not hide"
        lines.append(
            f"{model}: all-reduce {ring * 1e3:.2f} ms, backward at most {backward * 1e3:.2f} ms: "
            f"{verdict}; step on {most} predicted {step * 1e3:.2f} ms, measured "
            f"{measured * 1e3:.2f} ms ({measured / step:.0%} of predicted)"
        )
    return lines


def say(text: str) -> None:
    """Print `text` in lines of at most 80 characters, the later ones indented."""
    print(textwrap.fill(text, 80, subsequent_indent="   ", break_on_hyphens=False))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    where = "CPU processes, tiny sizes" if args.cpu else "GPUs"
    each = ", ".join(map(str, counts(args.most)))
    print(f"scaling.py: the recipes on {each} {where}; logs in {args.out}")
    rows = measure(args)
    measured = Path(args.out) / "bandwidth.json"
    largest = "4MiB" if args.cpu else "256MiB"
    flags = f"--largest {largest} --out {measured}"
    launch(args, args.most, HERE / "all_reduce_bandwidth.py", flags, "bandwidth")
    bandwidth = json.loads(measured.read_text())
    weights_ok, weights_text = same_weights(args)
    runs = read_runs([str(Path(args.out) / "results.jsonl")])
    add_efficiency(runs)
    for model, sizes in SIZES.items():
        print()
        say(f"{model}: {sizes[args.kind]}")
        print(format_table([run for run in runs if run["model"] == model], COLUMNS))
    memory = fsdp_memory([row for row in rows if row["model"] == "transformer"])
    print("\nchecks:")
    say(f"1. same weights: {'ok' if weights_ok else 'FAILED'}: {weights_text}")
    if args.cpu:
        say("2. FSDP2 below DDP: peak memory is measured on GPUs only")
    for ok, text in memory:
        say(f"2. FSDP2 below DDP: {'ok' if ok else 'FAILED'}: {text}")
    for text in hiding(rows, bandwidth, args.most):
        say(f"3. chapter 18's prediction for DDP: {text}")
    return 0 if weights_ok and all(ok for ok, _ in memory) else 1


if __name__ == "__main__":
    sys.exit(main())
