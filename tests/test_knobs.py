"""The one knob the second "Run all" cannot turn (conftest.RunAllAgain turns the others):
the number of devices, which a kernel fixes at its first TensorFlow call. A chapter runs
through papermill on 4 devices, with fewer epochs, and every assertion still holds.
"""

import nbformat
import papermill

from tests.helpers import ROOT


def test_chapter_4_holds_on_4_devices(tmp_path):
    notebook = nbformat.read(ROOT / "chapters" / "04_custom_loops.ipynb", as_version=4)
    setup = notebook.cells[next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")]
    assert "setup_devices(2)" in setup.source
    setup.source = setup.source.replace("setup_devices(2)", "setup_devices(4)")
    source = tmp_path / "04_custom_loops.ipynb"
    nbformat.write(notebook, source)
    papermill.execute_notebook(source, tmp_path / "executed.ipynb", parameters={"EPOCHS": 1},
                               cwd=ROOT / "chapters", progress_bar=False,
                               kernel_name="python3")  # raises on any failed assertion
