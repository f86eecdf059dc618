"""Check a machine, or a cluster, before the first training job: start this program exactly
as you will start training. A recipe to copy alone to a server:

    # one machine, one process per GPU (without GPUs, --nproc_per_node=2: CPU processes)
    torchrun --standalone --nproc_per_node=8 preflight.py
    # 2 machines with 8 GPUs each: this command on both, HOST the first machine's address
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \
        --rdzv-id=preflight-1 preflight.py
    # Slurm: one task per GPU, started by srun (SLURM_PROCID, SLURM_NTASKS...)
    srun --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 python preflight.py

Rank 0 prints one line per check, PASS or FAIL (SKIP where one does not apply, INFO for what
is only reported), each FAIL with what to do and the section of chapter 19 that explains it;
every process exits with code 1 if a check failed. The checks: each rank's host, local rank
and device (two ranks on one GPU, a GPU no rank uses, fewer GPUs than ranks); the rendezvous
port; free space in /dev/shm; the interfaces GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME name;
the process group (NCCL with a GPU per rank, else gloo); an all-reduce's exact sum. Then the
all-reduce's bus bandwidth at three sizes (nccl-tests' busbw: algbw x 2(n-1)/n) beside what
the machine reports of its links (nvidia-smi topo -m, NVLink, PCIe, network adapters), and
the versions. Each phase has --timeout seconds: a rank that never joins is named, not waited
for. torchrun holds the rendezvous port itself: on a port in use it fails before this program
starts (EADDRINUSE, chapter 19, section 6); started by srun, rank 0 opens and checks it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import torch
import torch.distributed as dist

SECTION = {  # the sections of chapter 19 that explain the failures
    2: "chapter 19, section 2: A collective that hangs",
    5: "chapter 19, section 5: Out of memory, and devices that are not the ones you meant",
    6: "chapter 19, section 6: What servers get wrong: ports, interfaces, shared memory, GPUs",
}
FIXES = {  # what to do about each failure, and its section
    "port": ("choose another MASTER_PORT (torchrun: --master_port), or end what holds it", 6),
    "store": ("is rank 0 running, MASTER_ADDR reachable from here, the port open?", 6),
    "missing": ("start them all (torchrun on every machine, srun --ntasks); read their logs", 2),
    "fewer": ("one process per GPU, or hide the GPUs (CUDA_VISIBLE_DEVICES=) for CPUs", 6),
    "shared": ("one process per GPU, each on torch.cuda.set_device(LOCAL_RANK)", 6),
    "no_cuda": ("install a CUDA build of PyTorch, check CUDA_VISIBLE_DEVICES", 5),
    "shm": ("DataLoader workers pass batches there: docker run --shm-size=16g or --ipc=host", 6),
    "interface": ("name one `ip -brief addr` lists on every machine, or unset it", 6),
    "group": ("check *_SOCKET_IFNAME, the firewall between machines; NCCL_DEBUG=INFO", 6),
    "sum": ("run with TORCH_DISTRIBUTED_DEBUG=DETAIL, then NCCL_P2P_DISABLE=1", 2),
    "hang": ("a rank stopped answering: read every rank's log", 2),
}
KIB, MIB, GIB = 2**10, 2**20, 2**30
VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="torchrun --nproc_per_node=N preflight.py",
        description="Check processes, devices, network and shared memory before training.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--timeout", type=float, default=60.0, help="seconds for each phase")
    add("--min-shm-gib", type=float, default=1.0, help="the least free space in /dev/shm, GiB")
    add("--largest-mib", type=float, help="largest all-reduce (default: 16 on CPUs, 1024 on GPUs)")
    args = parser.parse_args(argv)
    if not min(args.timeout, args.min_shm_gib, args.largest_mib or 1) > 0:
        parser.error("--timeout, --min-shm-gib and --largest-mib must be positive")
    return args


def fail(text: str, why: str) -> tuple[str, str]:
    """A FAIL line: what failed, what to do, and where chapter 19 explains it."""
    fix, section = FIXES[why]
    return "FAIL", f"{text}; {fix} ({SECTION[section]})"


def say(status: str, text: str) -> None:
    print(f"{status:<6}{text}", flush=True)


def leave(code: int) -> None:
    """Exit now: in Python's teardown a gloo thread can abort (pytorch/pytorch#117762)."""
    sys.stdout.flush()
    os._exit(code)


def _run(command: list[str]) -> str:
    """A command's output; empty where it is missing or fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


# ---- this process and its machine ---------------------------------------------------------


def launch_environment() -> dict:
    """Rank, world size, local rank and rendezvous from torchrun (or whatever sets RANK and
    WORLD_SIZE), else from srun."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world, local = env["RANK"], env["WORLD_SIZE"], env.get("LOCAL_RANK", "0")
        addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world, local = env["SLURM_PROCID"], env["SLURM_NTASKS"], env["SLURM_LOCALID"]
        nodes = env.get("SLURM_STEP_NODELIST") or env["SLURM_JOB_NODELIST"]
        first = re.match(r"([^,\[]+)(?:\[([^-,\]]+))?", nodes)  # n[1-2] or n1,n2: n1
        addr = env.get("MASTER_ADDR") or first[1] + (first[2] or "")  # hosts the store
        # a port of the job's own, below Linux's ephemeral ports (as recipes/slurm/ choose it)
        port = env.get("MASTER_PORT") or str(20000 + int(env["SLURM_JOB_ID"]) % 1276 * 10)
    else:
        raise SystemExit(
            "preflight.py: start it as you will start training: torchrun --nproc_per_node=N "
            "preflight.py (N: the GPUs of this machine, 2 without GPUs), or srun python "
            "preflight.py in a Slurm job; RANK and WORLD_SIZE are not set."
        )
    if not (addr and port):
        raise SystemExit("preflight.py: set MASTER_ADDR and MASTER_PORT (rank 0's host, a port).")
    launch = {"rank": int(rank), "world": int(world), "local": int(local), "addr": addr}
    launch["port"] = int(port)
    launch["torchrun"] = env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # its store
    return launch


def interfaces_missing() -> list[str]:
    """The *_SOCKET_IFNAME settings that name no interface here. Gloo takes exact names,
    comma-separated; NCCL prefixes, exact names after '=', exclusions after '^'."""
    here, missing = [name for _, name in socket.if_nameindex()], []
    for variable in VARIABLES[:2]:
        value = os.environ.get(variable, "")
        if not value or value.startswith("^"):
            continue
        exact = variable.startswith("GLOO") or value.startswith("=")
        for want in value.lstrip("=").split(","):
            if not any(name == want or not exact and name.startswith(want) for name in here):
                missing.append(f"{variable}={value}")
                break
    return missing


def local_facts(launch: dict) -> dict:
    """This process's device (GPU LOCAL_RANK, or the only one a task sees), /dev/shm,
    variables, versions; on local rank 0, what the machine says of its GPUs and links."""
    facts = {"host": socket.gethostname(), "rank": launch["rank"], "local": launch["local"]}
    facts.update(device="cpu", gpu=None, visible=[], cuda=torch.cuda.is_available())
    if facts["cuda"]:
        props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
        facts["visible"] = [str(p.uuid) for p in props]  # the same GPU has the same UUID
        index = 0 if len(props) == 1 else launch["local"]
        facts["device"] = f"cuda:{index}" if index < len(props) else None
        if facts["device"]:
            torch.cuda.set_device(index)
            facts["gpu"], facts["name"] = facts["visible"][index], props[index].name
    stat = os.statvfs("/dev/shm") if Path("/dev/shm").is_dir() else None
    facts["shm"] = stat.f_bavail * stat.f_frsize if stat else None
    facts["variables"] = {name: os.environ.get(name) for name in VARIABLES}
    facts["interfaces"] = [name for _, name in socket.if_nameindex()]
    facts["missing"] = interfaces_missing()
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if facts["cuda"] else "none"
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    facts["versions"] = (
        f"torch {torch.__version__}, CUDA {torch.version.cuda or 'none'}, NCCL {nccl}, "
        f"driver {driver.split()[0] if driver else 'none'}, Python {platform.python_version()}"
    )
    if launch["local"] == 0:
        facts["smi_gpus"] = _run(["nvidia-smi", "-L"]).count("GPU ")
        facts["links"] = links() if facts["cuda"] else None
    return facts


def gpu_pairs(topo: str) -> list[str]:
    """How each pair of GPUs is joined in `nvidia-smi topo -m`'s matrix (NV18, PIX, SYS...)."""
    lines = [line.split() for line in re.sub(r"\x1b\[[0-9;]*m", "", topo).splitlines()]
    heads = [i for i, line in enumerate(lines) if line[:1] == ["GPU0"]]  # the header first
    if not heads:
        return []
    header, below = lines[heads[0]], lines[heads[0] + 1 :]
    rows = [line for line in below if line and re.fullmatch(r"GPU\d+", line[0])]
    gpus = [j for j, name in enumerate(header) if re.fullmatch(r"GPU\d+", name)]
    return [row[1 + j] for i, row in enumerate(rows) for j in gpus if i < j < len(row) - 1]


def links() -> str:
    """What the machine reports of its links: GPU pairs, NVLink, PCIe, network adapters."""
    pairs = Counter(gpu_pairs(_run(["nvidia-smi", "topo", "-m"])))
    said = [f"{n} GPU pair(s) {kind} (nvidia-smi topo -m)" for kind, n in pairs.items()]
    nvlink = re.findall(r"Link \d+: ([\d.]+) GB/s", _run(["nvidia-smi", "nvlink", "-s", "-i", "0"]))
    if nvlink:
        said.append(f"GPU 0 NVLink {len(nvlink)} x {nvlink[0]} GB/s")
    query = "--query-gpu=pcie.link.gen.max,pcie.link.width.current"
    pcie = _run(["nvidia-smi", "-i", "0", "--format=csv,noheader", query]).split(",")
    if len(pcie) == 2:
        said.append(f"GPU 0 PCIe gen {pcie[0].strip()} x{pcie[1].strip()}")
    for path in sorted(Path("/sys/class/net").glob("*/speed")):
        try:
            said.append(f"{path.parent.name} {int(path.read_text()) / 1000:g} Gb/s")
        except (OSError, ValueError):  # a virtual interface has no speed
            pass
    for path in sorted(Path("/sys/class/infiniband").glob("*/ports/*/rate")):
        said.append(f"{path.parts[-4]} port {path.parts[-2]} {path.read_text().strip()}")
    return "; ".join(said) or "nvidia-smi and /sys/class report nothing"


# ---- meeting: the store, every rank, the group ----------------------------------------------


class Watchdog(threading.Thread):
    """Ends the process with a FAIL line when a phase outlasts its deadline: Python cannot
    interrupt a call blocked in C++ (a collective, a connection), but it can exit."""

    def __init__(self, where: str) -> None:
        super().__init__(daemon=True)
        self.where, self.deadline = where, float("inf")

    def arm(self, phase: str, seconds: float, why: str) -> None:
        self.phase, self.seconds, self.why = phase, seconds, why
        self.deadline = time.monotonic() + seconds

    def run(self) -> None:
        while time.monotonic() < self.deadline:
            time.sleep(0.1)
        say(*fail(f"{self.phase}: {self.where} still waiting after {self.seconds:g} s", self.why))
        leave(1)


def connect(launch: dict, timeout: float, host: str) -> tuple[dist.Store, tuple[str, str]]:
    """The rendezvous store: torchrun's, or rank 0's, which opens the port here."""
    addr, port, world = launch["addr"], launch["port"], launch["world"]
    server = launch["rank"] == 0 and not launch["torchrun"]
    wait = datetime.timedelta(seconds=timeout)
    try:
        store = dist.TCPStore(addr, port, world, server, wait, wait_for_workers=False)
    except RuntimeError as err:
        if server and ("EADDRINUSE" in str(err) or "address already in use" in str(err)):
            say(*fail(f"rendezvous port {port}: in use on {host}", "port"))
        else:
            who = f"rank {launch['rank']} on {host}"
            say(*fail(f"rendezvous {addr}:{port}: no answer to {who} in {timeout:g} s", "store"))
        leave(1)
    owner = "torchrun's store answers" if launch["torchrun"] else f"free on {host}, rank 0 listens"
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")  # a restart's own keys
    line = ("PASS", f"rendezvous port {port}: {owner}")
    return dist.PrefixStore(f"preflight/{restart}", store), line


def meet(store: dist.Store, launch: dict, timeout: float) -> float:
    """Wait until every rank has reached the store. At the deadline rank 0 names those that
    did not, and every rank leaves, rank 0 (which may hold the store) last."""
    rank, world, start = launch["rank"], launch["world"], time.monotonic()
    store.set(f"joined/{rank}", "1")
    store.add("joined", 1)
    while (joined := store.add("joined", 0)) < world:
        if rank == 0 and time.monotonic() - start > timeout:
            missing = [r for r in range(world) if not store.check([f"joined/{r}"])]
            named = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
            text = f"process group: rank(s) {named} of {world} never joined in {timeout:g} s"
            say(*fail(text, "missing"))
            store.set("given up", "1")
            while store.add("gave up", 0) < joined - 1 and time.monotonic() - start < timeout + 5:
                time.sleep(0.05)
            leave(1)
        if rank != 0 and store.check(["given up"]):
            store.add("gave up", 1)
            leave(1)
        time.sleep(0.05)
    return time.monotonic() - start


def form_group(store: dist.Store, launch: dict, backend: str, device: str | None, timeout: float):
    """init_process_group over the store; (error line or None, seconds, formed on every
    rank), once every rank has formed it or failed."""
    start, error, world = time.monotonic(), None, launch["world"]
    try:
        dist.init_process_group(
            backend,
            store=dist.PrefixStore("group", store),
            rank=launch["rank"],
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout),
            device_id=torch.device(device) if backend == "nccl" else None,
        )
    except RuntimeError as err:
        line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        error = re.sub(r"^\[[^\]]*\]\s*", "", line)  # without gloo's source path
    store.add("failed" if error else "formed", 1)
    while store.add("formed", 0) + store.add("failed", 0) < world:
        time.sleep(0.05)
    return error, time.monotonic() - start, store.add("formed", 0) == world


def collectives(launch: dict, device: str, sizes: list[int]) -> tuple[str | None, list[float]]:
    """An all-reduce of rank + 1 from every rank, whose sum must be exact; then nccl-tests'
    bus bandwidth (algbw x 2(n-1)/n) of 5 calls after a warm-up, at each size."""
    rank, world, cuda = launch["rank"], launch["world"], device.startswith("cuda")
    tensor = torch.full((2**20,), float(rank + 1), device=device)
    dist.all_reduce(tensor)
    wrong = tensor[tensor != world * (world + 1) // 2]
    error = f"{wrong.numel():,} elements wrong, one {wrong[0].item():g}" if wrong.numel() else None
    busbw = []
    for size in sizes if world > 1 else []:
        tensor = torch.zeros(size // 4, device=device)
        dist.all_reduce(tensor)  # warm-up: connections, buffers
        torch.cuda.synchronize() if cuda else None
        dist.barrier()
        start = time.perf_counter()
        for _ in range(5):
            dist.all_reduce(tensor)
        torch.cuda.synchronize() if cuda else None  # NCCL returns before the GPU has finished
        slowest = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # a call lasts until its slowest rank ends
        busbw.append(size / (slowest.item() / 5) * 2 * (world - 1) / world)
    return error, busbw


# ---- what rank 0 concludes ------------------------------------------------------------------


def device_lines(facts: list[dict]) -> list[tuple[str, str]]:
    """A line per rank, FAIL where it has no GPU of its own; then two ranks on one GPU, GPUs
    no rank uses, and GPUs that nvidia-smi lists but PyTorch does not see."""
    lines, users, problems = [], {}, []
    for f in facts:
        got = f"{f['device']} ({f['name']}, UUID ...{f['gpu'][-8:]})" if f["gpu"] else f["device"]
        got = got or "none"
        text = f"rank {f['rank']}: host {f['host']}, local rank {f['local']}, device {got}"
        if (hidden := f["variables"]["CUDA_VISIBLE_DEVICES"]) is not None:
            text += f", CUDA_VISIBLE_DEVICES={hidden}"
        fewer = f"{text}: no GPU of its own, {len(f['visible'])} visible for more ranks"
        lines.append(("PASS", text) if f["device"] else fail(fewer, "fewer"))
        users.setdefault(f["gpu"], []).append(str(f["rank"]))
        if f.get("smi_gpus") and not f["cuda"] and hidden != "":
            text = f"devices on {f['host']}: nvidia-smi lists {f['smi_gpus']} GPU(s), PyTorch none"
            lines.append(fail(text, "no_cuda"))
    for gpu, ranks in users.items():
        if gpu and len(ranks) > 1:
            problems.append(f"ranks {', '.join(ranks)} share GPU ...{gpu[-8:]}")
    for host in dict.fromkeys(f["host"] for f in facts):
        seen = {gpu for f in facts if f["host"] == host for gpu in f["visible"]}
        if idle := [f"...{gpu[-8:]}" for gpu in sorted(seen - set(users))]:
            problems.append(f"no rank uses {len(idle)} GPU(s) on {host} ({', '.join(idle)})")
    if problems:
        lines.append(fail(f"devices: {'; '.join(problems)}", "shared"))
    elif any(users):
        lines.append(("PASS", "devices: a GPU for each rank, a rank for each GPU"))
    return lines


def host_lines(facts: list[dict], min_shm_gib: float) -> list[tuple[str, str]]:
    """Per host: /dev/shm's free space, the interfaces the variables name; the versions."""
    lines = []
    for host, f in {f["host"]: f for f in reversed(facts)}.items():  # each host's first rank
        shm = f["shm"] or 0
        size = f"{shm / GIB:.1f} GiB" if shm >= GIB else f"{shm / MIB:.1f} MiB"
        free = f"/dev/shm on {host}: {size} free"
        if f["shm"] is None:
            lines.append(("SKIP", f"/dev/shm on {host}: none (not Linux?)"))
        elif f["shm"] < min_shm_gib * GIB:
            lines.append(fail(f"{free}, under --min-shm-gib {min_shm_gib:g}", "shm"))
        else:
            lines.append(("PASS", f"{free} (--min-shm-gib {min_shm_gib:g})"))
        said = [f"{k}={v}" if v is not None else f"{k} unset" for k, v in f["variables"].items()]
        if f["missing"]:
            text = f"variables on {host}: {', '.join(f['missing'])}: no such interface here"
            lines.append(fail(f"{text} ({', '.join(f['interfaces'])})", "interface"))
        else:
            lines.append(("PASS", f"variables on {host}: {', '.join(said[:3])}"))
    for versions in dict.fromkeys(f["versions"] for f in facts):
        hosts = sorted({f["host"] for f in facts if f["versions"] == versions})
        lines.append(("INFO", f"versions on {', '.join(hosts)}: {versions}"))
    return lines


def group_lines(outcomes: list[dict], backend: str, sizes: list[int]) -> list[tuple[str, str]]:
    """The process group, the exact sum and the bus bandwidth, as every rank found them."""
    world, total = len(outcomes), len(outcomes) * (len(outcomes) + 1) // 2
    errors = [(rank, o["error"]) for rank, o in enumerate(outcomes) if o["error"]]
    if errors:
        text = f"process group over {backend}: {len(errors)} rank(s) failed, rank {errors[0][0]}"
        return [fail(f"{text}: {errors[0][1]}", "group")]
    seconds = max(o["seconds"] for o in outcomes)
    lines = [("PASS", f"process group: {world} ranks joined over {backend} in {seconds:.1f} s")]
    if wrong := [(rank, o["sum"]) for rank, o in enumerate(outcomes) if o["sum"]]:
        text = f"all-reduce: rank {wrong[0][0]}: {wrong[0][1]}, not {total}"
        lines.append(fail(f"{text}: ranks in other collectives, or a broken link", "sum"))
    else:
        lines.append(("PASS", f"all-reduce: the exact sum, {total}, in all {2**20:,} elements"))
    if world == 1:
        return [*lines, ("SKIP", "all-reduce bus bandwidth: 1 rank has nothing to exchange")]
    said = [f"{s / KIB:g} KiB" if s < MIB else f"{s / MIB:g} MiB" for s in sizes]
    said = ", ".join(f"{s}: {bw / 1e9:.2f}" for s, bw in zip(said, outcomes[0]["busbw"]))
    text = f"all-reduce bus bandwidth over {backend}: {said} GB/s (busbw, mean of 5 calls)"
    return [*lines, ("PASS", text)]


def report(lines: list[tuple[str, str]], every: list[dict], backend: str) -> bool:
    """Print the lines, what the machines say of their links, and a summary; any FAIL?"""
    if backend == "nccl":
        lines += [("INFO", f"links on {f['host']}: {f['links']}") for f in every if f.get("links")]
    else:
        lines.append(("SKIP", "link speeds: no GPU per rank; gloo's processes talk over TCP"))
    for line in lines:
        say(*line)
    checks = [status for status, _ in lines if status in ("PASS", "FAIL")]
    failed, hosts = checks.count("FAIL"), len({f["host"] for f in every})
    summary = f"preflight: {len(checks) - failed} of {len(checks)} checks passed, {len(every)}"
    say(
        "",
        f"{summary} rank(s) on {hosts} host(s)" + ("; fix each FAIL, run again" if failed else ""),
    )
    return failed > 0


# ---- the program ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Meet, exchange what each rank found, form the group, all-reduce; rank 0 reports and
    every rank returns its exit code."""
    args = parse_args(argv)
    launch = launch_environment()
    rank, world, timeout = launch["rank"], launch["world"], args.timeout
    facts = local_facts(launch)
    dog = Watchdog(f"rank {rank} on {facts['host']}")
    dog.start()
    dog.arm(f"rendezvous {launch['addr']}:{launch['port']}", timeout + 2, "store")
    store, port_line = connect(launch, timeout, facts["host"])
    dog.arm("process group", timeout + 10, "missing")  # rank 0 names the missing ranks first
    met = meet(store, launch, timeout)
    store.set_timeout(datetime.timedelta(seconds=timeout + 10))  # the watchdog speaks first
    dog.arm("exchange", timeout, "hang")
    store.set(f"facts/{rank}", json.dumps(facts))
    if rank == 0:
        every = [json.loads(store.get(f"facts/{r}")) for r in range(world)]
        devices = device_lines(every)
        gpus = all(f["gpu"] for f in every) and all(s == "PASS" for s, _ in devices)
        store.set("backend", "nccl" if gpus else "gloo")  # NCCL with a GPU per rank
        lines = [*devices, port_line, *host_lines(every, args.min_shm_gib)]
    backend = store.get("backend").decode()
    dog.arm("process group", timeout + 2, "group")
    error, seconds, formed = form_group(store, launch, backend, facts["device"], timeout)
    largest = (args.largest_mib or (1024 if backend == "nccl" else 16)) * MIB
    sizes = [int(largest / 16**k) // 4 * 4 for k in (2, 1, 0)]
    outcome = {"error": error, "seconds": met + seconds, "sum": None, "busbw": []}
    if formed:
        dog.arm("all-reduce", timeout, "hang")
        device = facts["device"] if backend == "nccl" else "cpu"
        outcome["sum"], outcome["busbw"] = collectives(launch, device, sizes)
    store.set(f"outcome/{rank}", json.dumps(outcome))
    dog.arm("report", timeout, "hang")
    if rank == 0:
        outcomes = [json.loads(store.get(f"outcome/{r}")) for r in range(world)]
        failed = report([*lines, *group_lines(outcomes, backend, sizes)], every, backend)
        store.set("verdict", "1" if failed else "0")
    code = int(store.get("verdict"))
    store.add("left", 1)
    end = time.monotonic() + 10
    while rank == 0 and store.add("left", 0) < world and time.monotonic() < end:
        time.sleep(0.05)  # rank 0, which may hold the store, leaves last
    if dist.is_initialized():
        dist.destroy_process_group()
    return code


if __name__ == "__main__":
    try:
        leave(main())
    except dist.DistError as err:  # the store went with its rank 0, which said why
        say(*fail(f"rendezvous store lost: {str(err).strip().splitlines()[0]}", "hang"))
        leave(1)
