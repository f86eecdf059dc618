"""The recipes' Slurm batch scripts (recipes/slurm/, issue #53) submitted to a real Slurm
cluster that the test starts on this machine, as root, in a temporary folder: munged,
slurmctld and two slurmd (nodes n1 and n2, one CPU process each). Every script trains and
reports; a torch_ddp job preempted mid-run (`scontrol requeue`), whose checkpoint takes
SLOW_SAVE_S seconds to save, and a torch_fsdp job signalled as 120 s before its time limit
both come back and end, on CPUs with --deterministic, with the weights of an uninterrupted
run; recipes/preflight.py, started by srun, passes its checks. Skipped where Slurm is not
installed (or no namespace can be made), except in CI (CI set), which installs it (.ci/run).

Without Slurm (unmarked, bash only): the scripts' GPU branch and their stop-then-requeue on
the time limit's signal, run with stand-ins for srun, scontrol, scancel, nvidia-smi,
torchrun and python."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
import torch

from utils.launch import REPOSITORY

SCRIPTS = REPOSITORY / "recipes" / "slurm"
SCRIPT_NAMES = [
    "torch_ddp.sbatch",
    "torch_fsdp.sbatch",
    "tf_multiworker.sbatch",
    "keras_jax.sbatch",
]
NODES = ("n1", "n2")
#: what the test runs, and the Debian package that has it
PROGRAMS = {
    **dict.fromkeys(["munged", "mungekey"], "munge"),
    **dict.fromkeys(["slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "squeue"], "slurm-wlm"),
    **dict.fromkeys(["unshare", "nsenter"], "util-linux"),  # the cluster's namespace
    "ip": "iproute2",
}
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}
# a CPU process on each node, as in tests/recipes/test_recipes_torch.py and test_recipes_tf.py
CPU_JOB = ["--nodes=2", "--gpus-per-node=0", "--cpus-per-task=1"]
TORCH_TINY = (
    "--epochs 2 --limit-examples 512 --batch-per-device 8 --lr 0.05 --base-batch 16 "
    "--warmup-steps 5 --num-workers 1 --log-every 1 --seed 3 --deterministic"
).split()  # 28 steps per epoch
TF_TINY = "--epochs 3 --batch-per-device 16 --limit-examples 512 --warmup-steps 2".split()
#: The interruptions are sent at the first step (what the PyTorch recipes log there), so that
#: a loaded machine cannot finish the run first: the preempted job's first save, at the end
#: of epoch 1 at the latest, takes SLOW_SAVE_S seconds, so its stop lands mid-run (a requeue
#: sent at epoch 2's first step once arrived after the last step, and the job resumed with
#: nothing to train); the time limit's stop travels further (Slurm signals the batch script,
#: which then stops the steps).
EARLY = "epoch 1 step 1/"
DEADLINE_S = 300  # for a job; the jobs run side by side, so the CPUs are shared
#: A stand-in for a slow file system, on the requeued job's PYTHONPATH: in the job's first
#: run, every rename onto checkpoint.pt (the save after the stop signal among them) takes
#: SLOW_SAVE_S seconds. srun is signalled with the job's processes and turns that SIGTERM
#: into a SIGKILL of its tasks: a save of milliseconds would end before it whether or not
#: it reaches them.
SLOW_SAVE_S = 8
SLOW_SAVE = """import os, sys, time

_replace = os.replace


def _slow_replace(source, destination, *args, **kwargs):
    if os.path.basename(destination) == "checkpoint.pt":
        print(f"slow save: {os.environ['SLOW_SAVE_S']} s", file=sys.stderr, flush=True)
        time.sleep(float(os.environ["SLOW_SAVE_S"]))
    return _replace(source, destination, *args, **kwargs)


if os.environ.get("SLURM_RESTART_COUNT", "0") == "0":
    os.replace = _slow_replace
"""


def processes_with(variable: str) -> list[int]:
    """The processes whose environment has `variable` (NAME=VALUE): every daemon and job
    process of a test cluster has its SLURM_CONF."""
    marker, pids = variable.encode(), []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:  # ended meanwhile
            pass
    return pids


#: The cluster's network and mount namespace: loopback only, as CI's tests have, with
#: 127.0.0.2 besides 127.0.0.1 (Slurm resolves even "127.0.0.1" with AI_ADDRCONFIG, which
#: glibc answers only where an IPv4 address other than 127.0.0.1 exists), and the node
#: names in /etc/hosts (a copy, $0, bound over it): this machine's stay as they are.
NAMESPACE = (
    'ip link set lo up && ip addr add 127.0.0.2/8 dev lo && mount --bind "$0" /etc/hosts '
    '&& touch "$1" && exec sleep infinity'
)


class SlurmCluster:
    """A two-node Slurm cluster on this machine, in a network namespace of its own, all its
    files in `folder`.

    Debian's Slurm runs one slurmd per node name on one machine: n1 and n2 have the same
    NodeHostname, their own Port, and `%n` in their spool, pid and log paths. slurmctld
    reaches them at NodeAddr 127.0.0.1; the jobs resolve the node names (the scripts'
    rendezvous and TF_CONFIG name them) through the namespace's /etc/hosts."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.conf = folder / "slurm.conf"
        self.env = {  # sbatch's, hence the jobs': the test's Python first on PATH
            **os.environ,
            "SLURM_CONF": str(self.conf),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        self.daemons: dict[str, subprocess.Popen] = {}
        self.inside: list[str] = []  # the prefix that runs a command in the namespace

    def start(self) -> None:
        """Start the namespace, munged, slurmctld and both slurmd; wait for idle nodes."""
        hosts, ready = self.folder / "hosts", self.folder / "namespace-ready"
        hosts.write_text(" ".join(["127.0.0.1", *NODES]) + "\n" + Path("/etc/hosts").read_text())
        self._start("namespace", "unshare", "--net", "--mount", "sh", "-c", NAMESPACE, hosts, ready)
        self._wait(ready.exists, "network namespace", 10)
        holder = self.daemons["namespace"].pid
        self.inside = ["nsenter", f"--target={holder}", "--net", "--mount", f"--wd={REPOSITORY}"]
        key, munge_socket = self.folder / "munge.key", self.folder / "munge.socket"
        self.run("mungekey", "--create", f"--keyfile={key}")
        # --force: the socket's folder is root's alone (only root's daemons use it)
        self._start(
            "munged",
            *self.inside,
            "munged",
            "--foreground",
            "--force",
            f"--key-file={key}",
            f"--socket={munge_socket}",
            f"--pid-file={self.folder / 'munged.pid'}",
            f"--log-file={self.folder / 'munged.log'}",
            f"--seed-file={self.folder / 'munged.seed'}",
        )
        self._wait(munge_socket.exists, "munged's socket", 10)
        (self.folder / "state").mkdir()
        self.conf.write_text(self._configuration(munge_socket))
        self._start("slurmctld", *self.inside, "slurmctld", "-D")
        for node in NODES:
            self._start(f"slurmd {node}", *self.inside, "slurmd", "-D", "-N", node)
        self._wait(self._nodes_idle, "both nodes idle", 60)

    def _configuration(self, munge_socket: Path) -> str:
        hostname, folder = socket.gethostname().split(".")[0], self.folder
        lines = [
            "ClusterName=book",
            f"SlurmctldHost={hostname}(127.0.0.1)",
            "SlurmctldPort=6817",  # Slurm's own ports: the namespace has no other program
            "SlurmUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={folder / 'state'}",
            f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
            f"SlurmctldLogFile={folder / 'slurmctld.log'}",
            f"SlurmdSpoolDir={folder / 'spool-%n'}",
            f"SlurmdPidFile={folder / 'slurmd-%n.pid'}",
            f"SlurmdLogFile={folder / 'slurmd-%n.log'}",
            "ProctrackType=proctrack/linuxproc",  # no cgroups needed
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides",  # the nodes' CPUs as written here
            "MpiDefault=none",
            "AccountingStorageType=accounting_storage/none",  # hence no sacct
            "JobAcctGatherType=jobacct_gather/none",
            "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        # 8 CPUs a node: every job of the test (one CPU a node each) runs at once
        lines += [
            f"NodeName={node} NodeHostname={hostname} NodeAddr=127.0.0.1 Port={port} CPUs=8"
            for node, port in zip(NODES, [6818, 6819])
        ]
        return "\n".join(lines) + "\n"

    def _start(self, name: str, *command) -> None:
        with open(self.folder / f"{name.replace(' ', '-')}.out", "w") as log:
            self.daemons[name] = subprocess.Popen(
                command,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _nodes_idle(self) -> bool:
        states = self.run("sinfo", "--noheader", "--Node", "--format=%N %T").split()
        return states == [word for node in NODES for word in (node, "idle")]

    def _wait(self, ready, what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            ended = [name for name, daemon in self.daemons.items() if daemon.poll() is not None]
            if ended or time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- {log.name}:\n{log.read_text()[-1500:]}"
                    for log in sorted(self.folder.glob("*.out"))
                )
                raise RuntimeError(
                    f"test cluster: no {what} after {timeout_s} s"
                    f"{f'; {ended} ended' if ended else ''}\n{logs}"
                )
            time.sleep(0.2)

    def run(self, *command: str) -> str:
        """Run a command in the cluster's namespace, from the repository; its output."""
        result = subprocess.run(
            [*self.inside, *command], env=self.env, capture_output=True, text=True, timeout=30
        )
        if result.returncode:
            raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()}")
        return result.stdout

    def submit(self, options: list[str], script: str, args: list[str]) -> str:
        """sbatch OPTIONS recipes/slurm/SCRIPT ARGS; the job's id."""
        return self.run("sbatch", "--parsable", *options, str(SCRIPTS / script), *args).strip()

    def job(self, job_id: str) -> dict[str, str]:
        """What `scontrol show job` says of the job (JobState, Restarts, ExitCode...)."""
        return dict(re.findall(r"(\w+)=(\S*)", self.run("scontrol", "show", "job", "-o", job_id)))

    def wait_for(self, job_id: str, states: set[str], timeout_s: float = DEADLINE_S) -> dict:
        """Wait until the job is in one of `states`; what scontrol then says of it."""
        deadline = time.monotonic() + timeout_s
        while (fields := self.job(job_id))["JobState"] not in states:
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {fields['JobState']} after {timeout_s} s")
            time.sleep(0.5)
        return fields

    def stop(self) -> None:
        """Cancel every job and wait for them to end, stop the daemons; then kill whatever
        process of this cluster is left (its environment names this slurm.conf), and check
        that nothing is: no job still queued after the cancel, no daemon, no process."""
        queued: list[str] = []
        try:
            jobs = self.run("squeue", "--noheader", "--format=%i").split()
            if jobs:
                self.run("scancel", *jobs)
                deadline = time.monotonic() + 60
                while (queued := self.run("squeue", "--noheader", "--format=%i").split()) and (
                    time.monotonic() < deadline
                ):
                    time.sleep(0.5)
        except (RuntimeError, subprocess.TimeoutExpired):
            pass  # no controller answering (it failed to start): the last step ends the jobs
        finally:
            for daemon in reversed(self.daemons.values()):  # slurmd ... the namespace
                _stop(daemon)
            marker, deadline = f"SLURM_CONF={self.conf}", time.monotonic() + 10
            while (left := processes_with(marker)) and time.monotonic() < deadline:
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.2)
        running = [name for name, daemon in self.daemons.items() if daemon.poll() is None]
        assert not (queued or running or left), (
            f"test cluster not stopped: jobs {queued} still queued 60 s after scancel, "
            f"daemons {running} running, processes {left} left"
        )


def _stop(daemon: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM to the daemon's process group, SIGKILL after `grace_s`."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(daemon.pid, signum)
        except ProcessLookupError:
            pass
        try:
            daemon.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The started cluster; every job and daemon ends after the module's tests, whatever
    happened."""
    missing = [program for program in PROGRAMS if not shutil.which(program)]
    why = None
    if missing:
        packages = " ".join(sorted({PROGRAMS[program] for program in missing}))
        why = f"{', '.join(missing)} not found: the test cluster needs them (apt-get install "
        why += f"{packages})"
    elif os.geteuid() != 0:
        why = "the test cluster runs munged, slurmctld and slurmd as root"
    elif probe := subprocess.run(
        ["unshare", "--net", "--mount", "true"], capture_output=True, text=True
    ).returncode:
        why = (  # root without CAP_SYS_ADMIN, as in an unprivileged container
            f"unshare --net --mount fails here (exit {probe}): the test cluster needs a "
            "network and mount namespace of its own (CAP_SYS_ADMIN)"
        )
    if why and os.environ.get("CI"):
        pytest.fail(f"{why}; CI runs this test (.ci/run installs Slurm)")
    if why:
        pytest.skip(why)
    test_cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        test_cluster.start()
        yield test_cluster
    finally:
        test_cluster.stop()


class Job(NamedTuple):
    """A submitted job: its id, log, the recipe's --out folder and --results file."""

    id: str
    log: Path
    out: Path
    results: Path


#: name: (script, sbatch options beyond CPU_JOB, recipe arguments)
SUBMITTED = {
    "torch_ddp": ("torch_ddp.sbatch", [], TORCH_TINY),
    "preempted": ("torch_ddp.sbatch", [], TORCH_TINY),
    "time_limit": ("torch_fsdp.sbatch", [], TORCH_TINY),
    "tf_multiworker": ("tf_multiworker.sbatch", [], TF_TINY),
    "keras_jax": ("keras_jax.sbatch", ["--ntasks-per-node=1"], [*TF_TINY, "--cpu-devices", "1"]),
}


#: recipes/preflight.py as a job: srun starts it on each node (SLURM_PROCID, SLURM_NTASKS...)
PREFLIGHT = "srun --ntasks-per-node=1 python recipes/preflight.py --timeout 120"


@pytest.fixture(scope="module")
def jobs(cluster, tmp_path_factory) -> dict[str, Job]:
    """Every script, and the preflight check, submitted at once. Mid-run, `preempted` is
    requeued as a preemption requeues it (at the first step), its saves slowed by SLOW_SAVE, and
    `time_limit`'s batch script gets the USR1 that --signal=B:USR1@120 sends 120 s before
    the time limit (at the first step)."""
    folder, jobs = tmp_path_factory.mktemp("jobs"), {}
    slow = folder / "slow-save"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_SAVE)
    python_path = os.pathsep.join(filter(None, [str(slow), os.environ.get("PYTHONPATH")]))
    slowed = f"--export=ALL,PYTHONPATH={python_path},SLOW_SAVE_S={SLOW_SAVE_S}"
    for name, (script, options, args) in SUBMITTED.items():
        options = [*options, slowed] if name == "preempted" else options
        log, out, results = folder / f"{name}.log", folder / name, folder / f"{name}.jsonl"
        paths = ["--out", str(out), "--results", str(results)]
        job_id = cluster.submit([*CPU_JOB, f"--output={log}", *options], script, [*args, *paths])
        jobs[name] = Job(job_id, log, out, results)
    log = folder / "preflight.log"  # srun starts its tasks, one a node, with no torchrun
    job_id = cluster.run("sbatch", "--parsable", *CPU_JOB, f"--output={log}", "--wrap", PREFLIGHT)
    jobs["preflight"] = Job(job_id.strip(), log, folder / "preflight", folder / "preflight.jsonl")
    interrupts = {  # name: (the line to wait for, the command)
        "preempted": (EARLY, ["scontrol", "requeue", jobs["preempted"].id]),
        "time_limit": (EARLY, ["scancel", "--batch", "--signal=USR1", jobs["time_limit"].id]),
    }
    waiting, deadline = dict(interrupts), time.monotonic() + DEADLINE_S
    while waiting:
        for name, (line, command) in list(waiting.items()):
            job = jobs[name]
            if job.log.exists() and line in job.log.read_text():
                cluster.run(*command)
                del waiting[name]
            elif cluster.job(job.id)["JobState"] in ENDED or time.monotonic() > deadline:
                tail = job.log.read_text()[-3000:] if job.log.exists() else "(no log)"
                raise RuntimeError(f"job {name} never logged {line!r}:\n{tail}")
        time.sleep(0.2)
    # Slurm holds a requeued job for about 2 minutes, its credentials' lifetime: start it
    # now, but not in the second its nodes revoked the last credential (slurmd refuses one
    # created in that second: "Job N already killed, do not launch batch job", and the job
    # fails). The time limit's requeue comes after the processes ended, so the job is
    # pending within that second.
    for name in interrupts:
        cluster.wait_for(jobs[name].id, {"PENDING"})
    time.sleep(2)
    for name in interrupts:
        cluster.run("scontrol", "update", f"JobId={jobs[name].id}", "StartTime=now")
    return jobs


def finished(cluster: SlurmCluster, job: Job) -> tuple[dict, str]:
    """Wait for the job to end; check it completed; what scontrol says of it, and its log."""
    fields = cluster.wait_for(job.id, ENDED)
    log = job.log.read_text()
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), log[-3000:]
    return fields, log


def results(job: Job) -> list[dict]:
    return [json.loads(line) for line in job.results.read_text().splitlines()]


EXPECTED = {  # two processes, one a node; the steps of 2 (PyTorch) or 3 epochs
    "torch_ddp": {"world_size": 2, "nodes": 2, "device_type": "cpu", "steps": 2 * 28},
    "tf_multiworker": {"workers": 2, "replicas": 2, "device_type": "CPU", "steps": 3 * 16},
    "keras_jax": {"processes": 2, "replicas": 2, "device_type": "CPU", "steps": 3 * 16},
}


@pytest.mark.full  # a Slurm cluster and real jobs: the full proof (CONTRIBUTING.md)
@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_script_trains_on_two_nodes_and_reports(cluster, jobs, name):
    fields, log = finished(cluster, jobs[name])
    assert fields["NodeList"] == "n[1-2]" and fields["Restarts"] == "0"
    assert f"job {jobs[name].id} (restart 0) on n[1-2]:" in log  # what the script says
    (record,) = results(jobs[name])
    assert record["recipe"] == name
    assert {key: record[key] for key in EXPECTED[name]} == EXPECTED[name]
    assert record["loss_per_epoch"][-1] < record["loss_per_epoch"][0]
    assert record["test_accuracy"] > 0.3  # 10 classes: chance is 0.1


@pytest.mark.full  # a Slurm cluster and real jobs: the full proof (CONTRIBUTING.md)
def test_the_preflight_check_passes_under_srun(cluster, jobs):
    """recipes/preflight.py started by srun, as its docstring shows: rank 0 on n1 opens the
    port of the job's own (20000 + job id % 1276 x 10), both ranks meet, the group forms
    over gloo and the all-reduce sums exactly."""
    fields, log = finished(cluster, jobs["preflight"])
    port = 20000 + int(jobs["preflight"].id) % 1276 * 10
    assert f"PASS  rendezvous port {port}: free on " in log, log[-3000:]
    assert "PASS  process group: 2 ranks joined over gloo in " in log
    assert "checks passed, 2 rank(s) on " in log and "FAIL" not in log, log[-3000:]


@pytest.mark.full  # a Slurm cluster and real jobs: the full proof (CONTRIBUTING.md)
@pytest.mark.parametrize("name", ["preempted", "time_limit"])
def test_a_requeued_job_resumes_to_the_weights_of_an_uninterrupted_run(cluster, jobs, name):
    """Requeued, the job's processes got SIGTERM, saved after their step and exited (the
    preempted job's save taking SLOW_SAVE_S seconds, while srun, signalled too, turns the
    SIGTERM into a SIGKILL of its tasks); the job ran its script again (same id, same --out)
    and resumed there. On CPUs with
    --deterministic and two processes the weights are an uninterrupted run's, bit for bit
    (tests/recipes/test_recipes_torch.py says why), FSDP's as DDP's."""
    job = jobs[name]
    fields, log = finished(cluster, job)
    assert fields["Restarts"] == "1"
    if name == "time_limit":  # the script stopped the processes, then requeued the job
        stopping = log.index(f"time limit near: stopping job {job.id}'s processes (SIGTERM)")
        requeueing = log.index(f"requeueing job {job.id}; it resumes from its checkpoint")
        assert stopping < log.index("stop signal: checkpoint saved") < requeueing, log[-3000:]
    stopped = re.search(r"stop signal: checkpoint saved after epoch (\d) step (\d+)", log)
    assert stopped, log[-3000:]
    if name == "preempted":  # the stop's save was a slow one, and ended before the processes
        slow = log.rindex(f"slow save: {SLOW_SAVE_S} s", 0, stopped.start())
        assert not re.search(r"epoch \d step \d+", log[slow : stopped.start()]), log[-3000:]
    assert f"resumed from {job.out}: epoch {stopped[1]}, step {stopped[2]}" in log
    assert f"job {job.id} (restart 1) on n[1-2]:" in log  # one log (--open-mode=append)
    (record,) = results(job)
    done = (int(stopped[1]) - 1) * 28 + int(stopped[2])  # steps before the stop
    assert record["steps"] == 2 * 28 and record["steps_this_run"] == 2 * 28 - done
    finished(cluster, jobs["torch_ddp"])
    expected = torch.load(jobs["torch_ddp"].out / "model.pt", weights_only=True)
    got = torch.load(job.out / "model.pt", weights_only=True)
    assert expected.keys() == got.keys()
    for weight in expected:
        assert torch.equal(expected[weight], got[weight]), weight


#: what the scripts read besides SLURM_*: left out of the environment they run in here
READ = ("CUDA_VISIBLE_DEVICES", "MASTER_PORT", "TF_CONFIG", "JAX_", "TORCH_ELASTIC_")


def script_env(env: dict) -> dict[str, str]:
    """This environment without SLURM_* and what else the scripts read, plus `env`."""
    outside = {
        name: value for name, value in os.environ.items() if not name.startswith(("SLURM_", *READ))
    }
    return {**outside, **env}


def run_script(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """bash recipes/slurm/SCRIPT outside Slurm, in script_env(env)."""
    return subprocess.run(
        [shutil.which("bash"), str(SCRIPTS / script)],
        env=script_env(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


IN_A_JOB = {"SLURM_JOB_ID": "7"}  # what sbatch sets first


@pytest.mark.parametrize(
    ("script", "env", "cwd", "message"),
    [
        *[(script, {}, REPOSITORY, f"{script}: submit it with sbatch") for script in SCRIPT_NAMES],
        ("tf_multiworker.sbatch", IN_A_JOB, Path("/"), "run sbatch from the folder that holds"),
        (
            "torch_ddp.sbatch",
            {**IN_A_JOB, "PATH": "/nowhere"},
            REPOSITORY,
            "torchrun is not on PATH",
        ),
    ],
    ids=[
        *[f"{script} outside sbatch" for script in SCRIPT_NAMES],
        "another folder",
        "no torchrun",
    ],
)
def test_a_wrong_launch_gets_one_clear_line(script, env, cwd, message):
    result = run_script(script, env, cwd)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_fsdp_script_is_the_ddp_script_for_its_recipe():
    """The two PyTorch scripts are written once: the FSDP2 one asks for the same resources
    (its #SBATCH lines, which sbatch reads from the script it is given) and runs the DDP
    one with its recipe."""
    ddp, fsdp = ((SCRIPTS / f"{r}.sbatch").read_text() for r in ("torch_ddp", "torch_fsdp"))
    asked = [[line for line in s.splitlines() if line.startswith("#SBATCH")] for s in (ddp, fsdp)]
    assert [line.replace("torch_ddp", "torch_fsdp") for line in asked[0]] == asked[1]
    assert "TORCH_RECIPE=torch_fsdp exec bash recipes/slurm/torch_ddp.sbatch" in fsdp


def test_every_multi_machine_recipe_has_a_batch_script():
    """The recipes page's table lists these four as running on several machines."""
    assert sorted(path.name for path in SCRIPTS.iterdir()) == sorted(SCRIPT_NAMES)


# ---- the GPU branch, with stand-ins for Slurm's commands: bash only, a second or two ----

#: srun as on the job's nodes: runs the command after its options once per task, node after
#: node, with the task's variables and the CUDA_VISIBLE_DEVICES that Slurm gives it
#: (STUB_CUDA: the node's GPUs, or "bound": the task's own, or unset); a task that fails
#: ends it, as --kill-on-bad-exit does.
SRUN = """#!/bin/bash
per_node=${SLURM_NTASKS_PER_NODE:-1}
while [[ $1 == -* ]]; do
    case $1 in --ntasks-per-node=*) per_node=${1#*=} ;; esac
    shift
done
for ((node = 0; node < SLURM_NNODES; node++)); do
    for ((local = 0; local < per_node; local++)); do
        (
            export SLURM_NODEID=$node SLURM_LOCALID=$local SLURMD_NODENAME=gpu0$((node + 1))
            export SLURM_PROCID=$((node * per_node + local))
            if [ "${STUB_CUDA-}" = bound ]; then
                export CUDA_VISIBLE_DEVICES=$local
            elif [ -n "${STUB_CUDA+set}" ]; then
                export CUDA_VISIBLE_DEVICES=$STUB_CUDA
            fi
            exec "$@"
        ) || exit
    done
done
"""
#: torchrun and python: record the name, what the scripts set, and the arguments
RECORD = """#!/bin/bash
{
    printf '%s\\0' "${0##*/}"
    for name in CUDA_VISIBLE_DEVICES JAX_PLATFORMS JAX_LOCAL_DEVICE_IDS TF_CONFIG \\
        TORCH_ELASTIC_SHUTDOWN_TIMEOUT SLURM_NODEID; do
        if [ -n "${!name+set}" ]; then printf '%s\\0' "$name=${!name}"; fi
    done
    printf '%s\\0' -- "$@"
} >"$STUB_CALLS/$SLURM_PROCID"
"""
STUBS = {
    "srun": SRUN,
    "torchrun": RECORD,
    "python": RECORD,
    "scontrol": "#!/bin/bash\nprintf '%s\\n' gpu01 gpu02  # show hostnames gpu[01-02]\n",
    # STUB_SMI_GPUS: how many GPUs nvidia-smi -L lists; unset: none (no driver)
    "nvidia-smi": """#!/bin/bash
[ -n "${STUB_SMI_GPUS-}" ] || exit 9
for ((i = 0; i < STUB_SMI_GPUS; i++)); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done
""",
}
#: sbatch's variables in a two-node job of 8 GPUs a node (one task a node)
GPU_JOB = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "gpu[01-02]",
    "SLURM_NNODES": "2",
    "SLURM_NTASKS": "2",
    "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_TASKS_PER_NODE": "1(x2)",
    "SLURM_CPUS_PER_TASK": "32",
    "SLURM_GPUS_PER_NODE": "8",
    "SLURM_GPUS_ON_NODE": "8",
    "STUB_CUDA": "0,1,2,3,4,5,6,7",
}
JAX_JOB = {**GPU_JOB, "SLURM_NTASKS": "16", "SLURM_NTASKS_PER_NODE": "8"}
JAX_JOB["SLURM_TASKS_PER_NODE"] = "8(x2)"
#: as older Slurm or a GRES-only configuration leave it: no SLURM_GPUS_*, no
#: CUDA_VISIBLE_DEVICES, the GPUs in nvidia-smi -L
GRES_ONLY = {name: None for name in ("SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE", "STUB_CUDA")}
CPU_ONLY = {"SLURM_GPUS_PER_NODE": "0", "SLURM_GPUS_ON_NODE": None, "STUB_CUDA": None}
PORT = 20000 + 4242 % 1276 * 10  # the job's own port, below 32768


class Call(NamedTuple):
    """One task's torchrun or python, as the stand-in recorded it."""

    program: str
    env: dict[str, str]
    args: list[str]


def with_stubs(tmp_path: Path, env: dict, stubs: dict[str, str] = STUBS) -> dict[str, str]:
    """GPU_JOB's variables updated by `env` (None: unset), the stand-ins first on PATH,
    STUB_CALLS the folder of their records."""
    bin_folder, calls = tmp_path / "bin", tmp_path / "calls"
    bin_folder.mkdir()
    calls.mkdir()
    for name, text in stubs.items():
        (bin_folder / name).write_text(text)
        (bin_folder / name).chmod(0o755)
    job = {name: value for name, value in {**GPU_JOB, **env}.items() if value is not None}
    path = f"{bin_folder}{os.pathsep}{os.environ['PATH']}"
    return {**job, "PATH": path, "STUB_CALLS": str(calls)}


def run_with_stubs(
    tmp_path: Path, script: str, env: dict
) -> tuple[subprocess.CompletedProcess, list[Call]]:
    """bash recipes/slurm/SCRIPT with_stubs(); the result, and the tasks' calls in task
    order."""
    result = run_script(script, with_stubs(tmp_path, env), REPOSITORY)
    calls = tmp_path / "calls"
    recorded = []
    for record in sorted(calls.iterdir(), key=lambda file: int(file.name)):
        program, *fields = record.read_text().split("\0")[:-1]
        cut = fields.index("--")
        env_seen = dict(field.split("=", 1) for field in fields[:cut])
        recorded.append(Call(program, env_seen, fields[cut + 1 :]))
    return result, recorded


def test_torch_scripts_start_one_torchrun_a_node_with_a_process_per_gpu(tmp_path):
    result, calls = run_with_stubs(tmp_path, "torch_ddp.sbatch", {})
    assert result.returncode == 0, result.stderr
    assert [call.program for call in calls] == ["torchrun", "torchrun"]
    for node, call in enumerate(calls):
        assert call.args == [
            "--nnodes=2",
            "--nproc-per-node=8",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=gpu01:{PORT}",
            "--rdzv-id=4242",
            f"--rdzv-conf=is_host={int(node == 0)}",
            "--max-restarts=3",
            "recipes/pytorch/torch_ddp.py",
            "--out",
            "runs/torch_ddp-4242",
        ]
        assert call.env["CUDA_VISIBLE_DEVICES"] == GPU_JOB["STUB_CUDA"]  # not hidden
        assert call.env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "90"


@pytest.mark.parametrize(
    ("env", "processes", "cuda"),
    [
        ({**GRES_ONLY, "STUB_SMI_GPUS": "8"}, "8", None),
        ({"STUB_CUDA": None}, "8", None),  # SLURM_GPUS_ON_NODE alone
        ({**CPU_ONLY, "STUB_SMI_GPUS": "8"}, "1", ""),  # the CPU, the node's GPUs hidden
        ({**CPU_ONLY, "SLURM_GPUS_PER_NODE": "a100:0"}, "1", ""),
    ],
    ids=["nvidia-smi", "SLURM_GPUS_ON_NODE", "--gpus-per-node=0", "a100:0"],
)
def test_torch_scripts_count_the_gpus_each_node_has(tmp_path, env, processes, cuda):
    result, calls = run_with_stubs(tmp_path, "torch_fsdp.sbatch", env)
    assert result.returncode == 0, result.stderr
    assert len(calls) == 2
    for call in calls:
        assert f"--nproc-per-node={processes}" in call.args
        assert call.env.get("CUDA_VISIBLE_DEVICES") == cuda


def test_the_port_can_be_chosen(tmp_path):
    result, calls = run_with_stubs(tmp_path, "torch_ddp.sbatch", {"MASTER_PORT": "29500"})
    assert result.returncode == 0, result.stderr
    assert "--rdzv-endpoint=gpu01:29500" in calls[0].args


def test_the_tensorflow_script_writes_each_workers_tf_config(tmp_path):
    result, calls = run_with_stubs(tmp_path, "tf_multiworker.sbatch", {})
    assert result.returncode == 0, result.stderr
    assert [call.program for call in calls] == ["python", "python"]
    for node, call in enumerate(calls):
        assert json.loads(call.env["TF_CONFIG"]) == {
            "cluster": {"worker": [f"gpu01:{PORT}", f"gpu02:{PORT + 1}"]},
            "task": {"type": "worker", "index": node},
        }
        assert call.env["CUDA_VISIBLE_DEVICES"] == GPU_JOB["STUB_CUDA"]
        assert call.args == ["recipes/tf_multiworker.py", "--out", "runs/tf_multiworker-4242"]


@pytest.mark.parametrize(
    ("env", "local_device_ids"),
    [({}, None), ({"STUB_CUDA": "bound"}, "0")],
    ids=["every GPU visible: SLURM_LOCALID's", "one bound to each task"],
)
def test_the_jax_script_starts_a_process_per_gpu(tmp_path, env, local_device_ids):
    result, calls = run_with_stubs(tmp_path, "keras_jax.sbatch", {**JAX_JOB, **env})
    assert result.returncode == 0, result.stderr
    assert len(calls) == 16
    for process, call in enumerate(calls):
        assert call.args == [
            "recipes/keras_jax.py",
            "--coordinator",
            f"gpu01:{PORT}",
            "--num-processes",
            "16",
            "--process-id",
            str(process),
            "--out",
            "runs/keras_jax-4242",
        ]
        assert call.env.get("JAX_LOCAL_DEVICE_IDS") == local_device_ids
        assert "JAX_PLATFORMS" not in call.env


def test_the_jax_script_on_cpus(tmp_path):
    env = {**CPU_ONLY, "STUB_SMI_GPUS": "8"}
    result, calls = run_with_stubs(tmp_path, "keras_jax.sbatch", env)
    assert result.returncode == 0, result.stderr
    assert [(call.env["CUDA_VISIBLE_DEVICES"], call.env["JAX_PLATFORMS"]) for call in calls] == [
        ("", "cpu"),
        ("", "cpu"),
    ]


NO_GPU = "no GPU on gpu01 (CUDA_VISIBLE_DEVICES, SLURM_GPUS_ON_NODE and nvidia-smi -L name none)"


@pytest.mark.parametrize(
    ("script", "env", "message"),
    [
        *[(script, GRES_ONLY, f"{script}: {NO_GPU}") for script in SCRIPT_NAMES],
        (
            "keras_jax.sbatch",
            {},
            "keras_jax.sbatch: a task on gpu01 sees 8 GPUs, for 1 task(s) per node: JAX under "
            "Slurm takes one GPU per process",
        ),
    ],
    ids=[*[f"{script} without GPUs" for script in SCRIPT_NAMES], "jax tasks and GPUs"],
)
def test_a_gpu_job_that_finds_no_usable_gpu_fails_with_one_clear_line(
    tmp_path, script, env, message
):
    result, calls = run_with_stubs(tmp_path, script, env)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not calls


#: srun that runs until SIGTERM (its tasks then save and end: it exits 1, as torchrun's
#: SignalException makes it), scancel that sends it that SIGTERM, scontrol that records a
#: requeue; each says what it did in the file STUB_CALLS/events
STOPPABLE = {
    **STUBS,
    "srun": """#!/bin/bash
trap 'echo "srun: tasks ended" >>"$STUB_CALLS/events"; exit 1' TERM
echo $$ >"$STUB_CALLS/srun.pid"
while :; do sleep 0.05; done
""",
    "scancel": """#!/bin/bash
echo "scancel $*" >>"$STUB_CALLS/events"
kill -TERM "$(cat "$STUB_CALLS/srun.pid")"
""",
    "scontrol": """#!/bin/bash
if [ "$1" = requeue ]; then echo "scontrol $*" >>"$STUB_CALLS/events"; exit; fi
printf '%s\\n' gpu01 gpu02
""",
}


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_the_time_limits_signal_stops_the_processes_then_requeues(tmp_path, script):
    """On USR1 (--signal=B:USR1@120) the script sends SIGTERM to the steps (scancel: srun
    would make a SIGTERM a SIGKILL of its tasks), waits for srun, and only then requeues the
    job (scontrol requeue, whose SIGTERM would otherwise kill a step still saving)."""
    env = with_stubs(tmp_path, {}, STOPPABLE)
    started = tmp_path / "calls" / "srun.pid"
    job = subprocess.Popen(
        [shutil.which("bash"), str(SCRIPTS / script)],
        env=script_env(env),
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while not started.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        job.send_signal(signal.SIGUSR1)
        stdout, stderr = job.communicate(timeout=10)
    finally:
        job.kill()
    assert job.returncode == 0, stderr
    events = (tmp_path / "calls" / "events").read_text().splitlines()
    assert events == ["scancel --signal=TERM 4242", "srun: tasks ended", "scontrol requeue 4242"]
    assert "time limit near: stopping job 4242's processes (SIGTERM)" in stdout
