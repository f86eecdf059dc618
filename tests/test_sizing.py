"""utils.sizing, the formulas of the page "Before you rent GPUs": each against what the
chapters count and measure (the recipes' transformer, the book's CNN, the recipes' GPU
peaks), and bad inputs. tests/test_rendered_book.py checks that the page's calculator
(_static/calculator.js) gives the same numbers in Chromium."""

import re

import pytest
import torch
from torch.nn import functional as F

from tests.helpers import ROOT, import_recipe
from utils import sizing
from utils.pytorch_ddp import make_model

RECIPES = ROOT / "recipes"
CALCULATOR = (ROOT / "_static" / "calculator.js").read_text()


class Logits(torch.nn.Module):
    """The transformer's logits as (batch, vocabulary, length), for cross_entropy."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model(tokens).transpose(1, 2)


@pytest.fixture(scope="module")
def transformer():
    return import_recipe("transformer")


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
    preset = re.search(
        r'"The book\'s CNN": \{\s*kind: "any", parameters: (\d+), flops: (\d+), '
        r"activationBytes: (\d+)",
        CALCULATOR,
    )
    parameters, flops, activation_bytes = map(int, preset.groups())
    model = make_model(seed=0)
    counted_flops, saved = sizing.cost_per_example(
        model, torch.zeros(64, 1, 28, 28), torch.zeros(64, dtype=torch.long)
    )
    assert parameters == sum(w.numel() for w in model.parameters())
    assert flops == counted_flops and round(saved) == activation_bytes


def test_the_gpus_peaks_are_the_recipes():
    peaks = import_recipe("torch_ddp").GPU_PEAK_FLOPS
    names = {
        "T4": "Tesla T4",
        "L4": "NVIDIA L4",
        "A100 40GB": "NVIDIA A100-SXM4-40GB",
        "A100 80GB": "NVIDIA A100-SXM4-80GB",
        "H100 SXM": "NVIDIA H100 80GB HBM3",
        "H200": "NVIDIA H200",
    }
    assert {name: sizing.GPUS[name][1:] for name in names} == {
        name: peaks[recipe_name] for name, recipe_name in names.items()
    }


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
        (lambda: sizing.memory_per_gpu(10, 2, "ZeRO-1", "fp16", "Adam", 0), "fp16"),
        (lambda: sizing.memory_per_gpu(10, 2, "ZeRO-1", "bf16", "Adam", -1), "0 or more"),
        (lambda: sizing.step_time(1, 1, 2, 1e12, 0, 1, "ZeRO-1", 1e9, 0), "mfu"),
        (lambda: sizing.transformer_parameters(2, 0, 256, 128), "width"),
    ],
)
def test_bad_inputs_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
