"""ruff, the linter and formatter configured in pyproject.toml (and chapters/ruff.toml for the
notebooks' code cells), finds nothing: `ruff check --fix .` and `ruff format .` fix most of
what it reports."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT


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
