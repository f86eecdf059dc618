"""What a run measures: its operations per step, the device's peak (for the model FLOPs
utilisation, MFU), and the one JSON line of results rank 0 appends at the end
(`python ../results_table.py results.jsonl` compares runs)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
from models import build_model, loss_of
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode


def training_flops(args, classes: int, inputs: torch.Tensor, targets: torch.Tensor) -> int:
    """The floating-point operations of one forward and backward pass on this batch, as
    PyTorch's FlopCounterMode counts them (matrix products and convolutions), on a model
    built on the meta device (shapes only: nothing is allocated or computed). Attention is
    counted as its plain matrix products, the masked half included, as PaLM's formula does
    (chapter 18); causal fused kernels skip most of that half."""
    with torch.device("meta"):
        shapes_only = build_model(args, classes)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        loss_of(shapes_only(inputs.to("meta")), targets.to("meta")).backward()
    return counter.get_total_flops()


#: Peak dense operations per second from NVIDIA's datasheets (as PyTorch's torchtitan and
#: MosaicML's Composer copy them; the datasheets print some only "with sparsity", twice
#: these), by torch.cuda.get_device_name(): (bfloat16 on tensor cores, float32 without
#: them; PyTorch multiplies float32 matrices in float32 unless allow_tf32 is set, but runs
#: cuDNN's convolutions in TF32 on GPUs that have it, so the CNN's float32 MFU reads high).
#: "NVIDIA H200" may also name the H200 NVL, whose peak is lower. A GPU not here (another
#: name, an older driver's) needs --peak-tflops.
GPU_PEAK_FLOPS: dict[str, tuple[float | None, float]] = {
    "Tesla T4": (None, 8.1e12),  # no bfloat16
    "Tesla V100-SXM2-16GB": (None, 15.7e12),
    "Tesla V100-SXM2-32GB": (None, 15.7e12),
    "NVIDIA A100-SXM4-40GB": (312e12, 19.5e12),
    "NVIDIA A100-SXM4-80GB": (312e12, 19.5e12),
    "NVIDIA A100-SXM-80GB": (312e12, 19.5e12),
    "NVIDIA A100-PCIE-40GB": (312e12, 19.5e12),
    "NVIDIA A100 80GB PCIe": (312e12, 19.5e12),
    "NVIDIA A10": (125e12, 31.2e12),
    "NVIDIA L4": (121e12, 30.3e12),
    "NVIDIA L40S": (362e12, 91.6e12),
    "NVIDIA H100 80GB HBM3": (989e12, 67e12),  # SXM
    "NVIDIA H100 PCIe": (756e12, 51e12),
    "NVIDIA H200": (989e12, 67e12),  # SXM
}


def peak_flops(args, device: torch.device, precision: str, log) -> float | None:
    """The device's peak operations per second for MFU: --peak-tflops; for a GPU the
    vendor's figure (None for a GPU not in GPU_PEAK_FLOPS); for the CPU a float32 matrix
    product measured now (each process at once: the share of the cores each one has)."""
    if args.peak_tflops:
        return args.peak_tflops * 1e12
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        if name in GPU_PEAK_FLOPS:
            bf16, fp32 = GPU_PEAK_FLOPS[name]
            return bf16 if precision == "bf16" else fp32
        log(f"no peak known for {name}: give --peak-tflops for the MFU", flush=True)
        return None
    a = torch.randn(1024, 1024)
    best = float("inf")
    for _ in range(5):
        tick = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - tick)
    return 2 * 1024**3 / best


def results_row(run) -> dict:
    """The run's results (`run`: a training.TrainingRun that has finished)."""
    args, device = run.args, run.strategy.device
    mean_step = sum(run.step_times) / len(run.step_times) if run.step_times else None
    achieved = mean_step and run.flops_per_step / mean_step  # per second and device
    per_second = mean_step and args.batch_per_device / mean_step
    return {
        "recipe": run.strategy.recipe,
        "world_size": run.world_size,
        "nodes": run.world_size // int(os.environ["LOCAL_WORLD_SIZE"]),
        "device_type": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precision": run.strategy.precision,
        "compiled": args.compile,
        "batch_per_device": args.batch_per_device,
        "global_batch": run.global_batch,
        "learning_rate": run.lr,
        "model": args.model,
        "parameters": run.parameters,
        "examples_per_s_per_device": per_second,
        "tokens_per_s_per_device": (
            mean_step and args.batch_per_device * run.tokens_per_example / mean_step
            if args.model == "transformer"
            else None
        ),
        "flops_per_step_per_device": run.flops_per_step,
        "peak_flops_per_device": run.peak_flops,
        "mfu": achieved / run.peak_flops if achieved and run.peak_flops else None,
        "peak_memory_bytes": (
            torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        ),
        "mean_step_time_s": mean_step,
        "final_train_loss": run.epoch_losses[-1] if run.epoch_losses else None,
        "loss_per_epoch": run.epoch_losses,
        "test_loss": run.test_loss,
        "test_accuracy": run.test_accuracy,
        "epochs": round(run.done / run.steps_per_epoch, 3),
        "steps": run.done,
        "steps_this_run": run.steps_this_run,
        "steps_per_epoch": run.steps_per_epoch,
    }


def append_result(path: str | Path, record: dict) -> None:
    """Append `record` to `path` as one JSON line (results_table.py reads these)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as file:
        file.write(json.dumps(record) + "\n")
