"""tools.run_chapters: a chapter re-executed keeps what a reader sees and nothing that changes
from run to run."""

import nbformat

from tools.run_chapters import run_chapter


def test_a_run_keeps_what_a_reader_sees_and_drops_stderr_and_timestamps(tmp_path):
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import sys\nprint('a')\nprint('log', file=sys.stderr)\n"
                "sys.stderr.flush(); sys.stdout.flush()\nprint('b')\n"
                "print('50%', end='\\r', flush=True)\nprint('100%')"
            ),
            nbformat.v4.new_code_cell("import os\nos.path.basename(os.getcwd())"),
        ]
    )
    (tmp_path / "chapters").mkdir()
    path = tmp_path / "chapters" / "chapter.ipynb"
    nbformat.write(notebook, path)
    run_chapter(path)
    first, second = nbformat.read(path, as_version=4).cells
    assert [(o.output_type, o.get("name"), o.get("text")) for o in first.outputs] == [
        ("stream", "stdout", "a\nb\n100%\n")
    ]  # a progress bar keeps its last state
    assert second.outputs[0].data["text/plain"] == "'chapters'"  # ran in the notebook's folder
    assert [first.execution_count, second.execution_count] == [1, 2]
    assert "execution" not in first.metadata and "execution" not in second.metadata


def test_a_run_keeps_only_the_allowed_metadata(tmp_path):
    cell = nbformat.v4.new_code_cell("1", metadata={"tags": ["parameters"], "scrolled": True})
    notebook = nbformat.v4.new_notebook(
        cells=[cell],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python", "version": "3.11.7"},
            "widgets": {"state": {}},
        },
    )
    path = tmp_path / "chapter.ipynb"
    nbformat.write(notebook, path)
    run_chapter(path)
    written = nbformat.read(path, as_version=4)
    assert set(written.metadata) == {"kernelspec", "language_info"}
    assert "version" not in written.metadata.language_info
    assert written.cells[0].metadata == {"tags": ["parameters"]}
