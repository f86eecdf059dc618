"""conftest.py: what a failed second run of a chapter reports, the two tiers, and the
cores each test worker's processes use."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

import conftest
from conftest import failure_message
from tests.helpers import ROOT


def test_a_failed_second_run_shows_the_failing_line_without_colour_codes():
    error = {
        "ename": "AssertionError",
        "evalue": "",  # a bare `assert` has no message
        "traceback": [
            "\x1b[0;31m----> 2\x1b[0m assert rate > 3",
            "\x1b[0;31mAssertionError\x1b[0m: ",
        ],
    }
    message = failure_message("code cell 4", "EPOCHS = 1", error)
    assert message == (
        "code cell 4 failed when run again with 'EPOCHS = 1':\n"
        "----> 2 assert rate > 3\nAssertionError: "
    )


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


def test_nbvals_kernels_start_and_stop_without_a_heartbeat():
    """The kernels the tests start beat no heart (conftest._NoHeartbeat): nbval's kernel
    answers, and stopping its channels cannot wait on a heartbeat thread."""
    from nbval import kernel

    manager, client = kernel.start_new_kernel(kernel_name="python3")
    try:
        assert not client.hb_channel.is_alive() and client.is_alive()
        client.execute("1 + 1")
        assert client.get_shell_msg(timeout=60)["content"]["status"] == "ok"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


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
def test_each_worker_takes_its_share_of_the_cores(monkeypatch, workercount, preset, expected):
    """Two workers on two cores: one OpenMP thread each; alone, or outside pytest-xdist, the
    library's own default; a reader's OMP_NUM_THREADS wins."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setenv("OMP_NUM_THREADS", preset or "")  # restored after the test
    if preset is None:
        monkeypatch.delenv("OMP_NUM_THREADS")
    config = SimpleNamespace()
    if workercount is not None:
        config.workerinput = {"workercount": workercount}
    conftest.share_the_cores(config)
    assert os.environ.get("OMP_NUM_THREADS") == expected


def test_a_kernel_that_dies_at_start_is_started_again_and_says_why(monkeypatch):
    """nbval's kernel start with the kernel's stderr kept: one failed start is retried;
    two raise with what the kernel printed both times."""
    starts = []

    def dies_first(*args, stderr, **kwargs):
        starts.append(1)
        if len(starts) == 1:
            stderr.write("Fatal Python error: the first start\n")
            stderr.flush()
            raise RuntimeError("Kernel died before replying to kernel_info")
        return "manager", "client"

    monkeypatch.setattr(conftest, "_nbval_start_new_kernel", dies_first)
    assert conftest._start_new_kernel_alone(startup_timeout=60) == ("manager", "client")
    assert len(starts) == 2

    def always_dies(*args, stderr, **kwargs):
        stderr.write("MemoryError while importing\n")
        stderr.flush()
        raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(conftest, "_nbval_start_new_kernel", always_dies)
    with pytest.raises(RuntimeError, match="did not start twice") as failure:
        conftest._start_new_kernel_alone(startup_timeout=60)
    assert str(failure.value).count("MemoryError while importing") == 2
