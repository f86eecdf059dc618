"""Before you rent GPUs: the memory and the step time of a data-parallel run, from the
book's own formulas (the page before_you_rent_gpus.md; its calculator, _static/calculator.js,
is written from these functions, and tests/test_rendered_book.py checks that the two agree).

- What each GPU holds of weights, gradients and optimizer state under DDP, ZeRO-1, ZeRO-2
  and FSDP: chapter 14's `bytes_per_device`.
- A transformer's operations per token, 6 per weight of a matrix product plus attention's
  12 x layers x context x width: chapter 18.
- Its saved activations: measured on the book's transformer (recipes/transformer.py, fused
  attention, an MLP four times as wide) as about 16.5 values of its width per token and
  layer, plus the logits; with recomputation each block keeps its input, and one block's
  activations come back during the backward pass (chapter 16).
- The ring all-reduce, 2(n - 1)(S / (n B) + latency), and whether it hides behind the
  backward pass (about two thirds of a step's operations): chapters 17 and 18.
"""

from __future__ import annotations

from utils.checks import check_int, check_positive
from utils.sharding import MIXED_PRECISION_ADAM, SHARDED, bytes_per_device

#: Bytes per parameter of weights, gradients and optimizer state, by precision and
#: optimizer. "bf16" keeps ZeRO's layout: 16-bit weights and gradients and, in float32, a
#: master copy of the weights and the optimizer's moments. "autocast" is PyTorch's
#: autocast, as the recipes train: float32 weights, gradients and state, bfloat16 compute.
BYTES_PER_PARAMETER = {
    ("fp32", "SGD with momentum"): {"weights": 4, "gradients": 4, "optimizer state": 4},
    ("fp32", "Adam"): {"weights": 4, "gradients": 4, "optimizer state": 8},
    ("bf16", "SGD with momentum"): {"weights": 2, "gradients": 2, "optimizer state": 8},
    ("bf16", "Adam"): MIXED_PRECISION_ADAM,
    ("autocast", "SGD with momentum"): {
        "weights": 4,
        "gradients": 4,
        "optimizer state": 4,
    },
    ("autocast", "Adam"): {"weights": 4, "gradients": 4, "optimizer state": 8},
}

#: Common GPUs: nominal memory in GB (as NVIDIA names them) and the dense peaks of
#: recipes/torch_ddp.py's GPU_PEAK_FLOPS (bfloat16, float32), in operations per second.
GPUS = {
    "T4": (16, None, 8.1e12),  # no bfloat16
    "L4": (24, 121e12, 30.3e12),
    "A100 40GB": (40, 312e12, 19.5e12),
    "A100 80GB": (80, 312e12, 19.5e12),
    "H100 SXM": (80, 989e12, 67e12),
    "H200": (141, 989e12, 67e12),
}

#: Saved activations of one block of the book's transformer, per token, in values of its
#: width (measured: 16.5 to 16.6 at widths 64 to 256 with fused attention).
BLOCK_ACTIVATIONS_PER_TOKEN = 16.5

#: FSDP (ZeRO-3) sends 1.5 times DDP's bytes: two all-gathers and a reduce-scatter
#: (ZeRO's paper, section 7); ZeRO-1 and ZeRO-2 send what DDP does.
TRAFFIC = {"replicated": 1.0, "ZeRO-1": 1.0, "ZeRO-2": 1.0, "ZeRO-3 / FSDP": 1.5}


def transformer_parameters(
    layers: int, width: int, vocabulary: int, context: int
) -> int:
    """The parameters of the book's transformer (recipes/transformer.py): per block
    12 x width^2 + 13 x width, token and position embeddings, a final LayerNorm and an
    output matrix without bias."""
    for name, value in (
        ("layers", layers),
        ("width", width),
        ("vocabulary", vocabulary),
    ):
        check_int(f"transformer_parameters: {name}", value)
    check_int("transformer_parameters: context", context)
    return (
        layers * (12 * width**2 + 13 * width)
        + 2 * vocabulary * width
        + context * width
        + 2 * width
    )


def transformer_flops_per_token(
    layers: int, width: int, vocabulary: int, context: int
) -> int:
    """A training step's operations per token (chapter 18): 6 per weight of a matrix
    product (the blocks' 12 x width^2 and the output's width x vocabulary) plus
    attention's 12 x layers x context x width."""
    return (
        6 * (layers * 12 * width**2 + width * vocabulary)
        + 12 * layers * context * width
    )


def transformer_activation_values(
    layers: int, width: int, vocabulary: int, context: int, *, recompute: bool
) -> float:
    """Values autograd saves per sequence: each block's activations (or, recomputed, its
    input, and one block's activations again during the backward pass) and the logits."""
    block = BLOCK_ACTIVATIONS_PER_TOKEN * width
    blocks = layers * width + block if recompute else layers * block
    return context * (blocks + vocabulary)


def memory_per_gpu(
    parameters: int,
    gpus: int,
    stage: str,
    precision: str,
    optimizer: str,
    activation_bytes: float,
) -> dict[str, float]:
    """Bytes one GPU holds: weights, gradients and optimizer state (sharded as `stage`
    says), DDP's gradient buckets (a second copy of the gradients, with DDP's default
    gradient_as_bucket_view=False) and `activation_bytes` of saved activations."""
    if (precision, optimizer) not in BYTES_PER_PARAMETER:
        raise ValueError(
            f"memory_per_gpu: precision {precision!r} with {optimizer!r} is not one of "
            f"{', '.join(map(str, BYTES_PER_PARAMETER))}."
        )
    if not activation_bytes >= 0:
        raise ValueError(
            f"memory_per_gpu: activation_bytes must be 0 or more; got {activation_bytes!r}."
        )
    states = bytes_per_device(
        parameters, gpus, stage, BYTES_PER_PARAMETER[(precision, optimizer)]
    )
    buckets = states["gradients"] if stage == "replicated" else 0.0
    return {**states, "DDP's buckets": buckets, "activations": float(activation_bytes)}


def step_time(
    flops_per_example: float,
    examples_per_gpu: int,
    gpus: int,
    peak_flops: float,
    mfu: float,
    gradient_bytes: float,
    stage: str,
    bus_bandwidth: float,
    latency_s: float,
    recompute: bool = False,
) -> dict[str, float | bool]:
    """A step's estimate: compute at `mfu` of the peak (a third more with recomputation:
    each block's forward runs again); the gradients' all-reduce by the ring model (FSDP's
    traffic 1.5 times); whether it fits in the backward pass (the compute less the forward
    pass, a third of the operations); the step, compute plus what does not hide."""
    check_int("step_time: examples_per_gpu", examples_per_gpu)
    check_int("step_time: gpus", gpus)
    for name, value in (
        ("peak_flops", peak_flops),
        ("mfu", mfu),
        ("bus_bandwidth", bus_bandwidth),
    ):
        check_positive(f"step_time: {name}", value)
    if stage not in SHARDED:
        raise ValueError(
            f"step_time: stage {stage!r} is not one of {', '.join(SHARDED)}."
        )
    plain = flops_per_example * examples_per_gpu / (mfu * peak_flops)
    compute = plain * 4 / 3 if recompute else plain
    traffic = gradient_bytes * TRAFFIC[stage]
    communication = 2 * (gpus - 1) * (traffic / (gpus * bus_bandwidth) + latency_s)
    backward = compute - plain / 3
    return {
        "compute_s": compute,
        "communication_s": communication,
        "hidden": communication <= backward,
        "step_s": compute + max(0.0, communication - backward),
    }


def cost_per_example(model, inputs, targets) -> tuple[float, float]:
    """A training step's operations and saved activation bytes per example, for any PyTorch
    model on a batch of `inputs` (what the calculator's "any model" asks for): counted by
    FlopCounterMode and by autograd's saved-tensor hooks (weights left out)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    weights = {w.untyped_storage().data_ptr() for w in model.parameters()}
    saved = {}  # memory block -> bytes, each once

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with FlopCounterMode(display=False) as counter:
            torch.nn.functional.cross_entropy(model(inputs), targets).backward()
    return counter.get_total_flops() / len(inputs), sum(saved.values()) / len(inputs)


def calculate(inputs: dict) -> dict:
    """Everything the calculator shows for its `inputs` (the form's fields, bandwidth in
    bytes/s, latency in seconds), as _static/calculator.js computes it: parameters, memory
    per GPU by kind, its total, which GPUs it fits, the step's estimate, and tokens (or
    examples) per second per GPU."""
    i = inputs
    if not (0 < i["mfu"] < 1 and 0 < i["margin"] < 1 and i["latency"] >= 0):
        raise ValueError(
            "calculate: mfu and margin must lie between 0 and 1, latency >= 0."
        )
    value_bytes = 4 if i["precision"] == "fp32" else 2
    if i["kind"] == "transformer":
        shape = (i["layers"], i["width"], i["vocabulary"], i["context"])
        parameters = transformer_parameters(*shape)
        flops_per_example = transformer_flops_per_token(*shape) * i["context"]
        activations = transformer_activation_values(*shape, recompute=i["recompute"])
        activation_bytes = i["batch"] * value_bytes * activations
        tokens = i["context"]
    else:
        parameters, flops_per_example = i["parameters"], i["flops"]
        activation_bytes = i["batch"] * i["activationBytes"] * value_bytes / 4
        tokens = 1
    memory = memory_per_gpu(
        parameters,
        i["gpus"],
        i["stage"],
        i["precision"],
        i["optimizer"],
        activation_bytes,
    )
    total = sum(memory.values())
    fits = {
        name: total <= (1 - i["margin"]) * gb * 1e9 for name, (gb, _, _) in GPUS.items()
    }
    _, bf16_peak, fp32_peak = GPUS[i["gpu"]]
    peak = fp32_peak if i["precision"] == "fp32" else bf16_peak
    if peak is None:
        raise ValueError(f"calculate: the {i['gpu']} has no bfloat16.")
    gradient_bytes = (
        parameters * BYTES_PER_PARAMETER[(i["precision"], i["optimizer"])]["gradients"]
    )
    step = step_time(
        flops_per_example,
        i["batch"],
        i["gpus"],
        peak,
        i["mfu"],
        gradient_bytes,
        i["stage"],
        i["busBandwidth"],
        i["latency"],
        recompute=i["kind"] == "transformer" and i["recompute"],
    )
    return {
        "parameters": parameters,
        "memory": memory,
        "total": total,
        "fits": fits,
        "step": step,
        "unitsPerSecond": i["batch"] * tokens / step["step_s"],
    }
