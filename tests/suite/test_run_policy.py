"""tests/run_policy.py, how the suite runs: the two tiers, the order files are handed out in,
and the cores each test worker's processes use."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests import run_policy
from tests.helpers import ROOT


def _collected(*args: str) -> str:
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n0", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listing.returncode == 0, listing.stdout + listing.stderr
    return listing.stdout


@pytest.mark.full  # starts Python programs: the full proof's
def test_the_full_proof_is_behind_one_switch():
    """Without --full, the tests marked `full` are left out and a chapter runs once; with
    it, they run and each chapter is followed by its second run with other knobs."""
    paths = ("tests/book/test_knobs.py", "chapters/02_simulating_devices.ipynb")
    check = _collected(*paths)
    assert "test_knobs.py" not in check and "Run all again" not in check
    assert "02_simulating_devices.ipynb::Cell 0" in check and "deselected" in check
    full = _collected("--full", *paths)
    assert "test_chapter_holds_with_other_knob_values" in full
    assert "02_simulating_devices.ipynb::Run all again, other knobs" in full
    only_proof = _collected("--full", "-m", "full or chapter", *paths, "tests/suite/test_suite.py")
    assert "test_suite.py" not in only_proof and "Run all again" in only_proof


@pytest.mark.full  # starts Python programs: the full proof's
def test_the_long_files_are_handed_out_first():
    """Chapters and the files of tests marked `full` come before the short unit tests."""
    long_files = ("tests/tools/test_gpu_evidence.py", "chapters/02_simulating_devices.ipynb")
    listing = _collected("--full", "tests/suite/test_suite.py", *long_files).splitlines()
    files = [line.split("::")[0] for line in listing if "::" in line]
    last_long = max(index for index, path in enumerate(files) if path in long_files)
    assert last_long < files.index("tests/suite/test_suite.py")


@pytest.mark.parametrize(
    "workercount, preset, expected",
    [(2, None, "1"), (1, None, None), (None, None, None), (2, "3", "3")],
)
@pytest.mark.parametrize("setting", run_policy.THREAD_SETTINGS)
def test_each_worker_takes_its_share_of_the_cores(
    monkeypatch, setting, workercount, preset, expected
):
    """Two workers on two cores: one thread per operation each, PyTorch's and TensorFlow's;
    alone, or outside pytest-xdist, the library's own default; a reader's setting wins."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    for name in run_policy.THREAD_SETTINGS:
        monkeypatch.setenv(name, preset or "")  # restored after the test
        if preset is None:
            monkeypatch.delenv(name)
    config = SimpleNamespace()
    if workercount is not None:
        config.workerinput = {"workercount": workercount}
    run_policy.share_the_cores(config)
    assert os.environ.get(setting) == expected
