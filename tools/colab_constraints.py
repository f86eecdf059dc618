"""Write `constraints-colab.txt`, Colab's GPU runtime as pip constraints, from its pip freeze.

    python -m tools.colab_constraints pip-freeze.gpu.txt

Colab publishes the `pip freeze` of its runtime in github.com/googlecolab/backend-info
(`pip-freeze.gpu.txt`). When Colab moves, download the new file, run this command, and let
CI's Colab-runtime step (`.ci/run`) run every chapter against the new versions. Kept: every
`name==version` line. Dropped: packages installed from a URL; the CUDA builds of the torch
family (`+cu128`), since the Colab-runtime environment uses the book's CPU wheel of torch
(`requirements.txt`: the GPU build is several GB, and that environment has no GPU); and the
installer's own tools (pip, setuptools, wheel), which no chapter imports and which that
torch wheel needs newer.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from utils.launch import REPOSITORY

OUTPUT = REPOSITORY / "constraints-colab.txt"
INSTALLER_TOOLS = ("pip", "setuptools", "wheel")
HEADER = """\
# Colab's GPU runtime as pip constraints: the versions a chapter meets on Colab.
# Source: pip-freeze.gpu.txt of github.com/googlecolab/backend-info ({source}).
# Written by `python -m tools.colab_constraints FILE`; refresh it that way when Colab moves.
# Not kept: packages installed from URLs; the torch family's CUDA builds ({dropped}):
# CI's Colab-runtime environment (requirements-colab-runtime.txt) takes the book's torch
# CPU wheel instead; and {tools}, which that wheel needs newer.
# Colab runs Python {python}; that environment runs the book's Python.
"""


def constraints(freeze: str) -> tuple[list[str], list[str]]:
    """The `name==version` lines of a pip freeze that pip can take as constraints, and the
    lines left out (URLs, CUDA builds)."""
    kept, dropped = [], []
    for line in freeze.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        usable = "==" in line and "+" not in line and " @ " not in line
        tool = line.split("==")[0].lower() in INSTALLER_TOOLS
        (kept if usable and not tool else dropped).append(line)
    return kept, dropped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tools.colab_constraints",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("freeze", type=Path, help="Colab's pip-freeze.gpu.txt")
    parser.add_argument(
        "--source", default="August 2026", help="which version of the file (a date or a commit)"
    )
    parser.add_argument("--python", default="3.13", help="Colab's Python version")
    args = parser.parse_args(argv)
    kept, dropped = constraints(args.freeze.read_text())
    torch_family = ", ".join(
        line.split("==")[0] for line in dropped if "+" in line and " @ " not in line
    )
    OUTPUT.write_text(
        HEADER.format(
            source=args.source,
            dropped=torch_family,
            tools=", ".join(INSTALLER_TOOLS),
            python=args.python,
        )
        + "\n".join(kept)
        + "\n"
    )
    print(f"{OUTPUT.name}: {len(kept)} constraints; left out: {len(dropped)}")


if __name__ == "__main__":
    main()
