"""The book's structure: table of contents, Colab links, setup cells and committed outputs."""

import ast
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.helpers import colab_url, run_fresh, temporary_files_in_one_folder
from tests.other_knobs import OTHER_KNOBS
from tools.run_chapters import CELL_METADATA, NOTEBOOK_METADATA

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
NOTEBOOKS = sorted(p.relative_to(ROOT) for p in (ROOT / "chapters").glob("*.ipynb"))


def toc_files():
    files = [TOC["root"]]
    for entry in TOC.get("chapters", []):
        files.append(entry["file"])
    return files


def load(path):
    return json.loads((ROOT / path).read_text())


def code_cells(notebook):
    return [c for c in notebook["cells"] if c["cell_type"] == "code"]


def source(cell):
    return "".join(cell["source"])


def test_there_are_chapters():
    assert NOTEBOOKS, "no notebooks in chapters/"


def test_toc_and_chapters_agree():
    listed = set(toc_files())
    on_disk = {p.with_suffix("").as_posix() for p in NOTEBOOKS}
    assert on_disk - listed == set(), "notebooks missing from _toc.yml"
    for name in listed:
        assert any((ROOT / name).with_suffix(s).exists() for s in (".ipynb", ".md")), name


def test_config_builds_from_committed_outputs():
    assert CONFIG["execute"]["execute_notebooks"] == "off"
    assert CONFIG["sphinx"]["config"]["nb_output_stderr"] == "remove"
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"


def test_build_reads_only_the_book(tmp_path):
    """Sphinx reads every Markdown file under the root, hidden folders included, and with
    -W a stray one fails the build ("document isn't included in any toctree"): the
    README.md that pytest writes into .pytest_cache (when its cache is on) did."""
    from sphinx.util.matching import get_matching_files

    stray = [
        ".pytest_cache/README.md",
        ".venv/lib/pkg/README.md",
        "_build/html/page.md",
        "chapters/.ipynb_checkpoints/01-checkpoint.ipynb",
        "tests/notes.md",
        "README.md",
        "CONTRIBUTING.md",
    ]
    for name in (*stray, "intro.md", "chapters/01.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    read = set(get_matching_files(tmp_path, exclude_patterns=CONFIG["exclude_patterns"]))
    assert read == {"intro.md", "chapters/01.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_title_and_colab_badge_point_at_this_notebook(path):
    first = load(path)["cells"][0]
    assert first["cell_type"] == "markdown" and source(first).startswith("# ")
    links = re.findall(r"https://colab\.research\.google\.com/github/[^)\s]+", source(first))
    assert links == [colab_url(path.as_posix())]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_first_code_cell_sets_up_devices_before_tensorflow(path):
    setup = source(code_cells(load(path))[0])
    assert "setup_devices(" in setup
    before = setup.split("setup_devices(")[0]
    assert "import tensorflow" not in before and "import keras" not in before
    assert re.findall(r'repository = "(.*)"', setup) == [CONFIG["repository"]["url"]]
    assert "!git clone --quiet --depth 1 {repository} " in setup


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_notebooks_keep_only_what_the_book_needs(path):
    """Only the allowed metadata (no execution timestamps, no editor state, no Python version),
    and no stderr (TensorFlow's timestamped log lines, never shown): they change on every run
    and are not content (`python -m tools.run_chapters` drops them).
    The setup cell, the same in every chapter, is folded behind a toggle but still runs."""
    notebook = load(path)
    cells = code_cells(notebook)
    assert set(notebook["metadata"]) <= set(NOTEBOOK_METADATA), "run tools.run_chapters"
    assert "version" not in notebook["metadata"].get("language_info", {})
    assert all(set(c["metadata"]) <= set(CELL_METADATA) for c in notebook["cells"])
    streams = [o for c in cells for o in c["outputs"] if o["output_type"] == "stream"]
    assert not [o for o in streams if o["name"] == "stderr" or "\r" in "".join(o["text"])], (
        "stderr or progress-bar updates stored: run it with `python -m tools.run_chapters`"
    )
    assert "hide-input" in cells[0]["metadata"].get("tags", [])


LONGEST_CODE_LINE = 88  # what the theme shows unscrolled (tests/test_rendered_book.py)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_code_lines_fit_the_page(path):
    """Code lines, the setup cell's included, are at most LONGEST_CODE_LINE characters."""
    long_lines = [
        line
        for cell in code_cells(load(path))
        for line in "".join(cell["source"]).splitlines()
        if len(line) > LONGEST_CODE_LINE
    ]
    assert not long_lines, long_lines


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
        for cell in code_cells(load(path))
        for output in cell["outputs"]
        for line in printed_text(output).splitlines()
        if len(line) > LONGEST_CODE_LINE and not QUOTED_MESSAGE.search(line)
    ]
    assert not long_lines, long_lines


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_outputs_come_from_one_clean_run(path):
    cells = code_cells(load(path))
    counts = [c["execution_count"] for c in cells]
    assert counts == list(range(1, len(cells) + 1)), "re-run the notebook top to bottom"
    for cell in cells:
        for output in cell["outputs"]:
            assert output["output_type"] != "error", source(cell)[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_skeleton_parameters_and_ignored_outputs(path):
    notebook = load(path)
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
    other = OTHER_KNOBS.get(path.stem)  # the second "Run all" turns these (conftest.RunAllAgain)
    assert other, f"give {path.stem} other knob values in tests/other_knobs.py"
    assert set(other) <= knobs, f"{set(other) - knobs} are not knobs of {path.stem}"
    for cell in code_cells(notebook):
        lines = source(cell).splitlines() + [""]
        for line, following in zip(lines, lines[1:]):
            if "NBVAL_IGNORE_OUTPUT" in line:
                assert line == "# NBVAL_IGNORE_OUTPUT", "nbval reads the marker only alone"
                assert re.fullmatch(r"# why: \S.{10,}", following), "give the reason below it"


def pins(path):
    lines = (ROOT / path).read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))


def test_every_requirement_is_pinned():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    packages = [line for line in lines if line and not line.startswith("#")]
    assert all("==" in line for line in packages), packages
    assert pins("requirements.txt")["jupyter-book"].startswith("1.")


def test_the_colab_runtime_environment_takes_colab_s_versions():
    """CI's Colab-runtime environment: every package it names unpinned is pinned by Colab's
    constraints, and those pin the versions Colab's runtime reports (tools/colab_constraints)."""
    colab = {name.lower(): version for name, version in pins("constraints-colab.txt").items()}
    text = (ROOT / "requirements-colab-runtime.txt").read_text()
    lines = [line.strip() for line in text.splitlines()]
    names = [line for line in lines if line and not line.startswith(("#", "-c"))]
    assert "-c constraints-colab.txt" in lines
    assert [n for n in names if "==" not in n and n.lower() not in colab] == []
    assert {name: colab[name] for name in ("tensorflow", "keras", "numpy", "jax", "mlxtend")} == {
        "tensorflow": "2.20.0",
        "keras": "3.13.2",
        "numpy": "2.1.3",
        "jax": "0.7.2",
        "mlxtend": "0.23.4",
    }
    assert "torch" not in colab  # a CUDA build on Colab: the book's CPU wheel stands in


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"<!-- test-command -->\s*```\w*\n(.+?)\n```", readme, re.S).group(1)
    ci = (ROOT / ".ci" / "run").read_text()
    assert command.strip() in ci
    # the outputs were made with the default thread count and TensorFlow's own kernels; CI
    # checks them under another thread count and oneDNN's kernels
    assert "export TF_NUM_INTRAOP_THREADS=1 OMP_NUM_THREADS=1 TF_ENABLE_ONEDNN_OPTS=1" in ci


class _Listing:
    def __init__(self, returncode, stdout):
        self.returncode, self.stdout = returncode, stdout


@pytest.mark.parametrize(
    "behaviour, expected",
    [
        (lambda *a, **k: _Listing(0, "GPU 0: Tesla T4 (UUID: x)\nGPU 1: Tesla T4 (UUID: y)\n"), 2),
        (lambda *a, **k: _Listing(9, "NVIDIA-SMI has failed"), 0),
        (lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError()), 0),
    ],
)
def test_gpu_machines_are_detected_for_nbval_lax_mode(behaviour, expected):
    from tests.helpers import count_nvidia_gpus

    assert count_nvidia_gpus(run=behaviour) == expected


def test_the_suite_keeps_temporary_files_in_one_folder_it_removes(monkeypatch):
    assert Path(os.environ["TMPDIR"]).name.startswith("book-tests-")  # set by conftest.py
    monkeypatch.setenv("TMPDIR", os.environ["TMPDIR"])  # put back after this test
    cleanups = []
    folder = Path(temporary_files_in_one_folder(SimpleNamespace(add_cleanup=cleanups.append)))
    made_by_a_child = Path(run_fresh("import tempfile; print(tempfile.mkdtemp())").stdout.strip())
    assert made_by_a_child.parent == folder
    for cleanup in cleanups:
        cleanup()
    assert not folder.exists()


def test_every_utils_module_has_its_own_test_file():
    """The tests mirror the package: utils/NAME.py is tested in tests/test_NAME.py."""
    modules = {p.stem for p in (ROOT / "utils").glob("*.py") if p.stem != "__init__"}
    missing = sorted(m for m in modules if not (ROOT / "tests" / f"test_{m}.py").exists())
    assert not missing, f"no tests/test_<module>.py for: {missing}"
