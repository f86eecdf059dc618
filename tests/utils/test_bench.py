"""python -m utils.bench: options, the table, and a real quick run in a fresh process."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT, run_fresh
from utils import bench
from utils.bench import Result, format_table, parse_args


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--devices", "0"], "must be a positive integer"),
        (["--devices", "two"], "must be a positive integer, got 'two'"),
        (["--mode", "keras"], "invalid choice"),
        (["--global-batch", "63", "--devices", "2"], "does not split evenly"),
        (["--global-batch", "64", "--batch-per-device", "32"], "not allowed with"),
        (["--nonsense"], "unrecognized arguments"),
        (["--devices", "1", "2", "4"], "one count above 1 per run, not [2, 4]"),
    ],
)
def test_bad_options_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "usage: python -m utils.bench" in error and message in error


def test_defaults():
    args = parse_args([])
    assert (args.devices, args.mode, args.batch_per_device, args.global_batch) == (
        [2],
        ["fit"],
        64,
        None,
    )


def test_table_shows_cost_relative_to_the_baseline_of_the_same_mode():
    rows = [
        Result("none", 1, "fit", 64, 10.0, 6400.0, 5),
        Result("mirrored", 2, "fit", 128, 25.0, 5120.0, 5),
    ]
    table = format_table(rows).splitlines()
    assert table[1].split()[-1] == "1.00x" and table[2].split()[-1] == "1.25x"


@pytest.mark.full  # starts Python programs: the full proof's
def test_quick_run_writes_rows_for_every_configuration(tmp_path):
    """The command line end to end (chapter 7 runs every configuration through run_benchmark)."""
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "utils.bench",
            "--devices",
            "2",
            "--mode",
            "fit",
            "custom",
            "--quick",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert {(r["strategy"], r["replicas"], r["mode"]) for r in rows} == {
        ("none", 1, "fit"),
        ("none", 1, "custom"),
        ("mirrored", 2, "fit"),
        ("mirrored", 2, "custom"),
    }
    for row in rows:
        assert row["samples_per_s"] > 0 and row["step_ms"] > 0
        assert row["global_batch"] == 64 * row["replicas"]
    assert "per-sample cost" in result.stdout and "benchmark" in result.stderr  # table + progress


def test_configurations_take_turns_so_a_busy_spell_slows_them_alike(monkeypatch):
    """Chapter 7's CI failure: measured one after the other, a quiet baseline met a busy rival."""
    calls, clock = [], iter(range(100))

    def timed_blocks(devices, mode, global_batch, steps):
        name = (0 if devices is None else len(devices), mode)
        calls.append(("warm-up", name))

        def block():
            calls.append(("timed", name))
            return 3.0 if 4 <= next(clock) < 12 else 1.0  # busy during rounds 2 and 3

        return block

    monkeypatch.setattr(bench, "_timed_blocks", timed_blocks)
    results = bench.run_benchmark(
        ["a", "b"], [2], ["fit", "custom"], global_batch=8, steps=2, blocks=4, progress=False
    )
    names = [(0, "fit"), (0, "custom"), (2, "fit"), (2, "custom")]
    assert calls == [("warm-up", n) for n in names] + [("timed", n) for n in names] * 4
    assert {r.step_ms for r in results} == {1000.0}  # every median: blocks of 1, 3, 3, 1 s
    assert {r.samples_per_s for r in results} == {8.0}  # 2 steps of 8 examples in 2 s
    assert format_table(results).count("1.00x") == 4


def test_a_batch_that_does_not_split_is_refused_before_any_configuration_trains(monkeypatch):
    monkeypatch.setattr(bench, "_timed_blocks", lambda *args: pytest.fail("trained"))
    with pytest.raises(ValueError, match="global batch 63 does not split evenly over 2 replicas"):
        bench.run_benchmark(["a", "b"], [2], ["fit"], global_batch=63, progress=False)


@pytest.mark.full  # starts Python programs: the full proof's
def test_the_timed_custom_step_trains_as_chapter_4_s_step():
    """bench keeps its own step so that editing chapter 4 cannot change chapter 7's numbers;
    this holds it to chapter 4's `make_distributed_step`, under two replicas and none. When
    it fails after an edit of chapter 4, make `make_custom_step` train as the new step does."""
    result = run_fresh(
        """
        from utils import setup_devices
        devices = setup_devices(2, verbose=False)
        import tensorflow as tf
        from utils import load_mnist_subset, max_abs_difference, model_and_optimizer
        from utils.bench import make_custom_step
        from utils.custom_step import make_distributed_step
        (x, y), _ = load_mnist_subset()
        data = tf.data.Dataset.from_tensor_slices((x[:192], y[:192])).batch(64)
        for strategy in (tf.distribute.MirroredStrategy(devices), tf.distribute.get_strategy()):
            trained = []
            for make_step in (make_custom_step, make_distributed_step):
                model, optimizer = model_and_optimizer(strategy)
                step = make_step(strategy, model, optimizer, 64)
                losses = [float(step(b)) for b in strategy.experimental_distribute_dataset(data)]
                trained.append((losses, model.get_weights()))
            (bench_losses, bench_weights), (book_losses, book_weights) = trained
            assert bench_losses == book_losses, (bench_losses, book_losses)
            assert max_abs_difference(bench_weights, book_weights) == 0
        print("OK")
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")
