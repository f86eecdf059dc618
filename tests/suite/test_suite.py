"""The suite itself: CI runs the README's command, GPU machines are recognised, temporary
files stay in one folder, and every utils module has its test file."""

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import (
    PYTORCH_CHAPTERS,
    ROOT,
    code_cells,
    count_nvidia_gpus,
    load_notebook,
    run_fresh,
    source,
    temporary_files_in_one_folder,
)


def test_ci_runs_the_readme_test_command_as_typed_then_the_full_proof():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"<!-- test-command -->\s*```\w*\n(.+?)\n```", readme, re.S).group(1)
    ci = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in ci.splitlines()]
    # as typed: alone on its line (no variables before it), and nothing exported before it
    typed = lines.index(f"offline {command.strip()}")
    assert not any(line.startswith("export") for line in lines[:typed])
    # then the full proof, under one thread and the other kernel library (step 2)
    full = next(i for i, line in enumerate(lines) if "pytest --full" in line and line[0] != "#")
    assert typed < full
    settings = lines[full - 1]  # the full proof's command, continued from this line
    assert settings.startswith("TF_NUM_INTRAOP_THREADS=1 OMP_NUM_THREADS=1 TF_ENABLE_ONEDNN_OPTS=")
    assert settings.endswith("\\")


class _Listing:
    def __init__(self, returncode, stdout):
        self.returncode, self.stdout = returncode, stdout


@pytest.mark.parametrize(
    "behaviour, expected",
    [
        (lambda *a, **k: _Listing(0, "GPU 0: Tesla T4 (UUID: x)\nGPU 1: Tesla T4 (UUID: y)\n"), 2),
        (lambda *a, **k: _Listing(9, "NVIDIA-SMI has failed"), 0),
        (lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError()), 0),
    ],
)
def test_gpu_machines_are_detected_for_nbval_lax_mode(behaviour, expected):
    assert count_nvidia_gpus(run=behaviour) == expected


def test_the_suite_keeps_temporary_files_in_one_folder_it_removes(monkeypatch):
    assert Path(os.environ["TMPDIR"]).name.startswith("book-tests-")  # set by tests/run_policy.py
    monkeypatch.setenv("TMPDIR", os.environ["TMPDIR"])  # put back after this test
    cleanups = []
    folder = Path(temporary_files_in_one_folder(SimpleNamespace(add_cleanup=cleanups.append)))
    made_by_a_child = Path(run_fresh("import tempfile; print(tempfile.mkdtemp())").stdout.strip())
    assert made_by_a_child.parent == folder
    for cleanup in cleanups:
        cleanup()
    assert not folder.exists()


def test_every_utils_module_has_its_own_test_file():
    """The tests mirror the package: utils/NAME.py is tested in tests/utils/test_NAME.py."""
    modules = {p.stem for p in (ROOT / "utils").glob("*.py") if p.stem != "__init__"}
    tests = ROOT / "tests" / "utils"
    missing = sorted(m for m in modules if not (tests / f"test_{m}.py").exists())
    assert not missing, f"no tests/utils/test_<module>.py for: {missing}"


#: the folders of tests/, by what their tests are about (CONTRIBUTING.md, "How the parts fit")
GROUPS = {"book", "chapters", "recipes", "suite", "tools", "utils"}


def test_every_test_file_is_in_the_group_of_what_it_tests():
    """No test file lies loose in tests/, each group is a package (so that two files of one
    name in two groups stay two modules), and a chapter's own tests are named after it:
    tests/chapters/test_chNN_NAME.py for chapters/NN_NAME.ipynb."""
    tests = ROOT / "tests"
    assert not sorted(p.name for p in tests.glob("test_*.py")), "move them into a group"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == GROUPS
    assert all((tests / group / "__init__.py").exists() for group in GROUPS)
    chapters = {p.stem for p in (ROOT / "chapters").glob("*.ipynb")}
    named = {
        re.sub(r"^ch(?=\d\d_)", "", p.stem.removeprefix("test_"))
        for p in (tests / "chapters").glob("test_*.py")
    }
    assert not named - chapters, f"tests/chapters/ names no chapter: {named - chapters}"


def test_colab_s_versions_leave_out_only_chapters_without_their_libraries():
    """CI's run with Colab's versions (.ci/run, step 3) leaves out the PyTorch chapters: none
    of them may import TensorFlow, Keras, JAX or tensorflow-datasets, the libraries that run
    is for."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "from tests.helpers import PYTORCH_CHAPTERS" in ci and "$pytorch_chapters" in ci
    for name in PYTORCH_CHAPTERS:
        cells = "\n".join(source(c) for c in code_cells(load_notebook(f"chapters/{name}.ipynb")))
        imported = re.findall(r"^\s*(?:from|import) (\w+)", cells, re.M)
        found = {"tensorflow", "keras", "jax", "tensorflow_datasets"} & set(imported)
        assert not found, f"{name} imports {found}: take it out of PYTORCH_CHAPTERS"


def test_colab_s_versions_run_every_test_of_the_files_they_name():
    """CI's step 3 runs without --full, so a test marked `full` in a file it names would not
    run with Colab's versions at all."""
    ci = (ROOT / ".ci" / "run").read_text()
    step = ci[ci.index("offline .venv-colab/bin/python -m pytest") :].split("echo", 1)[0]
    files = re.findall(r"(tests/\S+\.py)", step)
    assert files
    for pattern in files:
        for path in ROOT.glob(pattern):
            assert "pytest.mark.full" not in path.read_text(), f"{path.name} has a `full` test"
