"""utils.launch: processes that end, ports that are free, errors that name the culprit."""

import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from utils.launch import (
    check_ports_free,
    child_environment,
    free_ports,
    gpu_per_process_environments,
    jax_platform_environment,
    join_spawned,
    launch_tf_workers,
    run_processes,
    tf_config,
    visible_gpu_ids,
)

PYTHON = sys.executable


def python(code: str) -> list[str]:
    return [PYTHON, "-c", code]


def running(pid: int) -> bool:
    """Whether `pid` runs (a killed process waiting to be reaped, a zombie, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


def test_outputs_come_back_in_order_with_the_extra_environment():
    outputs = run_processes(
        [python("import os; print(os.environ['WHO'])")] * 2,
        envs=[{"WHO": "first"}, {"WHO": "second"}],
    )
    assert [o.strip() for o in outputs] == ["first", "second"]


def test_the_repository_is_importable_from_a_child():
    (output,) = run_processes([python("import utils.launch; print('ok')")], cwd="/")
    assert output.strip() == "ok"
    assert child_environment({"A": "1"})["A"] == "1"


def test_a_failing_process_is_named_with_its_error_and_the_others_are_stopped(tmp_path):
    marker = tmp_path / "finished"
    slow = python(f"import time, pathlib; time.sleep(30); pathlib.Path({str(marker)!r}).touch()")
    failing = python("raise ValueError('bad batch size')")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker 1 exited with code 1: ValueError: bad batch"):
        run_processes([slow, failing], names=["worker 0", "worker 1"], timeout_s=60)
    assert time.monotonic() - start < 20 and not marker.exists()


@pytest.mark.full  # starts Python programs: the full proof's
def test_a_hung_process_and_its_children_are_killed_at_the_deadline(tmp_path):
    pid_file = tmp_path / "child.pid"
    parent = python(
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([{PYTHON!r}, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)"
    )
    with pytest.raises(TimeoutError, match=r"process 0 still running after 3 s"):
        run_processes([parent], timeout_s=3)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(child)  # the grandchild is gone too: no orphans


def sleep_if_rank_1(rank: int, seconds: float) -> None:
    """A spawned worker: rank 1 hangs (sleeps), the others return at once."""
    if rank == 1:
        time.sleep(seconds)


def fail_if_rank_1(rank: int) -> None:
    if rank == 1:
        raise ValueError("bad batch size")


@pytest.mark.full  # starts Python programs: the full proof's
def test_spawned_processes_are_joined_with_a_deadline():
    import torch.multiprocessing as mp

    context = mp.spawn(sleep_if_rank_1, args=(60,), nprocs=2, join=False)
    context.processes[0].join(60)  # rank 0 returns once started (slowly on a busy machine)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"process\(es\) 1 of 2 still running after 3 s"):
        join_spawned(context, timeout_s=3)
    assert time.monotonic() - start < 10
    assert not any(p.is_alive() for p in context.processes)
    join_spawned(mp.spawn(sleep_if_rank_1, args=(0.1,), nprocs=2, join=False), 60)
    failing = mp.spawn(fail_if_rank_1, nprocs=2, join=False)
    with pytest.raises(mp.ProcessRaisedException, match="bad batch size"):
        join_spawned(failing, timeout_s=60)
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        join_spawned(failing, timeout_s=0)


@pytest.mark.parametrize(
    "bad",
    [
        dict(commands=[]),
        dict(commands=[["true"]], timeout_s=0),
        dict(commands=[["true"]], names=["a", "b"]),
    ],
)
def test_bad_arguments_are_refused(bad):
    with pytest.raises(ValueError, match="run_processes"):
        run_processes(**bad)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_worker_and_port_counts_must_be_positive_ints(bad):
    with pytest.raises(ValueError, match="must be an int of at least 1"):
        free_ports(bad)
    with pytest.raises(ValueError, match="must be an int of at least 1"):
        launch_tf_workers(["true"], bad)


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(3)
    assert len(set(ports)) == 3
    check_ports_free(ports)


def test_a_port_in_use_is_named():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ValueError, match=f"port {port} on 127.0.0.1 is in use"):
            launch_tf_workers(["true"], 2, ports=[port, free_ports(1)[0]])
    with pytest.raises(ValueError, match="2 workers need 2 ports"):
        launch_tf_workers(["true"], 2, ports=[1234])


def test_each_worker_gets_its_own_tf_config_and_gpu():
    show = python(
        "import json, os; c = json.loads(os.environ['TF_CONFIG']); "
        "print(c['task']['index'], len(c['cluster']['worker']), "
        "repr(os.environ['CUDA_VISIBLE_DEVICES']))"
    )
    assert [o.split() for o in launch_tf_workers(show, 2, gpu_count=8)] == [
        ["0", "2", "'0'"],
        ["1", "2", "'1'"],
    ]
    assert [o.split()[2] for o in launch_tf_workers(show, 2, gpu_count=1)] == ["''", "''"]


def test_processes_that_must_not_share_a_gpu_get_one_each_or_none(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu_per_process_environments(2, 8) == [
        {"CUDA_VISIBLE_DEVICES": "0"},
        {"CUDA_VISIBLE_DEVICES": "1"},
    ]
    assert gpu_per_process_environments(2, 1) == [{"CUDA_VISIBLE_DEVICES": ""}] * 2  # Colab
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert gpu_per_process_environments(2, 2) == [
        {"CUDA_VISIBLE_DEVICES": "4"},
        {"CUDA_VISIBLE_DEVICES": "6"},
    ]


def test_a_scheduler_s_gpu_mask_is_respected(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")  # this job's GPUs: 3 and 5
    assert visible_gpu_ids(2) == ["3", "5"]
    show = python("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])")
    assert [o.strip() for o in launch_tf_workers(show, 2, gpu_count=2)] == ["3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU for this job
    assert visible_gpu_ids(0) == []
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpu_ids(3) == ["0", "1", "2"]
    with pytest.raises(ValueError, match="gpu_count must be an int of at least 0"):
        visible_gpu_ids(-1)


TORCHRUN_FAILED = """\
[rank1]: Traceback (most recent call last):
[rank1]: RuntimeError: first line of the worker's own traceback
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
ddp_train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-24_20:23:37
  host      : localhost
  rank      : 1 (local_rank: 0)
  exitcode  : 1 (pid: 3267)
  error_file: /tmp/torchelastic_x/attempt_0/1/error.json
  traceback : Traceback (most recent call last):
    File "ddp_train.py", line 6, in main
      raise ValueError("bad batch size")
  ValueError: bad batch size
============================================================
"""


@pytest.mark.full  # starts Python programs: the full proof's
def test_a_torchrun_failure_is_named_by_its_root_cause(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(
        "import os\nfrom torch.distributed.elastic.multiprocessing.errors "
        "import record\n\n\n@record\ndef main():\n"
        "    if os.environ['RANK'] == '1':\n"
        "        raise ValueError('bad batch size 7 for 8 devices')\n\n\n"
        "main()\n"
    )
    command = [
        PYTHON,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(script),
    ]
    with pytest.raises(
        RuntimeError,
        match=r"^node 0 exited with code 1: rank 1 failed: "
        r"ValueError: bad batch size 7 for 8 devices$",
    ):
        run_processes([command], names=["node 0"], timeout_s=120)


def test_a_torchrun_failure_without_a_traceback_says_how_to_get_one():
    failed = TORCHRUN_FAILED.replace("ValueError: bad batch size", "")
    plain = python(f"import sys; sys.stdout.write({failed!r}); sys.exit(1)")
    with pytest.raises(RuntimeError, match=r"rank 1 failed: RuntimeError: first line"):
        run_processes([plain])  # the summary had no exception: the worker's own line
    bare = failed.replace("[rank1]: RuntimeError: first line of the worker's own traceback", "")
    with pytest.raises(
        RuntimeError,
        match=r"rank 1 exited with code 1 and recorded no exception \(.* "
        r"decorate .* with torch\.distributed\.elastic",
    ):
        run_processes([python(f"import sys; sys.stdout.write({bare!r}); sys.exit(1)")])
    others = failed.replace("[rank1]: RuntimeError", "[rank0]: RuntimeError")
    with pytest.raises(RuntimeError, match=r"rank 1 exited with code 1 and recorded no"):
        run_processes([python(f"import sys; sys.stdout.write({others!r}); sys.exit(1)")])


def test_jax_uses_two_or_more_gpus_and_simulated_cpus_otherwise():
    assert jax_platform_environment(8) == jax_platform_environment(2) == {}
    assert jax_platform_environment(1) == jax_platform_environment(0) == {"JAX_PLATFORMS": "cpu"}
    with pytest.raises(ValueError, match="gpu_count must be an int of at least 0"):
        jax_platform_environment(-1)
    show = python("import jax; print([d.platform for d in jax.devices()])")
    env = {**jax_platform_environment(0), "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    (output,) = run_processes([show], envs=[env], timeout_s=120)
    assert output.strip().splitlines()[-1] == "['cpu', 'cpu']"


def test_tf_config_is_what_multi_worker_mirrored_strategy_reads():
    config = json.loads(tf_config([1000, 1001], 1))
    assert config == {
        "cluster": {"worker": ["127.0.0.1:1000", "127.0.0.1:1001"]},
        "task": {"type": "worker", "index": 1},
    }
