"""Before you rent GPUs: the memory, the step time and the cost of a data-parallel run, from
the book's own formulas (the page before_you_rent_gpus.md; its calculator,
_static/calculator.js, is written from these functions, and tests/book/test_rendered_book.py
checks that the two agree).

- What each GPU holds of weights, gradients and optimizer state under DDP, ZeRO-1, ZeRO-2
  and FSDP: chapter 14's `bytes_per_device`. This module builds on chapter 14 by design: it
  imports `utils.sharding`, written from that chapter's cells, so that the calculator and the
  chapter cannot disagree; editing chapter 14's formula changes the calculator.
- A transformer's weights and operations per token, 6 per weight of a matrix product plus
  attention's 12 x layers x context x width: chapter 18; with grouped-query attention (fewer
  key-value heads) and Llama's SwiGLU block as options.
- Its saved activations: measured on the book's transformer (recipes/pytorch/models.py) as
  about 16.5 values of its width per token and layer, plus the logits; with recomputation
  each block keeps its input, and one block's activations come back (chapter 16).
- The ring all-reduce, 2(n - 1)(S / (n B) + latency), with B the slower link the ring
  crosses (chapter 9), S what the collectives send in their dtypes (FSDP's gathers and
  reduce-scatters), and whether it hides behind the backward pass (chapters 17, 18).
- Published FSDP runs beside it: torchtitan's Llama 3 runs on 8 H100s and 64 A100s
  (PUBLISHED_RUNS; the page's table is published_table(), tests/utils/test_sizing.py keeps them
  equal; tests/book/test_calculator_js.py checks the page's JavaScript on them).
"""

from __future__ import annotations

import math

from utils.checks import check_int, check_positive
from utils.sharding import MIXED_PRECISION_ADAM, SHARDED, bytes_per_device

#: Bytes per parameter of weights, gradients and optimizer state, by precision and
#: optimizer. "bf16" keeps ZeRO's layout: 16-bit weights and gradients and, in float32, a
#: master copy of the weights and the optimizer's moments. "autocast" is PyTorch's
#: autocast, as the recipes train: float32 weights, gradients and state, bfloat16 compute;
#: "fp16" the same in float16 (with a loss scaler), for GPUs without bfloat16.
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
    ("fp16", "SGD with momentum"): {"weights": 4, "gradients": 4, "optimizer state": 4},
    ("fp16", "Adam"): {"weights": 4, "gradients": 4, "optimizer state": 8},
}

#: Common GPUs: nominal memory in GB (as NVIDIA names them) and dense peaks in operations
#: per second: bfloat16 and float32 are recipes/pytorch/measure.py's GPU_PEAK_FLOPS; float16 on
#: tensor cores from the same datasheets (the T4's 65 TFLOPS "mixed precision"; the others
#: as their bfloat16).
GPUS = {
    "T4": {"memory_gb": 16, "bf16": None, "fp32": 8.1e12, "fp16": 65e12},
    "L4": {"memory_gb": 24, "bf16": 121e12, "fp32": 30.3e12, "fp16": 121e12},
    "A10": {"memory_gb": 24, "bf16": 125e12, "fp32": 31.2e12, "fp16": 125e12},
    "L40S": {"memory_gb": 48, "bf16": 362e12, "fp32": 91.6e12, "fp16": 362e12},
    "A100 40GB": {"memory_gb": 40, "bf16": 312e12, "fp32": 19.5e12, "fp16": 312e12},
    "A100 80GB": {"memory_gb": 80, "bf16": 312e12, "fp32": 19.5e12, "fp16": 312e12},
    "H100 PCIe": {"memory_gb": 80, "bf16": 756e12, "fp32": 51e12, "fp16": 756e12},
    "H100 SXM": {"memory_gb": 80, "bf16": 989e12, "fp32": 67e12, "fp16": 989e12},
    "H200 SXM": {"memory_gb": 141, "bf16": 989e12, "fp32": 67e12, "fp16": 989e12},
}

#: The peak a precision computes at: autocast's matrix products run in bfloat16.
PEAK_OF = {"bf16": "bf16", "autocast": "bf16", "fp16": "fp16", "fp32": "fp32"}

#: The two blocks: "gelu" is the book's (recipes/pytorch/models.py) and GPT-2's: a GELU MLP of
#: 2 matrices, biases, LayerNorm, learned positions. "swiglu" is Llama's: a SwiGLU MLP of 3
#: matrices, no biases, RMSNorm, rotary positions (no weights).
MLP_MATRICES = {"gelu": 2, "swiglu": 3}

#: Saved activations of one block per token, in values: widths for the norms, attention's
#: queries and output and the residual stream (BLOCK_WIDTHS), twice the keys' and values'
#: width, and per MLP width 2 for GELU (its input and output) or 4 for SwiGLU (gate, up,
#: their SiLU and product). The book's block, 6.5 + 2 + 2 x 4 = 16.5 widths, is measured
#: (16.5 to 16.6 at widths 64 to 256 with fused attention); Llama's, 8 + 2 x key-value
#: width + 4 x MLP width, too (tests/utils/test_sizing.py: torch's RMSNorm keeps more than
#: LayerNorm).
BLOCK_WIDTHS = {"gelu": 6.5, "swiglu": 8.0}
ACTIVATIONS_PER_MLP_WIDTH = {"gelu": 2, "swiglu": 4}

#: Bytes a value of the collectives, by precision: (FSDP gathers the weights in, all reduce
#: the gradients in). DDP, ZeRO-1 and ZeRO-2 send each gradient's bytes twice (an
#: all-reduce, or a reduce-scatter and the weights' all-gather); FSDP (ZeRO-3) gathers the
#: weights twice (forward and backward pass) and reduce-scatters the gradients once (ZeRO's
#: paper, section 7): 1.5 times DDP's bytes in one dtype, DDP's bytes where it gathers in
#: 16 bits and reduces in 32, as the FSDP recipe's MixedPrecisionPolicy(param_dtype=
#: torch.bfloat16, reduce_dtype=torch.float32) and torchtitan do.
COLLECTIVE_BYTES = {"fp32": (4, 4), "bf16": (2, 2), "autocast": (2, 4), "fp16": (2, 4)}

#: The MFU (%) the page assumes where the book measured none: about what well-tuned large
#: runs report (46.2% for PaLM, Chowdhery et al. 2022, table 3; 38-43% for Llama 3 405B on
#: H100s, Grattafiori et al. 2024, table 4).
DEFAULT_MFU = 40

#: Where the presets' measured MFUs come from (rows named by their "step").
EVIDENCE = "recipes/measured/nvidia_h100_80gb_hbm3_evidence.jsonl"

#: The form's fields and their labels, as the page shows them (its messages name them).
LABELS = {
    "preset": "preset",
    "kind": "model",
    "layers": "layers",
    "width": "width",
    "heads": "attention heads",
    "kvHeads": "key-value heads",
    "mlpWidth": "MLP width",
    "mlp": "block",
    "tied": "input and output embeddings tied",
    "vocabulary": "vocabulary",
    "context": "sequence length",
    "parameters": "parameters",
    "flops": "operations per example (forward and backward)",
    "activationBytes": "saved activations per example, bytes in float32",
    "batch": "batch per GPU (sequences or examples)",
    "accumulation": "gradient accumulation steps",
    "gpus": "GPUs",
    "gpusPerMachine": "GPUs per machine",
    "precision": "precision",
    "optimizer": "optimizer",
    "stage": "sharding",
    "recompute": "recompute activations (transformer)",
    "gpu": "GPU",
    "mfu": "MFU, % of the GPU's peak",
    "busBandwidth": "bus bandwidth inside a machine, GB/s",
    "network": "network between machines, Gb/s per machine",
    "latency": "latency per ring step, µs",
    "margin": "memory kept free, %",
    "tokensToTrain": "tokens to train (examples, for any model)",
    "price": "price per GPU-hour (empty: no cost)",
}

_LLAMA_2 = dict(
    kind="transformer", mlp="swiglu", tied=False, vocabulary=32000, context=4096
)
#: The recipes' transformer at both sizes: bytes for tokens, GELU blocks, as the H100 ran it.
_RECIPES_TRANSFORMER = dict(
    kind="transformer",
    mlp="gelu",
    tied=False,
    vocabulary=256,
    batch=64,
    precision="autocast",
)

#: The presets: the form's fields they set, and where their MFU was measured ("measured":
#: the GPU, precision and row of EVIDENCE; None where DEFAULT_MFU stands). The CNN and the
#: recipes' transformers are as the H100 run trained them, with the tokens of its run; the
#: Llama 2 shapes are the models' config.json files (meta-llama/Llama-2-7b-hf, -70b-hf on
#: Hugging Face) and their 2.0 trillion tokens the paper's (Touvron et al. 2023, table 1).
PRESETS = {
    "The book's CNN": dict(
        kind="any",
        parameters=12810,
        flops=3782784,
        activationBytes=103984,
        batch=64,
        precision="autocast",
        mfu=0.00739,
        tokensToTrain=350 * 64,
        measured={
            "gpu": "H100 SXM",
            "precision": "autocast",
            "row": "CNN, torch_ddp, bf16",
        },
    ),
    "The recipes' transformer (3.3 M)": dict(
        _RECIPES_TRANSFORMER,
        layers=4,
        width=256,
        heads=4,
        kvHeads=4,
        mlpWidth=1024,
        context=128,
        mfu=1.03,
        tokensToTrain=300 * 64 * 128,
        measured={
            "gpu": "H100 SXM",
            "precision": "autocast",
            "row": "transformer recipe size, torch_ddp",
        },
    ),
    "The recipes' large transformer (153 M)": dict(
        _RECIPES_TRANSFORMER,
        layers=12,
        width=1024,
        heads=16,
        kvHeads=16,
        mlpWidth=4096,
        context=1024,
        mfu=35.8,
        tokensToTrain=64 * 64 * 1024,
        measured={
            "gpu": "H100 SXM",
            "precision": "autocast",
            "row": "transformer large, batch 64, torch_ddp",
        },
    ),
    "Llama 2 7B": dict(
        _LLAMA_2,
        layers=32,
        width=4096,
        heads=32,
        kvHeads=32,
        mlpWidth=11008,
        batch=1,
        precision="bf16",
        mfu=DEFAULT_MFU,
        tokensToTrain=2.0e12,
        measured=None,
    ),
    "Llama 2 70B": dict(
        _LLAMA_2,
        layers=80,
        width=8192,
        heads=64,
        kvHeads=8,
        mlpWidth=28672,
        batch=1,
        precision="bf16",
        mfu=DEFAULT_MFU,
        tokensToTrain=2.0e12,
        measured=None,
    ),
}


def _shape(
    width: int, heads: int, kv_heads: int | None, mlp_width: int | None, mlp: str
):
    """The key-value width and the MLP's width, checked: the book's block by default."""
    kv_heads = heads if kv_heads is None else kv_heads
    for name, value in (("width", width), ("heads", heads), ("kv_heads", kv_heads)):
        check_int(f"transformer: {name}", value)
    if width % heads or heads % kv_heads:
        raise ValueError(
            f"transformer: heads {heads} must divide width {width}, and kv_heads "
            f"{kv_heads} must divide heads."
        )
    if mlp not in MLP_MATRICES:
        raise ValueError(
            f"transformer: mlp {mlp!r} is not one of {', '.join(MLP_MATRICES)}."
        )
    mlp_width = (
        4 * width
        if mlp_width is None
        else check_int("transformer: mlp_width", mlp_width)
    )
    return width // heads * kv_heads, mlp_width


def transformer_parameters(
    layers: int,
    width: int,
    vocabulary: int,
    context: int,
    *,
    heads: int = 1,
    kv_heads: int | None = None,
    mlp_width: int | None = None,
    mlp: str = "gelu",
    tied: bool = False,
) -> int:
    """A transformer's weights. The book's block (recipes/pytorch/models.py, mlp="gelu", an
    MLP 4 times as wide): 12 x width^2 + 13 x width, and learned positions. Llama's
    (mlp="swiglu"): no biases, RMSNorm, rotary positions. `kv_heads` below `heads` is
    grouped-query attention; `tied` shares the output matrix with the token embedding."""
    for name, value in (
        ("layers", layers),
        ("vocabulary", vocabulary),
        ("context", context),
    ):
        check_int(f"transformer_parameters: {name}", value)
    kv, hidden = _shape(width, heads, kv_heads, mlp_width, mlp)
    matrices = 2 * width**2 + 2 * width * kv + MLP_MATRICES[mlp] * width * hidden
    if mlp == "gelu":  # biases: q, k, v, out, the MLP's two; two LayerNorms; positions
        block = matrices + 2 * width + 2 * kv + hidden + width + 4 * width
        rest = vocabulary * width + context * width + 2 * width
    else:  # two RMSNorms a block, one at the end
        block = matrices + 2 * width
        rest = vocabulary * width + width
    return layers * block + rest + (0 if tied else vocabulary * width)


def transformer_flops_per_token(
    layers: int,
    width: int,
    vocabulary: int,
    context: int,
    *,
    heads: int = 1,
    kv_heads: int | None = None,
    mlp_width: int | None = None,
    mlp: str = "gelu",
) -> int:
    """A training step's operations per token (chapter 18): 6 per weight of a matrix
    product (the blocks' and the output's width x vocabulary, tied or not) plus attention's
    12 x layers x context x width."""
    kv, hidden = _shape(width, heads, kv_heads, mlp_width, mlp)
    matrices = 2 * width**2 + 2 * width * kv + MLP_MATRICES[mlp] * width * hidden
    return 6 * (layers * matrices + width * vocabulary) + 12 * layers * context * width


def transformer_activation_values(
    layers: int,
    width: int,
    vocabulary: int,
    context: int,
    *,
    recompute: bool,
    heads: int = 1,
    kv_heads: int | None = None,
    mlp_width: int | None = None,
    mlp: str = "gelu",
) -> float:
    """Values autograd saves per sequence: each block's activations (or, recomputed, its
    input, and one block's activations again during the backward pass) and the logits."""
    kv, hidden = _shape(width, heads, kv_heads, mlp_width, mlp)
    block = BLOCK_WIDTHS[mlp] * width + 2 * kv + ACTIVATIONS_PER_MLP_WIDTH[mlp] * hidden
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


def ring_bandwidth(
    gpus: int, gpus_per_machine: int, inside: float, between: float
) -> tuple[float, str]:
    """The bus bandwidth a ring all-reduce runs at and the link that sets it: inside one
    machine its own; across machines the slower of the two (chapter 9: NCCL runs a ring
    per network adapter, so `between` is all of a machine's adapters together)."""
    check_int("ring_bandwidth: gpus", gpus)
    check_int("ring_bandwidth: gpus_per_machine", gpus_per_machine)
    if gpus <= gpus_per_machine or inside <= between:
        return inside, "inside a machine"
    return between, "between machines"


def all_reduce_bytes(parameters: int, stage: str, precision: str) -> float:
    """What a step's collectives send, as the size S of the one all-reduce that sends as
    much (a ring sends 2(n - 1)/n x S): the gradients' bytes under DDP, ZeRO-1 and ZeRO-2;
    under FSDP two gathers of the weights and a reduce-scatter of the gradients, in the
    dtypes of COLLECTIVE_BYTES."""
    if stage not in SHARDED:
        raise ValueError(
            f"all_reduce_bytes: stage {stage!r} is not one of {', '.join(SHARDED)}."
        )
    if precision not in COLLECTIVE_BYTES:
        raise ValueError(
            f"all_reduce_bytes: precision {precision!r} is not one of "
            f"{', '.join(COLLECTIVE_BYTES)}."
        )
    gather, reduce = COLLECTIVE_BYTES[precision]
    if stage == "ZeRO-3 / FSDP":
        return parameters * (2 * gather + reduce) / 2
    return parameters * reduce


def step_time(
    flops_per_example: float,
    examples_per_gpu: int,
    gpus: int,
    peak_flops: float,
    mfu: float,
    sent_bytes: float,
    bus_bandwidth: float,
    latency_s: float,
    recompute: bool = False,
    accumulation: int = 1,
) -> dict[str, float | bool]:
    """A step's estimate: compute at `mfu` of the peak (a third more with recomputation:
    each block's forward runs again) for each of `accumulation` micro-batches; the
    collectives once a step, by the ring model of an all-reduce of `sent_bytes`
    (all_reduce_bytes); whether they fit in the last micro-batch's backward pass (its
    compute less the forward pass, a third of the operations); the step, compute plus what
    does not hide."""
    check_int("step_time: examples_per_gpu", examples_per_gpu)
    check_int("step_time: gpus", gpus)
    check_int("step_time: accumulation", accumulation)
    for name, value in (
        ("peak_flops", peak_flops),
        ("mfu", mfu),
        ("bus_bandwidth", bus_bandwidth),
    ):
        check_positive(f"step_time: {name}", value)
    plain = flops_per_example * examples_per_gpu / (mfu * peak_flops)
    micro = plain * 4 / 3 if recompute else plain
    compute = accumulation * micro
    communication = 2 * (gpus - 1) * (sent_bytes / (gpus * bus_bandwidth) + latency_s)
    backward = micro - plain / 3
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


def _whole(value) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value == int(value)
        and value >= 1
    )


#: What the page says where a result overflows (huge fields) or vanishes.
TOO_LARGE = "These numbers are too large or too small to compute: check each field."


def problem(i: dict) -> str | None:
    """What is wrong with the form's `inputs`, in the words the page shows (naming the
    form's labels), or None: the checks of _static/calculator.js, in the same order."""
    transformer = i["kind"] == "transformer"
    whole = ["batch", "accumulation", "gpus", "gpusPerMachine"]
    if transformer:
        shape = [
            "layers",
            "width",
            "heads",
            "kvHeads",
            "mlpWidth",
            "vocabulary",
            "context",
        ]
        whole = shape + whole
    else:
        whole = ["parameters", *whole]
    for name in whole:
        if not _whole(i[name]):
            return f"“{LABELS[name]}” must be a whole number, 1 or more."
    if transformer and i["width"] % i["heads"] != 0:
        return (
            f"“{LABELS['heads']}” ({i['heads']}) must divide the width ({i['width']})."
        )
    if transformer and i["heads"] % i["kvHeads"] != 0:
        return (
            f"“{LABELS['kvHeads']}” ({i['kvHeads']}) must divide the attention heads "
            f"({i['heads']})."
        )
    if not transformer and not (i["flops"] > 0 and i["activationBytes"] >= 0):
        return (
            f"“{LABELS['flops']}” must be above 0, and “{LABELS['activationBytes']}” "
            "0 or more."
        )
    if i["gpus"] > i["gpusPerMachine"] and i["gpus"] % i["gpusPerMachine"] != 0:
        return (
            f"{i['gpus']} GPUs do not fill whole machines of {i['gpusPerMachine']}: "
            f"change “{LABELS['gpus']}” or “{LABELS['gpusPerMachine']}”."
        )
    for name in ("mfu", "margin"):
        if not 0 < i[name] < 100:
            return f"“{LABELS[name]}” must lie between 0 and 100."
    for name in ("busBandwidth", "network", "tokensToTrain"):
        if not i[name] > 0:
            return f"“{LABELS[name]}” must be above 0."
    if not i["latency"] >= 0:
        return f"“{LABELS['latency']}” must be 0 or more."
    if i["price"] is not None and not i["price"] >= 0:
        return f"“{LABELS['price']}” must be 0 or more, or empty."
    if i["gpu"] not in GPUS:
        return f"Unknown GPU {i['gpu']}."
    if GPUS[i["gpu"]][PEAK_OF[i["precision"]]] is None:
        return f"The {i['gpu']} has no bfloat16: choose float16 autocast or float32."
    return None


def calculate(inputs: dict) -> dict:
    """Everything the calculator shows for its `inputs` (the form's fields in the form's
    units: MFU and margin in %, bandwidths in GB/s and Gb/s, latency in µs, `price` None
    when empty), as _static/calculator.js computes it: parameters, memory per GPU by kind,
    its total, which GPUs it fits, the step's estimate and the link that bounds it, tokens
    (or examples) per second per GPU, and the time and cost to train. `fsdpGpus`: the
    fewest GPUs over which FSDP fits the run on the chosen GPU (each GPU holding its share
    of the weights, gradients and optimizer state, and all its activations), None where the
    activations alone fill it."""
    i = inputs
    message = problem(i)
    if message:
        raise ValueError(f"calculate: {message}")
    value_bytes = 4 if i["precision"] == "fp32" else 2
    if i["kind"] == "transformer":
        shape = (i["layers"], i["width"], i["vocabulary"], i["context"])
        block = dict(
            heads=i["heads"],
            kv_heads=i["kvHeads"],
            mlp_width=i["mlpWidth"],
            mlp=i["mlp"],
        )
        parameters = transformer_parameters(*shape, tied=i["tied"], **block)
        flops_per_example = transformer_flops_per_token(*shape, **block) * i["context"]
        activations = transformer_activation_values(
            *shape, recompute=i["recompute"], **block
        )
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
    free = 1 - i["margin"] / 100
    fits = {name: total <= free * gpu["memory_gb"] * 1e9 for name, gpu in GPUS.items()}
    room = free * GPUS[i["gpu"]]["memory_gb"] * 1e9 - activation_bytes
    states = parameters * sum(
        BYTES_PER_PARAMETER[(i["precision"], i["optimizer"])].values()
    )
    peak = GPUS[i["gpu"]][PEAK_OF[i["precision"]]]
    sent = all_reduce_bytes(parameters, i["stage"], i["precision"])
    bandwidth, bound = ring_bandwidth(
        i["gpus"], i["gpusPerMachine"], i["busBandwidth"] * 1e9, i["network"] / 8 * 1e9
    )
    step = step_time(
        flops_per_example,
        i["batch"],
        i["gpus"],
        peak,
        i["mfu"] / 100,
        sent,
        bandwidth,
        i["latency"] * 1e-6,
        recompute=i["kind"] == "transformer" and i["recompute"],
        accumulation=i["accumulation"],
    )
    per_gpu = i["batch"] * i["accumulation"] * tokens
    steps = i["tokensToTrain"] / (per_gpu * i["gpus"])
    hours = (
        math.ceil(steps) * step["step_s"] / 3600 if math.isfinite(steps) else math.inf
    )
    sizes = (
        parameters,
        total,
        step["compute_s"],
        step["communication_s"],
        step["step_s"],
        hours,
    )
    if not all(math.isfinite(x) for x in map(float, sizes)) or not step["step_s"] > 0:
        raise ValueError(f"calculate: {TOO_LARGE}")
    steps = math.ceil(steps)
    share = states / room if room > 0 else math.inf
    fsdp_gpus = max(1, math.ceil(share)) if math.isfinite(share) else None
    return {
        "parameters": parameters,
        "memory": memory,
        "total": total,
        "fits": fits,
        "fsdpGpus": fsdp_gpus,
        "step": step,
        "machines": math.ceil(i["gpus"] / i["gpusPerMachine"]),
        "bandwidth": bandwidth,
        "bound": bound if i["gpus"] > 1 else None,
        "unitsPerSecond": per_gpu / step["step_s"],
        "globalBatch": i["batch"] * i["accumulation"] * i["gpus"],
        "tokensPerStep": per_gpu * i["gpus"],
        "steps": steps,
        "hours": hours,
        "gpuHours": hours * i["gpus"],
        "cost": None if i["price"] is None else hours * i["gpus"] * i["price"],
    }


#: Llama 3's shapes as torchtitan builds them (torchtitan/models/llama/__init__.py: the MLP
#: width from its ffn_dim_multiplier 1.3 and multiple_of), with its tokenizer's 128,256
#: tokens and its training sequences of 8,192 (train_configs/llama3_8b.toml).
LLAMA_3 = {
    "8B": dict(layers=32, width=4096, heads=32, kvHeads=8, mlpWidth=14336),
    "70B": dict(layers=80, width=8192, heads=64, kvHeads=8, mlpWidth=28672),
}
_LLAMA_3 = dict(
    kind="transformer", mlp="swiglu", tied=False, vocabulary=128256, context=8192
)

#: Where the published runs come from: pytorch/torchtitan's docs/performance.md at two
#: commits (the H100 table, Dec 2024, moved to benchmarks/llama3_h100_202412_torchtitan.md
#: in June 2025), and the torchtitan commit each ran or counted its MFU with.
TORCHTITAN = "https://github.com/pytorch/torchtitan/blob/{commit}/docs/performance.md"

#: FSDP2 runs of torchtitan (bfloat16 gathers, float32 reduce-scatters, AdamW): the model,
#: GPUs, batch per GPU, what it recomputed, its tokens per second per GPU and memory
#: (GiB, the allocator's peak reserved, as its train.py logs it; None: not published), the
#: MFU it published (None: it gave "33% to 39%" for these only) and whether its MFU counted
#: 6 operations per weight of the input embedding (its train.py at `counted_at`).
PUBLISHED_RUNS = [
    dict(
        run="Llama 3.1 8B",
        model="8B",
        gpu="H100 SXM",
        gpus=8,
        batch=2,
        recomputed="selective, by op",
        tokens_per_s=5762,
        memory_gib=82.4,
        mfu=None,
        embedding_counted=False,
        commit="d4c86e3758a84cf23e2e879ab3c995cba9d5e410",
        counted_at="9dec370ad26b5f8e9a7333a0e36165018262644b",
    ),
    dict(
        run="Llama 3.1 8B, compiled",
        model="8B",
        gpu="H100 SXM",
        gpus=8,
        batch=2,
        recomputed="selective, by op",
        tokens_per_s=6667,
        memory_gib=77.0,
        mfu=None,
        embedding_counted=False,
        commit="d4c86e3758a84cf23e2e879ab3c995cba9d5e410",
        counted_at="9dec370ad26b5f8e9a7333a0e36165018262644b",
    ),
    dict(
        run="Llama 3 8B",
        model="8B",
        gpu="A100 80GB",
        gpus=64,
        batch=1,
        recomputed="selective, by layer",
        tokens_per_s=2904,
        memory_gib=None,
        mfu=56.8,
        embedding_counted=True,
        commit="4d88a8a44fe439f73f564b83d60b29a906ef3507",
        counted_at="1ea476e9f24be439eda358aa864f45c1c37a8a88",
    ),
    dict(
        run="Llama 3 8B",
        model="8B",
        gpu="A100 80GB",
        gpus=64,
        batch=1,
        recomputed="selective, by op",
        tokens_per_s=2973,
        memory_gib=None,
        mfu=58.2,
        embedding_counted=True,
        commit="4d88a8a44fe439f73f564b83d60b29a906ef3507",
        counted_at="1ea476e9f24be439eda358aa864f45c1c37a8a88",
    ),
    dict(
        run="Llama 3 70B",
        model="70B",
        gpu="A100 80GB",
        gpus=64,
        batch=1,
        recomputed="full",
        tokens_per_s=331,
        memory_gib=None,
        mfu=51.7,
        embedding_counted=True,
        commit="4d88a8a44fe439f73f564b83d60b29a906ef3507",
        counted_at="1ea476e9f24be439eda358aa864f45c1c37a8a88",
    ),
]


#: The form's fields the presets leave as the page opens with them: 8 H100s in one machine
#: over NVLink, DDP (replicated), Adam, no recomputation, 10% kept free, no price.
FORM = dict(
    accumulation=1,
    gpus=8,
    gpusPerMachine=8,
    stage="replicated",
    optimizer="Adam",
    recompute=False,
    gpu="H100 SXM",
    busBandwidth=370,
    network=3200,
    latency=10,
    margin=10,
    price=None,
)


def preset_inputs(preset: str, **changes) -> dict:
    """The calculator's inputs as the page opens with `preset` chosen, and `changes` made."""
    fields = {k: v for k, v in PRESETS[preset].items() if k != "measured"}
    return {**FORM, **fields, **changes}


def published_inputs(run: dict, recompute: bool, mfu: float) -> dict:
    """The calculator's inputs for one of PUBLISHED_RUNS: its model, GPUs and batch, FSDP
    with autocast's layout (float32 weights, gradients and AdamW state; bfloat16 gathers,
    float32 reduce-scatters, as torchtitan's MixedPrecisionPolicy), 8 GPUs a machine with
    the page's links (torchtitan's H100s: NVLink, 400 Gb/s a GPU between machines)."""
    return {
        **FORM,
        **_LLAMA_3,
        **LLAMA_3[run["model"]],
        "batch": run["batch"],
        "gpus": run["gpus"],
        "precision": "autocast",
        "stage": "ZeRO-3 / FSDP",
        "recompute": recompute,
        "gpu": run["gpu"],
        "mfu": mfu,
        "tokensToTrain": 1e12,
    }


def torchtitan_flops_per_token(run: dict) -> float:
    """Operations per token as torchtitan's MFU counted them: 6 per weight (the input
    embedding's too where `embedding_counted`) plus 12 x layers x heads x head width x
    sequence (utils.get_num_flop_per_token)."""
    shape = {**_LLAMA_3, **LLAMA_3[run["model"]]}
    weights = calculate(published_inputs(run, False, 40))["parameters"]
    if not run["embedding_counted"]:
        weights -= shape["vocabulary"] * shape["width"]
    return 6 * weights + 12 * shape["layers"] * shape["width"] * shape["context"]


def published_comparison() -> list[dict]:
    """Each of PUBLISHED_RUNS beside the calculator: the MFU (published, or from its tokens
    per second as torchtitan counts), the calculator's tokens per second at that MFU
    (recomputation off: a published MFU already counts its time as lost) and its memory
    per GPU in GiB, with full recomputation and without (the published runs recomputed
    selectively, between the two, or fully)."""
    rows = []
    for run in PUBLISHED_RUNS:
        peak = GPUS[run["gpu"]]["bf16"]
        mfu = (
            run["mfu"]
            or 100 * run["tokens_per_s"] * torchtitan_flops_per_token(run) / peak
        )
        speed = calculate(published_inputs(run, False, mfu))
        memory = {
            recompute: calculate(published_inputs(run, recompute, mfu))["total"] / 2**30
            for recompute in (True, False)
        }
        rows.append(
            {
                **run,
                "mfu_used": mfu,
                "calculator_tokens_per_s": speed["unitsPerSecond"],
                "hidden": speed["step"]["hidden"],
                "calculator_gib": memory,
            }
        )
    return rows


def published_table() -> str:
    """published_comparison() as the Markdown table of before_you_rent_gpus.md."""
    lines = [
        "| torchtitan's run | GPUs | batch a GPU | recomputed | MFU | tokens/s a GPU: "
        "published, calculator | GiB a GPU: published, calculator |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for row in published_comparison():
        full, none = row["calculator_gib"][True], row["calculator_gib"][False]
        gib = (
            f"{full:.1f}"
            if row["recomputed"] == "full"
            else f"{full:.1f} to {none:.1f}"
        )
        mfu = f"{row['mfu']}%" if row["mfu"] else f"{row['mfu_used']:.1f}%*"
        published = "—" if row["memory_gib"] is None else f"{row['memory_gib']}"
        lines.append(
            f"| {row['run']} | {row['gpus']} {row['gpu'].split()[0]} | {row['batch']} | "
            f"{row['recomputed']} | {mfu} | {row['tokens_per_s']:,}, "
            f"{row['calculator_tokens_per_s']:,.0f} | {published}, {gib} |"
        )
    return "\n".join(lines)


#: The book's own transformer runs on one H100 (EVIDENCE's rows, by "step") that the
#: calculator is held to, with the preset of the shape each ran and its recipe's sharding.
MEASURED_RUNS = [
    (f"transformer {size}, {recipe}", preset, stage)
    for size, preset in (
        ("recipe size", "The recipes' transformer (3.3 M)"),
        ("large", "The recipes' large transformer (153 M)"),
        ("large, batch 64", "The recipes' large transformer (153 M)"),
    )
    for recipe, stage in (("torch_ddp", "replicated"), ("torch_fsdp", "ZeRO-3 / FSDP"))
]


def measured_comparison(evidence: dict) -> list[dict]:
    """Each of MEASURED_RUNS (`evidence`: EVIDENCE's rows by step) beside the calculator as
    a reader would use it: the preset of its shape (its MFU one run's) on one H100, the
    run's batch and sharding. Its step time and peak memory, measured and estimated."""
    rows = []
    for step, preset, stage in MEASURED_RUNS:
        result = evidence[step]["result"]
        inputs = preset_inputs(
            preset, gpus=1, stage=stage, batch=result["batch_per_device"]
        )
        answer = calculate(inputs)
        rows.append(
            {
                "run": step.removeprefix("transformer "),
                "parameters": result["parameters"],
                "batch": result["batch_per_device"],
                "mfu": 100 * result["mfu"],
                "preset_mfu": inputs["mfu"],
                "step_ms": 1e3 * result["mean_step_time_s"],
                "calculator_step_ms": 1e3 * answer["step"]["step_s"],
                "memory_gb": result["peak_memory_bytes"] / 1e9,
                "calculator_memory_gb": answer["total"] / 1e9,
            }
        )
    return rows


def measured_table(evidence: dict) -> str:
    """measured_comparison(evidence) as the Markdown table of before_you_rent_gpus.md."""
    lines = [
        "| recipe on one H100 | weights | sequences a step | MFU: measured, preset's | "
        "step ms: measured, calculator | peak GB: measured, calculator |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in measured_comparison(evidence):
        recipe = "FSDP2" if row["run"].endswith("torch_fsdp") else "DDP"
        lines.append(
            f"| {recipe} | {row['parameters'] / 1e6:.3g} M | {row['batch']} | "
            f"{row['mfu']:.3g}%, {row['preset_mfu']:.3g}% | "
            f"{row['step_ms']:.1f}, {row['calculator_step_ms']:.1f} | "
            f"{row['memory_gb']:.3g}, {row['calculator_memory_gb']:.3g} |"
        )
    return "\n".join(lines)
