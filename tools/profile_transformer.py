"""Where a step of the transformer recipe spends its time on one GPU, eager and compiled.

    python -m tools.profile_transformer --out profile.jsonl            # the large size
    python -m tools.profile_transformer --dry-run --out profile.jsonl  # tiny, eager only

The step is the recipe's on one process (recipes/pytorch/models.py's model, AdamW, bfloat16
autocast, the loss read on the CPU each step as torch_ddp.py reads it), on random tokens,
without DDP: in one process DDP's bucket copies, its one-rank all-reduce and the recipe's
all-reduce of the loss add a little to the recipe's step. It times steps eagerly, records
three more with torch.profiler (the GPU's kernel time by kind: attention, matrix products,
the optimizer, the rest), then times steps under `torch.compile`. Kernel time against the
unprofiled step time is how busy the GPU was; the profiled steps' wall time includes the
profiler's own cost. Appends one JSON line to --out; tools/gpu_evidence.py runs it as a step.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

from utils.errors import error_line
from utils.sizing import transformer_flops_per_token

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "pytorch"
sys.path.insert(0, str(RECIPE))  # the recipe's modules import each other by their names
from measure import GPU_PEAK_FLOPS  # noqa: E402
from models import VOCABULARY, CharTransformer  # noqa: E402

#: Kinds of kernels, by name, in this order (attention's kernels may be CUTLASS's too): the
#: fused attention kernels, cuBLAS's and CUTLASS's matrix products, the optimizer's
#: multi-tensor kernels; on a CPU, the ATen operators' names.
KINDS = {
    "attention": r"flash|fmha|attention|sdpa",
    "matrix products": r"gemm|xmma|nvjet|cutlass|cublas|aten::(mm|addmm|bmm|linear)$",
    "optimizer": r"multi_tensor_apply|fused_adam",
}
WARMUP_STEPS, PROFILED_STEPS = 3, 3


def kind_of(name: str) -> str:
    """The kind of a kernel or operator by its name; "other" for elementwise work,
    normalisations, copies and the rest."""
    kinds = (kind for kind, pattern in KINDS.items() if re.search(pattern, name, re.I))
    return next(kinds, "other")


def short_name(name: str) -> str:
    """A kernel's name without the namespaces that every ATen kernel shares."""
    for prefix in ("void ", "at::native::", "(anonymous namespace)::"):
        name = name.replace(prefix, "")
    return name[:160]


def make_step(model, optimizer, tokens, targets, device):
    """One training step as the recipe takes it; returns the loss read on the CPU."""

    def step() -> float:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(tokens)
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()  # waits for the GPU, as the recipe's all-reduced loss does

    return step


def seconds_per_step(step, steps: int) -> float:
    """Mean wall time of `steps` steps after WARMUP_STEPS (first calls, compiling)."""
    for _ in range(WARMUP_STEPS):
        step()
    tick = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - tick) / steps


def seconds_by_kind(events, steps: int, gpu: bool) -> tuple[dict, list]:
    """Seconds per step by kind of the GPU's kernels (on a CPU, of ATen operators' own
    time) in the profiler's averaged `events`, and the eight longest. User annotations
    (`record_function` ranges, such as the optimizer's step, which the profiler also
    records on the GPU) span kernels already counted: they are left out."""
    by_kind, kernels = {}, []
    for event in events:
        if getattr(event, "is_user_annotation", False):
            continue
        if gpu and event.device_type == torch.autograd.DeviceType.CUDA:
            seconds = event.self_device_time_total / 1e6 / steps
        elif not gpu and event.key.startswith("aten::"):
            seconds = event.self_cpu_time_total / 1e6 / steps
        else:
            continue
        kind = kind_of(event.key)
        by_kind[kind] = by_kind.get(kind, 0.0) + seconds
        kernels.append((seconds, kind, event.count / steps, short_name(event.key)))
    top = [
        {"name": name, "kind": kind, "calls_per_step": calls, "ms_per_step": round(s * 1e3, 3)}
        for s, kind, calls, name in sorted(kernels, reverse=True)[:8]
    ]
    return by_kind, top


def profiled(step, gpu: bool) -> tuple[dict, list, float]:
    """Kernel time by kind, the longest kernels, and wall seconds per step, of
    PROFILED_STEPS steps under torch.profiler."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        tick = time.perf_counter()
        for _ in range(PROFILED_STEPS):
            step()
        wall = (time.perf_counter() - tick) / PROFILED_STEPS
    return *seconds_by_kind(profile.key_averages(), PROFILED_STEPS, gpu), wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--context", type=int, default=1024)
    add("--width", type=int, default=1024)
    add("--layers", type=int, default=12)
    add("--heads", type=int, default=16)
    add("--batch-per-device", type=int, default=16, help="sequences per step (one GPU)")
    add("--steps", type=int, default=20, help="timed steps, eager and compiled")
    add("--out", required=True, help="JSON-lines file to append the row to")
    add("--dry-run", action="store_true", help="tiny sizes, eager only (a CPU's check)")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.context, args.width, args.layers, args.heads = 32, 64, 2, 2
        args.batch_per_device, args.steps = 4, 2
    elif not torch.cuda.is_available():
        raise SystemExit("no GPU here: run with --dry-run to check it on a CPU.")
    gpu = torch.cuda.is_available()
    device = torch.device("cuda" if gpu else "cpu")
    torch.manual_seed(0)
    model = CharTransformer(args.context, args.width, args.layers, args.heads).to(device)
    lr = 0.001 * args.batch_per_device / 64  # the recipe's rule: 0.001 for 64 sequences, scaled
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    tokens = torch.randint(VOCABULARY, (args.batch_per_device, args.context + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    row = {
        "device_name": torch.cuda.get_device_name(device) if gpu else "cpu",
        "torch": torch.__version__,
        **{key: getattr(args, key) for key in ("context", "width", "layers", "heads")},
        "batch": args.batch_per_device,
        "precision": "bf16 autocast",
        "optimizer": f"AdamW, lr {lr}, PyTorch's default implementation",
        "parameters": sum(p.numel() for p in model.parameters()),
        "warmup_steps": WARMUP_STEPS,
        "timed_steps": args.steps,
        "profiled_steps": PROFILED_STEPS,
    }
    flops = transformer_flops_per_token(args.layers, args.width, VOCABULARY, args.context)
    row["flops_per_step"] = flops * args.batch_per_device * args.context
    row["dense_bf16_peak_flops_per_s"] = GPU_PEAK_FLOPS.get(row["device_name"], (None,))[0]

    def mfu(seconds: float) -> float | None:
        peak = row["dense_bf16_peak_flops_per_s"]
        return round(row["flops_per_step"] / seconds / peak, 4) if peak else None

    eager = make_step(model, optimizer, inputs, targets, device)
    eager_s = seconds_per_step(eager, args.steps)
    row |= {"eager_step_ms": round(eager_s * 1e3, 3), "eager_mfu": mfu(eager_s)}
    if gpu:
        row["eager_peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    by_kind, top, wall_s = profiled(eager, gpu)
    row["kernel_ms_per_step"] = {kind: round(s * 1e3, 3) for kind, s in sorted(by_kind.items())}
    row["kernel_busy_ms_per_step"] = round(sum(by_kind.values()) * 1e3, 3)
    row |= {"profiled_step_ms": round(wall_s * 1e3, 3), "top_kernels": top}
    if not args.dry_run:  # a CPU's dry run leaves compiling out: chapter 17 compiles on CPUs
        try:
            torch.cuda.reset_peak_memory_stats(device)
            compiled = make_step(torch.compile(model), optimizer, inputs, targets, device)
            compiled_s = seconds_per_step(compiled, args.steps)
            row |= {"compiled_step_ms": round(compiled_s * 1e3, 3), "compiled_mfu": mfu(compiled_s)}
            row["compiled_peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
        except Exception as err:  # the eager profile is kept
            row["compiled_error"] = f"{type(err).__name__}: {error_line(err)}"
    with open(args.out, "a") as file:
        file.write(json.dumps(row) + "\n")
    print(
        f"eager {row['eager_step_ms']} ms a step, kernels busy "
        f"{row['kernel_busy_ms_per_step']} ms of it; compiled "
        f"{row.get('compiled_step_ms', row.get('compiled_error', 'not run'))}"
    )


if __name__ == "__main__":
    main()
