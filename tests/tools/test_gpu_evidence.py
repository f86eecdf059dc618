"""tools.gpu_evidence: the script that measures the book's GPU paths in one run, and
tools.chapter_workers, its step that runs the PyTorch chapters' workers. Its dry run on the
CPU runs every step (the full proof), so the script is known to work before a GPU comes; a
failing or hanging step, or worker, is recorded and the others go on."""

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import ROOT, import_recipe
from tools import chapter_workers, gpu_evidence, profile_transformer
from tools.shared_gpu import OnSharedGpu
from utils.pytorch_ddp import run_ranks
from utils.sizing import transformer_flops_per_token


def test_without_a_gpu_it_says_to_use_the_dry_run(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit, match="--dry-run"):
        gpu_evidence.main([])


def test_a_folder_without_wheels_says_how_to_fetch_them(tmp_path):
    with pytest.raises(SystemExit, match="no wheels there .tools/gpu_wheels.txt says how"):
        gpu_evidence.install(tmp_path)


def test_a_failing_step_is_recorded_with_its_error_line():
    command = [sys.executable, "-c", "raise ValueError('wrong size')"]
    outcome = gpu_evidence.run_step(command, None, timeout_s=60)
    assert not outcome["ok"] and outcome["error"] == "ValueError: wrong size"


@pytest.mark.full  # starts Python programs: the full proof's
def test_a_step_past_its_deadline_is_stopped():
    outcome = gpu_evidence.run_step([sys.executable, "-c", "while True: pass"], None, 1)
    assert outcome == {"ok": False, "error": "stopped after 1 s"}


def test_the_chapters_step_fails_with_each_failed_worker_named(tmp_path):
    rows = tmp_path / chapter_workers.ROWS
    written = [
        {"chapter": "06_pytorch_dp_ddp", "worker": "ddp_worker", "outcome": "ok"},
        {"chapter": "17_inside_one_step", "worker": "compiled_worker", "outcome": "E: x"},
    ]
    rows.write_text("".join(json.dumps(row) + "\n" for row in written))
    outcome = gpu_evidence.run_step([sys.executable, "-c", "pass"], rows, timeout_s=60)
    assert not outcome["ok"] and outcome["workers"] == written
    assert outcome["error"] == "1 of 2 failed: 17_inside_one_step, compiled_worker"


def test_a_failing_worker_is_recorded_and_the_next_one_runs(tmp_path, monkeypatch):
    def fails(machine):
        raise ValueError("first line\nwhat went wrong")

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # as the dry run sets it, undone after
    monkeypatch.setattr(
        chapter_workers,
        "WORKERS",
        [
            (chapter_workers.DDP, "failing", fails),
            (chapter_workers.DDP, "working", lambda machine: {"files": machine.folder.name}),
        ],
    )
    chapter_workers.main(["--dry-run", "--out", str(tmp_path)])
    rows = [json.loads(line) for line in (tmp_path / chapter_workers.ROWS).read_text().splitlines()]
    assert [row["outcome"] for row in rows] == ["ValueError: what went wrong", "ok"]
    assert rows[1]["report"] == {"files": "06_pytorch_dp_ddp"}
    assert rows[1]["world_size"] == 2 and rows[1]["backend"] == "gloo"
    assert (tmp_path / "06_pytorch_dp_ddp" / "ddp_worker.py").is_file()  # the chapter's file


def test_each_gpu_call_contributing_plans_ends_inside_a_device_call():
    """CONTRIBUTING's calls for the next GPU: each `--only` picks steps, no step twice, and
    the deadlines of a call's steps add up to under a device call's 600 s."""
    import re

    text = " ".join((ROOT / "CONTRIBUTING.md").read_text().split())
    plan = text.split("For the next GPU, the new steps in this order:")[1].split(";")[0]
    calls = re.findall(r'`--only "?([^"`]+?)"? --timeout (\d+)`', plan)
    names = [name for name, *_ in gpu_evidence.steps(dry_run=False, work=ROOT)]
    picked = []
    for only, timeout in calls:
        steps = [name for name in names if re.search(only, name)]
        long = {gpu_evidence.CHAPTERS, gpu_evidence.SHARED, gpu_evidence.NBVAL}
        assert steps and sum((4 if s in long else 1) * int(timeout) for s in steps) < 600, only
        picked += steps
    assert len(calls) == 3 and len(picked) == len(set(picked)) == 6


def test_the_gpu_machines_wheels_are_the_books_versions():
    """tools/gpu_wheels.txt pins what the lent machines lack at this environment's versions,
    Keras, mlxtend and nbval with the kernel among them."""
    lines = (ROOT / "tools" / "gpu_wheels.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    assert {"keras", "mlxtend", "nbval", "ipykernel", "nbconvert"} <= pins.keys()
    assert {name: metadata.version(name) for name in pins} == pins


def where_ranks_train(rank, out):
    """A worker: what `ddp_device` answers in this process where NCCL would take a GPU a
    process (4 GPUs, 2 processes), through a module that imported it."""
    from utils import process_group

    device, backend = process_group.ddp_device(rank, 2, gpu_count=4)
    Path(out, f"{rank}.txt").write_text(f"{device} {backend}")


@pytest.mark.full  # starts Python programs: the full proof's
def test_shared_gpu_workers_take_gpu_0_over_gloo_in_every_process(tmp_path):
    """OnSharedGpu's processes all take GPU 0 (here, without one, the CPU) over gloo."""
    run_ranks(OnSharedGpu(where_ranks_train), 2, (str(tmp_path),), timeout_s=60)
    assert [(tmp_path / f"{rank}.txt").read_text() for rank in range(2)] == ["cpu gloo"] * 2


def test_the_gpu_runs_parse_and_the_batch_64_run_trains_4_epochs(tmp_path):
    """On a GPU the transformer's steps pass the recipe's parser, the later --epochs winning."""
    recipe = import_recipe("pytorch/torch_ddp")
    for name, command, _ in gpu_evidence.steps(dry_run=False, work=tmp_path):
        if name.startswith("transformer") and "profiled" not in name:
            args = recipe.parse_args(command[command.index("--model") :])
            assert args.epochs == (4 if "batch 64" in name else 1), name


@pytest.mark.full  # about a dozen launches: the full proof (CONTRIBUTING.md)
def test_the_dry_run_runs_every_step_and_records_each(tmp_path):
    command = [sys.executable, "-m", "tools.gpu_evidence", "--dry-run", "--out", str(tmp_path)]
    subprocess.run(command, cwd=ROOT, check=True, timeout=900, capture_output=True)
    rows = [json.loads(line) for line in (tmp_path / "cpu_evidence.jsonl").read_text().splitlines()]
    planned = [name for name, *_ in gpu_evidence.steps(True, tmp_path)]
    assert [row["step"] for row in rows] == planned
    assert all(row["ok"] for row in rows), [row for row in rows if not row["ok"]]
    assert all(row["dry_run"] and row["torch"] and row["date"] for row in rows)
    for row in rows:
        if row["step"] == gpu_evidence.PROFILE:  # the eager step's kernel time, by kind
            assert row["result"]["eager_step_ms"] > 0 and row["result"]["top_kernels"]
            assert "matrix products" in row["result"]["kernel_ms_per_step"]
        elif row["step"].startswith("transformer"):
            assert row["result"]["model"] == "transformer" and row["result"]["mfu"] > 0
            assert row["logged_losses"][-1] < row["logged_losses"][0]  # it learned
        elif row["step"].startswith("CNN"):  # Keras's row has no model (a CNN only)
            assert row["result"].get("model", "cnn") == "cnn" and row["result"]["steps"]
        elif row["step"] == gpu_evidence.CHAPTERS:  # every worker, on 2 gloo processes
            workers = [(row["chapter"], row["worker"]) for row in row["workers"]]
            assert workers == [(chapter, name) for chapter, name, _ in chapter_workers.WORKERS]
            assert all(w["world_size"] == 2 and w["backend"] == "gloo" for w in row["workers"])
        elif row["step"] == gpu_evidence.SHARED:  # chapter 15's, through OnSharedGpu
            workers = [w["worker"] for w in row["workers"]]
            assert workers == ["fsdp_worker", "fsdp_restore_worker"]
            assert row["workers"][1]["report"]["processes"] == 3  # restored on one more
        elif row["step"] == gpu_evidence.NBVAL:  # the dry run collects every chapter's cells
            assert "tests collected" in row["summary"] and not row["failed"]
        elif row["step"] == "preflight":  # every check on 2 CPU processes
            assert row["printed"][-1].endswith("checks passed, 2 rank(s) on 1 host(s)")
        else:  # the quick start's programs print their test accuracy
            assert "test accuracy" in row["printed"][-1]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matrix products"),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "matrix products"),
        ("aten::addmm", "matrix products"),
        ("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>", "attention"),
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>", "optimizer"),
        ("void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>", "other"),
        ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "attention"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", "attention"),
        ("aten::native_layer_norm", "other"),
    ],
)
def test_the_profile_sorts_kernels_by_kind(name, kind):
    assert profile_transformer.kind_of(name) == kind


def test_the_profile_sums_each_kernel_once_by_kind():
    """Kernels' own time on the GPU, per step; the optimizer's `record_function` range,
    which the profiler also records on the GPU around kernels already counted, and the
    CPU's events, are left out."""
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU

    def event(key, device_type, microseconds, count=3, annotation=False):
        return SimpleNamespace(
            key=key,
            device_type=device_type,
            self_device_time_total=microseconds if device_type == cuda else 0,
            self_cpu_time_total=microseconds if device_type == cpu else 0,
            count=count,
            is_user_annotation=annotation,
        )

    events = [
        event("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", cuda, 30_000),
        event("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<x>", cuda, 6_000),
        event("Optimizer.step#AdamW.step", cuda, 6_600, annotation=True),
        event("Memcpy DtoD (Device -> Device)", cuda, 300),
        event("aten::addmm", cpu, 90_000),
    ]
    by_kind, top = profile_transformer.seconds_by_kind(events, steps=3, gpu=True)
    assert by_kind == pytest.approx({"matrix products": 0.01, "optimizer": 0.002, "other": 1e-4})
    assert [kernel["kind"] for kernel in top] == ["matrix products", "optimizer", "other"]
    assert top[1]["name"] == "multi_tensor_apply_kernel<x>" and top[1]["calls_per_step"] == 1


def test_the_profile_without_a_gpu_says_to_use_the_dry_run(monkeypatch, tmp_path):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit, match="--dry-run"):
        profile_transformer.main(["--out", str(tmp_path / "profile.jsonl")])


def page_text(name: str) -> str:
    """A page's prose (a notebook's markdown cells), its whitespace made single spaces."""
    path = ROOT / name
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text()
    return " ".join(text.split())


def test_what_the_pages_say_of_the_h100_run_is_in_its_file():
    """The sentences of the results page, chapter 18, the quick start and the calculator page
    about the H100 run, built from the file it wrote and found on the pages."""
    path = ROOT / "recipes" / "measured" / "nvidia_h100_80gb_hbm3_evidence.jsonl"
    rows = {row["step"]: row for row in map(json.loads, path.read_text().splitlines())}
    first = next(iter(rows.values()))
    page = page_text("gpu_results.md")
    chapter = page_text("chapters/18_transformer_compute_and_memory.ipynb")
    quick = page_text("chapters/quick_start.ipynb")
    device = f"{first['device_name']} (PyTorch {first['torch'].split('+')[0]} with CUDA"
    assert f"{device} {first['cuda']}, NCCL {first['nccl']}, driver {first['driver']})" in page
    assert f"On {first['date']} the transformer recipe" in page
    # the chapters' workers
    workers = {row["worker"]: row for row in rows[gpu_evidence.CHAPTERS]["workers"]}
    assert len(workers) == 12 and "all twelve passed" in page
    assert all(row["outcome"] == "ok" for row in workers.values())  # "all twelve passed"
    assert all(row["world_size"] == 1 for row in workers.values())  # "one process each"
    assert workers["fsdp_worker"]["report"]["gap"] < 1e-14
    assert workers["fsdp_restore_worker"]["report"]["gap"] == 0
    assert (
        workers["clipping_worker"]["report"]["gap"] < 1e-17 and "one process's within 1e-17" in page
    )
    assert workers["timeline_worker"]["report"]["all-reduce began ms before backward ended"] > 0

    # the transformer: its flags, and what the pages make of its rows
    def ddp_and_fsdp2(by_step, size):
        return [by_step[f"transformer {size}, {recipe}"] for recipe in ("torch_ddp", "torch_fsdp")]

    small, large, large_64 = (
        ddp_and_fsdp2(rows, size) for size in ("recipe size", "large", "large, batch 64")
    )
    default_flags = gpu_evidence.TRANSFORMER_SIZES["recipe size"]
    assert f"`{default_flags}`" in page  # "the default size": the parser's
    defaults = vars(import_recipe("pytorch/torch_ddp").parse_args([]))
    for flag, value in zip(*[iter(default_flags.split())] * 2, strict=True):
        assert str(defaults[flag[2:].replace("-", "_")]) == value
    shown = "--context 1024 --width 1024 --layers 12 --heads 16 --batch-per-device 16"
    assert shown in page and shown in large[0]["command"]
    shown_64 = "--batch-per-device 64 --text-bytes 16000000"
    assert shown_64 in large_64[0]["command"] and f"`{shown_64}`" in page
    for row in (*small, *large, *large_64):
        result = row["result"]
        assert result["world_size"] == 1 and result["precision"] == "bf16"  # "one rank"
        assert result["peak_flops_per_device"] == 989e12 and "989 TFLOP/s" in page
    ddp, fsdp2 = (row["result"] for row in large)
    ddp_64, fsdp2_64 = (row["result"] for row in large_64)
    assert ddp_64["steps"] == fsdp2_64["steps"] == ddp_64["steps_per_epoch"] == 64
    assert "one epoch of 64 steps" in page and "rest on 64 steps" in page
    # "a little more than the default 4 MB": 64 steps of 64 sequences of 1,025 tokens
    sequence_bytes = ddp_64["steps_per_epoch"] * ddp_64["global_batch"] * (1024 + 1)
    assert defaults["text_bytes"] == 4_000_000 < sequence_bytes
    layers, width, context = 12, 1024, 1024
    per_token = transformer_flops_per_token(layers, width, 256, context)  # 256 bytes
    masked_half = 6 * layers * context * width / per_token
    assert (
        round(masked_half * 100) == 7
        and "masked half (7% of the operations at 1,024 tokens)" in page
    )
    assert (
        f"DDP reached {ddp['mfu']:.1%} and FSDP2 {fsdp2['mfu']:.1%} with 16 sequences a step, "
        f"and {ddp_64['mfu']:.1%} and {fsdp2_64['mfu']:.1%} with 64" in page
    )
    assert 0.38 < fsdp2_64["mfu"] < 0.4 and f"FSDP2's {fsdp2_64['mfu']:.1%} is close to" in page
    mfus = sorted(f"{row['result']['mfu']:.1%}" for row in small)
    span_16 = " to ".join(sorted(f"{result['mfu']:.1%}" for result in (ddp, fsdp2)))
    assert f"{' to '.join(mfus)} of the peak at the default size" in chapter
    assert f"{span_16} with 16 sequences a step" in chapter
    assert f"{ddp_64['mfu']:.1%} (DDP) and {fsdp2_64['mfu']:.1%} (FSDP2) with 64" in chapter
    best = max(ddp_64["mfu"], fsdp2_64["mfu"])
    assert f"up to {best:.1%} of the peak, the default size {' to '.join(mfus)}" in quick
    calculator = page_text("before_you_rent_gpus.md")
    lowest = min(ddp["mfu"], fsdp2["mfu"])
    assert (
        f"reached {' to '.join(mfus)} at its default size (3 million weights), and "
        f"{lowest:.1%} to {best:.1%} at 153 million with 16 to 64" in calculator
    )
    assert round(small[0]["result"]["parameters"], -6) == 3e6
    assert round(ddp["parameters"], -6) == 153e6 and "153 million weights" in page
    default = small[0]["result"]
    at_peak_ms = default["flops_per_step_per_device"] / default["peak_flops_per_device"] * 1e3
    step_ms = default["mean_step_time_s"] * 1e3
    assert f"{at_peak_ms:.2f} ms at the peak, yet a DDP step took {step_ms:.0f} ms" in page

    # DDP against FSDP2, in this run and in the earlier one
    def longer_ms(pair):
        ddp_, fsdp = (row["result"]["mean_step_time_s"] * 1e3 for row in pair)
        return fsdp - ddp_

    longer = [longer_ms(pair) for pair in (small, large, large_64)]
    assert (
        f"FSDP2's step took {longer[0]:.0f} ms longer than DDP's at the default size and "
        f"{longer[1]:.0f} ms longer at 153 million weights with 16 sequences; with 64 it was "
        f"{-longer[2]:.0f} ms shorter" in page
    )
    earlier_path = path.with_name("nvidia_h100_80gb_hbm3_earlier_run.jsonl")
    assert f"`{earlier_path.name}`" in page
    earlier = {row["step"]: row for row in map(json.loads, earlier_path.read_text().splitlines())}
    earlier_pairs = [ddp_and_fsdp2(earlier, size) for size in ("recipe size", "large")]
    gaps = [longer_ms(pair) for pair in earlier_pairs]
    assert f"the first two gaps were {gaps[0]:.0f} ms and {gaps[1]:.0f} ms" in page
    moved = [
        abs(then[0]["result"]["mean_step_time_s"] - now[0]["result"]["mean_step_time_s"])
        for then, now in zip(earlier_pairs, (small, large), strict=True)
    ]
    assert max(moved) <= 1e-3 and "DDP's steps moved by 1 ms or less" in page
    # the losses
    assert ddp["steps"] == fsdp2["steps"] == ddp["steps_per_epoch"]  # one epoch
    assert f"a learning rate of {ddp['learning_rate']:.1e}".replace("e-04", "e-4") in page
    assert f"(a learning rate of {ddp_64['learning_rate']:.0e})".replace("e-03", "e-3") in page
    losses = large[0]["logged_losses"]
    assert f"fell from {losses[0]:.1f} to {losses[2]:.1f} by step 40" in page
    assert 2.3 <= min(losses[2:]) and max(losses[2:]) <= 2.7  # "stayed between 2.3 and 2.7"
    losses_64 = large_64[0]["logged_losses"]
    assert f"it fell to {losses_64[3]:.1f} by step 60" in page  # logged at 1, 20, 40, 60
    for pair in (large, large_64):
        ddp_losses, fsdp_losses = (row["logged_losses"] for row in pair)
        gaps = [abs(a - b) for a, b in zip(ddp_losses, fsdp_losses, strict=True)]
        assert max(gaps) < 0.001
    assert "At 153 million weights DDP's and FSDP2's logged losses agree to within 0.001" in page
    # the profiled step
    profile = rows[gpu_evidence.PROFILE]["result"]
    assert (profile["batch"], profile["parameters"]) == (16, ddp["parameters"])
    assert profile["profiled_steps"] == 3 and "records 3 steps with `torch.profiler`" in page
    kernels = profile["kernel_ms_per_step"]
    assert (
        f"Eagerly a step took {profile['eager_step_ms']:.1f} ms ({profile['eager_mfu']:.1%} MFU)."
        f" The GPU's kernels ran for {profile['kernel_busy_ms_per_step']:.1f} ms of it: "
        f"matrix products {kernels['matrix products']:.1f} ms, attention "
        f"{kernels['attention']:.1f} ms, AdamW {kernels['optimizer']:.1f} ms, and "
        f"{kernels['other']:.1f} ms everything else" in page
    )
    top = {kernel["name"].split("<")[0]: kernel for kernel in profile["top_kernels"]}
    for name, phrase in (
        ("CatArrayBatchedCopy", "values in attention's backward pass"),
        ("reduce_kernel", "summing the biases' gradients"),
        ("vectorized_elementwise_kernel", "bfloat16 copies of weights and activations"),
        ("GammaBetaBackwardCUDAKernelTemplate", "the normalisations' backward pass"),
    ):
        assert top[name]["kind"] == "other"
        assert f"{phrase} ({top[name]['ms_per_step']:.1f} ms)" in page
    counted_ms = kernels["matrix products"] + kernels["attention"]
    rate = profile["flops_per_step"] / (counted_ms / 1e3) / profile["dense_bf16_peak_flops_per_s"]
    assert f"and attention ran at {rate:.0%} of the peak; the other kernels" in page
    assert f"attention ran at {rate:.0%} of the peak, and the other kernels" in chapter
    assert 0.9 < kernels["other"] / counted_ms < 1.1  # "about as long again"
    assert (
        f"the same step took {profile['compiled_step_ms']:.1f} ms, "
        f"{profile['compiled_mfu']:.1%} MFU" in page
    )
    idle_ms = profile["eager_step_ms"] - profile["kernel_busy_ms_per_step"]
    assert f"For about {idle_ms:.0f} ms a step no kernel ran" in page
    # the reader's own run
    transformer_s = sum(
        row["wall_s"] for name, row in rows.items() if name.startswith("transformer")
    )
    assert round(transformer_s / 60) == 5 and "(about 5 minutes on the H100)" in page
    assert round(ddp_64["peak_memory_bytes"] / 2**30) == 31 and "need about 31 GiB" in page


def _measured_rows():
    """Every row of recipes/measured/*.jsonl, a run's own row inside an evidence step."""
    for path in sorted((ROOT / "recipes" / "measured").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            yield row.get("result") or row


def test_the_front_page_says_what_ran_where_as_the_measured_files_do():
    """intro.md names every GPU and PyTorch version the measured files hold, and says that
    nothing ran on several GPUs exactly while every row has one process."""
    intro = " ".join((ROOT / "intro.md").read_text().split())
    rows = [row for row in _measured_rows() if "device_name" in row]
    gpus = {row["device_name"].split()[1] for row in rows}  # H100, H200
    assert gpus == {"H100", "H200"}, gpus
    assert "on one NVIDIA H100 and one H200" in intro
    about = json.loads((ROOT / "recipes/measured/nvidia_h200_one_gpu.about.json").read_text())
    versions = {about["PyTorch"]} | {
        json.loads(line)["torch"].split("+")[0]
        for line in (ROOT / "recipes/measured/nvidia_h100_80gb_hbm3_evidence.jsonl")
        .read_text()
        .splitlines()
        if "torch" in json.loads(line)
    }
    assert versions == {"2.11.0"} and "(PyTorch 2.11 there; the book pins 2.13)" in intro
    several = max(row.get("world_size", 1) for row in rows) > 1
    assert several != ("Nothing has run on several GPUs yet" in intro)
