"""tools.save_from_chapters: each module saved from a chapter is what its cells say."""

import json

import pytest

from tests.helpers import NOTEBOOKS, ROOT, code_cells, load_notebook, source
from tools.save_from_chapters import MARK, SAVED, main, saved_cells, saved_module


@pytest.mark.parametrize("chapter", SAVED)
def test_each_saved_module_is_what_its_chapter_writes(chapter):
    module = SAVED[chapter][0]
    assert saved_cells(chapter), f"chapters/{chapter}.ipynb marks no cell {MARK!r}"
    assert (ROOT / "utils" / f"{module}.py").read_text() == saved_module(chapter), (
        f"utils/{module}.py differs from chapters/{chapter}.ipynb: edit the chapter, "
        "re-run it, then run `python -m tools.save_from_chapters`"
    )


def test_every_chapter_that_marks_cells_has_a_module():
    marking = {
        path.stem
        for path in NOTEBOOKS
        if any(source(c).startswith(MARK) for c in code_cells(load_notebook(path)))
    }
    assert marking == set(SAVED)


def test_check_reports_a_module_edited_by_hand(tmp_path, monkeypatch, capsys):
    import tools.save_from_chapters as tool

    chapter = next(iter(SAVED))
    module = SAVED[chapter][0]
    (tmp_path / "chapters").mkdir()
    (tmp_path / "utils").mkdir()
    notebook = load_notebook(f"chapters/{chapter}.ipynb")
    (tmp_path / "chapters" / f"{chapter}.ipynb").write_text(json.dumps(notebook))
    edited = saved_module(chapter).replace("def ring_all_reduce", "def ring_allreduce")
    (tmp_path / "utils" / f"{module}.py").write_text(edited)
    monkeypatch.setattr(tool, "REPOSITORY", tmp_path)
    assert main(["--check"]) == 1
    assert f"utils/{module}.py" in capsys.readouterr().out
    assert main([]) == 0  # writes it back from the chapter
    assert main(["--check"]) == 0
