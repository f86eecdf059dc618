"""Measure how a chapter's printed numbers vary between machines and settings.

    python -m tools.output_variation --label threads1 \\
        --env TF_NUM_INTRAOP_THREADS=1 --env OMP_NUM_THREADS=1 chapters/*.ipynb

Runs each chapter top to bottom in a fresh kernel started with the given environment (and,
with `--knob NAME=VALUE`, other knob values put in after its `parameters` cell), without
writing it back, and compares every compared cell's output with the committed one after
nbval's masks (nbval_sanitize.cfg). Prints one tab-separated line per printed number that
differs (label, chapter, cell, kind, committed, measured, the committed line) and one per
line whose text differs. tests/output_policy.py's tolerances are calibrated from such runs
(CONTRIBUTING.md, section "What the outputs match means").
"""

from __future__ import annotations

import argparse
import configparser
import os
import re
import sys
from pathlib import Path

import nbformat

from tests.output_policy import NUMBER, printed_numbers
from tools.run_chapters import execute
from utils.launch import REPOSITORY

SKIPPED_TAGS = {"nbval-ignore-output", "nbval-skip", "raises-exception"}


def sanitize_patterns() -> list[tuple[re.Pattern, str]]:
    """nbval's masks, as nbval_sanitize.cfg declares them."""
    config = configparser.ConfigParser()
    config.read(REPOSITORY / "nbval_sanitize.cfg")
    return [(re.compile(config[s]["regex"]), config[s]["replace"]) for s in config.sections()]


def printed(cell) -> str:
    """What a code cell printed (stdout and plain-text results), as nbval compares it."""
    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream" and output["name"] == "stdout":
            parts.append(output["text"])
        elif output["output_type"] in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def compared(cell) -> bool:
    tags = set(cell.metadata.get("tags", []))
    return not tags & SKIPPED_TAGS


def run(path: Path, knobs: str, timeout_s: int) -> nbformat.NotebookNode:
    """Execute a copy of the chapter (with `knobs` after its `parameters` cell)."""
    notebook = nbformat.read(path, as_version=4)
    if knobs:
        at = next(
            i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])
        )
        notebook.cells.insert(at + 1, nbformat.v4.new_code_cell(knobs))
    execute(notebook, path.parent, timeout_s)  # trimmed as committed notebooks are
    if knobs:
        del notebook.cells[at + 1]
    return notebook


def differences(label: str, chapter: str, committed, measured):
    """The rows for every printed number and text line of `measured` that differs from
    `committed` (two versions of `chapter`)."""
    masks = sanitize_patterns()

    def masked(text: str) -> str:
        for pattern, replacement in masks:
            text = pattern.sub(replacement, text)
        return text

    for index, (old, new) in enumerate(zip(committed.cells, measured.cells)):
        if old.cell_type != "code" or not compared(old):
            continue
        for old_line, new_line in zip(
            masked(printed(old)).splitlines(), masked(printed(new)).splitlines()
        ):
            if old_line == new_line:
                continue
            if NUMBER.split(old_line) != NUMBER.split(new_line):
                yield (label, chapter, index, "text", old_line, new_line, "")
                continue
            pairs = zip(printed_numbers(old_line), printed_numbers(new_line))
            for (a, kind), (b, _) in pairs:
                if a != b:
                    yield (label, chapter, index, kind, a, b, old_line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tools.output_variation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--label", required=True, help="names the setting in the rows")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the kernel")
    parser.add_argument("--knob", action="append", default=[], help="NAME=VALUE after knobs")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args(argv)
    for setting in args.env:
        name, _, value = setting.partition("=")
        os.environ[name] = value
    knobs = "\n".join(knob.replace("=", " = ", 1) for knob in args.knob)
    for path in args.notebooks:
        committed = nbformat.read(path, as_version=4)
        measured = run(path, knobs, args.timeout)
        for row in differences(args.label, path.stem, committed, measured):
            print("\t".join(map(str, row)), flush=True)
        print(f"{path}: done", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
