"""ruff, the linter and formatter configured in pyproject.toml (and chapters/ruff.toml for the
notebooks' code cells), finds nothing: `ruff check --fix .` and `ruff format .` fix most of
what it reports."""

import subprocess
import sys

import pytest

from tests.helpers import NOTEBOOKS, ROOT, load_notebook, write_chapter_files
from tools.format_written import ruff_settings, written_names


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=" ".join)
def test_ruff_finds_nothing(command):
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


WRITES_FILES = [path for path in NOTEBOOKS if written_names(load_notebook(path))]


@pytest.mark.parametrize("path", WRITES_FILES, ids=str)
def test_the_files_a_chapter_writes_pass_ruff(path, tmp_path):
    """What the `%%writefile` cells write is checked and formatted like the rest (ruff does
    not read cells that start with a magic): `python -m tools.format_written` formats it."""
    names = write_chapter_files(path, tmp_path)
    settings = ruff_settings(list(names))
    for command in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *settings, *map(str, names.values())],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (
            f"{path}: {result.stdout}{result.stderr}\nrun: python -m tools.format_written {path}"
        )
