"""utils.sizing, the formulas of the page "Before you rent GPUs": each against what the
chapters count and measure (the recipes' transformer, the book's CNN, the recipes' GPU
peaks), and bad inputs. tests/test_rendered_book.py checks that the page's calculator
(_static/calculator.js) gives the same numbers in Chromium."""

import json
import math

import pytest
import torch
from torch.nn import functional as F

from tests.helpers import ROOT, import_recipe
from utils import sizing
from utils.pytorch_ddp import make_model

RECIPES = ROOT / "recipes"


class Logits(torch.nn.Module):
    """The transformer's logits as (batch, vocabulary, length), for cross_entropy."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model(tokens).transpose(1, 2)


@pytest.fixture(scope="module")
def transformer():
    return import_recipe("pytorch/models")


SHAPES = [(2, 64, 4, 64, 2), (3, 128, 4, 128, 4), (2, 256, 8, 32, 8)]  # L, d, heads, t, batch


@pytest.mark.parametrize("layers, width, heads, context, batch", SHAPES)
def test_parameters_and_operations_are_the_recipes_transformers(
    transformer, layers, width, heads, context, batch
):
    model = transformer.CharTransformer(context, width, layers, heads)
    vocabulary = transformer.VOCABULARY
    counted = sum(w.numel() for w in model.parameters())
    assert sizing.transformer_parameters(layers, width, vocabulary, context) == counted
    with torch.device("meta"):
        shapes_only = transformer.CharTransformer(context, width, layers, heads)
        tokens = torch.zeros(batch, context, dtype=torch.long)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        F.cross_entropy(shapes_only(tokens).flatten(0, 1), tokens.flatten()).backward()
    per_token = sizing.transformer_flops_per_token(layers, width, vocabulary, context)
    assert counter.get_total_flops() == per_token * batch * context


@pytest.mark.parametrize("layers, width, heads, context, batch", SHAPES)
def test_activations_are_within_5_percent_of_what_autograd_saves(
    transformer, layers, width, heads, context, batch
):
    torch.manual_seed(0)
    model = transformer.CharTransformer(context, width, layers, heads)
    tokens = torch.randint(0, transformer.VOCABULARY, (batch, context))
    logits = Logits(model)  # cross_entropy wants the vocabulary second
    _, per_sequence = sizing.cost_per_example(logits, tokens, tokens)
    measured = per_sequence * batch
    values = sizing.transformer_activation_values(
        layers, width, transformer.VOCABULARY, context, recompute=False
    )
    assert abs(4 * batch * values / measured - 1) < 0.05  # float32: 4 bytes a value


def test_the_cnn_preset_is_the_books_cnn_as_counted():
    preset = sizing.PRESETS["The book's CNN"]
    model = make_model(seed=0)
    counted_flops, saved = sizing.cost_per_example(
        model, torch.zeros(64, 1, 28, 28), torch.zeros(64, dtype=torch.long)
    )
    assert preset["parameters"] == sum(w.numel() for w in model.parameters())
    assert preset["flops"] == counted_flops and round(saved) == preset["activationBytes"]


def test_the_gpus_peaks_are_the_recipes():
    peaks = import_recipe("pytorch/measure").GPU_PEAK_FLOPS
    names = {
        "T4": "Tesla T4",
        "L4": "NVIDIA L4",
        "A100 40GB": "NVIDIA A100-SXM4-40GB",
        "A100 80GB": "NVIDIA A100-SXM4-80GB",
        "H100 SXM": "NVIDIA H100 80GB HBM3",
        "H200 SXM": "NVIDIA H200",
    }
    assert {name: (gpu["bf16"], gpu["fp32"]) for name, gpu in sizing.GPUS.items()} == {
        name: peaks[recipe_name] for name, recipe_name in names.items()
    }
    # float16 on tensor cores: as bfloat16 where the GPU has it; the T4's own figure
    assert all(gpu["fp16"] == (gpu["bf16"] or 65e12) for gpu in sizing.GPUS.values())


#: The rest of the form, as the page opens: 8 GPUs in one machine, DDP, Adam, NVLink.
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


def form(preset: str, **changes) -> dict:
    """The calculator's inputs with `preset` chosen and `changes` made."""
    fields = {k: v for k, v in sizing.PRESETS[preset].items() if k != "measured"}
    return {**FORM, **fields, **changes}


EVIDENCE_ROWS = {
    row["step"]: row for row in map(json.loads, (ROOT / sizing.EVIDENCE).read_text().splitlines())
}
MEASURED = [name for name, preset in sizing.PRESETS.items() if preset["measured"]]


@pytest.mark.parametrize("name", MEASURED)
def test_a_presets_mfu_and_speed_are_what_the_book_measured(name):
    """The preset's MFU is its row's (to 3 digits), its shape the run's, and the
    calculator's tokens (or examples) per second per GPU the run's, on one H100 as run and
    on the 8 the page opens with (the all-reduce hides)."""
    preset = sizing.PRESETS[name]
    row = EVIDENCE_ROWS[preset["measured"]["row"]]
    result, command = row["result"], row["command"]
    assert row["device_name"] == "NVIDIA H100 80GB HBM3"
    assert preset["measured"]["gpu"] == "H100 SXM" and result["precision"] == "bf16"
    assert preset["precision"] == "autocast"  # the recipes' bf16 is autocast
    assert preset["mfu"] == float(f"{result['mfu'] * 100:.3g}")
    assert preset["batch"] == result["batch_per_device"] and result["world_size"] == 1
    measured = result["tokens_per_s_per_device"] or result["examples_per_s_per_device"]
    if preset["kind"] == "transformer":
        flags = dict(zip(*[iter(command.split("torch_ddp.py ")[1].split())] * 2))
        assert [int(flags[f"--{k}"]) for k in ("context", "width", "layers", "heads")] == [
            preset[k] for k in ("context", "width", "layers", "heads")
        ]
        assert preset["tokensToTrain"] == result["steps"] * preset["batch"] * preset["context"]
    else:
        assert preset["tokensToTrain"] == result["steps"] * preset["batch"]
    for gpus in (1, 8):
        answer = sizing.calculate(form(name, gpus=gpus))
        assert answer["parameters"] == result["parameters"]
        assert answer["unitsPerSecond"] == pytest.approx(measured, rel=0.005)
        assert answer["step"]["hidden"]


class LlamaBlock(torch.nn.Module):
    """Llama's block as its Hugging Face model builds it (RMSNorm, no biases, SwiGLU,
    grouped-query attention), without the rotary positions, which have no weights."""

    def __init__(self, width, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.head = heads, kv_heads, width // heads
        self.norm1, self.norm2 = torch.nn.RMSNorm(width), torch.nn.RMSNorm(width)
        linear = lambda a, b: torch.nn.Linear(a, b, bias=False)  # noqa: E731
        self.q, self.o = linear(width, width), linear(width, width)
        self.k, self.v = linear(width, self.head * kv_heads), linear(width, self.head * kv_heads)
        self.gate, self.up, self.down = (
            linear(width, hidden),
            linear(width, hidden),
            linear(hidden, width),
        )

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (
            p(h).view(b, t, n, self.head).transpose(1, 2)
            for p, n in ((self.q, self.heads), (self.k, self.kv_heads), (self.v, self.kv_heads))
        )
        gqa = self.kv_heads != self.heads
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(torch.nn.Module):
    def __init__(self, layers, width, heads, kv_heads, hidden, vocabulary, tied=False):
        super().__init__()
        self.embed = torch.nn.Embedding(vocabulary, width)
        self.blocks = torch.nn.Sequential(
            *(LlamaBlock(width, heads, kv_heads, hidden) for _ in range(layers))
        )
        self.norm = torch.nn.RMSNorm(width)
        self.out = torch.nn.Linear(width, vocabulary, bias=False)
        if tied:
            self.out.weight = self.embed.weight

    def forward(self, tokens):  # logits as (batch, vocabulary, length), for cross_entropy
        return self.out(self.norm(self.blocks(self.embed(tokens)))).transpose(1, 2)


#: The published models: their config.json's shape, and their weights as Hugging Face
#: counts them (6.74 B and 68.98 B).
PUBLISHED = {"Llama 2 7B": 6_738_415_616, "Llama 2 70B": 68_976_648_192}


@pytest.mark.parametrize("name", PUBLISHED)
def test_a_published_models_preset_has_its_weights(name):
    p = sizing.PRESETS[name]
    with torch.device("meta"):
        model = Llama(p["layers"], p["width"], p["heads"], p["kvHeads"], p["mlpWidth"], 32000)
    counted = sum(w.numel() for w in model.parameters())
    assert sizing.calculate(form(name))["parameters"] == counted == PUBLISHED[name]
    page = " ".join((ROOT / "before_you_rent_gpus.md").read_text().split())
    sizes = " and ".join(f"{n / 1e9:.2f}" for n in PUBLISHED.values())
    assert f"give their published sizes, {sizes} billion weights" in page


LLAMA_SHAPES = [(4, 64, 4, 4, 176, 64, 2), (4, 128, 8, 2, 352, 32, 2)]  # L, d, h, kv, f, t, b


@pytest.mark.parametrize("layers, width, heads, kv_heads, hidden, context, batch", LLAMA_SHAPES)
@pytest.mark.parametrize("tied", [False, True])
def test_llamas_weights_operations_and_activations(
    layers, width, heads, kv_heads, hidden, context, batch, tied
):
    """Grouped-query attention and the SwiGLU block: weights counted exactly, operations as
    FlopCounterMode counts them, saved activations within 5% of autograd's."""
    vocabulary = 256
    block = dict(heads=heads, kv_heads=kv_heads, mlp_width=hidden, mlp="swiglu")
    torch.manual_seed(0)
    model = Llama(layers, width, heads, kv_heads, hidden, vocabulary, tied)
    weights = sizing.transformer_parameters(layers, width, vocabulary, context, tied=tied, **block)
    assert weights == sum(w.numel() for w in model.parameters())
    tokens = torch.randint(0, vocabulary, (batch, context))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(tokens), tokens).backward()
    per_token = sizing.transformer_flops_per_token(layers, width, vocabulary, context, **block)
    assert counter.get_total_flops() == per_token * batch * context
    _, per_sequence = sizing.cost_per_example(model, tokens, tokens)
    values = sizing.transformer_activation_values(
        layers, width, vocabulary, context, recompute=False, **block
    )
    assert abs(4 * values / per_sequence - 1) < 0.05  # float32: 4 bytes a value


def test_a_ring_across_machines_runs_at_the_slower_link():
    """One machine: its own link, however slow the network; across machines the slower of
    the two, named; the step's all-reduce follows the ring model with that bandwidth."""
    assert sizing.ring_bandwidth(8, 8, 370e9, 12.5e9) == (370e9, "inside a machine")
    assert sizing.ring_bandwidth(16, 8, 370e9, 12.5e9) == (12.5e9, "between machines")
    assert sizing.ring_bandwidth(16, 8, 370e9, 400e9) == (370e9, "inside a machine")
    name = "Llama 2 7B"
    one = sizing.calculate(form(name, gpus=8))
    ethernet = sizing.calculate(form(name, gpus=16, network=100))
    assert one["bound"] == "inside a machine" and one["machines"] == 1
    assert ethernet["bound"] == "between machines" and ethernet["machines"] == 2
    assert ethernet["bandwidth"] == 12.5e9
    gradient_bytes = 2 * one["parameters"]  # bfloat16 gradients
    ring = 2 * 15 * (gradient_bytes / (16 * 12.5e9) + 10e-6)
    assert ethernet["step"]["communication_s"] == pytest.approx(ring, rel=1e-12)
    assert not ethernet["step"]["hidden"]
    alone = sizing.calculate(form(name, gpus=1, network=100))
    assert alone["bound"] is None and alone["step"]["communication_s"] == 0


def test_time_and_cost_follow_the_step():
    """Tokens a step (batch x accumulation x GPUs x sequence), whole steps to the tokens,
    hours, GPU-hours and, only with a price, the cost; accumulation repeats the compute
    and not the all-reduce."""
    name = "Llama 2 70B"
    plain = sizing.calculate(form(name, gpus=64, stage="ZeRO-3 / FSDP"))
    twice = sizing.calculate(form(name, gpus=64, stage="ZeRO-3 / FSDP", accumulation=2, price=2.5))
    assert plain["cost"] is None and twice["cost"] == pytest.approx(2.5 * twice["gpuHours"])
    assert twice["tokensPerStep"] == 2 * 64 * 4096 and twice["globalBatch"] == 128
    assert twice["steps"] == math.ceil(2e12 / (128 * 4096))
    assert twice["hours"] == pytest.approx(twice["steps"] * twice["step"]["step_s"] / 3600)
    assert twice["gpuHours"] == pytest.approx(64 * twice["hours"])
    assert twice["step"]["compute_s"] == pytest.approx(2 * plain["step"]["compute_s"])
    assert twice["step"]["communication_s"] == plain["step"]["communication_s"]


def test_float16_is_for_gpus_without_bfloat16():
    t4 = sizing.calculate(form("The book's CNN", gpu="T4", precision="fp16", gpus=1))
    h100 = sizing.calculate(form("The book's CNN", gpu="H100 SXM", precision="fp16", gpus=1))
    assert t4["step"]["compute_s"] == pytest.approx(h100["step"]["compute_s"] * 989 / 65)
    assert t4["memory"] == h100["memory"]  # float32 weights, as autocast
    with pytest.raises(ValueError, match="no bfloat16: choose float16"):
        sizing.calculate(form("The book's CNN", gpu="T4", precision="bf16"))


def test_sharding_divides_what_each_stage_splits():
    held = {
        stage: sizing.memory_per_gpu(7 * 10**9, 8, stage, "bf16", "Adam", 0)
        for stage in sizing.SHARDED
    }
    assert sum(held["replicated"].values()) == (16 + 2) * 7e9  # and DDP's buckets
    assert held["ZeRO-1"]["optimizer state"] == 12 * 7e9 / 8
    assert held["ZeRO-2"]["gradients"] == 2 * 7e9 / 8
    assert sum(held["ZeRO-3 / FSDP"].values()) == 16 * 7e9 / 8  # no buckets


def test_one_gpu_sends_nothing_and_fsdp_sends_half_as_much_again():
    common = dict(peak_flops=1e15, mfu=0.4, gradient_bytes=1e9, bus_bandwidth=1e11)
    alone = sizing.step_time(1e12, 8, 1, stage="replicated", latency_s=1e-5, **common)
    assert alone["communication_s"] == 0 and alone["hidden"]
    ddp = sizing.step_time(1e12, 8, 8, stage="replicated", latency_s=0, **common)
    fsdp = sizing.step_time(1e12, 8, 8, stage="ZeRO-3 / FSDP", latency_s=0, **common)
    assert fsdp["communication_s"] == pytest.approx(1.5 * ddp["communication_s"])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: sizing.memory_per_gpu(10, 0, "ZeRO-1", "bf16", "Adam", 0), "devices"),
        (lambda: sizing.memory_per_gpu(10, 2, "ZeRO-4", "bf16", "Adam", 0), "ZeRO-4"),
        (lambda: sizing.memory_per_gpu(10, 2, "ZeRO-1", "fp8", "Adam", 0), "fp8"),
        (lambda: sizing.memory_per_gpu(10, 2, "ZeRO-1", "bf16", "Adam", -1), "0 or more"),
        (lambda: sizing.step_time(1, 1, 2, 1e12, 0, 1, "ZeRO-1", 1e9, 0), "mfu"),
        (lambda: sizing.transformer_parameters(2, 0, 256, 128), "width"),
        (lambda: sizing.transformer_parameters(2, 64, 256, 128, heads=4, kv_heads=3), "divide"),
        (lambda: sizing.transformer_flops_per_token(2, 64, 256, 128, mlp="relu"), "relu"),
        (lambda: sizing.ring_bandwidth(0, 8, 1e9, 1e9), "gpus"),
    ],
)
def test_bad_inputs_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(kvHeads=3), "“key-value heads” (3) must divide the attention heads (4)."),
        (dict(width=250), "“attention heads” (4) must divide the width (250)."),
        (dict(batch=0.5), "“batch per GPU (sequences or examples)” must be a whole number"),
        (dict(gpus=12), "12 GPUs do not fill whole machines of 8: change “GPUs”"),
        (dict(mfu=100), "“MFU, % of the GPU's peak” must lie between 0 and 100."),
        (dict(network=0), "“network between machines, Gb/s per machine” must be above 0."),
        (dict(price=-1), "“price per GPU-hour (empty: no cost)” must be 0 or more"),
    ],
)
def test_a_bad_field_is_named_by_its_label(changes, message):
    """What the page says of a bad field names it as the form does (the browser test checks
    that the page says the same)."""
    inputs = form("The recipes' transformer (3.3 M)", **changes)
    assert sizing.problem(inputs).startswith(message)
    with pytest.raises(ValueError, match="calculate: "):
        sizing.calculate(inputs)


def test_numbers_too_large_to_compute_are_refused():
    with pytest.raises(ValueError, match="too large or too small"):
        sizing.calculate(form("Llama 2 7B", mfu=1e-300))
