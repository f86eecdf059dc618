"""tools.gpu_evidence: the script that measures the book's GPU paths in one run, and
tools.chapter_workers, its step that runs the PyTorch chapters' workers. Its dry run on the
CPU runs every step (the full proof), so the script is known to work before a GPU comes; a
failing or hanging step, or worker, is recorded and the others go on."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tools import chapter_workers, gpu_evidence


def test_without_a_gpu_it_says_to_use_the_dry_run(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit, match="--dry-run"):
        gpu_evidence.main([])


def test_a_failing_step_is_recorded_with_its_error_line():
    command = [sys.executable, "-c", "raise ValueError('wrong size')"]
    outcome = gpu_evidence.run_step(command, None, timeout_s=60)
    assert not outcome["ok"] and outcome["error"] == "ValueError: wrong size"


def test_a_step_past_its_deadline_is_stopped():
    outcome = gpu_evidence.run_step([sys.executable, "-c", "while True: pass"], None, 1)
    assert outcome == {"ok": False, "error": "stopped after 1 s"}


def test_the_chapters_step_fails_with_each_failed_worker_named(tmp_path):
    rows = tmp_path / chapter_workers.ROWS
    written = [
        {"chapter": "06_pytorch_dp_ddp", "worker": "ddp_worker", "outcome": "ok"},
        {"chapter": "17_inside_one_step", "worker": "compiled_worker", "outcome": "E: x"},
    ]
    rows.write_text("".join(json.dumps(row) + "\n" for row in written))
    outcome = gpu_evidence.run_step([sys.executable, "-c", "pass"], rows, timeout_s=60)
    assert not outcome["ok"] and outcome["workers"] == written
    assert outcome["error"] == "1 of 2 failed: 17_inside_one_step, compiled_worker"


def test_a_failing_worker_is_recorded_and_the_next_one_runs(tmp_path, monkeypatch):
    def fails(machine):
        raise ValueError("first line\nwhat went wrong")

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # as the dry run sets it, undone after
    monkeypatch.setattr(
        chapter_workers,
        "WORKERS",
        [
            (chapter_workers.DDP, "failing", fails),
            (chapter_workers.DDP, "working", lambda machine: {"files": machine.folder.name}),
        ],
    )
    chapter_workers.main(["--dry-run", "--out", str(tmp_path)])
    rows = [json.loads(line) for line in (tmp_path / chapter_workers.ROWS).read_text().splitlines()]
    assert [row["outcome"] for row in rows] == ["ValueError: what went wrong", "ok"]
    assert rows[1]["report"] == {"files": "06_pytorch_dp_ddp"}
    assert rows[1]["world_size"] == 2 and rows[1]["backend"] == "gloo"
    assert (tmp_path / "06_pytorch_dp_ddp" / "ddp_worker.py").is_file()  # the chapter's file


@pytest.mark.full  # about a dozen launches: the full proof (CONTRIBUTING.md)
def test_the_dry_run_runs_every_step_and_records_each(tmp_path):
    command = [sys.executable, "-m", "tools.gpu_evidence", "--dry-run", "--out", str(tmp_path)]
    subprocess.run(command, cwd=ROOT, check=True, timeout=900, capture_output=True)
    rows = [json.loads(line) for line in (tmp_path / "cpu_evidence.jsonl").read_text().splitlines()]
    planned = [name for name, *_ in gpu_evidence.steps(True, tmp_path)]
    assert [row["step"] for row in rows] == planned
    assert all(row["ok"] for row in rows), [row for row in rows if not row["ok"]]
    assert all(row["dry_run"] and row["torch"] and row["date"] for row in rows)
    for row in rows:
        if row["step"].startswith("transformer"):
            assert row["result"]["model"] == "transformer" and row["result"]["mfu"] > 0
            assert row["logged_losses"][-1] < row["logged_losses"][0]  # it learned
        elif row["step"].startswith("CNN"):
            assert row["result"]["model"] == "cnn"
        elif row["step"] == gpu_evidence.CHAPTERS:  # every worker, on 2 gloo processes
            workers = [(row["chapter"], row["worker"]) for row in row["workers"]]
            assert workers == [(chapter, name) for chapter, name, _ in chapter_workers.WORKERS]
            assert all(w["world_size"] == 2 and w["backend"] == "gloo" for w in row["workers"])
        else:  # the quick start's programs print their test accuracy
            assert "test accuracy" in row["printed"][-1]


def test_what_the_server_page_says_of_the_h100_run_is_in_its_file():
    """The sentences of on_your_own_machine.md, chapter 18 and the quick start about the
    H100 run, against the file it wrote."""
    path = ROOT / "recipes" / "measured" / "nvidia_h100_80gb_hbm3_evidence.jsonl"
    rows = {row["step"]: row for row in map(json.loads, path.read_text().splitlines())}
    assert all(row["device_name"] == "NVIDIA H100 80GB HBM3" for row in rows.values())
    workers = {row["worker"]: row for row in rows[gpu_evidence.CHAPTERS]["workers"]}
    failed = [name for name, row in workers.items() if row["outcome"] != "ok"]
    assert len(workers) == 12 and failed == ["clipping_worker"]
    assert "cuda:0 device type tensor to numpy" in workers["clipping_worker"]["outcome"]
    assert workers["fsdp_worker"]["report"]["gap"] < 1e-14
    assert workers["fsdp_restore_worker"]["report"]["gap"] == 0
    assert workers["timeline_worker"]["report"]["all-reduce began ms before backward ended"] > 0
    small = [rows[f"transformer recipe size, {recipe}"] for recipe in ("torch_ddp", "torch_fsdp")]
    assert all(0.005 < row["result"]["mfu"] < 0.015 for row in small)  # "about 1%"
    ddp, fsdp2 = (rows[f"transformer large, {recipe}"] for recipe in ("torch_ddp", "torch_fsdp"))
    assert round(ddp["result"]["mfu"], 2) == 0.30  # chapter 18: "30% at 153 million weights"
    assert max(ddp["result"]["mfu"], fsdp2["result"]["mfu"]) < 1 / 3  # the quick start's
    assert round(ddp["result"]["parameters"], -6) == 153e6
    assert ddp["result"]["peak_memory_bytes"] < 11e9  # "under 11 GB"
    assert ddp["result"]["steps"] == fsdp2["result"]["steps"] == 219  # one epoch
    first, *_, last = ddp["logged_losses"]
    assert round(first, 1) == 5.7 and last < 2.4
    gaps = [abs(a - b) for a, b in zip(ddp["logged_losses"], fsdp2["logged_losses"], strict=True)]
    assert max(gaps) < 0.001
