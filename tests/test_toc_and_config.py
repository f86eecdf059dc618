"""The book as Jupyter Book builds it: table of contents, configuration, what the build
reads, and each chapter's title with its Colab link."""

import re

import pytest
import yaml

from tests.helpers import NOTEBOOKS, ROOT, colab_url, load_notebook, source, toc_pages

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())


def toc_files():
    return [TOC["root"], *toc_pages()]


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
    first = load_notebook(path)["cells"][0]
    assert first["cell_type"] == "markdown" and source(first).startswith("# ")
    links = re.findall(r"https://colab\.research\.google\.com/github/[^)\s]+", source(first))
    assert links == [colab_url(path.as_posix())]


def test_the_chapters_are_numbered_in_the_order_the_prose_numbers_them():
    """The prose says "chapter N": the rendered book numbers the notebooks 1, 2, ... in the
    order of their file names, across the numbered parts."""
    numbered = [
        entry["file"] for part in TOC["parts"] if part.get("numbered") for entry in part["chapters"]
    ]
    assert numbered == [p.with_suffix("").as_posix() for p in NOTEBOOKS]
