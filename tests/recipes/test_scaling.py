"""recipes/scaling.py, the one command that measures a reader's own GPUs: its plan, its
checks of the book's claims from a run's rows, its one-line refusals, and (the full proof)
its CPU dry run, whose output the server page shows."""

import json
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT, import_recipe, run_as_typed
from utils.launch import child_environment

SHOWN = ROOT / "recipes" / "measured" / "scaling_cpu_2_processes.txt"


@pytest.fixture(scope="module")
def scaling():
    return import_recipe("scaling")


def test_the_device_counts_double_up_to_the_most(scaling):
    assert scaling.counts(2) == [1, 2]
    assert scaling.counts(8) == [1, 2, 4, 8]
    assert scaling.counts(6) == [1, 2, 4, 6]


def row(recipe, model, n, step_s, memory=None, parameters=152_729_600):
    return {"recipe": recipe, "model": model, "world_size": n, "mean_step_time_s": step_s,
            "peak_memory_bytes": memory, "parameters": parameters}  # fmt: skip


def test_the_prediction_is_chapter_18s_ring_model(scaling):
    """All-reduce of float32 gradients by the ring, backward 2/3 of the one-GPU step; a
    large model's all-reduce hides when shorter than its backward pass."""
    bandwidth = {"bandwidth_bytes_per_s": 370e9, "alpha_s": 10e-6}
    ring, backward, step = scaling.predicted_step(row("torch_ddp", "t", 1, 0.06), 8, bandwidth)
    gradient_bytes = 4 * 152_729_600
    assert ring == pytest.approx(2 * 7 * (gradient_bytes / (8 * 370e9) + 10e-6))
    last_bucket = 2 * 7 * (25 * 2**20 / (8 * 370e9) + 10e-6)  # reduced after the backward
    assert backward == pytest.approx(0.04) and step == pytest.approx(0.06 + last_bucket)
    cnn = row("torch_ddp", "cnn", 1, 0.003, parameters=12_810)
    ring, _, step = scaling.predicted_step(cnn, 8, bandwidth)
    assert step == pytest.approx(0.003 + ring)  # one bucket: after the backward pass


def test_fsdp2_must_hold_less_than_ddp_from_two_gpus(scaling):
    rows = [
        row("torch_ddp", "transformer", 1, 0.06, 10 * 2**30),
        row("torch_fsdp", "transformer", 1, 0.07, 11 * 2**30),  # one GPU: not checked
        row("torch_ddp", "transformer", 2, 0.06, 10 * 2**30),
        row("torch_fsdp", "transformer", 2, 0.07, 9 * 2**30),
        row("torch_ddp", "transformer", 4, 0.06, 10 * 2**30),
        row("torch_fsdp", "transformer", 4, 0.07, 10.5 * 2**30),
    ]
    assert scaling.fsdp_memory(rows) == [
        (True, "transformer on 2 GPUs: FSDP2 9.00 GiB, DDP 10.00 GiB"),
        (False, "transformer on 4 GPUs: FSDP2 10.50 GiB, DDP 10.00 GiB"),
    ]


def test_more_gpus_than_the_machine_shows_is_refused(scaling, monkeypatch):
    monkeypatch.setattr(scaling, "visible_gpus", lambda: 4)
    with pytest.raises(SystemExit, match="scaling.py: --devices 8, but this machine shows 4."):
        scaling.parse_args(["--devices", "8"])
    assert scaling.parse_args([]).most == 4 and scaling.parse_args(["--devices", "2"]).most == 2


def run_scaling(*flags, cwd=None, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, str(ROOT / "recipes" / "scaling.py"), *flags],
        cwd=cwd,
        env=child_environment({"CUDA_VISIBLE_DEVICES": "", **(env or {})}),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.full  # starts Python programs: the full proof's
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([], "scaling.py: 0 GPU(s) here: scaling needs 2 or more; on a machine without GPUs, "
         "--cpu-processes 2 runs the tool on two CPU processes."),
        (["--devices", "1"], "scaling.py: --devices 1: scaling needs 2 or more."),
    ],
    ids=["no GPU", "one GPU"],
)  # fmt: skip
def test_a_wrong_start_gets_one_line(flags, message, tmp_path):
    result = run_scaling(*flags, cwd=tmp_path)
    assert result.returncode != 0 and result.stderr.strip() == message


def masked(text: str) -> str:
    """The printout with its numbers (and the seconds each launch took) left out, and its
    spacing, which follows the numbers' widths (columns, wrapped lines)."""
    return re.sub(r"\s+", " ", re.sub(r"\d[\d.,e+-]*", "#", text)).strip()


@pytest.mark.full  # eleven launches on two CPU processes: the full proof (CONTRIBUTING.md)
def test_the_cpu_dry_run_prints_the_table_and_the_checks_the_page_shows(tmp_path):
    """The server page's command as typed, in a fresh folder (tests/book/test_shell_blocks.py
    leaves this block to this test)."""
    result = run_as_typed("python recipes/scaling.py --cpu-processes 2", tmp_path, 600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert masked(result.stdout) == masked(SHOWN.read_text()), (
        f"the printout changed: save it to {SHOWN.relative_to(ROOT)} (the page shows it)"
    )
    assert "1. same weights: ok" in result.stdout
    rows = [json.loads(line) for line in (tmp_path / "runs/scaling/results.jsonl").open()]
    assert {(r["recipe"], r["model"], r["world_size"]) for r in rows} == {
        (recipe, model, n)
        for recipe in ("torch_ddp", "torch_fsdp")
        for model in ("cnn", "transformer")
        for n in (1, 2)
    }
    assert max(len(line) for line in result.stdout.splitlines()) <= 88
