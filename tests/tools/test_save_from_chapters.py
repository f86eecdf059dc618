"""tools.save_from_chapters: each module saved from a chapter is what its cells say."""

import shutil

import nbformat
import pytest

from tests.helpers import ROOT
from tools.save_from_chapters import (
    MARK,
    SAVED,
    main,
    module_path,
    saved_cells,
    saved_module,
    unsaved_chapters,
)


@pytest.mark.parametrize("chapter", SAVED)
def test_each_saved_module_is_what_its_chapter_writes(chapter):
    assert saved_cells(chapter), f"chapters/{chapter}.ipynb marks no cell {MARK!r}"
    assert module_path(SAVED[chapter][0]).read_text() == saved_module(chapter), (
        f"utils/{SAVED[chapter][0]}.py differs from chapters/{chapter}.ipynb: edit the "
        "chapter, re-run it, then run `python -m tools.save_from_chapters`"
    )


def test_every_chapter_that_marks_cells_has_a_module():
    assert unsaved_chapters() == []


@pytest.fixture
def copy(tmp_path):
    """A copy of the chapters and utils/ that the command reads and writes."""
    for folder in ("chapters", "utils"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


@pytest.mark.full  # starts Python programs: the full proof's
def test_check_finds_a_module_edited_by_hand_and_the_command_restores_it(copy, capsys):
    chapter = next(iter(SAVED))
    path = module_path(SAVED[chapter][0], copy)
    assert main(["--check"], copy) == 0
    edited = path.read_text() + "\n\ndef added_by_hand():\n    pass\n"
    path.write_text(edited)
    assert main(["--check"], copy) == 1
    assert f"utils/{path.name}" in capsys.readouterr().out
    assert path.read_text() == edited  # --check writes nothing
    assert main([], copy) == 0 and main(["--check"], copy) == 0
    assert path.read_text() == saved_module(chapter)


def _edit_chapter(root, chapter, change):
    path = root / "chapters" / f"{chapter}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    change(notebook.cells)
    nbformat.write(notebook, path)


def test_a_mark_that_is_not_the_first_line_is_refused(copy):
    chapter = next(iter(SAVED))

    def comment_first(cells):
        saved = next(c for c in cells if c.source.startswith(MARK))
        saved.source = "# a comment first\n" + saved.source

    _edit_chapter(copy, chapter, comment_first)
    with pytest.raises(ValueError, match="alone on the cell's first line"):
        saved_cells(chapter, copy)


def test_a_chapter_that_marks_cells_needs_a_module(copy, capsys):
    chapters = sorted(p.stem for p in (copy / "chapters").glob("*.ipynb"))
    other = next(chapter for chapter in chapters if chapter not in SAVED)

    def mark_a_new_cell(cells):
        cells.append(nbformat.v4.new_code_cell(MARK + "\nx = 1"))

    _edit_chapter(copy, other, mark_a_new_cell)
    assert unsaved_chapters(copy) == [other]
    assert main(["--check"], copy) == 1 and "give it a module" in capsys.readouterr().out


def test_a_hand_written_module_is_never_replaced(copy, capsys):
    chapter = next(iter(SAVED))
    path = module_path(SAVED[chapter][0], copy)
    path.write_text('"""Written by hand."""\n')
    assert main([], copy) == 1 and "not replaced" in capsys.readouterr().out
    assert path.read_text() == '"""Written by hand."""\n'
