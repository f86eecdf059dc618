"""Shared by the tests: TensorFlow configures devices once per process, so some tests
run their code in a fresh Python process."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a new Python process with the repository root as working directory."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
