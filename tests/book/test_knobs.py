"""Knobs the second "Run all" (nbval_policy.RunAllAgain, same kernel) cannot turn: chapters run
through papermill, each in a fresh kernel, and every assertion still holds. Chapter 3 with
another batch size (in the same kernel TensorFlow's collective keys collide: its warning
says why), and other device counts (a kernel fixes its devices at its first TensorFlow call):
chapter 4 on 4 devices, chapter 5 on 8, as on an 8-GPU server. (Chapters 2-12 were also run
once on 4 and on 8 devices, CONTRIBUTING.md; here three stand for them, in the full proof.)
"""

import nbformat
import papermill
import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.full  # fresh kernels on other device counts: the full proof

CASES = {
    "chapter 3, 2 epochs of 64 per device": (
        "03_mirrored_fit",
        2,
        {"EPOCHS": 2, "BATCH_PER_DEVICE": 64},
    ),
    "chapter 4, 1 epoch on 4 devices": ("04_custom_loops", 4, {"EPOCHS": 1}),
    "chapter 5, 1 epoch on 8 devices": ("05_data_parallel_by_hand", 8, {"EPOCHS": 1}),
}


@pytest.mark.parametrize("case", CASES)
def test_chapter_holds_with_other_knob_values(tmp_path, monkeypatch, case):
    name, devices, values = CASES[case]
    # its own cache: chapter 4 writes image folders there while nbval may run it beside
    monkeypatch.setenv("MULTIGPU_BOOK_CACHE", str(tmp_path / "cache"))
    notebook = nbformat.read(ROOT / "chapters" / f"{name}.ipynb", as_version=4)
    setup = notebook.cells[next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")]
    assert "setup_devices(2)" in setup.source
    setup.source = setup.source.replace("setup_devices(2)", f"setup_devices({devices})")
    source = tmp_path / f"{name}.ipynb"
    nbformat.write(notebook, source)
    papermill.execute_notebook(
        source,
        tmp_path / "executed.ipynb",
        parameters=values,
        cwd=ROOT / "chapters",
        progress_bar=False,
        kernel_name="python3",
    )  # raises on any failed assertion
