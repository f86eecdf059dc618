"""The TensorFlow and Keras/JAX recipes (recipes/, issue #43), run as a reader runs them.

Every run is a separate `python recipes/...` process with a deadline (utils.launch). They
run on the CPU, GPUs hidden: the exact-resume check below holds by construction only there
(two replicas on one CPU sum their gradients in a fixed order, op determinism on, same batch
order), and a GPU machine's GPUs would be shared by the suite's processes.
"""

import json
import shutil
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from utils.launch import REPOSITORY, launch_tf_workers, run_processes

CPU_ONLY = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
TINY = [
    "--epochs", "3", "--batch-per-device", "16", "--limit-examples", "512",
    "--warmup-steps", "2",
]  # fmt: skip
STEPS_PER_EPOCH = 512 // 32  # 2 replicas (or workers) x 16
KEYS = {
    "recipe", "replicas", "device_type", "precision", "global_batch",
    "examples_per_s_per_replica", "mean_step_time_s", "final_train_loss",
    "test_accuracy", "epochs", "steps",
}  # fmt: skip
DEADLINE_S = 120
RECIPES = ["tf_mirrored_fit", "tf_custom_loop", "tf_multiworker", "keras_jax"]


@pytest.fixture(autouse=True)
def _no_tf_config(monkeypatch):
    """The children inherit this environment: a TF_CONFIG there would make them workers."""
    monkeypatch.delenv("TF_CONFIG", raising=False)


def command(recipe: str, out: Path, *extra: str) -> list[str]:
    """`python recipes/RECIPE.py` with the tiny sizes, writing into `out`."""
    script = str(REPOSITORY / "recipes" / f"{recipe}.py")
    paths = ["--out", str(out), "--results", str(out / "results.jsonl")]
    return [sys.executable, script, *TINY, *paths, *extra]


def run(*commands: list[str], env: dict | None = None) -> list[str]:
    """Run the commands side by side on the CPU, from the repository's root."""
    envs = [{**CPU_ONLY, **(env or {})}] * len(commands)
    return run_processes(commands, envs=envs, cwd=REPOSITORY, timeout_s=DEADLINE_S)


def without_tensorflow(tmp_path: Path) -> dict:
    """An environment whose `import tensorflow` fails, as on a JAX-only machine."""
    blocker = tmp_path / "no-tensorflow" / "tensorflow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    return {"PYTHONPATH": str(blocker.parent)}


def results(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def weights(path: Path) -> dict[str, np.ndarray]:
    """Every array in a Keras .weights.h5 file, by its path in the file."""
    arrays = {}
    with h5py.File(path) as file:
        file.visititems(
            lambda name, item: (
                arrays.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
    return arrays


def check_trained(record: dict, recipe: str) -> None:
    """The results line has the keys, and the run learned something."""
    assert KEYS <= record.keys() and record["recipe"] == recipe
    assert record["replicas"] == 2 and record["global_batch"] == 32
    assert record["device_type"] == "CPU" and record["precision"] == "float32"
    losses = record["loss_per_epoch"]
    assert len(losses) >= 2 and losses[-1] < losses[0], losses
    assert record["test_accuracy"] > 0.3  # 10 classes: chance is 0.1
    assert record["test_examples"] == (480 if recipe == "keras_jax" else 500)  # JAX: whole batches
    assert record["mean_step_time_s"] > 0 and record["examples_per_s_per_replica"] > 0


def test_help_explains_every_flag():
    outputs = run(*[[sys.executable, f"recipes/{r}.py", "--help"] for r in RECIPES])
    for text in outputs:
        for flag in ("--epochs", "--batch-per-device", "--base-lr", "--base-batch",
                     "--warmup-steps", "--images", "--out", "--results", "--seed",
                     "--limit-examples", "--precision"):  # fmt: skip
            assert flag in text
        assert "signal-self" not in text and "kill-after" not in text  # tests only
        assert "8 GPUs, 1 machine:" in text and "2 machines:" in text and "Chapters:" in text
    assert '"task": {"type": "worker", "index": 0}' in outputs[2]  # how to set TF_CONFIG
    assert "--coordinator 10.0.0.1:1234" in outputs[3]


@pytest.mark.full  # starts Python programs: the full proof's
@pytest.mark.parametrize(
    ("recipe", "extra", "env", "message"),
    [
        ("tf_custom_loop", ["--batch-per-device", "0"], {}, "--batch-per-device must be"),
        ("keras_jax", ["--epochs", "0"], {}, "--epochs must be at least 1"),
        ("tf_mirrored_fit", ["--images", "EMPTY"], {}, "expected one subfolder of images"),
        ("tf_multiworker", [], {}, "TF_CONFIG is not set: set TF_CONFIG"),
        ("tf_multiworker", [], {"TF_CONFIG": "{cluster"}, "TF_CONFIG is not valid JSON"),
        (
            "tf_multiworker",
            [],
            {"TF_CONFIG": '{"cluster": {"worker": ["localhost:1"]}, "task": {"index": 3}}'},
            "is not in its cluster",
        ),
        ("tf_mirrored_fit", ["--limit-examples", "20"], {}, "is larger than the 20 training"),
        ("keras_jax", ["--limit-examples", "20"], {}, "needs at least as many training"),
        ("keras_jax", ["--coordinator", "localhost:1"], {}, "--coordinator needs --num-processes"),
    ],
)
def test_a_wrong_launch_says_what_to_do(tmp_path, recipe, extra, env, message):
    extra = [str(tmp_path) if arg == "EMPTY" else arg for arg in extra]
    with pytest.raises(RuntimeError, match="exited with code 1") as failure:
        run(command(recipe, tmp_path / "out", *extra), env=env)
    assert message in str(failure.value)
    if "TF_CONFIG" in message:
        assert "see --help" in str(failure.value)


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
def test_custom_loop_sigterm_mid_epoch_then_resume_is_exact(tmp_path):
    """Stopped by SIGTERM inside epoch 2, resumed: the same bits as an uninterrupted run."""
    whole, parts = tmp_path / "uninterrupted", tmp_path / "interrupted"
    deterministic = "--deterministic"
    signal_at = str(STEPS_PER_EPOCH + 5)  # saved after the step that follows: batch 6
    outputs = run(
        command("tf_custom_loop", whole, deterministic),
        command("tf_custom_loop", parts, deterministic, "--signal-self-at-step", signal_at),
    )  # run_processes checks that both exited with 0
    assert f"saved {parts / 'checkpoints'}" in outputs[1] and "at epoch 2, batch 6;" in outputs[1]
    assert not results(parts)  # stopped: no results line yet
    shutil.copytree(parts / "checkpoints", tmp_path / "wider" / "checkpoints")  # for below
    check_trained(results(whole)[0], "tf_custom_loop")

    resumed = run(command("tf_custom_loop", parts, deterministic))[0]
    assert "epoch 2, batch 6" in resumed
    record = results(parts)[0]
    assert record["steps"] == 3 * STEPS_PER_EPOCH == results(whole)[0]["steps"]
    assert record["steps_this_run"] == 3 * STEPS_PER_EPOCH - (STEPS_PER_EPOCH + 6)
    final, expected = weights(parts / "final.weights.h5"), weights(whole / "final.weights.h5")
    assert final.keys() == expected.keys() and len(final) == 6
    for name in expected:
        np.testing.assert_array_equal(final[name], expected[name], err_msg=name)

    # the stopped run's checkpoint, resumed on 4 replicas: its position counted batches of
    # 32, so epoch 2 starts again from its first batch (of 64)
    wider = run(command("tf_custom_loop", tmp_path / "wider", "--cpu-devices", "4"))[0]
    assert "global batch was 32, this run's is 64: epoch 2 runs from its first batch" in wider
    assert results(tmp_path / "wider")[0]["steps_this_run"] == 2 * 512 // 64


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
def test_mirrored_fit_resumes_at_the_epoch_boundary(tmp_path):
    """Killed (SIGKILL) after epoch 1: BackupAndRestore brings back the weights, the
    optimizer (with its step count) and the epoch, and fit trains epochs 2 and 3 only."""
    out = tmp_path / "fit"
    with pytest.raises(RuntimeError, match="exited with code -9"):
        run(command("tf_mirrored_fit", out, "--kill-after-epoch", "1"))
    backup = out / "backup"
    assert json.loads((backup / "training_metadata.json").read_text())["epoch"] == 1
    saved = weights(backup / "latest.weights.h5")
    assert any(name.startswith("optimizer") for name in saved)  # the optimizer is in it

    run(command("tf_mirrored_fit", out))
    record = results(out)[0]
    check_trained(record, "tf_mirrored_fit")
    assert record["resumed_from_epoch"] == 1 and len(record["loss_per_epoch"]) == 2
    # the optimizer's step count came back (so the warm-up does not start again) ...
    assert record["steps"] == 3 * STEPS_PER_EPOCH
    assert record["steps_this_run"] == 2 * STEPS_PER_EPOCH
    # ... and the weights: a fresh model's first epoch averages about 2.26 here (it starts
    # at ln 10 = 2.30), the restored one's far less. Not bit-identical to an uninterrupted
    # run: the shuffle's state is not in the backup, so epochs 2 and 3 see other orders.
    assert record["loss_per_epoch"][0] < 2.0
    assert not backup.exists()  # deleted once fit finished


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
def test_keras_jax_killed_after_an_epoch_resumes_at_its_end(tmp_path):
    """2 simulated CPU devices, TensorFlow not installed; killed (SIGKILL) after epoch 1,
    started again: the weights and optimizer of epoch 1 come back, fit trains epochs 2 and 3
    only, in an uninterrupted run's order, and ends with its weights to the bit."""
    out, whole = tmp_path / "jax", tmp_path / "uninterrupted"
    env = without_tensorflow(tmp_path)
    with pytest.raises(RuntimeError, match="exited with code -9"):
        run(command("keras_jax", out, "--kill-after-epoch", "1"), env=env)
    assert json.loads((out / "checkpoint.json").read_text())["epoch"] == 1
    assert any(name.startswith("optimizer") for name in weights(out / "epoch-1.weights.h5"))

    output = run(command("keras_jax", out), command("keras_jax", whole), env=env)[0]
    resumed, uninterrupted = weights(out / "final.weights.h5"), weights(whole / "final.weights.h5")
    assert resumed.keys() == uninterrupted.keys()
    for name, array in resumed.items():
        np.testing.assert_array_equal(array, uninterrupted[name], err_msg=name)
    assert "resumed from epoch-1.weights.h5: epoch 1" in output
    record = results(out)[0]
    check_trained(record, "keras_jax")
    assert record["resumed_from_epoch"] == 1 and len(record["loss_per_epoch"]) == 2
    assert record["steps"] == 3 * STEPS_PER_EPOCH  # the optimizer's count came back
    assert record["steps_this_run"] == 2 * STEPS_PER_EPOCH and record["processes"] == 1
    assert record["loss_per_epoch"][0] < 2.0  # a fresh model's first epoch: about 2.26
    pointer = json.loads((out / "checkpoint.json").read_text())
    assert pointer == {"epoch": 3, "weights": "epoch-3.weights.h5"}
    assert sorted(p.name for p in out.glob("*.weights.h5")) == [
        "epoch-3.weights.h5",
        "final.weights.h5",
    ]  # older epochs' files deleted


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
def test_keras_jax_on_eight_devices_evaluates_whole_batches_of_the_test_set(tmp_path):
    """64 per device on 8 devices: a global batch of 512, more than the 500 test examples;
    they are evaluated in batches of 496, and the warm-up fits in the one step there is."""
    out = tmp_path / "jax8"
    extra = ["--epochs", "1", "--cpu-devices", "8", "--batch-per-device", "64"]
    output = run(command("keras_jax", out, *extra), env=without_tensorflow(tmp_path))[0]
    assert "warm-up shortened from 2 to 0 steps, a quarter of the 1 steps" in output
    (record,) = results(out)
    assert record["replicas"] == 8 and record["global_batch"] == 512
    assert record["test_examples"] == 496 and record["steps"] == 1


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
def test_multiworker_two_workers_only_the_chief_writes(tmp_path):
    out = tmp_path / "multiworker"
    outputs = launch_tf_workers(command("tf_multiworker", out), 2, cwd=REPOSITORY,
                                timeout_s=DEADLINE_S)  # fmt: skip
    assert all("epoch 3/3" in text for text in outputs)
    [record] = results(out)  # one line: the chief's
    check_trained(record, "tf_multiworker")
    assert record["workers"] == 2 and record["steps"] == 3 * STEPS_PER_EPOCH
    assert (out / "final.weights.h5").exists() and (out / "checkpoints" / "checkpoint").exists()
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoints",
        "final.weights.h5",
        "results.jsonl",
    ]  # worker 1's temporary checkpoints are gone


def test_the_keras_recipes_choose_their_precision_by_one_rule():
    """tf_common.choose_precision serves the TensorFlow recipes and keras_jax.py alike: the
    same --precision gives the same policy on the same GPU, whichever framework reports it."""
    from types import SimpleNamespace

    from tests.helpers import import_recipe

    choose = import_recipe("tf_common").choose_precision
    capability = import_recipe("keras_jax").jax_gpu_capability
    assert [choose("auto", None), choose("mixed", None), choose("fp32", (9, 0))] == [
        "float32",
        "mixed_bfloat16",
        "float32",
    ]
    t4, a100 = SimpleNamespace(compute_capability="7.5"), SimpleNamespace(compute_capability="8.0")
    assert choose("auto", capability([t4], "gpu")) == "mixed_float16"
    assert choose("auto", capability([a100], "gpu")) == "mixed_bfloat16"
    assert capability([t4], "CPU") is None
