"""The calculator of "Before you rent GPUs" (_static/calculator.js) in Chromium, on a bare
page of its own (no book to build): equal to utils.sizing where tests/book/test_rendered_book.py
does not look (what FSDP sends by dtype, how many GPUs FSDP needs, torchtitan's runs of the
page's table), its answer when nothing fits, and its summary at a phone's width.

Uses Debian's Chromium driven by Playwright, as tests/book/test_rendered_book.py does: skipped
without it, except in CI (CI set), where it fails."""

import itertools
import os
import shutil

import pytest

from tests.helpers import ROOT
from utils import sizing

pytestmark = pytest.mark.full  # a browser: the full proof

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PHONE_SCREEN = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def calculator(tmp_path_factory):
    """The calculator alone on a page at a phone's width, as the book loads it."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs Debian's Chromium: apt-get install chromium")
        pytest.skip("Chromium not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    static = ROOT / "_static"
    html = tmp_path_factory.mktemp("calculator") / "page.html"
    html.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width">'
        f'<link rel="stylesheet" href="{(static / "calculator.css").as_uri()}">'
        f'<script src="{(static / "calculator.js").as_uri()}"></script></head>'
        '<body><h1>Before you rent GPUs</h1><div id="gpu-calculator"></div></body></html>'
    )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport=PHONE_SCREEN)
        page.route("http*://**", lambda route: route.abort())  # nothing may be fetched
        page.goto(html.as_uri())
        page.wait_for_selector(".calculator-output p")
        yield page
        browser.close()


def _grid() -> list[dict]:
    """Every preset and torchtitan's runs, over GPUs, shardings and precisions."""
    shapes = [{k: v for k, v in p.items() if k != "measured"} for p in sizing.PRESETS.values()]
    shapes += [sizing.published_inputs(run, True, 50) for run in sizing.PUBLISHED_RUNS]
    grid = []
    for k, (shape, gpus, stage, precision) in enumerate(
        itertools.product(shapes, (1, 8, 64), sizing.SHARDED, ("bf16", "autocast", "fp16", "fp32"))
    ):
        grid.append(
            {
                "accumulation": 1,
                "gpusPerMachine": 8,
                "optimizer": "Adam",
                "recompute": False,
                "busBandwidth": 370,
                "network": 3200,
                "latency": 10,
                "margin": 10,
                "price": None,
                "mfu": 40,
                **shape,
                "gpus": gpus,
                "stage": stage,
                "precision": precision,
                "gpu": ("H100 SXM", "A100 80GB", "L4", "H200 SXM")[k % 4],
            }
        )
    return grid


def test_the_page_computes_what_utils_sizing_does(calculator):
    grid = _grid()
    answers = calculator.evaluate("grid => grid.map(window.bookCalculator.calculate)", grid)
    for inputs, js in zip(grid, answers, strict=True):
        python = sizing.calculate(inputs)
        assert js["fsdpGpus"] == python["fsdpGpus"], inputs
        assert js["fits"] == python["fits"], inputs
        for key in ("compute_s", "communication_s", "step_s"):
            assert js["step"][key] == pytest.approx(python["step"][key], rel=1e-12), inputs
        assert js["step"]["hidden"] == python["step"]["hidden"], inputs
        assert js["total"] == pytest.approx(python["total"], rel=1e-12), inputs
        assert js["unitsPerSecond"] == pytest.approx(python["unitsPerSecond"], rel=1e-12)


def _choose(page, preset: str, **fields):
    page.select_option('[name="preset"]', preset)
    for name, value in fields.items():
        if name == "recompute":
            page.set_checked('[name="recompute"]', value)
        elif name in ("stage", "gpu", "precision"):
            page.select_option(f'[name="{name}"]', value)
        else:
            page.fill(f'[name="{name}"]', str(value))


def test_where_nothing_fits_the_page_says_what_does(calculator):
    """Llama 2 70B under DDP, its activations recomputed, fits no GPU: the page names the
    GPUs FSDP needs (Python's count), and with that many FSDP fits; without recomputation
    the activations alone fill the GPU, and it says so; both point beyond data
    parallelism."""
    page = calculator
    _choose(page, "Llama 2 70B", stage="replicated", gpus=8, recompute=True)
    needed = int(page.get_attribute("[data-fsdp-gpus]", "data-fsdp-gpus"))
    inputs = {
        **{k: v for k, v in sizing.PRESETS["Llama 2 70B"].items() if k != "measured"},
        "accumulation": 1,
        "gpus": 8,
        "gpusPerMachine": 8,
        "stage": "replicated",
        "optimizer": "Adam",
        "recompute": True,
        "gpu": "H100 SXM",
        "busBandwidth": 370,
        "network": 3200,
        "latency": 10,
        "margin": 10,
        "price": None,
    }
    assert not any(sizing.calculate(inputs)["fits"].values())
    assert needed == sizing.calculate(inputs)["fsdpGpus"]
    assert "beyond_data_parallelism.html" in page.inner_html(".calculator-nothing-fits")
    for gpus, fits in ((needed, True), (needed - 1, False)):
        answer = sizing.calculate(
            {**inputs, "stage": "ZeRO-3 / FSDP", "gpus": gpus, "gpusPerMachine": 1}
        )
        assert answer["fits"]["H100 SXM"] is fits
    _choose(page, "Llama 2 70B", stage="ZeRO-3 / FSDP", gpus=-(-needed // 8) * 8)
    assert page.query_selector(".calculator-nothing-fits") is None
    assert page.get_attribute("[data-fits-here]", "data-fits-here") == "true"
    _choose(page, "Llama 2 70B", recompute=False)
    assert sizing.calculate({**inputs, "recompute": False})["fsdpGpus"] is None
    assert "the activations alone" in page.inner_text(".calculator-nothing-fits")
    assert "beyond_data_parallelism.html" in page.inner_html(".calculator-nothing-fits")


def test_the_answer_stays_in_view_on_a_phone(calculator):
    """At 390 pixels the page is no wider than the screen; while the first fields are
    edited, the summary (the memory bar and one line) sits on the screen, its bar's parts
    in proportion to the memory table."""
    page = calculator
    _choose(page, "Llama 2 7B", stage="replicated", gpus=8)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE_SCREEN["width"]
    page.focus('[name="layers"]')
    page.evaluate("document.querySelector('[name=\"layers\"]').scrollIntoView()")
    box = page.locator(".calculator-summary").bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE_SCREEN["height"]
    assert box["height"] < PHONE_SCREEN["height"] / 5  # a strip, not the page
    widths = page.evaluate(
        "[...document.querySelectorAll('.calculator-bar span')]"
        ".map(s => s.getBoundingClientRect().width)"
    )
    held = [
        float(cell)
        for cell in page.eval_on_selector_all(
            ".calculator-memory td[data-bytes]", "cells => cells.map(c => c.dataset.bytes)"
        )[:-1]  # the last row is the total
        if float(cell) > 0
    ]
    assert len(widths) == len(held)
    for width, bytes_ in zip(widths, held):
        assert width / widths[0] == pytest.approx(bytes_ / held[0], abs=0.02)
