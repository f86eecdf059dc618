"""What each chapter costs a reader: the reading time its opening states, from its text.

    python -m tools.chapter_costs            # print every chapter's and page's reading time
    python -m tools.chapter_costs --check    # exit 1 where an opening states another time

A chapter opens with its cost: "About N minutes to read". N is computed, not guessed: prose
at 200 words a minute, visible code at 15 lines a minute, visible output at 40 lines a
minute (a figure counts as 10 lines), rounded to 5 minutes. The book's Markdown pages are
read the same way: their prose, their code blocks and the lines a `literalinclude` shows
(as Sphinx selects them; one of `:language: text`, a program's printout, counts as
output); a page that states a time, in its opening (before its first section), must state
this one. tests/book/test_chapter_costs.py checks both.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

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


#: The book's Markdown pages that are not for readers.
NOT_PAGES = {"README.md", "CONTRIBUTING.md"}
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\{([\w-]+)\})?\s*(.*)$")
_OPTION = re.compile(r"^:([\w-]+):\s*(.*)$")
#: directives whose body is code (shown as typed) or whose lines come from a file
_CODE_DIRECTIVES = {"code", "code-block", "sourcecode", "code-cell"}
_FIGURE_DIRECTIVES = {"figure", "image"}
#: what a reader does not see: comments, MyST targets `(name)=`, HTML tags, images
_UNSEEN = re.compile(r"<!--.*?-->|^\(\S+\)=\s*$|<[^>\s][^>]*>", re.DOTALL | re.MULTILINE)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")


def included_lines(folder: Path, argument: str, options: dict[str, str]) -> int:
    """The number of lines a `literalinclude` of `argument` with `options` shows, as Sphinx
    selects them (its own reader: pyobject, start-at, end-before, lines...)."""
    from sphinx.directives.code import LiteralIncludeReader

    path = REPOSITORY / argument.lstrip("/") if argument.startswith("/") else folder / argument
    options = {key: value.strip().strip("\"'") for key, value in options.items()}
    if "dedent" in options:
        options["dedent"] = int(options["dedent"]) if options["dedent"] else None
    config = SimpleNamespace(source_encoding="utf-8-sig")
    return LiteralIncludeReader(str(path), options, config).read()[1]


def _blocks(lines: list[str], folder: Path) -> tuple[list[str], int, int]:
    """(prose lines, code lines, output lines) of Markdown `lines`; a directive that is not
    code (a note, a dropdown) is read as prose, its own fences included."""
    prose, code, output = [], 0, 0
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i].strip())
        if not opened:
            prose.append(lines[i])
            output += FIGURE_LINES * len(_IMAGE.findall(lines[i]))
            i += 1
            continue
        fence, directive, argument = opened.group(1), opened.group(3), opened.group(4)
        end = i + 1  # the closing fence: the same character, at least as many times
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and set(lines[end].strip()) == {fence[0]}
        ):
            end += 1
        body = lines[i + 1 : end]
        options = {}
        while directive and body and _OPTION.match(body[0].strip()):
            key, value = _OPTION.match(body[0].strip()).groups()
            options[key] = value
            body = body[1:]
        if directive == "literalinclude" and options.get("language") == "text":
            output += included_lines(folder, argument, options)  # a program's printout
        elif directive == "literalinclude":
            code += included_lines(folder, argument, options)
        elif directive in _FIGURE_DIRECTIVES:
            output += FIGURE_LINES
        elif directive is None or directive in _CODE_DIRECTIVES:
            code += len(body)
        else:
            prose.append(argument)
            inner = _blocks(body, folder)
            prose += inner[0]
            code += inner[1]
            output += inner[2]
        i = end + 1
    return prose, code, output


def page_reading_minutes(path: Path) -> int:
    """Minutes to read the Markdown page at `path` as the book shows it, rounded to 5."""
    prose, code, output = _blocks(path.read_text().splitlines(), path.parent)
    text = _IMAGE.sub("", "\n".join(prose))
    words = len(_WORD.findall(_UNSEEN.sub(" ", _shown(text))))
    minutes = (
        words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE + output / OUTPUT_LINES_PER_MINUTE
    )
    return max(5, 5 * round(minutes / 5))


def page_stated_minutes(path: Path) -> int | None:
    """The reading time the page's opening (before its first section) states, or None."""
    opening = re.split(r"^## ", path.read_text(), maxsplit=1, flags=re.MULTILINE)[0]
    found = STATED.search(opening)
    return int(found.group(1)) if found else None


def book_pages() -> list[Path]:
    """The book's Markdown pages, in the repository's root."""
    return sorted(p for p in REPOSITORY.glob("*.md") if p.name not in NOT_PAGES)


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
    for path in book_pages():
        computed, stated = page_reading_minutes(path), page_stated_minutes(path)
        print(f"{path.name}: about {computed} minutes to read (states {stated})")
        differ |= stated is not None and computed != stated
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
