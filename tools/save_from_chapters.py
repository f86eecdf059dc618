"""Save the code a chapter writes into the module of `utils` that other code imports.

    python -m tools.save_from_chapters          # write the modules from the chapters
    python -m tools.save_from_chapters --check  # exit 1 where a module differs

d2l's way: a chapter writes the functions it teaches in its own cells, and a code cell whose
first line is `# @save` is also saved, in order, into that chapter's module (`SAVED`), where
the tests and later chapters import it. The module is never edited by hand: edit the
chapter, re-run it, then run this command. tests/tools/test_save_from_chapters.py fails when a
module and its chapter differ.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import nbformat

from utils.launch import REPOSITORY

MARK = "# @save"

#: chapter -> (module in utils, its docstring's first line, the imports its saved cells
#: take from the chapter's setup cell: ruff's F401/F821 in tests/book/test_style.py catch a
#: name missing from this list, or one listed and unused)
SAVED: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "04_custom_loops": (
        "custom_step",
        "The training step of a custom loop under a tf.distribute strategy.",
        ("import keras", "import tensorflow as tf"),
    ),
    "05_data_parallel_by_hand": (
        "by_hand",
        "Data parallelism written by hand: split a batch, all-reduce gradients, the ring.",
        ("import numpy as np", "import tensorflow as tf"),
    ),
    "appendix_multi_gpu_model": (
        "legacy",
        "A working re-creation of the removed `keras.utils.multi_gpu_model`, for old code.",
        ("import keras", "import tensorflow as tf"),
    ),
    "06_pytorch_dp_ddp": (
        "ddp_reference",
        "Where a DDP process trains, and what the processes train, replayed in one process.",
        ("import torch", "from torch import nn", "from utils.pytorch_ddp import make_model"),
    ),
    "12_splitting_the_batch": (
        "batch_scaling",
        "What to change when the global batch grows: the linear rule and its warm-up.",
        ("import keras",),
    ),
    "13_precision_and_accumulation": (
        "process_group",
        "Joining a PyTorch process group at a TCP port: the workers from chapter 13 on.",
        (),
    ),
    "14_sharded_data_parallelism": (
        "sharding",
        "Sharded data parallelism: what each device holds, and what it computes.",
        (
            "import torch",
            "from torch import nn",
            "from utils.pytorch_ddp import make_model",
        ),
    ),
    "16_layouts_and_recomputation": (
        "recompute",
        "Recomputing activations: the bytes autograd saves, and the operations it runs.",
        ("import torch",),
    ),
}

# where ruff finds the project's settings (pyproject.toml, utils/ruff.toml)
_CONFIG_ROOT = REPOSITORY
# a mark anywhere in a cell: `# @save`, or d2l's `#@save`
_ANY_MARK = re.compile(r"^\s*#\s?@save\b", re.M)


def is_saved(cell) -> bool:
    """Whether `cell` is a code cell whose first line is the mark."""
    return cell["cell_type"] == "code" and "".join(cell["source"]).split("\n")[0] == MARK


def module_path(module: str, root: Path = REPOSITORY) -> Path:
    return root / "utils" / f"{module}.py"


def saved_cells(chapter: str, root: Path = REPOSITORY) -> list[str]:
    """The sources of `chapter`'s cells marked `# @save`, without the mark. A mark
    anywhere else (not the first line, or in a markdown cell) raises a ValueError."""
    notebook = nbformat.read(root / "chapters" / f"{chapter}.ipynb", as_version=4)
    sources = []
    for index, cell in enumerate(notebook.cells):
        if is_saved(cell):
            sources.append(cell.source.partition("\n")[2])
        elif _ANY_MARK.search(cell.source) and cell.cell_type == "code":
            raise ValueError(
                f"chapters/{chapter}.ipynb, cell {index}: put {MARK!r} alone on the "
                "cell's first line to save it, or remove it."
            )
    return sources


def _split_imports(chapter: str, source: str) -> tuple[list[str], str]:
    """The top-level import statements of a saved cell, and the rest of its code."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise ValueError(
            f"chapters/{chapter}.ipynb: a cell marked {MARK!r} is not plain Python "
            f"(line {err.lineno}: {err.msg}); keep magics out of saved cells."
        ) from err
    lines = source.splitlines()
    spans = [
        (node.lineno - 1, node.end_lineno)
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    imports = ["\n".join(lines[start:end]) for start, end in spans]
    cut = {i for start, end in spans for i in range(start, end)}
    rest = "\n".join(line for i, line in enumerate(lines) if i not in cut)
    return imports, rest.strip()


def saved_module(chapter: str, root: Path = REPOSITORY) -> str:
    """The text of `chapter`'s module: docstring, imports, then its saved cells."""
    module, docstring, imports = SAVED[chapter]
    written_in = f"chapter {int(chapter[:2])}" if chapter[:2].isdigit() else "the appendix"
    written = (
        f"Written in {written_in} ({chapter}.ipynb), in its cells marked `{MARK}`: edit them "
        "there, re-run the chapter, then run `python -m tools.save_from_chapters`."
    )
    command = "python -m tools.save_from_chapters"
    wrapped = textwrap.fill(written.replace(command, command.replace(" ", "\0")), 92)
    wrapped = wrapped.replace("\0", " ")
    header = f'"""{docstring}\n\n{wrapped}\n"""\n'
    found, blocks = list(imports), []
    for source in saved_cells(chapter, root):
        cell_imports, code = _split_imports(chapter, source)
        found += [line for line in cell_imports if line not in found]
        blocks.append(code)
    text = "\n\n".join([header, "\n".join(found), *blocks]) + "\n"
    return ruff_formatted(text, module_path(module, _CONFIG_ROOT))


def ruff_formatted(text: str, path: Path | str, options: Sequence[str] = ()) -> str:
    """`text` with its imports sorted and its code formatted as ruff does for a file at
    `path`, with the project's settings, or with `options` (ruff's command-line options)."""
    for command in (["check", "--select", "I", "--fix", "--quiet"], ["format", "--quiet"]):
        ruff = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *options, "--stdin-filename", str(path), "-"],
            input=text,
            capture_output=True,
            text=True,
            cwd=_CONFIG_ROOT,
        )
        if ruff.returncode != 0:
            raise ValueError(f"ruff could not format {Path(path).name}:\n{ruff.stderr.strip()}")
        text = ruff.stdout
    return text


def unsaved_chapters(root: Path = REPOSITORY) -> list[str]:
    """Chapters that mark cells but have no module in `SAVED`."""
    return [
        path.stem
        for path in sorted((root / "chapters").glob("*.ipynb"))
        if path.stem not in SAVED
        and any(is_saved(c) for c in nbformat.read(path, as_version=4).cells)
    ]


def main(argv: list[str] | None = None, root: Path = REPOSITORY) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 where a module differs"
    )
    args = parser.parse_args(argv)
    if unsaved := unsaved_chapters(root):
        print(f"{', '.join(unsaved)}: marks cells {MARK!r}; give it a module in SAVED")
        return 1
    differ = []
    for chapter, (module, _, _) in SAVED.items():
        path, text = module_path(module, root), saved_module(chapter, root)
        if path.exists() and path.read_text() == text:
            continue
        if path.exists() and "tools.save_from_chapters" not in path.read_text()[:400]:
            print(f"utils/{module}.py was not written by this command: not replaced")
            return 1
        differ.append(f"utils/{module}.py (from chapters/{chapter}.ipynb)")
        if not args.check:
            path.write_text(text)
    if differ and args.check:
        print(f"differs: {', '.join(differ)}; run `python -m tools.save_from_chapters`")
    elif differ:
        print(f"wrote: {', '.join(differ)}")
    return 1 if differ and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
