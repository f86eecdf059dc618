"""Chapter 9's programs for servers (`ddp_train.py`, `accelerate_train.py`), the files its
page writes: they import nothing from the book, build the book's model and data
(utils.pytorch_ddp's), and started without torchrun say how in one line."""

import ast

import numpy as np
import pytest
import torch

from tests.helpers import stderr_lines_started_alone
from tools.format_written import write_chapter_files
from utils.pytorch_ddp import make_model, to_tensors

#: Chapter 9's programs for servers: a reader copies each alone, so it imports nothing from
#: the book, and it builds the book's model and data itself.
CHAPTER9_PROGRAMS = ["ddp_train.py", "accelerate_train.py"]


@pytest.fixture(scope="module")
def chapter9_programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chapter9")
    return write_chapter_files("chapters/09_processes_and_machines.ipynb", folder)


@pytest.mark.parametrize("name", CHAPTER9_PROGRAMS)
def test_chapter9_programs_import_nothing_from_the_book(chapter9_programs, name):
    text = chapter9_programs[name].read_text()
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported.isdisjoint({"utils", "tools", "recipes", "tests"}), imported
    assert "PYTHONPATH" not in text  # it runs from any folder


@pytest.mark.parametrize("name", CHAPTER9_PROGRAMS)
def test_chapter9_programs_build_the_book_s_model_and_data(chapter9_programs, name):
    """The program's make_model and to_tensors (its imports and definitions run alone, not
    its training) give utils.pytorch_ddp's layers, initial weights and tensors."""
    tree = ast.parse(chapter9_programs[name].read_text())
    kept = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    tree.body = [node for node in tree.body if isinstance(node, kept)]
    program = {}
    exec(compile(tree, name, "exec"), program)
    for seed, dtype in [(0, torch.float32), (0, torch.float64), (3, torch.float32)]:
        theirs, ours = program["make_model"](seed, dtype), make_model(seed, dtype)
        assert repr(theirs) == repr(ours.layers)  # the same layers, in the same order
        weights = zip(theirs.state_dict().values(), ours.state_dict().values(), strict=True)
        assert all(torch.equal(a, b) for a, b in weights)
    rng = np.random.default_rng(0)
    images, labels = rng.random((5, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 5)
    theirs = program["to_tensors"](images, labels, dtype=torch.float64).tensors
    ours = to_tensors(images, labels, dtype=torch.float64).tensors
    assert all(torch.equal(a, b) and a.is_contiguous() for a, b in zip(theirs, ours))


@pytest.mark.full  # starts Python programs: the full proof's
def test_chapter9s_program_started_without_torchrun_says_how_in_one_line(chapter9_programs):
    """`python ddp_train.py ...`, what a newcomer types first: one line, no traceback."""
    program = chapter9_programs["ddp_train.py"]
    flags = ("--data", "digits.npz", "--out", "run")
    assert stderr_lines_started_alone(program, *flags, cwd=program.parent) == (
        1,
        ["Start it with torchrun: the command is at the top of ddp_train.py"],
    )
