"""Starting training programs as separate processes, as torchrun and TF_CONFIG do
(chapters 9 and 10).

Every process is started in its own process group with its output in a file (a pipe that
nobody reads can fill and stall it). `run_processes` waits for all of them, and on a failure
or at the deadline it kills every group it started, children included, so nothing is left
running; its error names the process that failed and the first error line it printed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from utils.checks import check_int
from utils.errors import EXCEPTION_LINE, output_error_line

REPOSITORY = Path(__file__).resolve().parent.parent  # the book's root folder, one home
TORCHRUN = [
    sys.executable,
    "-m",
    "torch.distributed.run",
]  # what the `torchrun` command runs
LOOPBACK = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports that are free on the loopback interface right now."""
    check_int("free_ports: count", count)
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:  # all held open at once, so the ports differ
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def check_ports_free(ports: Sequence[int]) -> None:
    """Raise a ValueError naming the first port that another program already listens on."""
    for port in ports:
        with socket.socket() as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                raise ValueError(
                    f"port {port} on {LOOPBACK} is in use: pass other ports, or "
                    "ports=None to have free ones chosen."
                ) from None


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, plus `extra`, with the repository on PYTHONPATH (so a
    program started from a temporary folder can `import utils`)."""
    paths = [str(REPOSITORY), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **(extra or {})}


_ROOT_CAUSE = "Root Cause (first observed failure):"


def _torchrun_root_cause(text: str) -> str | None:
    """What torchrun's failure summary says of the first process that failed: its rank and
    its exception (from the error file that `@record` writes), or its exit code."""
    if _ROOT_CAUSE not in text:
        return None
    before, section = text.split(_ROOT_CAUSE, 1)
    rank = re.search(r"^\s*rank\s*:\s*(\d+)", section, re.M)
    code = re.search(r"^\s*exitcode\s*:\s*(-?\d+)", section, re.M)
    who = f"rank {rank.group(1)}" if rank else "a process"
    recorded = [
        line.strip() for line in section.splitlines() if EXCEPTION_LINE.search(line)
    ]
    # the lines it printed itself; none when the summary names no rank
    own = rf"\[(?:default|rank){rank.group(1)}\]:" if rank else r"(?!)"
    printed = [
        re.sub(own, "", line.strip(), count=1).strip()
        for line in before.splitlines()
        if EXCEPTION_LINE.search(line) and re.match(own, line.strip())
    ]
    if recorded or printed:
        return f"{who} failed: {(recorded[-1:] or printed)[0]}"
    return (
        f"{who} exited with code {code.group(1) if code else '?'} and recorded no "
        "exception (a process that dies without raising one records none; otherwise, "
        "decorate the program's main function with torch.distributed.elastic."
        "multiprocessing.errors.record)"
    )


def _error_line(text: str) -> str:
    """The worker's failure from torchrun's summary, else `output_error_line`."""
    return _torchrun_root_cause(text) or output_error_line(text)


def run_processes(
    commands: Sequence[Sequence[str]],
    *,
    envs: Sequence[Mapping[str, str]] | None = None,
    names: Sequence[str] | None = None,
    cwd: str | Path | None = None,
    timeout_s: float = 120.0,
) -> list[str]:
    """Run the commands at the same time and return each one's output (stdout and stderr).

    `envs[i]` is added to command i's environment (see `child_environment`). If one exits
    with a non-zero code, the others are killed and a RuntimeError names it with its first
    error line (or its last line); at `timeout_s` every process still running is killed and
    a TimeoutError names them.
    """
    if not commands:
        raise ValueError("run_processes: give at least one command.")
    names = list(names or [f"process {i}" for i in range(len(commands))])
    envs = list(envs or [{}] * len(commands))
    if not len(names) == len(envs) == len(commands):
        raise ValueError(
            "run_processes: commands, envs and names must have the same length."
        )
    if not timeout_s > 0:
        raise ValueError(
            f"run_processes: timeout_s must be positive; got {timeout_s!r}."
        )
    with tempfile.TemporaryDirectory(prefix="run_processes-") as logs:
        files = [open(Path(logs) / f"{i}.log", "w+") for i in range(len(commands))]
        processes = [
            subprocess.Popen(
                list(command),
                env=child_environment(env),
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for command, env, log in zip(commands, envs, files)
        ]

        def output(i: int) -> str:
            files[i].seek(0)
            return files[i].read()

        try:
            deadline = time.monotonic() + timeout_s
            while any(p.poll() is None for p in processes):
                failed = [
                    i for i, p in enumerate(processes) if p.poll() not in (None, 0)
                ]
                if failed or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            failed = [i for i, p in enumerate(processes) if p.poll() not in (None, 0)]
            if failed:
                i = failed[0]
                raise RuntimeError(
                    f"{names[i]} exited with code {processes[i].returncode}: "
                    f"{_error_line(output(i))}"
                )
            running = [names[i] for i, p in enumerate(processes) if p.poll() is None]
            if running:
                raise TimeoutError(
                    f"{', '.join(running)} still running after {timeout_s:g} s; "
                    "every process was stopped."
                )
            return [output(i) for i in range(len(processes))]
        finally:
            for process in processes:  # the whole group: torchrun's workers too
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # the group has already ended
                process.wait()
            for log in files:
                log.close()


def join_spawned(context, timeout_s: float = 120.0) -> None:
    """Wait for the processes of `torch.multiprocessing.spawn(..., join=False)`, at most
    `timeout_s` seconds. As `spawn(..., join=True)` does, raise the error of a process
    that failed (after stopping the others); unlike it, at the deadline kill every
    process still running and raise a TimeoutError, so that a hung group (chapter 19)
    cannot hang the notebook."""
    if not timeout_s > 0:
        raise ValueError(
            f"join_spawned: timeout_s must be positive; got {timeout_s!r}."
        )
    deadline = time.monotonic() + timeout_s
    while not context.join(timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            running = [i for i, p in enumerate(context.processes) if p.is_alive()]
            for process in context.processes:
                process.kill()
                process.join()
            raise TimeoutError(
                f"process(es) {', '.join(map(str, running))} of "
                f"{len(context.processes)} still running after {timeout_s:g} s; "
                "every process was stopped."
            )


def visible_gpu_ids(gpu_count: int) -> list[str]:
    """The `CUDA_VISIBLE_DEVICES` entries that name this process's first `gpu_count` GPUs.

    A child process given entry i sees this process's GPU i. When `CUDA_VISIBLE_DEVICES` is
    set (by a scheduler, or by the reader to leave GPUs to another job), GPU i is its i-th
    entry, not the machine's GPU i; otherwise the entries are 0, 1, ..."""
    check_int("visible_gpu_ids: gpu_count", gpu_count, least=0)
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mask is None:
        return [str(i) for i in range(gpu_count)]
    return [entry.strip() for entry in mask.split(",") if entry.strip()][:gpu_count]


def gpu_per_process_environments(
    num_processes: int, gpu_count: int
) -> list[dict[str, str]]:
    """The `CUDA_VISIBLE_DEVICES` of each of `num_processes` programs started on this machine
    that must not share a GPU (chapter 9's torchrun agents, chapter 10's TensorFlow
    workers): with a GPU for each, process i sees only the i-th GPU this process sees
    (`visible_gpu_ids`);
    otherwise none of them sees a GPU, and they run on the CPU."""
    check_int("gpu_per_process_environments: num_processes", num_processes)
    ids = visible_gpu_ids(gpu_count)
    one_each = len(ids) >= num_processes
    return [
        {"CUDA_VISIBLE_DEVICES": ids[i] if one_each else ""}
        for i in range(num_processes)
    ]


def jax_platform_environment(gpu_count: int) -> dict[str, str]:
    """The environment for a JAX program that trains data parallel on this machine's devices
    (chapter 10): JAX's default with 2 or more GPUs (it uses them all), `JAX_PLATFORMS=cpu`
    with 1 or none, so that the CPU devices the program asks XLA to simulate
    (`--xla_force_host_platform_device_count`) are the ones it computes on: on one GPU, a
    mesh would have one device and distribute nothing."""
    check_int("jax_platform_environment: gpu_count", gpu_count, least=0)
    return {} if gpu_count >= 2 else {"JAX_PLATFORMS": "cpu"}


def tf_config(ports: Sequence[int], index: int) -> str:
    """The `TF_CONFIG` of worker `index` in a cluster of workers on these loopback ports."""
    cluster = {"worker": [f"{LOOPBACK}:{port}" for port in ports]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def launch_tf_workers(
    command: Sequence[str],
    num_workers: int,
    *,
    ports: Sequence[int] | None = None,
    gpu_count: int = 0,
    cwd: str | Path | None = None,
    timeout_s: float = 120.0,
) -> list[str]:
    """Run `command` as `num_workers` MultiWorkerMirroredStrategy workers on this machine.

    Each gets its own `TF_CONFIG` (worker i listens on `ports[i]`; free ports are chosen when
    `ports` is None). With at least one GPU per worker (`gpu_count`, the GPUs this process
    sees), worker i sees only the i-th of them (`visible_gpu_ids`); otherwise they see none
    and run on the CPU. Returns each worker's output.
    """
    check_int("launch_tf_workers: num_workers", num_workers)
    if ports is None:
        ports = free_ports(num_workers)
    elif len(ports) != num_workers:
        raise ValueError(
            f"launch_tf_workers: {num_workers} workers need {num_workers} ports; got {list(ports)}."
        )
    else:
        check_ports_free(ports)  # ports chosen by free_ports were free a moment ago
    gpus = gpu_per_process_environments(num_workers, gpu_count)
    envs = [{"TF_CONFIG": tf_config(ports, i), **gpus[i]} for i in range(num_workers)]
    names = [f"worker {i}" for i in range(num_workers)]
    return run_processes(
        [command] * num_workers, envs=envs, names=names, cwd=cwd, timeout_s=timeout_s
    )
