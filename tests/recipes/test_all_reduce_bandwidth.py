"""recipes/all_reduce_bandwidth.py, the on-your-own-machine page's all-reduce measurement:
its fit of the ring model, its message sizes, its one line for a wrong launch, and (the full
proof) one run as a reader starts it, with torchrun on 2 CPU processes over gloo."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT, import_recipe
from utils.launch import TORCHRUN, child_environment, run_processes

RECIPES = ROOT / "recipes"
CPU = {"CUDA_VISIBLE_DEVICES": ""}  # CPU processes with gloo, even on a GPU machine
TORCHRUN_ENV = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
SIZES = [4096 * 4**k for k in range(7)]  # 4 KiB to 16 MiB, the CPU's default
ROW = re.compile(r"^ +([\d,]+) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)$", re.M)


@pytest.fixture(scope="module")
def recipe():
    return import_recipe("all_reduce_bandwidth")


def ring_seconds(sizes, world_size, alpha, bandwidth):
    return [2 * (world_size - 1) * (s / (world_size * bandwidth) + alpha) for s in sizes]


@pytest.mark.parametrize("world_size", [2, 8])
def test_the_fit_recovers_latency_and_bandwidth_from_the_models_own_times(recipe, world_size):
    alpha, bandwidth = 12e-6, 370e9  # 12 us per ring step, 370 GB/s
    seconds = ring_seconds(SIZES, world_size, alpha, bandwidth)
    fitted = recipe.fit_latency_and_bandwidth(SIZES, seconds, world_size)
    assert fitted == pytest.approx((alpha, bandwidth), rel=1e-9)
    model = [recipe.model_seconds(s, world_size, *fitted) for s in SIZES]
    assert model == pytest.approx(seconds, rel=1e-9)


def test_the_largest_messages_fix_the_bandwidth(recipe):
    """The page's fit tip: on noisy times (each off by up to -30% or +40%, as the CPU's
    were), the three largest sizes alone give the bandwidth of the fit on all sizes
    within 3x, whatever the noise; the three smallest fix it far less well."""
    world_size, alpha, bandwidth = 2, 80e-6, 3e9
    exact = np.array(ring_seconds(SIZES, world_size, alpha, bandwidth))
    worst_largest, worst_smallest = 1.0, 1.0
    for seed in range(200):
        seconds = exact * np.random.default_rng(seed).uniform(0.7, 1.4, len(SIZES))
        _, on_all = recipe.fit_latency_and_bandwidth(SIZES, seconds, world_size)
        _, largest = recipe.fit_latency_and_bandwidth(SIZES[-3:], seconds[-3:], world_size)
        _, smallest = recipe.fit_latency_and_bandwidth(SIZES[:3], seconds[:3], world_size)
        assert 1 / 3 < largest / on_all < 3, seed
        worst_largest = max(worst_largest, largest / on_all, on_all / largest)
        worst_smallest = max(worst_smallest, abs(smallest / on_all), abs(on_all / smallest))
    assert worst_smallest > 10 * worst_largest


def test_the_fit_refuses_what_it_cannot_fit(recipe):
    with pytest.raises(ValueError, match="world_size must be at least 2; got 1"):
        recipe.fit_latency_and_bandwidth(SIZES, [1.0] * len(SIZES), 1)
    for sizes, seconds in [([4096], [1e-4]), ([4096, 4096], [1e-4, 2e-4]), ([0, 8], [1, 2])]:
        with pytest.raises(ValueError, match="at least two different message sizes"):
            recipe.fit_latency_and_bandwidth(sizes, seconds, 2)


def test_message_sizes_grow_by_powers_of_4(recipe):
    assert recipe.message_sizes(4096, recipe.default_largest(None)) == SIZES  # the CPU's
    h100 = recipe.message_sizes(4096, recipe.default_largest(85_000_000_000))
    assert (len(h100), h100[-1]) == (11, 4 * 2**30)  # where nccl-tests' peaks are measured
    small_gpu = recipe.message_sizes(4096, recipe.default_largest(24 * 2**30))
    assert (len(small_gpu), small_gpu[-1]) == (9, 256 * 2**20)
    assert recipe.message_sizes(4096, 5 * 4096) == [4096, 4 * 4096]
    args = recipe.parse_args(["--smallest", "64KiB", "--largest", "4GiB"])
    assert (args.smallest, args.largest) == (2**16, 2**32)


def test_each_call_counts_as_long_as_its_slowest_process(recipe, monkeypatch):
    """Rank 0 leaves the barrier last on the second call, so its own time is the shortest
    there; the other process's times (the MAX all-reduce brings them) say the first call was
    the fastest. Simulated: this process's clock, and the other's times, for 3 calls."""
    own = iter([0.0, 5.0, 10.0, 11.0, 20.0, 24.0])  # begin and end of each call: 5, 1, 4
    other = iter([5.5, 6.0, 4.5])
    reduced = []

    def all_reduce(tensor, op=recipe.dist.ReduceOp.SUM):
        if op == recipe.dist.ReduceOp.MAX:
            tensor.copy_(tensor.clamp(min=next(other)))
        else:  # the measured all-reduce: in place, its values stay 0 over the calls
            reduced.append(tensor.abs().max().item())

    monkeypatch.setattr(recipe.dist, "all_reduce", all_reduce)
    monkeypatch.setattr(recipe.dist, "barrier", lambda: None)
    monkeypatch.setattr(recipe.time, "perf_counter", lambda: next(own))
    assert recipe.time_all_reduces([4096], 3, recipe.torch.device("cpu")) == [4.5]
    assert reduced == [0.0] * 4  # the warm-up and 3 calls, nothing to overflow


def run_python(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "all_reduce_bandwidth.py", *args],
        cwd=RECIPES,
        env=child_environment({**CPU, **(env or {})}),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.full  # starts Python programs: the full proof's
def test_help_lists_the_flags():
    result = run_python("--help")
    assert result.returncode == 0, result.stderr
    for flag in ("--smallest", "--largest", "--repeats", "--out"):
        assert flag in result.stdout


@pytest.mark.full  # starts Python programs: the full proof's
def test_a_launch_without_torchrun_gets_one_clear_line():
    result = run_python()
    assert result.returncode != 0
    message = "all_reduce_bandwidth.py: start it with torchrun --nproc_per_node=N"
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            [],
            {**TORCHRUN_ENV, "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"},
            "1 process has nothing to all-reduce with: the fit needs 2 processes or more",
        ),
        (
            ["--largest", "8KiB"],
            TORCHRUN_ENV,
            "--largest 8192 must be at least 4 x --smallest 4096: the fit needs two",
        ),
        (
            ["--smallest", "8MiB"],  # the CPU's default largest, 16 MiB, is below 4 x 8 MiB
            TORCHRUN_ENV,
            "the largest message, 16777216 bytes (the default on CPUs; set --largest), must "
            "be at least 4 x --smallest 8388608",
        ),
        (["--largest", "6"], TORCHRUN_ENV, "must be a multiple of 4 bytes (float32)"),
        (["--smallest", "1MB"], TORCHRUN_ENV, "expected bytes, as 4096, 64KiB or 4GiB"),
        (["--repeats", "0"], TORCHRUN_ENV, "--repeats: must be at least 1; got 0"),
    ],
    ids=["1 process", "one size", "one size by default", "not float32", "unit", "repeats 0"],
)
def test_a_wrong_launch_gets_one_clear_line(recipe, args, env, message, monkeypatch, capsys):
    """Each refused before any process connects: a SystemExit with the line (argparse's
    errors print theirs), which Python prints without a traceback, as the launch above."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(recipe.torch.cuda, "is_available", lambda: False)  # CPU processes
    with pytest.raises(SystemExit) as refused:
        # without torchrun's @record, whose fault handler needs a real stderr
        recipe.main.__wrapped__(args)
    assert refused.value.code != 0
    assert message in f"{refused.value.code} {capsys.readouterr().err}"


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
def test_two_cpu_processes_measure_and_fit(tmp_path):
    out = tmp_path / "bandwidth.json"
    command = [*TORCHRUN, "--standalone", "--nproc_per_node=2", "all_reduce_bandwidth.py"]
    flags = ["--largest", "4MiB", "--repeats", "10", "--out", str(out)]
    (output,) = run_processes([command + flags], envs=[CPU], cwd=RECIPES, timeout_s=60)
    assert "over 2 processes (gloo, cpu), the fastest of 10 calls per size" in output
    rows = ROW.findall(output)
    sizes = [int(row[0].replace(",", "")) for row in rows]
    assert sizes == SIZES[:-1]  # 4 KiB to 4 MiB: the table printed, once (rank 0)
    for _, measured, _, algbw, busbw in rows:  # with 2 processes, busbw = algbw
        assert float(measured) > 0 and float(busbw) == pytest.approx(float(algbw), abs=0.01)
    result = json.loads(out.read_text())
    assert result["sizes_bytes"] == sizes and result["world_size"] == 2
    assert result["bandwidth_bytes_per_s"] > 0
    fitted = re.search(r"fitted: alpha (-?[\d.]+) us per ring step, B ([\d.]+) GB/s", output)
    assert fitted and float(fitted[2]) == pytest.approx(
        result["bandwidth_bytes_per_s"] / 1e9, abs=0.01
    )
    size, seconds = sizes[-1], result["fastest_seconds"][-1]
    model = 2 * (size / (2 * result["bandwidth_bytes_per_s"]) + result["alpha_s"])
    assert 1 / 3 < model / seconds < 3  # the model within 3x of the largest message's time
