"""recipes/preflight.py, the check a reader runs on a new server before the first job: copied
alone to a folder and started as a reader starts it (torchrun, 2 CPU processes over gloo),
healthy and with each of chapter 19's server failures injected: a port in use, a wrong
interface name, a tiny /dev/shm (in a mount namespace of its own, where one is allowed), a
rank that never joins. Every FAIL line names the section of chapter 19 that explains it.
Its run through srun is in tests/recipes/test_slurm.py. Without --full: the wrong launch's one line,
and what rank 0 concludes from made-up ranks (GPUs included), in milliseconds."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT, import_recipe, load_notebook

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
#: what torchrun or srun would have set, left out of the programs' environment
LAUNCH = ("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_", "TORCHELASTIC_", "SLURM_", "GROUP_")
HEALTHY = [
    "PASS  rank 0: host {host}, local rank 0, device cpu, CUDA_VISIBLE_DEVICES=",
    "PASS  rank 1: host {host}, local rank 1, device cpu, CUDA_VISIBLE_DEVICES=",
    "PASS  rendezvous port N: torchrun's store answers",
    "PASS  /dev/shm on {host}: N GiB free (--min-shm-gib 1)",
    "PASS  variables on {host}: GLOO_SOCKET_IFNAME unset, NCCL_SOCKET_IFNAME unset, "
    "NCCL_DEBUG unset",
    "INFO  versions on {host}: N",
    "PASS  process group: 2 ranks joined over gloo in N s",
    "PASS  all-reduce: the exact sum, 3, in all 1,048,576 elements",
    "PASS  all-reduce bus bandwidth over gloo: 64 KiB: N, 1 MiB: N, 16 MiB: N GB/s "
    "(busbw, mean of 5 calls)",
    "SKIP  link speeds: no GPU per rank; gloo's processes talk over TCP",
    "      preflight: 8 of 8 checks passed, 2 rank(s) on 1 host(s)",
]
SECTION_6 = (
    "(chapter 19, section 6: What servers get wrong: ports, interfaces, shared memory, GPUs)"
)


@pytest.fixture(scope="module")
def preflight():
    return import_recipe("preflight")


@pytest.fixture
def alone(tmp_path):
    """A folder holding only preflight.py, as a reader copies it to a server."""
    shutil.copy(ROOT / "recipes" / "preflight.py", tmp_path)
    return tmp_path


def environment(**extra: str) -> dict[str, str]:
    """This environment without a launcher's variables or the repository on the path; CPU
    processes (gloo) even on a GPU machine."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH) and k != "PYTHONPATH"}
    return {**kept, "CUDA_VISIBLE_DEVICES": "", **extra}


def start(command: list[str], folder, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: torchrun's workers end with it
    )


def finish(processes: list[subprocess.Popen], timeout_s: float = 120) -> list[tuple]:
    """(exit code, stdout, stderr) of each process; at the deadline every process still
    running, and everything it started, is killed (the test then fails)."""
    deadline, results = time.monotonic() + timeout_s, []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=max(deadline - time.monotonic(), 0.1))
            results.append((process.returncode, stdout, stderr))
    finally:
        for process in processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
    return results


def torchrun(folder, *flags: str, env=None, prefix=(), timeout_s: float = 120) -> tuple:
    """torchrun --standalone --nproc_per_node=2 preflight.py FLAGS, as a reader types it."""
    command = [*prefix, *TORCHRUN, "--standalone", "--nproc_per_node=2", "preflight.py", *flags]
    return finish([start(command, folder, env or environment())], timeout_s)[0]


def by_hand(folder, world: int, ranks, port: int, *flags: str) -> list[tuple]:
    """Processes `ranks` of `world`, started with the variables srun's tasks get from it."""
    env = {"WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    command = [sys.executable, "preflight.py", *flags]
    started = [
        start(command, folder, environment(**env, RANK=str(r), LOCAL_RANK=str(r))) for r in ranks
    ]
    return finish(started)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fail_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("FAIL")]


# ---- without --full: the wrong launch, and rank 0's conclusions ------------------------------


@pytest.mark.full  # starts Python programs: the full proof's
def test_started_without_torchrun_it_says_how_in_one_line(alone):
    code, stdout, stderr = finish([start([sys.executable, "preflight.py"], alone, environment())])[
        0
    ]
    assert code != 0 and not stdout, stderr
    assert stderr.strip() == (
        "preflight.py: start it as you will start training: torchrun --nproc_per_node=N "
        "preflight.py (N: the GPUs of this machine, 2 without GPUs), or srun python "
        "preflight.py in a Slurm job; RANK and WORLD_SIZE are not set."
    )


def test_every_fail_line_names_a_section_of_chapter_19_by_its_title(preflight):
    notebook = load_notebook("chapters/19_troubleshooting.ipynb")
    text = "\n".join("".join(cell["source"]) for cell in notebook["cells"])
    titles = dict(re.findall(r"^## (\d+)\. (.+)$", text, re.M))
    for number, cited in preflight.SECTION.items():
        assert cited == f"chapter 19, section {number}: {titles[str(number)]}"
    assert {section for _, section in preflight.FIXES.values()} <= set(preflight.SECTION)


def facts(rank, local, host="gpu01", visible=("GPU-aaaa1111", "GPU-bbbb2222"), index=None):
    """What a rank reports of itself: GPU `index` (default: its local rank) of `visible`."""
    index = local if index is None else index
    gpu = visible[index] if index < len(visible) else None
    device = f"cuda:{index}" if gpu else None
    hidden = {"CUDA_VISIBLE_DEVICES": None}
    return {
        **dict(host=host, rank=rank, local=local, device=device, gpu=gpu, name="H100"),
        **dict(visible=list(visible), cuda=True, variables=hidden),
    }


@pytest.mark.parametrize(
    ("ranks", "failures"),
    [
        ([facts(0, 0), facts(1, 1)], []),
        ([facts(0, 0)], ["devices: no rank uses 1 GPU(s) on gpu01 (...bbbb2222)"]),
        ([facts(0, 0), facts(1, 1, index=0)], ["devices: ranks 0, 1 share GPU ...aaaa1111"]),
        (
            [facts(r, r) for r in range(3)],
            ["rank 2: host gpu01, local rank 2, device none: no GPU of its own, 2 visible"],
        ),
        (
            [facts(0, 0, visible=[]) | {"cuda": False, "device": "cpu", "smi_gpus": 8}],
            ["devices on gpu01: nvidia-smi lists 8 GPU(s), PyTorch none"],
        ),
    ],
    ids=["one GPU each", "a GPU unused", "two ranks on one GPU", "fewer GPUs", "CPU build"],
)
def test_rank_0_finds_shared_unused_and_missing_gpus(preflight, ranks, failures):
    lines = preflight.device_lines(ranks)
    found = [text for status, text in lines if status == "FAIL"]
    assert len(found) == len(failures)
    for text, failure in zip(found, failures):
        assert text.startswith(failure), text
    if not failures:
        assert lines[-1] == ("PASS", "devices: a GPU for each rank, a rank for each GPU")


def test_the_links_the_machine_reports(preflight, monkeypatch):
    """nvidia-smi topo -m's GPU pairs (its header underlined, as nvidia-smi prints it); the
    interfaces *_SOCKET_IFNAME name, gloo's exact, NCCL's prefixes, '=' and '^'."""
    topo = (
        "\x1b[4m\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tNV18\tPIX\tSYS\t0-55\t0\t\tN/A\n"
        "GPU1\tNV18\t X \tNV18\tSYS\t0-55\t0\t\tN/A\n"
        "GPU2\tPIX\tNV18\t X \tPXB\t56-111\t1\t\tN/A\n"
        "NIC0\tSYS\tSYS\tPXB\t X \n\nLegend:\n\n  X    = Self\n  NV#  = a bonded set of # NVLinks\n"
    )
    assert preflight.gpu_pairs(topo) == ["NV18", "PIX", "NV18"]
    assert preflight.gpu_pairs("\tGPU0\tCPU Affinity\nGPU0\t X \t0-15\n") == []
    assert preflight.gpu_pairs("") == []
    here = socket.if_nameindex()[0][1]  # lo, usually
    for value, missing in [(here, False), (here[:-1], True), ("nope0", True)]:
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", value)
        assert preflight.interfaces_missing() == (
            [f"GLOO_SOCKET_IFNAME={value}"] if missing else []
        )
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    for value, missing in [(here[:-1], False), (f"={here[:-1]}", True), ("^nope", False)]:
        monkeypatch.setenv("NCCL_SOCKET_IFNAME", value)
        assert preflight.interfaces_missing() == (
            [f"NCCL_SOCKET_IFNAME={value}"] if missing else []
        )


# ---- the full proof: the program launched, healthy and with each failure --------------------


MASKS = [  # what varies between runs and machines
    (r"port \d+", "port N"),
    (r"[\d.]+ GiB free", "N GiB free"),
    (r"(versions on [^:]*): .*", r"\1: N"),
    (r"in [\d.]+ s$", "in N s"),
    (r"(KiB|MiB): [\d.]+", r"\1: N"),
]


def masked(stdout: str) -> list[str]:
    """The lines, with what varies (numbers, versions, this machine's name) masked."""
    lines = [line.replace(f" {socket.gethostname()}", " {host}") for line in stdout.splitlines()]
    for pattern, replacement in MASKS:
        lines = [re.sub(pattern, replacement, line) for line in lines]
    return lines


@pytest.mark.full  # a launch: the full proof (CONTRIBUTING.md)
def test_a_healthy_run_passes_every_check(alone):
    code, stdout, stderr = torchrun(alone)
    assert code == 0, stdout + stderr[-3000:]
    assert masked(stdout) == HEALTHY, stdout


@pytest.mark.full
def test_a_port_in_use(alone):
    """Started by hand (as srun starts it), rank 0 finds the port taken, and rank 1, which
    reached whatever holds it, gives up at the deadline. torchrun holds the port itself: on
    a port in use, torchrun fails before the program starts, as the recipe says."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        start_s = time.monotonic()
        (code0, out0, err0), (code1, out1, _) = by_hand(alone, 2, [0, 1], port, "--timeout", "5")
        elapsed = time.monotonic() - start_s
        command = [*TORCHRUN, "--nproc_per_node=2", f"--master_port={port}", "preflight.py"]
        code, stdout, stderr = finish([start(command, alone, environment())])[0]
    assert fail_lines(out0) == [
        f"FAIL  rendezvous port {port}: in use on {socket.gethostname()}; choose another "
        f"MASTER_PORT (torchrun: --master_port), or end what holds it {SECTION_6}"
    ], out0 + err0
    assert fail_lines(out1)[0].startswith(f"FAIL  rendezvous 127.0.0.1:{port}: rank 1 on ")
    assert code0 == code1 == 1 and elapsed < 60  # the default --timeout: 5 s was used
    assert code != 0 and not stdout and "EADDRINUSE" in stderr


@pytest.mark.full
def test_a_wrong_interface_name(alone):
    code, stdout, stderr = torchrun(
        alone, "--timeout", "10", env=environment(GLOO_SOCKET_IFNAME="doesnotexist0")
    )
    failures = fail_lines(stdout)
    assert code != 0 and len(failures) == 2, stdout + stderr[-3000:]
    variables = f"FAIL  variables on {socket.gethostname()}: GLOO_SOCKET_IFNAME=doesnotexist0"
    assert failures[0].startswith(f"{variables}: no such interface here (")
    assert failures[0].endswith(
        f"; name one `ip -brief addr` lists on every machine, or unset it {SECTION_6}"
    )
    assert failures[1].startswith("FAIL  process group over gloo: 2 rank(s) failed, rank ")
    assert "Unable to find address for: doesnotexist0" in failures[1] and failures[1].endswith(
        SECTION_6
    )


@pytest.mark.full
def test_a_tiny_dev_shm(alone):
    """A 1 MiB /dev/shm, mounted in a mount namespace of this test's own (as root, or in a
    user namespace where the kernel allows one)."""
    namespace = (
        ["unshare", "--mount"]
        if os.geteuid() == 0
        else ["unshare", "--user", "--map-root-user", "--mount"]
    )
    tiny = ["sh", "-c", 'mount -t tmpfs -o size=1m tmpfs /dev/shm && exec "$@"', "tiny"]
    try:
        probe = subprocess.run(
            [*namespace, *tiny, "true"], capture_output=True, text=True, timeout=30
        )
    except FileNotFoundError:
        pytest.skip("no unshare here (util-linux)")
    if probe.returncode:
        pytest.skip(f"no private mount namespace here: {probe.stderr.strip()[:200]}")
    code, stdout, stderr = torchrun(alone, prefix=[*namespace, *tiny])
    assert code != 0, stdout + stderr[-3000:]
    assert fail_lines(stdout) == [
        f"FAIL  /dev/shm on {socket.gethostname()}: 1.0 MiB free, under --min-shm-gib 1; "
        "DataLoader workers pass batches there: docker run --shm-size=16g or --ipc=host "
        + SECTION_6
    ]


@pytest.mark.full
def test_a_rank_that_never_joins(alone):
    """Rank 0 of 2 alone: named within --timeout, not waited for."""
    start_s = time.monotonic()
    ((code, stdout, stderr),) = by_hand(alone, 2, [0], free_port(), "--timeout", "5")
    assert code == 1 and time.monotonic() - start_s < 60, stdout + stderr
    assert stdout.splitlines() == [
        "FAIL  process group: rank(s) 1 of 2 never joined in 5 s; start them all (torchrun on "
        "every machine, srun --ntasks); read their logs (chapter 19, section 2: A collective "
        "that hangs)"
    ]
