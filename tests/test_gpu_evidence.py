"""tools.gpu_evidence: the script that measures the book's GPU paths in one run. Its dry run
on the CPU runs every step (the full proof), so the script is known to work before a GPU
comes; a failing or hanging step is recorded and the others go on."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tools import gpu_evidence


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
        else:  # the quick start's programs print their test accuracy
            assert "test accuracy" in row["printed"][-1]
