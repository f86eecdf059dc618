"""tools.format_written formats what `%%writefile` cells write, and leaves the rest."""

import nbformat

from tools.format_written import format_notebook, written_names


def test_written_cells_are_formatted_and_other_cells_left_alone(tmp_path):
    path = tmp_path / "chapter.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "%%writefile a.py\nimport os\nfrom utils import x\nimport b\nf(x,b,os)"
        ),
        nbformat.v4.new_code_cell("%%writefile -a a.py\ndef g( ):\n  return 1"),
        nbformat.v4.new_code_cell("%%writefile b.py\ny=1"),
        nbformat.v4.new_code_cell("left  =  'as it is'"),
    ]
    nbformat.write(notebook, path)
    assert written_names(notebook) == ["a.py", "b.py"]
    assert format_notebook(path) == 3
    cells = [cell.source for cell in nbformat.read(path, as_version=4).cells]
    # the chapter's own files and utils are first-party imports, after the others
    assert cells[0] == "%%writefile a.py\nimport os\n\nimport b\nfrom utils import x\n\nf(x, b, os)"
    assert cells[1] == "%%writefile -a a.py\n\n\ndef g():\n    return 1"
    assert cells[2:] == ["%%writefile b.py\ny = 1", "left  =  'as it is'"]
    assert format_notebook(path) == 0  # formatted already
