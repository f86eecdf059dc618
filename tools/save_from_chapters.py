"""Save the code a chapter writes into the module of `utils` that later code imports.

    python -m tools.save_from_chapters          # write the modules from the chapters
    python -m tools.save_from_chapters --check  # exit 1 where a module differs

d2l's way: a chapter writes the functions it teaches in its own cells, and a cell whose
first line is `# @save` is also saved, in order, into that chapter's module (`SAVED`), where
the tests and later chapters import it. The module is never edited by hand: edit the
chapter, re-run it, then run this command. tests/test_save_from_chapters.py fails when a
module and its chapter differ.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import nbformat

from utils.launch import REPOSITORY

MARK = "# @save"

#: chapter -> (module in utils, its docstring, the imports its saved cells take from the
#: chapter's setup cell)
SAVED: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "05_data_parallel_by_hand": (
        "by_hand",
        "Data parallelism written by hand: split a batch, all-reduce gradients, the ring.",
        ("import numpy as np", "import tensorflow as tf"),
    ),
}

# an import at the top level of a cell: moved to the top of the module
_IMPORT = re.compile(r"(import|from)\s+\S+")


def saved_cells(chapter: str) -> list[str]:
    """The sources of `chapter`'s code cells marked `# @save`, without the mark."""
    notebook = nbformat.read(REPOSITORY / "chapters" / f"{chapter}.ipynb", as_version=4)
    return [
        cell.source.partition("\n")[2]
        for cell in notebook.cells
        if cell.cell_type == "code" and cell.source.partition("\n")[0].strip() == MARK
    ]


def saved_module(chapter: str) -> str:
    """The text of `chapter`'s module: docstring, imports, then its saved cells."""
    module, docstring, imports = SAVED[chapter]
    number = int(chapter[:2])
    header = (
        f'"""{docstring}\n\nWritten in chapter {number} ({chapter}.ipynb), in its cells '
        f"marked `{MARK}`: edit\nthem there, re-run the chapter, then run "
        '`python -m tools.save_from_chapters`.\n"""\n'
    )
    found, blocks = set(imports), []
    for source in saved_cells(chapter):
        lines = source.splitlines()
        found.update(line for line in lines if _IMPORT.match(line))
        blocks.append("\n".join(line for line in lines if not _IMPORT.match(line)).strip())
    text = "\n\n".join([header, "\n".join(sorted(found)), *blocks]) + "\n"
    return _formatted(text, REPOSITORY / "utils" / f"{module}.py")


def _formatted(text: str, path) -> str:
    """`text` with its imports sorted and its code formatted as ruff does for `path`."""
    for command in (["check", "--select", "I", "--fix", "--quiet"], ["format", "--quiet"]):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(path), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=REPOSITORY,
        ).stdout
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 on a difference"
    )
    args = parser.parse_args(argv)
    differ = []
    for chapter, (module, _, _) in SAVED.items():
        path = REPOSITORY / "utils" / f"{module}.py"
        text = saved_module(chapter)
        if path.exists() and path.read_text() == text:
            continue
        differ.append(f"utils/{module}.py (from chapters/{chapter}.ipynb)")
        if not args.check:
            path.write_text(text)
    if differ:
        print(("differs: " if args.check else "wrote: ") + ", ".join(differ))
    return 1 if differ and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
