"""Format the files a chapter writes with `%%writefile`, as ruff formats the rest.

    python -m tools.format_written chapters/13_sharded_data_parallelism.ipynb [more ...]

ruff does not read a cell that starts with a magic, so the programs and workers the
chapters write with `%%writefile NAME` (and add to with `%%writefile -a NAME`) would escape
it. This sorts each such cell's imports and formats its code with the chapters' settings;
tests/test_style.py checks the written files with the same `ruff_settings`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from tools.save_from_chapters import ruff_formatted
from utils.launch import REPOSITORY

MAGIC = "%%writefile"


def written_names(notebook: nbformat.NotebookNode) -> list[str]:
    """The files `notebook`'s `%%writefile` cells write, in order, without repeats."""
    names = []
    for cell in notebook.cells:
        first = cell.source.partition("\n")[0].split()
        if cell.cell_type == "code" and first[:1] == [MAGIC] and first[-1] not in names:
            names.append(first[-1])
    return names


def ruff_settings(names: list[str]) -> list[str]:
    """ruff's options for files named `names`: the chapters' settings, with `utils` and the
    chapter's own files as first-party imports; a program may set environment variables
    before its imports (E402)."""
    first_party = ["utils", *(Path(name).stem for name in names)]
    return [
        "--config",
        str(REPOSITORY / "chapters" / "ruff.toml"),
        "--config",
        f"lint.isort.known-first-party = {first_party!r}",
        "--config",
        "lint.ignore = ['E402']",
        "--no-cache",
    ]


def format_notebook(path: Path) -> int:
    """Format `path`'s `%%writefile` cells in place; the number of cells changed."""
    notebook = nbformat.read(path, as_version=4)
    settings = ruff_settings(written_names(notebook))
    changed = 0
    for cell in notebook.cells:
        first, _, code = cell.source.partition("\n")
        if cell.cell_type != "code" or first.split()[:1] != [MAGIC]:
            continue
        new = ruff_formatted(code, first.split()[-1], settings).strip("\n")
        if "-a" in first.split():  # an addition: two blank lines after the part before
            new = "\n\n" + new
        if new != code:
            cell.source = f"{first}\n{new}"
            changed += 1
    if changed:
        nbformat.write(notebook, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    for path in parser.parse_args(argv).notebooks:
        print(f"{path}: {format_notebook(path)} cell(s) formatted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
