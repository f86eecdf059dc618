"""The book as Jupyter Book builds it: table of contents, configuration, what the build
reads, and each chapter's title with its Colab link."""

import posixpath
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


# {doc}`text <target>` or {doc}`target`; a target is relative to the linking page's folder
DOC_LINK = re.compile(r"\{doc\}`(?:([^`<]*?)\s*<([^>`]+)>|([^`<]+))`")


def doc_links(markdown: str, folder: str = "") -> list[tuple[str | None, str]]:
    """(the link's own text, or None; its target from the book's root) of every {doc} link."""
    links = []
    for m in DOC_LINK.finditer(markdown):
        text, target = (m[1], m[2]) if m[2] else (None, m[3])
        links.append((text, posixpath.normpath(posixpath.join(folder, target.strip()))))
    return links


def opening(page: str) -> str:
    """What a page opens with: a chapter's first cell, a Markdown page's text before its
    first section (`page` as _toc.yml names it)."""
    if (ROOT / f"{page}.ipynb").exists():
        return source(load_notebook(f"{page}.ipynb")["cells"][0])
    return re.split(r"^## ", (ROOT / f"{page}.md").read_text(), maxsplit=1, flags=re.M)[0]


def assumed_pages(text: str, folder: str) -> list[set[str]]:
    """What the "Assumes ..." clause of `text` (up to the end of its sentence or its first
    semicolon) requires: one set of pages per requirement, several where it says "or"."""
    clause = (re.split(r"\bAssumes\s+", text, maxsplit=1) + [""])[1]
    masked = DOC_LINK.sub(lambda m: "L" * len(m[0]), clause)  # a link's dots end nothing
    end = re.search(r";|\.(?=\s|\*|$)", masked)
    clause, masked = clause[: end.start() if end else None], masked[: end.start() if end else None]
    assert not re.search(r"\b\d+\b", masked), f"name each assumed chapter as a link: {clause!r}"
    links = list(DOC_LINK.finditer(clause))
    required: list[set[str]] = []
    for i, link in enumerate(links):
        (_, target), alternative = doc_links(link[0], folder)[0], False
        if i:
            alternative = re.fullmatch(r"\s+or\s+", clause[links[i - 1].end() : link.start()])
        if alternative:
            required[-1].add(target)
        else:
            required.append({target})
    return required


def test_an_assumes_clause_lists_its_requirements():
    text = (
        "*About 5 minutes. Assumes\nchapter {doc}`3 <03_a>` or {doc}`4 <04_b>`, "
        "{doc}`chapter 6 <06_c>` and {doc}`../intro`; {doc}`chapter 5 <05_d>` helps.*"
    )
    assert assumed_pages(text, "chapters") == [
        {"chapters/03_a", "chapters/04_b"},
        {"chapters/06_c"},
        {"intro"},
    ]
    assert assumed_pages("Assumes Keras `fit`. Skip it ({doc}`6 <06_c>`).", "chapters") == []


QUICK_START = "chapters/quick_start"
# "- **PyTorch** (2 h 40): {doc}`6 <chapters/06_pytorch_dp_ddp>` (DDP), ..." up to the next
# item or the end of the list
ROUTE = re.compile(
    r"^- \*\*(?P<name>[^*]+)\*\* \((?P<time>[^)]+)\): (?P<pages>.*?)(?=^- |^$)", re.M | re.S
)


def front_page_routes() -> dict[str, tuple[str, list[str]]]:
    """The front page's reading routes: name -> (its stated time, its pages in order, the
    quick start first)."""
    section = (ROOT / "intro.md").read_text().split("## A route for each reader")[1]
    section = section.split("\n## ")[0]
    return {
        m["name"]: (m["time"], [QUICK_START] + [target for _, target in doc_links(m["pages"])])
        for m in ROUTE.finditer(section)
    }


def route_time(minutes: int) -> str:
    """How the front page writes a route's time: "45 minutes", "2 h", "1 h 20", "2 h 05"."""
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{minutes} minutes"
    return f"{hours} h {rest:02d}" if rest else f"{hours} h"


def test_the_front_page_says_how_route_times_are_computed():
    from tools.chapter_costs import (
        CODE_LINES_PER_MINUTE,
        OUTPUT_LINES_PER_MINUTE,
        WORDS_PER_MINUTE,
    )

    section = (ROOT / "intro.md").read_text().split("## A route for each reader")[1]
    words = " ".join(section.split("\n- ")[0].split())  # the paragraph before the routes
    assert "Each route starts with the {doc}`quick start <chapters/quick_start>`" in words
    for rate in (
        f"{WORDS_PER_MINUTE} words",
        f"{CODE_LINES_PER_MINUTE} lines of code",
        f"{OUTPUT_LINES_PER_MINUTE} printed lines",
    ):
        assert rate in words, f"the front page should say how times are computed: {rate!r}"
    assert len(front_page_routes()) >= 4
    assert [route_time(m) for m in (45, 60, 80, 125)] == ["45 minutes", "1 h", "1 h 20", "2 h 05"]


@pytest.mark.parametrize("name", sorted(front_page_routes()))
def test_each_route_reads_a_chapter_after_the_chapters_it_assumes(name):
    """BOOK_STYLE: a chapter's "Assumes" line is the order every route keeps."""
    _, pages = front_page_routes()[name]
    book = set(toc_files())
    for i, page in enumerate(pages):
        for needed in assumed_pages(opening(page), posixpath.dirname(page)):
            needed &= book  # what is not a page of the book, no route can give
            assert not needed or needed & set(pages[:i]), (
                f"route {name!r} reads {page} without {' or '.join(sorted(needed))} before "
                f"it, which {page} assumes: add it earlier, or drop {page}"
            )


@pytest.mark.parametrize("name", sorted(front_page_routes()))
def test_each_route_states_the_sum_of_its_pages_reading_times(name):
    stated, pages = front_page_routes()[name]
    times = {}
    for page in pages:
        found = re.search(r"About (\d+) minutes to read", opening(page))
        assert found, f"{page} states no reading time, so route {name!r} cannot count it"
        times[page] = int(found[1])
    total = sum(times.values())
    assert stated == route_time(total), (
        f"route {name!r} should say ({route_time(total)}), the sum of {times}"
    )
    assert total <= 180, f"route {name!r} takes {route_time(total)}: at most 3 hours"


def h1(page: str) -> str:
    first = opening(page).lstrip().split("\n")[0]
    assert first.startswith("# "), f"{page} opens with no title"
    return first[2:].strip()


def test_a_page_the_front_page_names_has_one_title():
    """The front page's link (its text, or the page's title where it has none), the
    sidebar (_toc.yml) and the page's own title name a page alike. Links by number
    ("chapter 6", "appendix") and the chapters' table (their full titles beside the
    sidebar's numbered short ones) are not names."""
    titles = {
        entry["file"]: entry.get("title") for part in TOC["parts"] for entry in part["chapters"]
    }
    differ = []
    for text, page in doc_links((ROOT / "intro.md").read_text()):
        if text is None and (ROOT / f"{page}.ipynb").exists():
            continue
        if text is not None and re.fullmatch(r"(?:[Cc]hapters? )?\d+|appendix", text):
            continue
        names = {text or h1(page), titles.get(page) or h1(page), h1(page)}
        if len({" ".join(n.replace("`", "").casefold().split()) for n in names}) > 1:
            differ.append((page, sorted(names)))
    assert not differ, (
        f"name each page alike on the front page, in _toc.yml and in its title: {differ}"
    )
