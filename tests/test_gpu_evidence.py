"""tools.gpu_evidence: the script that measures the book's GPU paths in one run, and
tools.chapter_workers, its step that runs the PyTorch chapters' workers. Its dry run on the
CPU runs every step (the full proof), so the script is known to work before a GPU comes; a
failing or hanging step, or worker, is recorded and the others go on."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import ROOT, import_recipe
from tools import chapter_workers, gpu_evidence, profile_transformer


def test_without_a_gpu_it_says_to_use_the_dry_run(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit, match="--dry-run"):
        gpu_evidence.main([])


def test_a_failing_step_is_recorded_with_its_error_line():
    command = [sys.executable, "-c", "raise ValueError('wrong size')"]
    outcome = gpu_evidence.run_step(command, None, timeout_s=60)
    assert not outcome["ok"] and outcome["error"] == "ValueError: wrong size"


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
        elif row["step"].startswith("CNN"):
            assert row["result"]["model"] == "cnn"
        elif row["step"] == gpu_evidence.CHAPTERS:  # every worker, on 2 gloo processes
            workers = [(row["chapter"], row["worker"]) for row in row["workers"]]
            assert workers == [(chapter, name) for chapter, name, _ in chapter_workers.WORKERS]
            assert all(w["world_size"] == 2 and w["backend"] == "gloo" for w in row["workers"])
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
    """The sentences of the server page, chapter 18, the quick start and the calculator page
    about the H100 run, built from the file it wrote and found on the pages."""
    path = ROOT / "recipes" / "measured" / "nvidia_h100_80gb_hbm3_evidence.jsonl"
    rows = {row["step"]: row for row in map(json.loads, path.read_text().splitlines())}
    first = next(iter(rows.values()))
    server = page_text("on_your_own_machine.md")
    chapter = page_text("chapters/18_transformer_compute_and_memory.ipynb")
    quick = page_text("chapters/quick_start.ipynb")
    device = f"{first['device_name']} (PyTorch {first['torch'].split('+')[0]} with CUDA"
    assert f"{device} {first['cuda']}, NCCL {first['nccl']}, driver {first['driver']})" in server
    assert f"On {first['date']} the transformer recipe" in server
    # the chapters' workers
    workers = {row["worker"]: row for row in rows[gpu_evidence.CHAPTERS]["workers"]}
    assert len(workers) == 12 and "twelve workers" in server
    assert all(row["outcome"] == "ok" for row in workers.values())  # "all twelve ran"
    assert all(row["world_size"] == 1 for row in workers.values())  # "one process each"
    assert workers["fsdp_worker"]["report"]["gap"] < 1e-14
    assert workers["fsdp_restore_worker"]["report"]["gap"] == 0
    assert workers["clipping_worker"]["report"]["gap"] < 1e-17 and "1e-17 of one" in server
    assert workers["timeline_worker"]["report"]["all-reduce began ms before backward ended"] > 0
    # the transformer: its flags, and what the pages make of its rows
    small, large, large_64 = (
        [rows[f"transformer {size}, {recipe}"] for recipe in ("torch_ddp", "torch_fsdp")]
        for size in ("recipe size", "large", "large, batch 64")
    )
    flags = gpu_evidence.TRANSFORMER_SIZES
    assert f"`{flags['recipe size']}`" in server  # "the default size": the parser's
    defaults = vars(import_recipe("torch_ddp").parse_args([]))
    for flag, value in zip(*[iter(flags["recipe size"].split())] * 2, strict=True):
        assert str(defaults[flag[2:].replace("-", "_")]) == value
    assert " ".join(flags["large"].split()[:-2]) in server and "--batch-per-device 16" in server
    assert f"`{' '.join(flags['large, batch 64'].split()[-4:])}`" in server
    for row in (*small, *large, *large_64):
        result = row["result"]
        assert result["world_size"] == 1 and result["precision"] == "bf16"
        assert result["peak_flops_per_device"] == 989e12 and "989 TFLOP/s" in server
    ddp, fsdp2 = (row["result"] for row in large)
    ddp_64, fsdp2_64 = (row["result"] for row in large_64)
    assert (
        f"DDP reached {ddp['mfu']:.1%} and FSDP2 {fsdp2['mfu']:.1%} with 16 sequences a step, "
        f"and {ddp_64['mfu']:.1%} and {fsdp2_64['mfu']:.1%} with 64: close to the 40%" in server
    )
    assert 0.38 < max(ddp_64["mfu"], fsdp2_64["mfu"]) < 0.4  # "close to", not "reached"
    low, high = sorted(round(result["mfu"] * 100) for result in (ddp, fsdp2))
    assert f"{low}% to {high}% with 16 sequences a step" in chapter
    assert f"{ddp_64['mfu']:.1%} (DDP) and {fsdp2_64['mfu']:.1%} (FSDP2) with 64" in chapter
    assert f"up to {max(ddp_64['mfu'], fsdp2_64['mfu']):.1%} of the peak" in quick
    calculator = page_text("before_you_rent_gpus.md")
    assert f"up to {max(ddp_64['mfu'], fsdp2_64['mfu']):.1%} at 153 million" in calculator
    assert all(round(row["result"]["mfu"] * 100, 1) <= 1 for row in small)  # "1% or less"
    assert "1% or less of its peak" in chapter and "default size 1% or less" in quick
    assert "reached 1% or less at its default size" in calculator
    assert round(ddp["parameters"], -6) == 153e6 and "153 million weights" in server
    default = small[0]["result"]
    at_peak_ms = default["flops_per_step_per_device"] / default["peak_flops_per_device"] * 1e3
    step_ms = default["mean_step_time_s"] * 1e3
    assert f"{at_peak_ms:.2f} ms at the peak, yet a DDP step took {step_ms:.0f} ms" in server
    longer = [
        (fsdp["result"]["mean_step_time_s"] - ddp_["result"]["mean_step_time_s"]) * 1e3
        for ddp_, fsdp in (small, large, large_64)
    ]
    assert (
        f"its step took {longer[0]:.0f} ms longer than DDP's at the default size and "
        f"{longer[1]:.0f} ms longer at 153 million weights with 16 sequences; with 64 it was "
        f"{-longer[2]:.0f} ms shorter" in server
    )
    assert ddp["steps"] == fsdp2["steps"] == ddp["steps_per_epoch"]  # one epoch
    assert all(result["steps"] <= 300 for result in (ddp_64, fsdp2_64))  # "at most 300 steps"
    assert f"a learning rate of {ddp['learning_rate']:.1e}".replace("e-04", "e-4") in server
    losses = large[0]["logged_losses"]
    assert f"fell from {losses[0]:.1f} to {losses[2]:.1f} by step 40" in server
    assert 2.3 <= min(losses[2:]) and max(losses[2:]) <= 2.7  # "stayed between 2.3 and 2.7"
    gaps = [abs(a - b) for a, b in zip(losses, large[1]["logged_losses"], strict=True)]
    assert max(gaps) < 0.001 and "agree to within 0.001" in server
    # the profiled step
    profile = rows[gpu_evidence.PROFILE]["result"]
    assert (profile["batch"], profile["parameters"]) == (16, ddp["parameters"])
    kernels = profile["kernel_ms_per_step"]
    assert (
        f"Eagerly a step took {profile['eager_step_ms']:.1f} ms ({profile['eager_mfu']:.1%} MFU),"
        f" and the GPU's kernels ran for {profile['kernel_busy_ms_per_step']:.1f} ms of it: "
        f"matrix products {kernels['matrix products']:.1f} ms, attention "
        f"{kernels['attention']:.1f} ms, AdamW {kernels['optimizer']:.1f} ms, and "
        f"{kernels['other']:.1f} ms everything else" in server
    )
    counted_ms = kernels["matrix products"] + kernels["attention"]
    rate = profile["flops_per_step"] / (counted_ms / 1e3) / profile["dense_bf16_peak_flops_per_s"]
    assert f"attention reached {rate:.0%} of the peak" in server
    assert f"attention run at {rate:.0%} of the peak while they run" in chapter
    assert 0.9 < kernels["other"] / counted_ms < 1.1  # "about as long again"
    assert (
        f"the same step took {profile['compiled_step_ms']:.1f} ms, "
        f"{profile['compiled_mfu']:.1%} MFU" in server
    )
    idle_ms = profile["eager_step_ms"] - profile["kernel_busy_ms_per_step"]
    assert f"idle about {idle_ms:.0f} ms a step" in server
