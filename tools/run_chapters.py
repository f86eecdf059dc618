"""Re-execute chapters top to bottom in a fresh kernel, keeping only what the book needs.

    python -m tools.run_chapters chapters/04_custom_loops.ipynb [more chapters ...]

Committed outputs must come from such a run of the committed code. nbclient runs each
notebook from its own folder, as nbval and Colab do. Afterwards the stderr streams are
dropped: they hold TensorFlow's log lines with timestamps and thread ids, which change on
every run, and the book shows none of them (myst-nb's `output_stderr: remove`; nbval does
not compare them). What is left is what a reader sees, so re-running a chapter changes only
that. tests/book/test_notebooks.py checks every chapter for it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

# The metadata a chapter keeps, as tensorflow_docs' nbfmt does: what Jupyter and Colab need
# to open it (kernel, language, Colab's GPU runtime), the cell tags (`parameters`,
# `hide-input`, `nbval-ignore-output`) and why a cell's output is not compared. The rest is
# an editor's state or says which machine ran the chapter.
NOTEBOOK_METADATA = ("accelerator", "colab", "kernelspec", "language_info")
CELL_METADATA = ("tags", "why_not_compared", "why_skipped", "difference_bound")


def keep_what_the_book_needs(notebook: nbformat.NotebookNode) -> None:
    """Keep the allowed metadata (without the Python version that ran the chapter), drop
    stderr streams, then let nbconvert merge the streams left side by side and apply their
    carriage returns (progress bars keep their last state)."""
    notebook.metadata = {
        key: value for key, value in notebook.metadata.items() if key in NOTEBOOK_METADATA
    }
    notebook.metadata.get("language_info", {}).pop("version", None)
    for cell in notebook.cells:
        cell.metadata = {key: value for key, value in cell.metadata.items() if key in CELL_METADATA}
        if cell.cell_type == "code":
            cell.outputs = [
                output
                for output in cell.outputs
                if not (output.output_type == "stream" and output.name == "stderr")
            ]
    CoalesceStreamsPreprocessor().preprocess(notebook, {})


def execute(notebook: nbformat.NotebookNode, folder: Path, timeout_s: int = 900) -> None:
    """Run every cell of `notebook` in a fresh kernel started in `folder`, in place, and
    keep only what the book needs."""
    NotebookClient(
        notebook,
        timeout=timeout_s,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(folder)}},
    ).execute()
    keep_what_the_book_needs(notebook)


def run_chapter(path: Path, timeout_s: int = 900) -> None:
    """Execute the notebook at `path` in a fresh kernel and write it back, trimmed."""
    notebook = nbformat.read(path, as_version=4)
    execute(notebook, path.parent, timeout_s)
    nbformat.write(notebook, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tools.run_chapters",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        start = time.perf_counter()
        run_chapter(path, args.timeout)
        print(f"{path}: ran in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
