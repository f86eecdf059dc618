"""tests/nbval_policy.py, how nbval runs the chapters: what a failed second run of a chapter
reports, kernels without a heartbeat, and a kernel that dies at start."""

import pytest

from tests import nbval_policy
from tests.nbval_policy import failure_message


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


def test_nbvals_kernels_start_and_stop_without_a_heartbeat():
    """The kernels the tests start beat no heart (nbval_policy._NoHeartbeat): nbval's kernel
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

    monkeypatch.setattr(nbval_policy, "_nbval_start_new_kernel", dies_first)
    assert nbval_policy._start_new_kernel_alone(startup_timeout=60) == ("manager", "client")
    assert len(starts) == 2

    def always_dies(*args, stderr, **kwargs):
        stderr.write("MemoryError while importing\n")
        stderr.flush()
        raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(nbval_policy, "_nbval_start_new_kernel", always_dies)
    with pytest.raises(RuntimeError, match="did not start twice") as failure:
        nbval_policy._start_new_kernel_alone(startup_timeout=60)
    assert str(failure.value).count("MemoryError while importing") == 2
