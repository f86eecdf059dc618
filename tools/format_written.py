"""Format the files a chapter writes with `%%writefile`, as ruff formats the rest.

    python -m tools.format_written chapters/14_sharded_data_parallelism.ipynb [more ...]

ruff does not read a cell that starts with a magic, so the programs and workers the
chapters write with `%%writefile NAME` (and add to with `%%writefile -a NAME`) would escape
it. This sorts each such cell's imports and formats its code with the chapters' settings;
tests/book/test_style.py checks the written files with the same `ruff_settings`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from utils.launch import REPOSITORY

MAGIC = "%%writefile"


class Written(NamedTuple):
    """A `%%writefile` cell: its first line, the file it writes, whether `-a` adds to the
    file, and its code (the rest of the cell)."""

    cell: dict
    header: str
    name: str
    appends: bool
    code: str


def writefile_cells(notebook) -> Iterator[Written]:
    """The `%%writefile` cells of `notebook` (nbformat's, or its JSON as a dict), in order:
    the one reading of them that this tool and the tests share."""
    for cell in notebook["cells"]:
        header, _, code = "".join(cell["source"]).partition("\n")
        words = header.split()
        if cell["cell_type"] == "code" and words[:1] == [MAGIC]:
            yield Written(cell, header, words[-1], "-a" in words, code)


def write_chapter_files(notebook: str | Path, folder: str | Path) -> dict[str, Path]:
    """Write the files that `notebook`'s `%%writefile NAME` cells write (`-a` appends) into
    `folder`, as IPython does: the cell's text after its first line, ending with a newline.
    Returns {NAME: path}. `notebook`: a path, relative to the repository or absolute. The
    tests and tools/chapter_workers.py import or run the code a chapter writes this way."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    paths = {}
    for written in writefile_cells(json.loads((REPOSITORY / notebook).read_text())):
        paths[written.name] = Path(folder) / written.name
        with open(paths[written.name], "a" if written.appends else "w") as file:
            text = written.code
            file.write(text if text.endswith("\n") else text + "\n")
    return paths


def written_names(notebook) -> list[str]:
    """The files `notebook`'s `%%writefile` cells write, in order, without repeats."""
    return list(dict.fromkeys(written.name for written in writefile_cells(notebook)))


def ruff_settings(names: list[str]) -> list[str]:
    """ruff's options for files named `names`: the chapters' settings, with `utils`,
    `recipes` and the chapter's own files as first-party imports; a program may set
    environment variables before its imports (E402)."""
    first_party = ["utils", "recipes", *(Path(name).stem for name in names)]
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
    import nbformat  # here, not above: tools/chapter_workers.py runs where it is missing

    from tools.save_from_chapters import ruff_formatted

    notebook = nbformat.read(path, as_version=4)
    settings = ruff_settings(written_names(notebook))
    changed = 0
    for cell, header, name, appends, code in writefile_cells(notebook):
        new = ruff_formatted(code, name, settings).strip("\n")
        if appends:  # an addition: two blank lines after the part before
            new = "\n\n" + new
        if new != code:
            cell.source = f"{header}\n{new}"
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
