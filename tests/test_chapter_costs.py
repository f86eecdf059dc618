"""tools.chapter_costs: every chapter opens with the reading time its text gives."""

import pytest

from tests.helpers import NOTEBOOKS, load_notebook
from tools.chapter_costs import reading_minutes, stated_minutes


@pytest.mark.parametrize("path", NOTEBOOKS, ids=str)
def test_each_chapter_opens_with_its_reading_time(path):
    notebook = load_notebook(path)
    computed = reading_minutes(notebook)
    assert stated_minutes(notebook) == computed, (
        f"{path}: its first cell should say 'About {computed} minutes to read' "
        "(python -m tools.chapter_costs)"
    )


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
