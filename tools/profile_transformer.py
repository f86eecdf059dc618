"""Where a step of the transformer recipe spends its time on one GPU, eager and compiled.

    python -m tools.profile_transformer --out profile.jsonl            # the large size
    python -m tools.profile_transformer --dry-run --out profile.jsonl  # a CPU, tiny, eager

The step is the recipe's on one process (recipes/transformer.py's model, AdamW, bfloat16
autocast, the loss read on the CPU each step as torch_ddp.py reads it; no DDP, which has
nothing to all-reduce in one process), on random tokens. It times steps eagerly and with
`torch.compile`, then records three eager steps with torch.profiler: the GPU's kernel time
by kind (matrix products, attention, the optimizer, the rest) against the steps' wall time,
whose difference is time the GPU waited. Appends one JSON line to --out; tools/gpu_evidence.py
runs it as one of its steps.
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

from utils.sizing import transformer_flops_per_token

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
sys.path.insert(0, str(RECIPES))
from torch_ddp import GPU_PEAK_FLOPS  # noqa: E402  (recipes/, beside transformer.py)
from transformer import VOCABULARY, CharTransformer  # noqa: E402

#: Kinds of kernels, by name (the fused attention kernels, cuBLAS's and CUTLASS's matrix
#: products, the optimizer's multi-tensor kernels); on a CPU the ATen operators' names.
KINDS = {  # in this order: attention's kernels may be CUTLASS's too
    "attention": r"flash|fmha|attention|sdpa",
    "matrix products": r"gemm|xmma|nvjet|cutlass|cublas|aten::(mm|addmm|bmm|linear)$",
    "optimizer": r"multi_tensor|adam",
}


def kind_of(name: str) -> str:
    """The kind of a kernel or operator by its name; "other" for elementwise work,
    normalisations, copies and the rest."""
    return next(
        (kind for kind, pattern in KINDS.items() if re.search(pattern, name, re.I)), "other"
    )


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


def seconds_per_step(step, warmup: int, steps: int) -> float:
    """Mean wall time of `steps` steps after `warmup` (which pay for first calls and
    compilation)."""
    for _ in range(warmup):
        step()
    tick = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - tick) / steps


def kernel_time(step, device, steps: int = 3) -> tuple[dict, list, float]:
    """Profile `steps` steps: seconds per step of kernel time by kind, the top kernels,
    and the wall time per step."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        tick = time.perf_counter()
        for _ in range(steps):
            step()
        wall = (time.perf_counter() - tick) / steps
    kind = torch.autograd.DeviceType.CUDA if device.type == "cuda" else None
    by_kind, kernels = {}, []
    for event in profile.key_averages():
        if kind is not None:
            if event.device_type != kind:
                continue
            seconds = event.self_device_time_total / 1e6 / steps
        elif event.key.startswith("aten::"):
            seconds = event.self_cpu_time_total / 1e6 / steps
        else:
            continue
        by_kind[kind_of(event.key)] = by_kind.get(kind_of(event.key), 0.0) + seconds
        kernels.append((seconds, event.key[:90]))
    top = [{"kernel": name, "ms per step": round(s * 1e3, 3)} for s, name in sorted(kernels)[-8:]]
    return by_kind, top[::-1], wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--context", type=int, default=1024)
    add("--width", type=int, default=1024)
    add("--layers", type=int, default=12)
    add("--heads", type=int, default=16)
    add("--batch", type=int, default=16, help="sequences per step")
    add("--steps", type=int, default=20, help="timed steps, eager and compiled")
    add("--out", required=True, help="JSON-lines file to append the row to")
    add("--dry-run", action="store_true", help="tiny sizes on a CPU, not compiled")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.context, args.width, args.layers, args.heads, args.batch, args.steps = (
            32,
            64,
            2,
            2,
            4,
            2,
        )
    elif not torch.cuda.is_available():
        raise SystemExit("no GPU here: run with --dry-run to check it on a CPU.")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    sizes = args.context, args.width, args.layers, args.heads
    model = CharTransformer(*sizes).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2.5e-4)
    tokens = torch.randint(VOCABULARY, (args.batch, args.context + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    peak_memory = {}
    eager = make_step(model, optimizer, inputs, targets, device)
    eager_s = seconds_per_step(eager, 3, args.steps)
    if device.type == "cuda":
        peak_memory["eager"] = torch.cuda.max_memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    by_kind, top, profiled_s = kernel_time(eager, device)
    compiled_s = None  # a CPU's dry run leaves compiling out: chapter 17 compiles on CPUs
    if not args.dry_run:
        compiled = make_step(torch.compile(model), optimizer, inputs, targets, device)
        compiled_s = seconds_per_step(compiled, 3, args.steps)
    if device.type == "cuda":
        peak_memory["compiled"] = torch.cuda.max_memory_allocated(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = GPU_PEAK_FLOPS.get(name, (None, None))[0]
    tokens_per_step = args.batch * args.context
    flops = transformer_flops_per_token(args.layers, args.width, VOCABULARY, args.context)
    flops *= tokens_per_step

    def mfu(seconds: float | None) -> float | None:
        return round(flops / seconds / peak, 4) if peak and seconds else None

    row = {
        "device_name": name,
        "torch": torch.__version__,
        "context": args.context,
        "width": args.width,
        "layers": args.layers,
        "heads": args.heads,
        "batch": args.batch,
        "parameters": sum(p.numel() for p in model.parameters()),
        "flops_per_step": flops,
        "peak_flops": peak,
        "eager_step_ms": round(eager_s * 1e3, 3),
        "compiled_step_ms": compiled_s and round(compiled_s * 1e3, 3),
        "eager_mfu": mfu(eager_s),
        "compiled_mfu": mfu(compiled_s),
        "profiled_step_ms": round(profiled_s * 1e3, 3),
        "kernel_ms_per_step": {kind: round(s * 1e3, 3) for kind, s in sorted(by_kind.items())},
        "top_kernels": top,
        "peak_memory_bytes": peak_memory,
    }
    with open(args.out, "a") as file:
        file.write(json.dumps(row) + "\n")
    busy = sum(by_kind.values()) * 1e3
    print(
        f"eager {row['eager_step_ms']} ms, compiled {row['compiled_step_ms']} ms a step; "
        f"kernels busy {busy:.1f} of {row['profiled_step_ms']} ms"
    )


if __name__ == "__main__":
    main()
