"""tools.set_repository: one command points the book at its published repository."""

import json
import shutil

import pytest
import yaml

from tests.helpers import ROOT
from tools.set_repository import main, set_repository


@pytest.fixture
def book_copy(tmp_path):
    shutil.copy(ROOT / "_config.yml", tmp_path)
    shutil.copytree(
        ROOT / "chapters",
        tmp_path / "chapters",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints"),
    )
    return tmp_path


def test_rewrites_config_badges_and_clone_urls(book_copy):
    old = yaml.safe_load((book_copy / "_config.yml").read_text())["repository"]["url"]
    new = "https://github.com/example-org/dp-book"
    changed = set_repository(new, book_copy)
    notebooks = sorted((book_copy / "chapters").glob("*.ipynb"))
    assert set(changed) == {book_copy / "_config.yml", *notebooks}
    assert yaml.safe_load((book_copy / "_config.yml").read_text())["repository"]["url"] == new
    for path in notebooks:
        text = path.read_text()
        assert old not in text and old.removeprefix("https://github.com/") not in text
        cells = json.loads(text)["cells"]
        assert (
            f"colab.research.google.com/github/example-org/dp-book/blob/main/chapters/{path.name}"
            in "".join(cells[0]["source"])
        )
        setup = next("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert f'repository = "{new}"' in setup
    assert set_repository(new, book_copy) == []  # a second run changes nothing


@pytest.mark.parametrize(
    "bad",
    [
        "github.com/a/b",
        "https://github.com/a/b/",
        "https://github.com/a/b.git",
        "https://gitlab.com/a/b",
        "https://github.com/a",
    ],
)
def test_refuses_urls_it_cannot_use(book_copy, bad):
    before = (book_copy / "_config.yml").read_text()
    with pytest.raises(ValueError, match="https://github.com/OWNER/NAME"):
        set_repository(bad, book_copy)
    assert (book_copy / "_config.yml").read_text() == before


def test_command_line_reports_a_bad_url(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["https://example.com/x"])
    assert exit_info.value.code == 2
    assert "expected a URL of the form https://github.com/OWNER/NAME" in capsys.readouterr().err
