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
    order of their file names, across the numbered parts; the appendix's are not numbered."""
    numbered = [
        entry["file"] for part in TOC["parts"] if part.get("numbered") for entry in part["chapters"]
    ]
    chapters = [p.with_suffix("").as_posix() for p in NOTEBOOKS if p.name[:2].isdigit()]
    assert numbered == chapters


# "chapter 6", "chapters 6 and 9", "chapters 6, 9 and 12" (a range, "chapters 2 to 12",
# stays text); code, links and headings are left alone
NAMED_CHAPTERS = re.compile(r"\b[Cc]hapters? (\d+(?:(?:, | and | or )\d+)*)\b(?! to )")
NOT_PROSE = re.compile(r"\{(?:doc|ref|term)\}`[^`]*`|`[^`\n]*`|\[[^\]]*\]\([^)]*\)")


def prose_lines(markdown: str) -> list[str]:
    """The lines of `markdown` outside code blocks and headings; a MyST directive's body
    (```{dropdown} ... ```) is prose."""
    lines, fences = [], []  # open fences: (backticks, whether a code block)
    for line in markdown.split("\n"):
        fence = re.match(r"\s*(`{3,})(.*)$", line)
        if fence and fences and fences[-1][0] == fence[1] and not fence[2].strip():
            fences.pop()
        elif fence and not (fences and fences[-1][1]):
            fences.append((fence[1], not fence[2].strip().startswith("{")))
        elif not any(code for _, code in fences) and not line.lstrip().startswith("#"):
            lines.append(line)
    return lines


def unlinked_chapters(markdown: str, own: int | None) -> list[str]:
    """The mentions of other chapters in `markdown` that are not links."""
    prose = NOT_PROSE.sub("", "\n".join(prose_lines(markdown)))  # a link may span lines
    return [
        m.group(0)
        for m in NAMED_CHAPTERS.finditer(prose)
        if any(int(n) != own for n in re.split(r", | and | or ", m.group(1)))
    ]


def chapter_number(path) -> int | None:
    """The number of the chapter in `path`; None for the appendix's notebooks."""
    return int(path.name[:2]) if path.name[:2].isdigit() else None


def test_every_chapter_the_prose_names_is_a_link():
    """A reader can follow every "chapter N" of the chapters and the book's pages."""
    found = {}
    for path in NOTEBOOKS:
        for cell in load_notebook(path)["cells"]:
            if cell["cell_type"] == "markdown":
                found.setdefault(path.name, []).extend(
                    unlinked_chapters(source(cell), chapter_number(path))
                )
    for page in (
        "intro.md",
        "glossary.md",
        "beyond_data_parallelism.md",
        "known_breakages.md",
        "on_your_own_machine.md",
        "gpu_results.md",
        "code_you_will_find_online.md",
    ):
        found[page] = unlinked_chapters((ROOT / page).read_text(), None)
    assert not {name: mentions for name, mentions in found.items() if mentions}, (
        "write them as {doc}`chapter N <NN_name>` (chapters/NN_name from the book's root)"
    )


def test_unlinked_chapters_are_found_outside_code_and_links():
    text = "chapter 7, chapters 3 and 9, `chapter 2`, {doc}`chapter 4 <04_x>`, chapter 5"
    text += "\n# chapter 6\n```python\n# chapter 8\n```\n```{dropdown} Hint\nchapter 10\n```"
    assert unlinked_chapters(text, own=5) == ["chapter 7", "chapters 3 and 9", "chapter 10"]


# {doc}`chapter 6 <06_pytorch_dp_ddp>`, {doc}`Chapters 6 <chapters/06_x>`, {doc}`6 <06_x>`
NUMBERED_LINK = re.compile(r"\{doc\}`(?:[Cc]hapters?\s+)?(\d+)\s+<(?:\.\./)?(?:chapters/)?(\d\d)_")


def test_every_chapter_link_names_the_chapter_it_points_to():
    """After a renumbering, "chapter 13" must still lead to chapter 13."""
    pages = [
        (path.name, source(cell)) for path in NOTEBOOKS for cell in load_notebook(path)["cells"]
    ]
    pages += [(page.name, page.read_text()) for page in ROOT.glob("*.md")]
    wrong = [
        (name, m.group(0))
        for name, text in pages
        for m in NUMBERED_LINK.finditer(text)
        if int(m.group(1)) != int(m.group(2))
    ]
    assert not wrong, "a link's text names another chapter than its target"
    assert NUMBERED_LINK.findall("{doc}`chapter 6\n<06_x>`, {doc}`13 <chapters/12_y>`") == [
        ("6", "06"),
        ("13", "12"),
    ]
