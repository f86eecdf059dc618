"""What each chapter costs a reader: the reading time its opening states, from its text.

    python -m tools.chapter_costs            # print every chapter's reading time
    python -m tools.chapter_costs --check    # exit 1 where an opening states another time

A chapter opens with its cost: "About N minutes to read". N is computed, not guessed: prose
at 200 words a minute, visible code at 15 lines a minute, visible output at 40 lines a
minute (a figure counts as 10 lines), rounded to 5 minutes. tests/test_notebooks.py checks
every chapter states the time this gives.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from utils.launch import REPOSITORY

WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE, OUTPUT_LINES_PER_MINUTE = 200, 15, 40
FIGURE_LINES = 10
STATED = re.compile(r"About (\d+) minutes to read")
_WORD = re.compile(r"[A-Za-z0-9][\w'.-]*")
# what a reader sees of a link: {doc}`chapter 6 <06_pytorch_dp_ddp>`, [text](address)
_ROLE = re.compile(r"\{\w+\}`([^`<]*?)\s*(?:<[^>`]*>)?`")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def _shown(markdown: str) -> str:
    """The text of `markdown` as the book shows it: links by their text alone."""
    return _LINK.sub(r"\1", _ROLE.sub(r"\1", STATED.sub("", markdown)))


def _visible_output_lines(cell) -> int:
    lines = 0
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "image/png" in data:
            lines += FIGURE_LINES
        else:
            lines += len("".join(output.get("text", "") or data.get("text/plain", "")).splitlines())
    return lines


def reading_minutes(notebook: dict) -> int:
    """Minutes to read `notebook` (its JSON) as the book shows it, rounded to 5 (at least 5)."""
    words = code = output = 0
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "markdown":
            words += len(_WORD.findall(_shown(text)))
            continue
        if not {"hide-input", "hide-cell"} & set(tags):
            code += len(text.splitlines())
        if not {"hide-output", "hide-cell"} & set(tags):
            output += _visible_output_lines(cell)
    minutes = (
        words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE + output / OUTPUT_LINES_PER_MINUTE
    )
    return max(5, 5 * round(minutes / 5))


def stated_minutes(notebook: dict) -> int | None:
    """The reading time the chapter's first cell states, or None."""
    found = STATED.search("".join(notebook["cells"][0]["source"]))
    return int(found.group(1)) if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where a time differs")
    args = parser.parse_args(argv)
    differ = False
    for path in sorted((REPOSITORY / "chapters").glob("*.ipynb")):
        notebook = json.loads(Path(path).read_text())
        computed, stated = reading_minutes(notebook), stated_minutes(notebook)
        print(f"{path.name}: about {computed} minutes to read (states {stated})")
        differ |= computed != stated
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
