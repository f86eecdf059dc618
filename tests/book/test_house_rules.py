"""The house's rules for what may import what (CONTRIBUTING.md, "How the parts fit"), read
with `ast` from every .py file under recipes/ and utils/.

The modules written from chapters' cells come from their source of truth,
`tools.save_from_chapters.SAVED`, not from a list kept here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tools.save_from_chapters import SAVED

#: the repository's own top-level packages and folders of Python code
BOOK = ("recipes", "tests", "tools", "utils")

#: module in utils -> the chapter whose `# @save` cells write it
WRITTEN_FROM = {module: chapter for chapter, (module, _, _) in SAVED.items()}


def _files(part: str) -> list[Path]:
    return sorted(p for p in (ROOT / part).rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def imports(path: Path, root: Path | None = None) -> set[str]:
    """The dotted names `path` imports, anywhere in it: `import a.b` gives a.b, `from a import
    b` gives a and a.b, a relative import is resolved from the file's folder under `root`, and
    `importlib.import_module("a.b")` with a literal name gives a.b."""
    package = path.relative_to(root or ROOT).parent.parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {module} | {f"{module}.{alias.name}".lstrip(".") for alias in node.names}
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return {name for name in found if name}


def _chapter(chapter: str) -> str:
    return f"chapter {int(chapter[:2])}" if chapter[:2].isdigit() else "the appendix"


def _order(chapter: str) -> float:
    return int(chapter[:2]) if chapter[:2].isdigit() else float("inf")


def _written_from_chapters(path: Path) -> list[str]:
    """The modules written from chapters that `path` imports."""
    return sorted(
        {
            name.split(".")[1]
            for name in imports(path)
            if name.startswith("utils.") and name.split(".")[1] in WRITTEN_FROM
        }
    )


def test_the_import_reader_sees_every_form_of_import(tmp_path):
    (tmp_path / "utils").mkdir()
    program = tmp_path / "utils" / "example.py"
    program.write_text(
        "import os.path\nfrom utils.checks import check_int\nfrom . import data\n"
        "from .. import tools\nimport importlib\nimportlib.import_module('recipes.data')\n"
        "def later():\n    from utils import custom_step\n"
    )
    found = imports(program, tmp_path)
    assert {"os.path", "utils.checks", "utils.data", "tools", "recipes.data"} <= found
    assert "utils.custom_step" in found  # an import inside a function counts too


def test_every_module_written_from_a_chapter_is_in_utils_and_says_so():
    for module, chapter in WRITTEN_FROM.items():
        path = ROOT / "utils" / f"{module}.py"
        assert path.exists(), (
            f"SAVED names utils/{module}.py: run python -m tools.save_from_chapters"
        )
        assert "tools.save_from_chapters" in path.read_text()[:400], (
            f"utils/{module}.py does not say it is written from chapters/{chapter}.ipynb: "
            "run python -m tools.save_from_chapters"
        )


@pytest.mark.parametrize(
    "part, forbidden, what_to_do",
    [
        (
            "recipes",
            {"utils", "tools", "tests", "recipes"},
            "a program a reader copies to a server stands alone: write what it needs into "
            "the recipe or a file beside it, imported by that file's own name",
        ),
        (
            "utils",
            {"tools", "recipes", "tests"},
            "utils is what chapters and tools build on, never the other way round: move "
            "what it needs into utils",
        ),
    ],
    ids=["recipes", "utils"],
)
def test_each_part_imports_only_what_it_may(part, forbidden, what_to_do):
    broken = []
    for path in _files(part):
        names = {name for name in imports(path) if name.split(".")[0] in forbidden}
        outermost = sorted(n for n in names if not any(n.startswith(f"{o}.") for o in names))
        broken += [f"{_name(path)} imports {name}" for name in outermost]
    assert not broken, f"{'; '.join(broken)}. {part}/: {what_to_do} (CONTRIBUTING.md)"


def test_plumbing_never_imports_a_module_written_from_a_chapter():
    """Editing a chapter must not change another chapter through the plumbing it runs on
    (bench imported chapter 4's step: editing chapter 4 could break chapter 7). A module may
    build on a chapter by design (sizing on chapter 14's sharding) when its docstring says
    so, in the words this test reads."""
    broken = []
    for path in _files("utils"):
        if path.stem in WRITTEN_FROM:
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        for module in _written_from_chapters(path):
            chapter = _chapter(WRITTEN_FROM[module])
            said = f"builds on {chapter} by design" in docstring
            if not (said and f"`utils.{module}`" in docstring):
                broken.append(
                    f"{_name(path)} imports utils.{module}, written from {chapter}'s cells "
                    f"(tools/save_from_chapters.py): move what it needs into plumbing, or "
                    f"let the chapter pass it in; if it builds on that code by design, its "
                    f"docstring says 'builds on {chapter} by design' and names "
                    f"`utils.{module}`"
                )
    assert not broken, "\n".join(broken)


def test_a_module_written_from_a_chapter_imports_only_earlier_chapters():
    """A chapter builds on the chapters before it (chapter 13's process group on chapter 6's
    device), never on a later one: no cycles, and the book reads in order."""
    broken = [
        f"utils/{module}.py ({_chapter(chapter)}) imports utils.{other} "
        f"({_chapter(WRITTEN_FROM[other])}): move that code into plumbing or an earlier "
        "chapter"
        for module, chapter in WRITTEN_FROM.items()
        for other in _written_from_chapters(ROOT / "utils" / f"{module}.py")
        if _order(WRITTEN_FROM[other]) >= _order(chapter)
    ]
    assert not broken, "\n".join(broken)


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"CONTRIBUTING.md has no section '## {title}'"
    return match.group(1)


def test_contributing_says_how_the_parts_fit_and_points_inside_the_clone():
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    section = " ".join(_section(contributing, "How the parts fit").split())
    named = [f"`utils/{m}.py` ({_chapter(chapter)})" for m, chapter in WRITTEN_FROM.items()]
    missing = [name for name in named if name not in section]
    assert not missing, (
        f"CONTRIBUTING.md, 'How the parts fit': name {', '.join(missing)} among the modules "
        "written from chapters (SAVED in tools/save_from_chapters.py)"
    )
    assert "test_house_rules.py" in section, "name the test that holds the rules"
    outside = re.findall(r"`(\.\./[^`]*|/[^`\s]*)`", contributing)
    outside = [p for p in outside if not p.startswith(("/tmp", "/etc/"))]
    assert not outside, f"CONTRIBUTING.md points outside the clone: {outside}"
    paths = {
        re.sub(r"::.*", "", token)
        for token in re.findall(r"`([^`\s]+)`", contributing)
        if token.split("/")[0] in (*BOOK, "chapters", ".ci") and "/" in token
    }
    lacking = sorted(
        p for p in paths if not re.search(r"[*<>]|NAME", p) and not (ROOT / p).exists()
    )
    assert not lacking, f"CONTRIBUTING.md names what a clone lacks: {lacking}"
