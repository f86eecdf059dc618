"""The rendered book in a real browser: outputs and figures show, Colab links point at each
page's own notebook, and internal links resolve.

Uses Debian's Chromium (`apt-get install chromium`) driven by Playwright; no browser is
downloaded. CI (CI=true) fails when Chromium is missing; elsewhere these tests are skipped.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.helpers import ROOT, colab_url, toc_pages

pytestmark = pytest.mark.full  # builds the book and opens it: the full proof

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAGES = toc_pages()
#: The chapters: the pages made from notebooks (the recipes page is Markdown).
NOTEBOOK_PAGES = [page for page in PAGES if (ROOT / f"{page}.ipynb").exists()]
LAPTOP_SCREEN = {"width": 1440, "height": 900}  # the screen every page opens on

if CHROMIUM is None:
    if os.environ.get("CI"):
        raise RuntimeError(
            "CI needs Debian's Chromium for the browser tests: apt-get install chromium"
        )
    pytest.skip("Chromium not installed (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build the book from the working tree, with warnings as errors, into a fresh folder."""
    out = tmp_path_factory.mktemp("book")
    build = subprocess.run(
        [
            str(Path(sys.executable).parent / "jupyter-book"),
            "build",
            "--all",
            "-W",
            "--path-output",
            str(out),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def opened(site, browser):
    """`opened(name)`: the page `name` loaded once, offline, on a 1440-pixel-wide laptop
    screen, and shared by the checks below (a page load costs about a second)."""
    pages = {}

    def open_page(page_name):
        if page_name not in pages:
            page = browser.new_page(viewport=LAPTOP_SCREEN)
            page.route("http*://**", lambda route: route.abort())  # nothing may be fetched
            page.goto((site / f"{page_name}.html").as_uri())
            pages[page_name] = page
        return pages[page_name]

    yield open_page
    for page in pages.values():
        page.close()


def image_outputs(notebook_path: Path) -> int:
    notebook = json.loads(notebook_path.read_text())
    return sum(
        "image/png" in output.get("data", {})
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
    )


@pytest.mark.parametrize("page_name", NOTEBOOK_PAGES)
def test_chapter_page_renders_outputs_figures_and_its_own_colab_link(opened, page_name):
    page = opened(page_name)
    outputs = page.locator("div.cell_output").all_inner_texts()
    assert any(text.strip() for text in outputs), "no executed output is shown"
    assert not any("oneDNN" in text or "cuInit" in text for text in outputs), "stderr is shown"

    figures = page.evaluate(
        "Array.from(document.querySelectorAll('div.cell_output img')).map(i => i.naturalWidth)"
    )
    assert len(figures) == image_outputs(ROOT / f"{page_name}.ipynb")
    assert all(width > 0 for width in figures), "a figure did not render"

    expected = colab_url(f"{page_name}.ipynb")
    colab = page.evaluate(
        "Array.from(document.querySelectorAll('a')).map(a => a.href)"
        ".filter(h => h.includes('colab.research'))"
    )
    assert colab and set(colab) == {expected}


@pytest.mark.parametrize("page_name", ["intro", *PAGES])
def test_internal_links_resolve(opened, page_name):
    page = opened(page_name)
    links = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    local = {unquote(urlparse(link).path) for link in links if link.startswith("file://")}
    assert local, "no internal links found"
    missing = sorted(path for path in local if not Path(path).exists())
    assert not missing, missing


@pytest.mark.parametrize("page_name", PAGES)
def test_code_and_tables_fit_the_page_without_scrolling_sideways(opened, page_name):
    """On laptop screens 1280 and 1440 pixels wide, no code cell, output, code block or
    table scrolls sideways (_static/fit-code.css: below 1440 px code is smaller and names
    in tables break)."""
    page = opened(page_name)
    try:
        for width in (1280, LAPTOP_SCREEN["width"]):
            page.set_viewport_size({**LAPTOP_SCREEN, "width": width})
            overflowing = page.evaluate(
                "Array.from(document.querySelectorAll("
                "'div.cell div.cell_input pre, div.cell div.cell_output pre, "
                "article div.highlight pre'))"
                ".filter(pre => pre.scrollWidth > pre.clientWidth + 1)"
                ".map(pre => pre.textContent.split('\\n')"
                ".reduce((a, b) => a.length > b.length ? a : b))"
            )
            assert not overflowing, f"at {width} px, code or output too wide: {overflowing}"
            tables = page.evaluate(
                "Array.from(document.querySelectorAll('div.pst-scrollable-table-container'))"
                ".filter(box => box.scrollWidth > box.clientWidth + 1)"
                ".map(box => `${box.scrollWidth - box.clientWidth} px too wide: `"
                " + box.querySelector('tr').textContent.trim().replace(/\\s+/g, ' '))"
            )
            assert not tables, f"at {width} px, tables wider than the page: {tables}"
    finally:
        page.set_viewport_size(LAPTOP_SCREEN)


PHONE_SCREEN = {"width": 390, "height": 844}


@pytest.mark.parametrize("page_name", PAGES)
def test_the_page_fits_a_phone(opened, page_name):
    """At a phone's 390 pixels, no page is wider than the screen: inline code wraps
    (_static/fit-code.css), and code blocks and wide tables scroll inside their own box."""
    page = opened(page_name)
    try:
        page.set_viewport_size(PHONE_SCREEN)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE_SCREEN["width"], f"{page_name} is {width} px wide at 390 px"
    finally:
        page.set_viewport_size(LAPTOP_SCREEN)


def test_the_server_pages_commands_are_on_its_first_screen(opened):
    """On a 1280 x 800 laptop screen, "The commands" and its first block of commands start
    on the first screen of the server page, before anything a reader must scroll to."""
    page = opened("on_your_own_machine")
    try:
        page.set_viewport_size({"width": 1280, "height": 800})
        page.evaluate("window.scrollTo(0, 0)")
        tops = page.evaluate(
            "(() => { const h = document.getElementById('the-commands');"
            " const block = h.parentElement.querySelector('div.highlight');"
            " return [h.getBoundingClientRect().top, block.getBoundingClientRect().top]; })()"
        )
        assert all(top < 800 for top in tops), f"the commands start at {tops} px"
    finally:
        page.set_viewport_size(LAPTOP_SCREEN)


def test_a_programs_copy_button_copies_the_program(opened):
    """On the quick start, the copy button of each program's cell copies the program as
    recipes/quickstart/ has it, without the %%writefile line (_config.yml's copybutton
    settings leave an empty first line there), so that pasted into a file it runs."""
    page = opened("chapters/quick_start")
    page.evaluate(  # ClipboardJS copies from a hidden text area: read it there
        "document.addEventListener('copy', e => { window.copied = e.target.value }, true)"
    )
    copied = []
    buttons = page.locator("div.cell_input button.copybtn")
    for index in range(buttons.count()):
        page.evaluate("window.copied = null")
        buttons.nth(index).click(force=True)
        copied.append(page.evaluate("window.copied") or "")
    for program in sorted((ROOT / "recipes" / "quickstart").glob("*.py")):
        text = program.read_text().rstrip("\n")
        assert "\n" + text in copied, f"no copy button on the quick start copies {program.name}"
        compile("\n" + text, program.name, "exec")  # what is pasted parses


def _calculator_grid(presets: dict) -> list[dict]:
    """The calculator's inputs over every preset (and one with tied embeddings and fewer
    key-value heads), GPU count, sharding, precision, optimizer and recomputation; each
    combination with one of the GPUs (the T4 too, which has no bfloat16), machine sizes,
    networks, accumulations and prices, in turn."""
    import itertools

    from utils.sizing import SHARDED

    shapes = [{k: v for k, v in preset.items() if k != "measured"} for preset in presets.values()]
    shapes.append({**shapes[-2], "tied": True, "kvHeads": 8})  # Llama 2 7B, changed
    grid = []
    combinations = itertools.product(
        shapes,
        (1, 8, 64),
        SHARDED,
        ("bf16", "autocast", "fp16", "fp32"),
        ("Adam", "SGD with momentum"),
        (False, True),
    )
    for k, (shape, gpus, stage, precision, optimizer, recompute) in enumerate(combinations):
        grid.append(
            {
                **shape,
                "gpus": gpus,
                "stage": stage,
                "precision": precision,
                "optimizer": optimizer,
                "recompute": recompute,
                "gpu": ("H100 SXM", "A100 80GB", "T4", "L4")[k % 4],
                "gpusPerMachine": (8, 4)[k // 4 % 2],
                "network": (3200, 100)[k // 8 % 2],
                "accumulation": (1, 4)[k // 16 % 2],
                "price": (None, 2.5)[k // 32 % 2],
                "mfu": 40,
                "busBandwidth": 370,
                "latency": 10,
                "margin": 10,
            }
        )
    return grid


def test_the_calculator_gives_the_books_formulas(opened):
    """_static/calculator.js against utils.sizing, over a grid of inputs in Chromium: the
    same presets and labels, the same numbers, the same messages."""
    from utils.sizing import LABELS, PRESETS, calculate, problem

    page = opened("before_you_rent_gpus")
    assert page.evaluate("window.bookCalculator.PRESETS") == PRESETS
    assert page.evaluate("window.bookCalculator.LABELS") == LABELS
    grid = _calculator_grid(PRESETS)
    answers = page.evaluate("grid => grid.map(window.bookCalculator.calculate)", grid)
    errors = 0
    for inputs, js in zip(grid, answers, strict=True):
        if problem(inputs):
            assert js == {"error": problem(inputs)}, inputs
            errors += 1
            continue
        python = calculate(inputs)
        for key in ("parameters", "fits", "bound", "machines", "globalBatch", "steps"):
            assert js[key] == python[key], (key, inputs)
        assert js["memory"] == pytest.approx(python["memory"], rel=1e-12), inputs
        step = {k: v for k, v in python["step"].items() if k != "hidden"}
        assert {k: js["step"][k] for k in step} == pytest.approx(step, rel=1e-12), inputs
        assert js["step"]["hidden"] == python["step"]["hidden"]
        numbers = ("unitsPerSecond", "bandwidth", "tokensPerStep", "hours", "gpuHours")
        for key in numbers:
            assert js[key] == pytest.approx(python[key], rel=1e-12), (key, inputs)
        if python["cost"] is None:
            assert js["cost"] is None, inputs
        else:
            assert js["cost"] == pytest.approx(python["cost"], rel=1e-12), inputs
    assert len(answers) == 6 * 3 * 4 * 4 * 2 * 2 and 0 < errors < len(answers) / 4


def _calculator_reopened(opened):
    """The calculator's page as a reader opens it (earlier tests changed its form)."""
    page = opened("before_you_rent_gpus")
    page.reload()
    page.wait_for_selector(".calculator-output p")
    return page


def test_the_calculator_opens_with_what_the_book_measured(opened):
    """The first answer: the recipes' transformer on an H100 at the MFU the H100 run
    measured, its row named beside the field, and about the run's tokens per second."""
    from utils.sizing import EVIDENCE, PRESETS

    page = _calculator_reopened(opened)
    preset = "The recipes' transformer (3.3 M)"
    assert page.input_value('[name="preset"]') == preset
    assert page.input_value('[name="gpu"]') == "H100 SXM"
    row = PRESETS[preset]["measured"]["row"]
    measured = next(
        json.loads(line)["result"]
        for line in (ROOT / EVIDENCE).read_text().splitlines()
        if json.loads(line)["step"] == row
    )
    assert float(page.input_value('[name="mfu"]')) == round(measured["mfu"] * 100, 2)
    note = page.inner_text('[data-note="mfu"]')
    assert note == f"Measured on one H100 SXM ({EVIDENCE.split('/')[-1]}, row “{row}”)."
    shown = float(page.get_attribute("[data-units-per-second]", "data-units-per-second"))
    assert shown == pytest.approx(measured["tokens_per_s_per_device"], rel=0.005)
    assert page.get_attribute("[data-bound]", "data-bound") == "inside a machine"
    page.select_option('[name="gpu"]', "A100 80GB")  # not where it was measured: said so
    assert "expect another share here" in page.inner_text('[data-note="mfu"]')
    page.fill('[name="mfu"]', "30")
    assert page.inner_text('[data-note="mfu"]').startswith("Your value.")


def test_the_calculator_names_the_link_that_bounds_the_step(opened):
    """Across two machines on one 100 Gb/s adapter the network bounds the all-reduce; the
    time and the cost follow the price a reader enters, and no price means no cost."""
    page = _calculator_reopened(opened)
    page.select_option('[name="preset"]', "Llama 2 7B")
    page.select_option('[name="stage"]', "ZeRO-3 / FSDP")
    page.fill('[name="gpus"]', "16")
    assert page.get_attribute("[data-bound]", "data-bound") == "inside a machine"
    page.fill('[name="network"]', "100")
    assert page.get_attribute("[data-bound]", "data-bound") == "between machines"
    assert "2 machines" in page.inner_text(".calculator-output")
    assert page.query_selector("[data-cost]") is None
    page.fill('[name="price"]', "3")
    hours = float(page.get_attribute("[data-gpu-hours]", "data-gpu-hours"))
    assert float(page.get_attribute("[data-cost]", "data-cost")) == pytest.approx(3 * hours)


def test_the_calculator_shows_small_models_in_mb(opened):
    page = _calculator_reopened(opened)
    page.select_option('[name="preset"]', "The book's CNN")
    memory = page.inner_text(".calculator-memory")
    assert "MB" in memory and "GB" not in memory
    total = page.inner_text(".calculator-memory tr:last-child td:last-child")
    assert float(total) > 0


def test_the_calculator_answers_bad_input_with_a_message(opened):
    """The form itself: a preset fills it and its total is Python's; each bad field gets
    Python's message, naming the field by its label, never a NaN."""
    from utils.sizing import PRESETS, calculate, problem

    page = _calculator_reopened(opened)
    preset = "Llama 2 70B"
    page.select_option('[name="preset"]', preset)
    shown = float(
        page.get_attribute(".calculator-memory tr:last-child td[data-bytes]", "data-bytes")
    )
    inputs = {
        **{k: v for k, v in PRESETS[preset].items() if k != "measured"},
        "accumulation": 1,
        "gpus": 8,
        "gpusPerMachine": 8,
        "stage": "replicated",
        "optimizer": "Adam",
        "recompute": False,
        "gpu": "H100 SXM",
        "busBandwidth": 370,
        "network": 3200,
        "latency": 10,
        "margin": 10,
        "price": None,
    }
    assert shown == pytest.approx(calculate(inputs)["total"], rel=1e-12)
    for field, value, python_value in (
        ("width", "8001", 8001),
        ("kvHeads", "7", 7),
        ("gpus", "0", 0),
        ("gpus", "12", 12),
        ("batch", "", float("nan")),
        ("mfu", "100", 100),
        ("network", "-1", -1),
        ("tokensToTrain", "0", 0),
        ("price", "-2", -2),
    ):
        before = page.input_value(f'[name="{field}"]')
        page.fill(f'[name="{field}"]', value)
        message = problem({**inputs, field: python_value})
        assert message and page.inner_text(".calculator-output") == message
        assert "NaN" not in page.inner_text("#gpu-calculator")
        page.fill(f'[name="{field}"]', before)  # whole again
        page.select_option('[name="preset"]', preset)
        assert page.query_selector(".calculator-error") is None
    page.select_option('[name="gpu"]', "T4")
    assert "T4 has no bfloat16: choose float16" in page.inner_text(".calculator-output")
    page.select_option('[name="precision"]', "fp16")
    assert page.query_selector(".calculator-error") is None
    page.fill('[name="gpus"]', "1e308")
    assert "too large or too small" in page.inner_text(".calculator-output")
