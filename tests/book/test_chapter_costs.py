"""tools.chapter_costs: every chapter, and every Markdown page that states its reading time,
opens with the time its text gives."""

import pytest

from tests.helpers import NOTEBOOKS, load_notebook
from tools.chapter_costs import (
    book_pages,
    page_reading_minutes,
    page_stated_minutes,
    reading_minutes,
    stated_minutes,
)

#: pages a reader plans time for: they must state it
MUST_STATE = {"on_your_own_machine.md", "gpu_results.md"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_each_chapter_opens_with_its_reading_time(path):
    notebook = load_notebook(path)
    computed = reading_minutes(notebook)
    assert stated_minutes(notebook) == computed, (
        f"{path}: its first cell should say 'About {computed} minutes to read' "
        "(python -m tools.chapter_costs)"
    )


@pytest.mark.parametrize("path", book_pages(), ids=lambda path: path.name)
def test_a_page_that_states_its_reading_time_states_the_computed_one(path):
    stated, computed = page_stated_minutes(path), page_reading_minutes(path)
    if stated is None:
        assert path.name not in MUST_STATE, f"{path.name} should state its reading time"
        return
    assert stated == computed, (
        f"{path.name}: its opening should say 'About {computed} minutes to read' "
        "(python -m tools.chapter_costs)"
    )


def test_the_pages_that_must_state_a_time_are_the_books():
    assert MUST_STATE <= {path.name for path in book_pages()}
    assert "README.md" not in {path.name for path in book_pages()}


def test_reading_time_counts_prose_visible_code_and_output():
    def cell(kind, text, tags=(), outputs=()):
        return {
            "cell_type": kind,
            "source": text,
            "metadata": {"tags": list(tags)},
            "outputs": list(outputs),
        }

    prose = cell("markdown", "word " * 2000)  # 10 minutes
    code = cell("code", "x\n" * 150)  # 10 minutes
    hidden = cell("code", "y\n" * 600, tags=["hide-input"])  # not read
    printed = cell("code", "", outputs=[{"text": "line\n" * 400}])  # 10 minutes
    notebook = {"cells": [prose, code, hidden, printed]}
    assert reading_minutes(notebook) == 30
    assert reading_minutes({"cells": [cell("markdown", "a few words")]}) == 5  # at least 5


def test_a_pages_reading_time_counts_prose_code_blocks_and_included_lines(tmp_path):
    shown, not_shown = "    x = 1\n" * 74, "    y = 2\n" * 500
    (tmp_path / "program.py").write_text(
        f"import os\n\n\ndef shown():\n{shown}\n\ndef not_shown():\n{not_shown}"
    )
    (tmp_path / "printed.txt").write_text("a line it printed\n" * 200)
    parts = [
        "# Title\n\n*About 30 minutes to read.*\n",
        "word " * 2000,  # 10 minutes
        "(a-target)=\n<!-- " + "hidden " * 3000 + "-->",  # not shown
        "```bash\n" + "echo\n" * 75 + "```",  # 5 minutes
        "```{literalinclude} program.py\n:language: python\n:pyobject: shown\n```",  # 5
        "```{literalinclude} printed.txt\n:language: text\n```",  # output: 5 minutes
        "```{note}\n" + "word " * 1000 + "\n```",  # prose: 5 minutes
        "## A section\n\n*About 5 minutes to read* is not the opening.",
    ]
    page = tmp_path / "page.md"
    page.write_text("\n\n".join(parts) + "\n")
    assert page_reading_minutes(page) == 30
    assert page_stated_minutes(page) == 30
    page.write_text("# Title\n\nA few words.\n\n## Then\n\n*About 5 minutes to read.*\n")
    assert page_reading_minutes(page) == 5 and page_stated_minutes(page) is None
