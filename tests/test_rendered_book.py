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
    """The calculator's inputs over every preset, GPU count, sharding, precision, optimizer,
    recomputation and two GPUs, with its default assumptions."""
    import itertools

    from utils.sizing import SHARDED

    grid = []
    for preset, gpus, stage, precision, optimizer, recompute, gpu in itertools.product(
        presets.values(),
        (1, 8, 64),
        SHARDED,
        ("bf16", "autocast", "fp32"),
        ("Adam", "SGD with momentum"),
        (False, True),
        ("A100 80GB", "H100 SXM"),
    ):
        grid.append(
            {
                **preset,
                "gpus": gpus,
                "stage": stage,
                "precision": precision,
                "optimizer": optimizer,
                "recompute": recompute,
                "gpu": gpu,
                "mfu": 0.4,
                "busBandwidth": 370e9,
                "latency": 10e-6,
                "margin": 0.1,
            }
        )
    return grid


def test_the_calculator_gives_the_books_formulas(opened):
    """_static/calculator.js against utils.sizing, over a grid of inputs in Chromium."""
    from utils.sizing import calculate

    page = opened("before_you_rent_gpus")
    grid = _calculator_grid(page.evaluate("window.bookCalculator.PRESETS"))
    answers = page.evaluate("grid => grid.map(window.bookCalculator.calculate)", grid)
    for inputs, js in zip(grid, answers, strict=True):
        python = calculate(inputs)
        assert js["parameters"] == python["parameters"] and js["fits"] == python["fits"]
        assert js["memory"] == pytest.approx(python["memory"], rel=1e-12), inputs
        step = {k: v for k, v in python["step"].items() if k != "hidden"}
        assert {k: js["step"][k] for k in step} == pytest.approx(step, rel=1e-12), inputs
        assert js["step"]["hidden"] == python["step"]["hidden"]
        assert js["unitsPerSecond"] == pytest.approx(python["unitsPerSecond"], rel=1e-12)
    assert len(answers) == 1152


def test_the_calculator_answers_bad_input_with_a_message(opened):
    """The form itself: a preset fills it and its total is Python's; a width the heads do
    not divide, zero GPUs or an empty batch get a message, never a NaN."""
    from utils.sizing import calculate

    page = opened("before_you_rent_gpus")
    page.select_option('[name="preset"]', "7B-shaped (32 x 4,096)")
    shown = float(
        page.get_attribute(".calculator-memory tr:last-child td[data-bytes]", "data-bytes")
    )
    preset = page.evaluate("window.bookCalculator.PRESETS['7B-shaped (32 x 4,096)']")
    inputs = {
        **preset,
        "gpus": 8,
        "stage": "replicated",
        "precision": "bf16",
        "optimizer": "Adam",
        "recompute": False,
        "gpu": "H100 SXM",
        "mfu": 0.4,
        "busBandwidth": 370e9,
        "latency": 10e-6,
        "margin": 0.1,
    }
    assert shown == pytest.approx(calculate(inputs)["total"], rel=1e-12)
    for field, value, message in (
        ("width", "4001", "not divisible by heads"),
        ("gpus", "0", "gpus must be a whole number"),
        ("batch", "", "batch must be a whole number"),
        ("gpus", "1e308", "too large or too small"),
    ):
        page.fill(f'[name="{field}"]', value)
        assert message in page.inner_text(".calculator-output")
        assert "NaN" not in page.inner_text("#gpu-calculator")
        page.select_option('[name="preset"]', "7B-shaped (32 x 4,096)")  # whole again
