"""tools.output_variation: which printed numbers moved between two runs of a chapter."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools.output_variation import differences, run


def notebook(*printed, tags=()):
    cells = [new_markdown_cell("# A chapter")]
    for text in printed:
        cell = new_code_cell("print(...)", metadata={"tags": list(tags)})
        cell.outputs = [new_output("stream", name="stdout", text=text)]
        cells.append(cell)
    return new_notebook(cells=cells)


def test_rows_name_each_moved_number_with_its_kind():
    committed = notebook("loss 0.3944, gap 4e-03\nsame\n", "accuracy 92.7%\n")
    rerun = notebook("loss 0.3943, gap 9e-04\nsame\n", "accuracy 92.7%\n")
    assert list(differences("x", "ch", committed, rerun)) == [
        ("x", "ch", 1, "decimal", "0.3944", "0.3943", "loss 0.3944, gap 4e-03"),
        ("x", "ch", 1, "difference", "4e-03", "9e-04", "loss 0.3944, gap 4e-03"),
    ]


def test_masked_text_and_ignored_cells_are_not_rows():
    committed = notebook("epoch took 1.5 s at 10:00:01\n")
    rerun = notebook("epoch took 2.5 s at 11:02:03\n")
    assert list(differences("x", "ch", committed, rerun)) == []
    ignored = notebook("loss 0.1\n", tags=["nbval-ignore-output"])
    assert list(differences("x", "ch", ignored, notebook("loss 0.9\n"))) == []


def test_changed_text_is_a_row_of_its_own():
    rows = list(differences("x", "ch", notebook("fit works\n"), notebook("fit fails\n")))
    assert rows == [("x", "ch", 1, "text", "fit works", "fit fails", "")]


@pytest.mark.full  # starts Python programs: the full proof's
def test_a_run_takes_other_knobs_after_the_parameters_cell(tmp_path):
    chapter = new_notebook(
        cells=[
            new_code_cell("EPOCHS = 3", metadata={"tags": ["parameters"]}),
            new_code_cell("print(f'epochs {EPOCHS}')"),
        ]
    )
    path = tmp_path / "chapter.ipynb"
    nbformat.write(chapter, path)
    measured = run(path, "EPOCHS = 1", timeout_s=60)
    assert len(measured.cells) == 2
    assert measured.cells[1].outputs[0]["text"] == "epochs 1\n"
