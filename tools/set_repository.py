"""Point the book at the GitHub repository it is published from.

    python -m tools.set_repository https://github.com/OWNER/NAME

Rewrites the one place the repository is named (`_config.yml`: the launch and repository
buttons) and what is derived from it in every chapter: the Colab badge and the setup cell's
`repository` line (the URL it clones). tests/book/test_toc_and_config.py and
tests/book/test_notebooks.py check that they agree.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import yaml

from utils.launch import REPOSITORY

ROOT = REPOSITORY
_GITHUB = re.compile(r"https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)")


def _repository_path(url: str) -> str:
    """OWNER/NAME from a GitHub URL, or a ValueError saying what form is expected."""
    match = _GITHUB.fullmatch(url)
    if not match or url.endswith(".git"):
        raise ValueError(
            f"set_repository: expected a URL of the form https://github.com/OWNER/NAME "
            f"(no trailing slash or .git); got {url!r}."
        )
    return match.group(1)


def set_repository(url: str, root: Path = ROOT) -> list[Path]:
    """Make the book at `root` name `url` as its repository; return the files changed."""
    new = _repository_path(url)
    config_path = root / "_config.yml"
    config_text = config_path.read_text()
    old = _repository_path(yaml.safe_load(config_text)["repository"]["url"])
    if old == new:
        return []
    replacements = {
        f"https://github.com/{old}": f"https://github.com/{new}",
        f"https://colab.research.google.com/github/{old}/": (
            f"https://colab.research.google.com/github/{new}/"
        ),
    }
    changed = []
    for path in [config_path, *sorted((root / "chapters").glob("*.ipynb"))]:
        text = path.read_text()
        updated = text
        for before, after in replacements.items():
            updated = updated.replace(before, after)
        if updated != text:
            path.write_text(updated)
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="https://github.com/OWNER/NAME")
    args = parser.parse_args(argv)
    try:
        changed = set_repository(args.url)
    except ValueError as err:
        parser.error(str(err))
    for path in changed:
        print("updated", path.relative_to(ROOT))
    print(f"the book now names {args.url}" if changed else f"already {args.url}: nothing to do")


if __name__ == "__main__":
    main()
