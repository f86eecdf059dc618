"""Each chapter's committed notebook: the setup cell, the skeleton and its knobs, the
metadata kept, lines that fit the page, and outputs from one clean run."""

import ast
import re

import pytest
import yaml

from tests.helpers import (
    NOTEBOOKS,
    PYTORCH_CHAPTERS,
    ROOT,
    code_cells,
    load_notebook,
    source,
)
from tests.other_knobs import OTHER_KNOBS
from tests.output_policy import printed_numbers
from tools.chapter_costs import stated_minutes
from tools.run_chapters import CELL_METADATA, NOTEBOOK_METADATA

REPOSITORY_URL = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_devices_are_set_up_before_tensorflow_starts(path):
    """A chapter that distributes TensorFlow over devices sets them up with setup_devices()
    before anything imports TensorFlow or Keras; one that never does (a PyTorch chapter, the
    quick start, whose programs run in processes of their own) needs no such call."""
    cells = [source(c) for c in code_cells(load_notebook(path))]
    in_kernel = "\n".join(s for s in cells if not s.startswith("%%writefile"))
    if re.search(r"tf\.distribute\.|DEVICES\b", in_kernel):
        assert "setup_devices(" in in_kernel
    before = in_kernel.split("setup_devices(")[0] if "setup_devices(" in in_kernel else ""
    assert not re.search(r"import (tensorflow|keras)", before)
    assert re.findall(r'repository = "(.*)"', cells[0]) == [REPOSITORY_URL]
    assert "!git clone --quiet --depth 1 {repository} " in cells[0]


@pytest.mark.parametrize("name", PYTORCH_CHAPTERS)
def test_pytorch_chapters_set_up_pytorch_not_tensorflow(name):
    cells = [source(c) for c in code_cells(load_notebook(f"chapters/{name}.ipynb"))]
    assert "import torch" in cells[0] and "torch.manual_seed(" in cells[0]
    tf = r"import (tensorflow|keras)|setup_devices\("
    starts = [i for i, s in enumerate(cells) if re.search(tf, s)]
    before = cells[: starts[0] if starts else len(cells)]  # before the comparison, if any
    keras_helpers = r"\b(small_cnn|fit_model|make_dataset|batch_examples|read_image_folder)\b"
    assert not any(re.search(keras_helpers, s) for s in before)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_skeleton_and_parameters(path):
    notebook = load_notebook(path)
    markdown = "\n".join(source(c) for c in notebook["cells"] if c["cell_type"] == "markdown")
    assert "## Summary" in markdown and "## Exercises" in markdown
    tagged = [c for c in code_cells(notebook) if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1, "one cell tagged `parameters` holds the knobs"
    knobs = {
        name.id
        for node in ast.parse(source(tagged[0])).body
        if isinstance(node, ast.Assign)
        for name in ast.walk(node.targets[0])
        if isinstance(name, ast.Name)
    }
    # the second "Run all" turns these (tests.nbval_policy.RunAllAgain)
    other = OTHER_KNOBS.get(path.stem)
    assert other, f"give {path.stem} other knob values in tests/other_knobs.py"
    assert set(other) <= knobs, f"{set(other) - knobs} are not knobs of {path.stem}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_the_test_harness_stays_out_of_the_lesson(path):
    """Harness markers are cell tags, never comments the page shows; a cell whose output is
    not compared says why in its metadata (`why_not_compared`), which the page does not show;
    only an exercise's hidden solution may skip the reader's check (`nbval-skip`, with
    `why_skipped`: the full proof's second run executes it); the lesson's text does not talk
    about the book's tests."""
    notebook = load_notebook(path)
    for cell in notebook["cells"]:
        assert not re.search(r"NBVAL_|\bnbval\b|papermill|pytest", source(cell)), source(cell)
        ignored = "nbval-ignore-output" in cell["metadata"].get("tags", [])
        why = cell["metadata"].get("why_not_compared", "")
        assert ignored == bool(why), "tag nbval-ignore-output and give why_not_compared"
        assert not why or re.fullmatch(r"\S.{10,}\.", why), why
        tags = cell["metadata"].get("tags", [])
        if "nbval-skip" in tags:  # the reader's check skips it; the full proof runs it
            assert "hide-cell" in tags and source(cell).startswith("# Solution to exercise")
            assert re.fullmatch(r"\S.{10,}\.", cell["metadata"].get("why_skipped", ""))
        if cell["cell_type"] == "markdown":
            assert not re.search(r"\bCI\b|test suite|(?<![\w-])tests/", source(cell)), source(cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_notebooks_keep_only_what_the_book_needs(path):
    """Only the allowed metadata (no execution timestamps, no editor state, no Python version),
    and no stderr (TensorFlow's timestamped log lines, never shown): they change on every run
    and are not content (`python -m tools.run_chapters` drops them).
    The setup cell, the same in every chapter, is folded behind a toggle but still runs."""
    notebook = load_notebook(path)
    cells = code_cells(notebook)
    assert set(notebook["metadata"]) <= set(NOTEBOOK_METADATA), "run tools.run_chapters"
    assert "version" not in notebook["metadata"].get("language_info", {})
    assert all(set(c["metadata"]) <= set(CELL_METADATA) for c in notebook["cells"])
    streams = [o for c in cells for o in c["outputs"] if o["output_type"] == "stream"]
    assert not [o for o in streams if o["name"] == "stderr" or "\r" in "".join(o["text"])], (
        "stderr or progress-bar updates stored: run it with `python -m tools.run_chapters`"
    )
    assert "hide-input" in cells[0]["metadata"].get("tags", [])


LONGEST_CODE_LINE = 88  # what the theme shows unscrolled (tests/book/test_rendered_book.py)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_code_lines_fit_the_page(path):
    """Code lines, the setup cell's included, are at most LONGEST_CODE_LINE characters."""
    long_lines = [
        line
        for cell in code_cells(load_notebook(path))
        for line in "".join(cell["source"]).splitlines()
        if len(line) > LONGEST_CODE_LINE
    ]
    assert not long_lines, long_lines


#: A code cell a reader can hold (BOOK_STYLE.md): never over this many lines.
LONGEST_CODE_CELL = 60


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_code_cells_fit_a_reader(path):
    """No code cell is over LONGEST_CODE_CELL lines (a program shown whole, its %%writefile
    line included)."""
    lengths = [len(source(cell).splitlines()) for cell in code_cells(load_notebook(path))]
    long = [n for n in lengths if n > LONGEST_CODE_CELL]
    assert not long, f"code cells of {long} lines: split or shorten them (at most 60)"


# Where a printed line may run past the page: it quotes a library's own message as it is
# (an exception, a warning, TensorFlow's log). Such lines wrap on the page like prose.
QUOTED_MESSAGE = re.compile(r"\w(Error|Exception|Warning)\b|^INFO:tensorflow:|warned:")


def printed_text(output) -> str:
    return "".join(output.get("text") or output.get("data", {}).get("text/plain", ""))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_printed_lines_fit_the_page(path):
    """Printed lines are at most LONGEST_CODE_LINE characters, so that tables and columns
    keep their shape on the page; quoted library messages may be longer."""
    long_lines = [
        line
        for cell in code_cells(load_notebook(path))
        for output in cell["outputs"]
        for line in printed_text(output).splitlines()
        if len(line) > LONGEST_CODE_LINE and not QUOTED_MESSAGE.search(line)
    ]
    assert not long_lines, long_lines


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_outputs_come_from_one_clean_run(path):
    cells = code_cells(load_notebook(path))
    counts = [c["execution_count"] for c in cells]
    assert counts == list(range(1, len(cells) + 1)), "re-run the notebook top to bottom"
    for cell in cells:
        for output in cell["outputs"]:
            assert output["output_type"] != "error", source(cell)[:80]


def _asserted_comparisons(cell_source: str) -> tuple[set[float], bool]:
    """The constants a cell's assertions bound a value by from above (`x < 1e-5`,
    `1e-5 > x`), and whether one of them asserts a value exactly zero (`x == 0`)."""
    bounds, exact = set(), False
    if cell_source.startswith("%%"):  # a cell magic (%%writefile): not run as Python here
        return bounds, exact
    python = re.sub(r"(?m)^(\s*)[!%].*$", r"\1pass", cell_source)  # shell and line magics
    for node in ast.walk(ast.parse(python)):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            lefts = [compare.left, *compare.comparators[:-1]]
            for left, op, right in zip(lefts, compare.ops, compare.comparators):
                if isinstance(op, ast.Gt | ast.GtE):  # `1e-5 > x` reads as `x < 1e-5`
                    left, right = right, left
                constant = _number(right)
                if constant is None or _number(left) is not None:
                    continue  # not a value compared with a constant
                if isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE):
                    bounds.add(constant)
                exact |= isinstance(op, ast.Eq) and constant == 0
    return bounds, exact


def _number(node: ast.expr) -> float | None:
    """The value of a numeric constant (booleans are not numbers here), else None."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_printed_zeros_are_asserted_exact_or_bounded(path):
    """Exactness lives in assertions (tests/output_policy.py). A cell that prints a zero in
    scientific notation either asserts a result `== 0`, and its zero is compared exactly,
    or gives the bound it asserts as its `difference_bound`, and any difference at most that
    bound matches (the assertion may sit in the collapsed cell right after it, the proof
    behind the page); a `difference_bound` is always one of the cell's asserted bounds. The
    bound holds for the whole cell: each difference it prints must be asserted at most the
    bound or exactly (CONTRIBUTING.md), which a reviewer checks and this test cannot."""
    cells = code_cells(load_notebook(path))
    for cell, following in zip(cells, [*cells[1:], None]):
        bound = cell["metadata"].get("difference_bound")
        checked = source(cell)
        if following is not None and "hide-input" in following["metadata"].get("tags", []):
            checked += "\n" + source(following)  # the proof behind the page, collapsed
        bounds, exact = _asserted_comparisons(checked)
        if bound is not None:
            assert bound in bounds, f"difference_bound {bound} is not asserted: {bounds}"
        zeros = [
            token
            for output in cell["outputs"]
            for line in printed_text(output).splitlines()
            for token, kind in printed_numbers(line)
            if kind == "zero"
        ]
        if (
            zeros
            and bound is None
            and not set(cell["metadata"].get("tags", [])) & {"nbval-ignore-output"}
        ):
            assert exact, f"prints {zeros} but asserts no `== 0`: {source(cell)[:200]}"


#: What a reader of the whole book meets (#63, CONTRIBUTING.md "The proof behind the page"):
#: `assert` lines the pages show, hedges ("we expect", "(not measured)") in the chapters and
#: pages, and the chapters' stated reading minutes. Lower a limit when the book gets lighter.
LEAN = {"visible assert lines": 57, "hedges": 20, "reading minutes": 430}
COLLAPSED = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
NOT_THE_BOOK = {"README", "CONTRIBUTING"}  # pages for authors, not readers


def test_the_book_stays_lean():
    notebooks = [load_notebook(path) for path in NOTEBOOKS]
    visible = sum(
        len(re.findall(r"^\s*assert\b", source(cell), flags=re.MULTILINE))
        for notebook in notebooks
        for cell in code_cells(notebook)
        if not COLLAPSED & set(cell["metadata"].get("tags", []))
    )
    pages = [
        "\n".join(source(c) for c in notebook["cells"] if c["cell_type"] == "markdown")
        for notebook in notebooks
    ] + [page.read_text() for page in ROOT.glob("*.md") if page.stem not in NOT_THE_BOOK]
    hedges = sum(len(re.findall(r"we expect|\(not measured\)", p, re.I)) for p in pages)
    minutes = sum(stated_minutes(notebook) for notebook in notebooks)
    weight = {"visible assert lines": visible, "hedges": hedges, "reading minutes": minutes}
    assert all(weight[k] <= LEAN[k] for k in LEAN), f"{weight}, at most {LEAN}"


#: words that narrate the page's machinery (BOOK_STYLE, "What the reader takes away")
NARRATION = re.compile(r"collapsed|hidden cell", re.IGNORECASE)
BOOK_PAGES = [p.relative_to(ROOT) for p in sorted(ROOT.glob("*.md")) if p.stem not in NOT_THE_BOOK]


@pytest.mark.parametrize("path", [*NOTEBOOKS, *BOOK_PAGES], ids=str)
def test_the_prose_does_not_say_which_cells_are_collapsed(path):
    """The theme shows a collapsed cell as "Show code cell source"; the prose says what the
    code does or what is checked, never that a cell is collapsed or hidden."""
    if path.suffix == ".ipynb":
        cells = load_notebook(path)["cells"]
        texts = [source(c) for c in cells if c["cell_type"] == "markdown"]
    else:
        texts = [(ROOT / path).read_text()]
    found = [line.strip() for text in texts for line in text.split("\n") if NARRATION.search(line)]
    assert not found, (
        f"{path}: say what the code does or what is checked, not which cells are collapsed "
        "or hidden ('the collapsed cell checks both' -> 'both are checked', or drop it; "
        "for an exercise, 'The solution follows the exercises.'): " + " | ".join(found)
    )
