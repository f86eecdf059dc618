"""The quick start's three programs: the files under recipes/quickstart/ are what its page
shows and runs, and they are complete (nothing from the book's `utils`). Its cells train
each of them; tests/book/test_notebooks.py and nbval check those."""

import ast
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT, code_cells, load_notebook, source, stderr_lines_started_alone

PAGE = "chapters/quick_start.ipynb"
PROGRAMS = sorted(p.name for p in (ROOT / "recipes" / "quickstart").glob("*.py"))


def written_by_the_page() -> dict[str, str]:
    """The files the quick start writes with %%writefile (and adds to with `-a`), by name:
    each cell's code ends with a newline in the file, as IPython writes it."""
    written = {}
    for cell in code_cells(load_notebook(PAGE)):
        first, _, rest = source(cell).partition("\n")
        if first.startswith("%%writefile "):
            *flags, name = first.split()[1:]
            written[name] = (written[name] + "\n" if "-a" in flags else "") + rest
    return written


def test_the_page_shows_every_program_and_no_other():
    shown = {name for name in written_by_the_page() if "_own_loss" not in name}
    assert PROGRAMS == ["keras_jax.py", "keras_mirrored.py", "torch_ddp.py"]
    assert shown == set(PROGRAMS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_program_is_the_one_on_the_page(name):
    on_page = written_by_the_page()[name]
    in_file = (ROOT / "recipes" / "quickstart" / name).read_text()
    assert on_page.rstrip("\n") == in_file.rstrip("\n"), (
        f"recipes/quickstart/{name} differs from the quick start's cell: copy the cell "
        "into the file (or the file into the cell) so that they are the same"
    )


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_program_is_complete(name):
    tree = ast.parse((ROOT / "recipes" / "quickstart" / name).read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported.isdisjoint({"utils", "recipes", "data", "tf_common", "transformer"})
    assert ast.get_docstring(tree).count("\n") >= 2  # says how to run it


@pytest.mark.full  # starts Python programs: the full proof's
def test_torch_ddp_started_without_torchrun_says_how_to_start_it(tmp_path):
    """`python torch_ddp.py`, what a newcomer types first: one line that says what to do."""
    program = ROOT / "recipes" / "quickstart" / "torch_ddp.py"
    assert stderr_lines_started_alone(program, cwd=tmp_path) == (
        1,
        ["Start it with torchrun: torchrun --nproc_per_node=2 torch_ddp.py"],
    )


@pytest.mark.full
def test_torch_ddp_with_more_processes_than_gpus_says_it_trains_on_the_cpu(tmp_path):
    """On a machine with one GPU (made up here: torch.cuda reports one), two processes
    say so in one line and train on the CPU with gloo."""
    (tmp_path / "sitecustomize.py").write_text(
        "import torch\n"
        "torch.cuda.device_count = lambda: 1\n"
        "torch.cuda.is_available = lambda: True\n"
    )
    program = ROOT / "recipes" / "quickstart" / "torch_ddp.py"
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        + ["--nproc_per_node=2", str(program), "--epochs", "1"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "More processes (2) than GPUs: all of them train on the CPU"
    assert lines[-1].startswith("2 processes on cpu: test accuracy")
