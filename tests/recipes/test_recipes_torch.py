"""The PyTorch recipes run as a reader runs them (torchrun, here with 2 CPU processes and tiny
sizes): they train, report, stop cleanly on SIGTERM and resume exactly, and refuse a wrong
launch with one clear line; and recipes/results_table.py reads what they write."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.helpers import ROOT, import_recipe
from utils.launch import TORCHRUN, child_environment, run_processes
from utils.sizing import transformer_flops_per_token

RECIPES = ROOT / "recipes"
PYTORCH = RECIPES / "pytorch"  # the folder a reader copies
CPU = {"CUDA_VISIBLE_DEVICES": ""}  # CPU processes with gloo, even on a GPU machine
# 461 training examples, 8 per process: 28 steps per epoch
TINY = (
    "--epochs 2 --limit-examples 512 --batch-per-device 8 --lr 0.05 --base-batch 16 "
    "--warmup-steps 5 --num-workers 1 --log-every 1 --seed 3 --deterministic"
).split()
STEPS_PER_EPOCH = 28
KEYS = {
    "recipe",
    "world_size",
    "device_type",
    "precision",
    "global_batch",
    "examples_per_s_per_device",
    "mean_step_time_s",
    "final_train_loss",
    "test_accuracy",
    "epochs",
    "steps",
}
LOGGED_LOSS = re.compile(r"^epoch (\d+) step (\d+)/\d+ loss ([\d.]+)$", re.M)


def torchrun(recipe: str, out, *flags: str) -> list[str]:
    """The reader's command: torchrun --standalone --nproc_per_node=2 RECIPE.py ..."""
    results = ["--out", str(out), "--results", str(out) + ".jsonl"]
    return [*TORCHRUN, "--standalone", "--nproc_per_node=2", f"{recipe}.py", *results, *flags]


def run_recipe(command: list[str], timeout_s: float = 150) -> str:
    """Run one command from recipes/pytorch/ on CPUs; its output (an error names a failure)."""
    (output,) = run_processes([command], envs=[CPU], cwd=PYTORCH, timeout_s=timeout_s)
    return output


def run_and_stop(command: list[str], log_path, when: str, timeout_s: float = 150):
    """Run `command` and, once its output shows `when`, send SIGTERM to its whole process
    group (torchrun, its workers and their DataLoader workers), as Slurm does on
    preemption. Returns the exit code, the output and the seconds from signal to exit."""
    with open(log_path, "a") as log:  # appends, so our reads do not move its writes
        process = subprocess.Popen(
            command,
            cwd=PYTORCH,
            env=child_environment(CPU),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    signalled, deadline = None, time.monotonic() + timeout_s
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if signalled is None and when in log_path.read_text():
                os.killpg(process.pid, signal.SIGTERM)
                signalled = time.monotonic()
            time.sleep(0.02)
        assert process.poll() is not None, f"still running after {timeout_s} s"
        assert signalled, f"ended before {when!r}:\n{log_path.read_text()[-2000:]}"
        return process.returncode, log_path.read_text(), time.monotonic() - signalled
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def results(out) -> list[dict]:
    return [json.loads(line) for line in open(str(out) + ".jsonl")]


def weights(out) -> dict[str, torch.Tensor]:
    return torch.load(out / "model.pt", weights_only=True)


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """torch_ddp.py, 2 epochs, uninterrupted: the reference for the other runs."""
    out = tmp_path_factory.mktemp("ddp") / "uninterrupted"
    return out, run_recipe(torchrun("torch_ddp", out, *TINY))


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
def test_ddp_trains_and_appends_one_result(ddp_run):
    out, output = ddp_run
    losses = [float(loss) for _, _, loss in LOGGED_LOSS.findall(output)]
    assert len(losses) == 2 * STEPS_PER_EPOCH  # logged by rank 0 only, each step
    assert losses[-1] < losses[0], losses
    (record,) = results(out)
    assert KEYS <= record.keys()
    assert record["recipe"] == "torch_ddp" and record["world_size"] == 2
    assert (record["device_type"], record["precision"]) == ("cpu", "fp32")
    assert record["global_batch"] == 16 and record["steps"] == 2 * STEPS_PER_EPOCH
    assert record["loss_per_epoch"][1] < record["loss_per_epoch"][0]
    assert record["examples_per_s_per_device"] > 0 and record["test_accuracy"] > 0.3


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
@pytest.mark.parametrize("recipe", ["torch_ddp", "torch_fsdp"])
def test_stopped_by_sigterm_and_resumed_ends_with_the_same_weights(recipe, ddp_run, tmp_path):
    """Stopped in epoch 2, the run saves a checkpoint and exits; started again, it resumes
    and ends with the uninterrupted DDP run's weights, bit for bit.

    Exact on CPUs: the same seed, batches and float32 kernels (one thread per process), and
    with 2 processes each gradient element is the sum of two numbers (the same whatever
    their order) halved (exact), whatever DDP's buckets or FSDP's shards. The resumed run
    restores weights, momentum, learning-rate schedule, epoch and position in the epoch.
    (With 3 or more processes, a resumed DDP run's first step reduces gradients in other
    buckets than the uninterrupted run, which could change sums in the last bit.)"""
    uninterrupted, _ = ddp_run
    out, log = tmp_path / recipe, tmp_path / "stopped.log"
    code, output, seconds = run_and_stop(torchrun(recipe, out, *TINY), log, "epoch 2 step 1/")
    stopped = re.search(r"stop signal: checkpoint saved after epoch 2 step (\d+)", output)
    assert stopped, output[-3000:]
    assert int(stopped[1]) < STEPS_PER_EPOCH  # stopped mid-epoch
    # torchrun itself, signalled too, stops its workers and exits 1 with a SignalException
    # traceback; the workers save and exit by themselves (no traceback, no SIGKILL),
    # well within torchrun's 30 s grace period.
    assert code == 1 and "SignalException" in output
    assert output.count("Traceback") == 1 and "forcefully" not in output, output[-3000:]
    assert seconds < 25
    assert not os.path.exists(str(out) + ".jsonl")  # a stopped run reports nothing

    output = run_recipe(torchrun(recipe, out, *TINY))
    assert f"resumed from {out}: epoch 2, step {stopped[1]}" in output
    (record,) = results(out)
    assert record["steps"] == 2 * STEPS_PER_EPOCH
    assert record["steps_this_run"] == STEPS_PER_EPOCH - int(stopped[1])
    expected, got = weights(uninterrupted), weights(out)
    assert expected.keys() == got.keys()
    for name in expected:  # FSDP trains the very weights DDP does, here
        assert torch.equal(expected[name], got[name]), name


def run_python(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=PYTORCH,
        env=child_environment({**CPU, **(env or {})}),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.full  # starts Python programs: the full proof's
@pytest.mark.parametrize("recipe", ["torch_ddp", "torch_fsdp"])
def test_help_lists_the_flags(recipe):
    result = run_python(f"{recipe}.py", "--help")
    assert result.returncode == 0, result.stderr
    for flag in [
        "--epochs",
        "--batch-per-device",
        "--lr",
        "--base-batch",
        "--warmup-steps",
        "--images",
        "--out",
        "--results",
        "--seed",
        "--num-workers",
        "--max-steps",
        "--precision",
        "--limit-examples",
        "--deterministic",
        "--model",
        "--context",
        "--width",
        "--layers",
        "--heads",
        "--text-bytes",
        "--peak-tflops",
    ]:
        assert flag in result.stdout


@pytest.mark.full  # starts Python programs: the full proof's
@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {}, "torch_ddp.py: start it with torchrun --nproc_per_node=N torch_ddp.py"),
        (["--batch-per-device", "0"], {}, "--batch-per-device: must be at least 1; got 0"),
        (  # what torchrun would set for 2 processes: the check comes before they connect
            ["--limit-examples", "20", "--batch-per-device", "16"],
            {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"},
            "the global batch, 32 (--batch-per-device 16 x 2 processes), is larger than the "
            "18 training examples",
        ),
        (
            ["--model", "transformer", "--images", "photos"],
            {},
            "--images: the transformer trains on text; use --model cnn for images.",
        ),
        (
            ["--model", "transformer", "--text-bytes", "100", "--context", "64"],
            {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"},
            "a context of 64 tokens needs at least 130 bytes of text; there are 100",
        ),
        (
            ["--model", "transformer", "--width", "100", "--heads", "3"],
            {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"},
            "--width 100 must be a multiple of --heads 3.",
        ),
        (
            ["--compile", "--bucket-cap-mb", "0.5"],
            {},
            "--compile with --bucket-cap-mb 0.5: torch.compile splits the model at buckets "
            "whose first is 1 MiB",
        ),
    ],
    ids=[
        "without torchrun",
        "batch 0",
        "global batch too large",
        "images for the transformer",
        "text too short",
        "width and heads",
        "compile with small buckets",
    ],
)
def test_a_wrong_launch_gets_one_clear_line(args, env, message):
    result = run_python("torch_ddp.py", *args, env=env)
    assert result.returncode != 0
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr


def _recipe(name: str):
    """A recipe's module, imported as its launcher would."""
    return import_recipe(name)


def test_more_processes_than_gpus_is_refused(monkeypatch):
    recipe = _recipe("pytorch/launch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(SystemExit, match="--nproc_per_node=8 but this machine has 2 GPU"):
        recipe.choose_device(local_rank=0, local_world_size=8)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert recipe.choose_device(0, 8) == torch.device("cpu")
    assert recipe.choose_precision("auto", torch.device("cpu")) == "fp32"


def test_processes_that_see_different_checkpoints_are_stopped(monkeypatch, tmp_path):
    """A rank that sees another checkpoint (an --out that is not shared) would train from
    other weights, or wait forever for FSDP's collectives: every rank stops instead."""
    recipe = _recipe("pytorch/training")
    seen_by_rank = ["checkpoint.pt of 1700000000", None]
    monkeypatch.setattr(recipe.dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(
        recipe.dist,
        "all_gather_object",
        lambda seen, mine: seen.__setitem__(slice(None), seen_by_rank),
    )
    training = SimpleNamespace(out=tmp_path, latest=lambda: None)
    with pytest.raises(SystemExit, match="--out must be one folder that every machine shares"):
        recipe.agreed_checkpoint(training)
    seen_by_rank = [None, None]
    assert recipe.agreed_checkpoint(training) is False


def test_a_warm_up_longer_than_a_quarter_of_the_run_is_shortened():
    data = _recipe("pytorch/training")
    said = []
    assert data.warmup_length(50, 40, lambda text, flush: said.append(text)) == 10
    assert said == [
        "warm-up shortened from 50 to 10 steps, a quarter of the 40 steps of this run "
        "(more --epochs or a smaller batch give more)"
    ]
    assert data.warmup_length(5, 56, print) == 5 and len(said) == 1


def _results_table():
    return _recipe("results_table")


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
def test_results_table_compares_with_the_one_device_run(ddp_run, tmp_path, capsys):
    run = {
        "recipe": "torch_ddp",
        "device_type": "cuda",
        "precision": "bf16",
        "mean_step_time_s": 0.01,
        "test_accuracy": 0.9,
    }
    lines = [
        {**run, "world_size": 1, "global_batch": 64, "examples_per_s_per_device": 6400.0},
        {**run, "world_size": 8, "global_batch": 512, "examples_per_s_per_device": 5760.0},
        # the Keras recipes count replicas
        {
            **run,
            "recipe": "tf",
            "replicas": 2,
            "global_batch": 128,
            "examples_per_s_per_replica": 100.0,
        },
    ]
    made = tmp_path / "made.jsonl"
    made.write_text("".join(json.dumps(line) + "\n" for line in lines))
    plot = tmp_path / "scaling.png"
    _results_table().main([str(made), str(ddp_run[0]) + ".jsonl", "--plot", str(plot), "--wide"])
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 2 + 4 + 1  # header, rule, runs, "plot saved"
    assert rows[3].split()[:10] == [
        "torch_ddp",
        "cnn",  # results without a model are the CNN's
        "-",  # nor their weights
        "8",
        "cuda",
        "bf16",
        "-",  # nor whether they compiled
        "512",
        "5760.0",
        "90%",
    ]
    assert rows[4].split()[9] == "-"  # no 1-device run to compare with
    assert rows[5].split()[:8] == [
        "torch_ddp", "cnn", "12,810", "2", "cpu", "fp32", "False", "16",
    ]  # fmt: skip
    assert plot.stat().st_size > 0


#: the transformer's rows of one GPU's evidence, as the server page and chapter 18 show them
EVIDENCE = RECIPES / "measured" / "nvidia_h100_80gb_hbm3_evidence.jsonl"
TRANSFORMER_COLUMNS = "recipe,weights,global_batch,tokens,mfu,memory_gib"


def test_results_table_reads_the_gpu_evidence_files_recipe_rows(tmp_path, capsys):
    """tools/gpu_evidence.py's file holds a row per step; the table shows each recipe's
    run (the transformer's and the CNN's), and none of the steps that ran no recipe (the
    chapters' workers, the quick start's programs, the profiled step's row)."""
    steps = [json.loads(line) for line in EVIDENCE.read_text().splitlines()]
    profiled = {"step": "transformer large, its step profiled", "result": {"eager_mfu": 0.3}}
    evidence = tmp_path / "evidence.jsonl"
    evidence.write_text(EVIDENCE.read_text() + json.dumps(profiled) + "\n")
    _results_table().main([str(evidence)])
    printed = capsys.readouterr().out.splitlines()[2:]
    recipe_rows = [step for step in steps if "recipe" in step.get("result", {})]
    assert len(printed) == len(recipe_rows) == 9
    _results_table().main([str(EVIDENCE), "--model", "transformer", "--columns", "recipe,mfu"])
    header, _, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["recipe", "MFU"] and len(rows) == 6


MEASURED = sorted((RECIPES / "measured").glob("*.jsonl"))


@pytest.mark.parametrize("path", MEASURED, ids=[path.name for path in MEASURED])
def test_results_table_fits_100_columns_and_wide_shows_every_column(path, capsys):
    """Each committed evidence file's default table has the default columns, in at most 100
    characters a line; --wide shows every column, for the same rows."""
    table = _results_table()
    table.main([str(path)])
    default = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in default) <= 100
    titles = {key: title for title, key, _ in table.COLUMNS}
    assert re.split(r"\s{2,}", default[0].strip()) == [titles[key] for key in table.DEFAULT]
    table.main([str(path), "--wide"])
    wide = capsys.readouterr().out.splitlines()
    assert re.split(r"\s{2,}", wide[0].strip()) == list(titles.values())
    assert len(wide) == len(default)  # the same rows


def test_results_table_compares_only_runs_of_the_same_model_size(tmp_path, capsys):
    """Two sizes of the transformer at the same batch per device are two groups: each run
    on one device is its own 100%, not a share of the other size's speed."""
    run = {"recipe": "torch_ddp", "model": "transformer", "device_type": "cuda"}
    run |= {"precision": "bf16", "world_size": 1, "global_batch": 64, "test_accuracy": 0.5}
    sizes = [(3_323_392, 4000.0), (152_729_600, 60.0)]
    lines = [
        {**run, "parameters": weights, "examples_per_s_per_device": rate, "mean_step_time_s": 1}
        for weights, rate in sizes
    ]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    _results_table().main([str(path), "--columns", "efficiency,weights"])
    _, _, *rows = capsys.readouterr().out.splitlines()
    assert [row.split() for row in rows] == [["100%", "3,323,392"], ["100%", "152,729,600"]]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--columns", "recipe,speed"], "--columns: no column speed; choose from recipe,"),
        (["--model", "gpt"], "no run of --model gpt in"),
    ],
)
def test_results_table_explains_a_wrong_column_or_model(flags, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        _results_table().main([str(EVIDENCE), *flags])
    assert message in f"{stopped.value.code} {capsys.readouterr().err}"


def markdown_table(flags: list[str], capsys) -> str:
    """What results_table.py prints with `flags`, as the Markdown table a page shows."""
    _results_table().main(flags)
    printed = [
        re.split(r"\s{2,}", line.strip())
        for line in capsys.readouterr().out.splitlines()
        if line.strip() and not set(line.strip()) <= set("- ")  # not the rule under the header
    ]
    rows = ["| " + " | ".join(row) + " |" for row in printed]
    rows.insert(1, "|" + "---|" * len(printed[0]))  # the header's rule
    return "\n".join(rows)


def test_the_pages_transformer_table_is_what_the_evidence_file_gives(capsys):
    """gpu_results.md shows the transformer's rows of one GPU's evidence file as
    results_table.py prints them: no number on the page typed by hand."""
    flags = [str(EVIDENCE), "--model", "transformer", "--columns", TRANSFORMER_COLUMNS]
    assert markdown_table(flags, capsys) in (ROOT / "gpu_results.md").read_text()


def test_the_pages_gpu_table_is_what_the_measured_file_gives(capsys):
    """gpu_results.md shows, as a Markdown table, the rows results_table.py prints
    for the GPU runs' own results file, so that no number on the page was typed by hand."""
    measured = str(RECIPES / "measured" / "nvidia_h200_one_gpu.jsonl")
    _results_table().main([measured, "--columns", "devices,device_type,efficiency"])
    _, _, *rows = capsys.readouterr().out.splitlines()
    assert {tuple(row.split()) for row in rows} == {("1", "cuda", "100%")}
    columns = "recipe,precision,global_batch,per_device,step_ms,accuracy"
    table = markdown_table([measured, "--columns", columns], capsys)
    assert table in (ROOT / "gpu_results.md").read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no results in it; run a recipe with --results"),
        ('{"recipe": "torch_ddp"\n', "line 1: not one run's results"),
        ('{"recipe": "torch_ddp"}\n', "line 1: no world_size or replicas"),
    ],
    ids=["empty", "not JSON", "not results"],
)
def test_results_table_explains_a_bad_file(text, message, tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(text)
    with pytest.raises(SystemExit, match=re.escape(message)):
        _results_table().main([str(path)])


def test_the_transformer_trains_on_the_standard_librarys_sources():
    """Its text is on every machine; each target is the input moved one token on."""
    transformer = _recipe("pytorch/data")
    tokens = transformer.load_python_sources(10_000)
    assert tokens.dtype == np.uint8 and len(tokens) == 10_000
    assert b"import" in tokens.tobytes()
    inputs, targets = transformer.sequences(tokens, 64)
    assert inputs.shape == targets.shape == (10_000 // 65, 64)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert torch.equal(inputs[1, 0], torch.tensor(int(tokens[65])))


def test_the_operations_counted_per_step_are_the_transformers_formula(monkeypatch):
    """training_flops counts, on the meta device, what chapter 18 derives: 6 per weight of
    a matrix product and token, plus attention's 12 x layers x context x width per token
    (as plain matrix products: the fused kernel's own count on a CPU is missing)."""
    recipe = _recipe("pytorch/measure")
    context, width, layers, batch = 32, 64, 3, 5
    inputs = torch.randint(0, 256, (batch, context))
    per_token = transformer_flops_per_token(layers, width, 256, context)
    args = SimpleNamespace(
        model="transformer", context=context, width=width, layers=layers, heads=4
    )
    assert recipe.training_flops(args, 256, inputs, inputs) == per_token * batch * context


def test_the_peak_for_mfu(monkeypatch):
    """--peak-tflops first; a known GPU's vendor figure by precision; the CPU measured."""
    recipe = _recipe("pytorch/measure")
    args = SimpleNamespace(peak_tflops=None)
    cuda, said = torch.device("cuda", 0), []
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H100 80GB HBM3")
    h100 = recipe.GPU_PEAK_FLOPS["NVIDIA H100 80GB HBM3"]
    assert recipe.peak_flops(args, cuda, "bf16", said.append) == h100[0]
    assert recipe.peak_flops(args, cuda, "fp32", said.append) == h100[1]
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "Some Future GPU")
    assert recipe.peak_flops(args, cuda, "bf16", lambda text, flush: said.append(text)) is None
    assert said == ["no peak known for Some Future GPU: give --peak-tflops for the MFU"]
    assert recipe.peak_flops(SimpleNamespace(peak_tflops=2.5), cuda, "bf16", print) == 2.5e12
    assert recipe.peak_flops(args, torch.device("cpu"), "fp32", print) > 1e8


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
@pytest.mark.parametrize("recipe", ["torch_ddp", "torch_fsdp"])
def test_the_transformer_trains_and_reports_tokens_and_mfu(recipe, tmp_path):
    out = tmp_path / recipe
    flags = (
        "--model transformer --context 32 --width 64 --layers 2 --heads 2 --text-bytes 40000 "
        "--epochs 1 --batch-per-device 8 --num-workers 0 --log-every 10"
    ).split()
    output = run_recipe(torchrun(recipe, out, *flags))
    losses = [float(loss) for _, _, loss in LOGGED_LOSS.findall(output)]
    assert losses[-1] < losses[0] - 1, losses
    (record,) = results(out)
    # 40000 bytes: 1212 sequences of 33 tokens, 1091 to train on, 68 steps of 2 x 8
    assert record["model"] == "transformer" and record["steps"] == 68
    steps_per_s = record["examples_per_s_per_device"] / 8
    assert record["tokens_per_s_per_device"] == pytest.approx(steps_per_s * 8 * 32)
    per_token = transformer_flops_per_token(layers=2, width=64, vocabulary=256, context=32)
    assert record["flops_per_step_per_device"] == 8 * 32 * per_token
    assert record["mfu"] == pytest.approx(
        record["flops_per_step_per_device"] * steps_per_s / record["peak_flops_per_device"]
    )
    assert 0 < record["mfu"] < 1 and record["peak_memory_bytes"] is None  # on a CPU


@pytest.mark.full  # an end-to-end launch: the full proof (CONTRIBUTING.md)
@pytest.mark.parametrize(
    ("recipe", "model"),
    [("torch_ddp", "transformer"), ("torch_fsdp", "transformer"), ("torch_fsdp", "cnn")],
)
def test_compiled_a_model_trains_as_it_does_eagerly(recipe, model, tmp_path):
    """--compile (the whole model before DDP, as chapter 17 does; each of FSDP2's units):
    Inductor compiles, and 12 steps in float32 log eager's losses to float32's rounding."""
    size = (
        "--context 32 --width 64 --layers 2 --heads 2 --text-bytes 40000"
        if model == "transformer"
        else "--limit-examples 512"
    )
    flags = (
        f"--model {model} {size} --epochs 1 --max-steps 12 --batch-per-device 8 "
        "--num-workers 0 --log-every 1 --precision fp32 --deterministic"
    ).split()
    logged = {}
    for compiled in (False, True):
        out, cache = tmp_path / f"compiled-{compiled}", tmp_path / f"inductor-{compiled}"
        command = torchrun(recipe, out, *flags, *(["--compile"] if compiled else []))
        env = {**CPU, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
        (output,) = run_processes([command], envs=[env], cwd=PYTORCH, timeout_s=240)
        logged[compiled] = [float(loss) for _, _, loss in LOGGED_LOSS.findall(output)]
        (record,) = results(out)
        assert record["compiled"] is compiled and record["steps"] == 12
        assert any(cache.rglob("*.py")) is compiled, "Inductor's kernels"
    assert len(logged[True]) == 12 and logged[True] == pytest.approx(logged[False], rel=1e-4)


def test_results_table_scales_compiled_runs_against_compiled_ones():
    """A compiled run's efficiency is over the compiled one-device run's, not eager's."""
    table = _results_table()
    common = dict(recipe="torch_ddp", model="cnn", weights=10, device_type="cuda")
    common |= dict(precision="bf16", global_batch=64, step_time_s=1.0, memory=None)
    runs = [
        {**common, "devices": 1, "per_device": 100.0, "compiled": False},
        {**common, "devices": 1, "per_device": 200.0, "compiled": True},
        {**common, "global_batch": 128, "devices": 2, "per_device": 180.0, "compiled": True},
    ]
    table.add_efficiency(runs)
    assert [run["efficiency"] for run in runs] == [1.0, 1.0, 0.9]
