"""Shared by the tests: TensorFlow configures devices once per process, so some tests
run their code in a fresh Python process."""

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from tools.format_written import write_chapter_files  # noqa: F401 (the tests import it here)
from utils.launch import REPOSITORY

ROOT = REPOSITORY  # the repository's root folder


NOTEBOOKS = sorted(p.relative_to(ROOT) for p in (ROOT / "chapters").glob("*.ipynb"))

#: Chapters whose lessons are PyTorch: their setup starts PyTorch, not TensorFlow. CI's run
#: with Colab's versions leaves them out (.ci/run, step 3), and tools/gpu_evidence.py runs
#: them on GPUs without TensorFlow, so they import no TensorFlow, Keras or JAX
#: (tests/suite/test_suite.py).
PYTORCH_CHAPTERS = [
    "06_pytorch_dp_ddp",
    "09_processes_and_machines",
    "14_sharded_data_parallelism",
    "15_fsdp2_and_sharded_checkpoints",
    "17_inside_one_step",
    "18_transformer_compute_and_memory",
]


def load_notebook(path):
    """A chapter's notebook as JSON (`path` relative to the repository)."""
    return json.loads((ROOT / path).read_text())


def code_cells(notebook):
    return [c for c in notebook["cells"] if c["cell_type"] == "code"]


def source(cell):
    return "".join(cell["source"])


def colab_url(notebook: str) -> str:
    """The Colab link a page must carry for `notebook` (a path such as chapters/x.ipynb)."""
    import yaml

    repository = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    repo = repository["url"].removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{repo}/blob/{repository['branch']}/{notebook}"


def run_fresh(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a new Python process with the repository root as working directory."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


#: What torchrun tells every process; a program started without it has none of them.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def stderr_lines_started_alone(program, *arguments, cwd) -> tuple[int, list[str]]:
    """`python PROGRAM ARGUMENTS` as a newcomer types it, without torchrun: its exit code
    and the lines it wrote to stderr."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    done = subprocess.run(
        [sys.executable, str(program), *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stderr.strip().splitlines()


@functools.cache
def count_nvidia_gpus(run=subprocess.run) -> int:
    """How many NVIDIA GPUs `nvidia-smi -L` lists; 0 when there is no driver or no GPU.

    Asked once per process (the suite's two plugins both ask); `run` replaces `subprocess.run`
    in tests, each with its own cached answer."""
    try:
        listing = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return 0
    if listing.returncode != 0:
        return 0
    return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))


def temporary_files_in_one_folder(config) -> str:
    """Make one folder the temporary folder (TMPDIR) of every kernel and process the suite
    starts, and remove it when pytest ends (`config.add_cleanup`); return its path.

    nbval stops its kernels by killing them, so what a kernel would delete at exit
    (TensorFlow's AutoGraph sources) would otherwise stay behind, with chapter 8's checkpoint
    folder (CONTRIBUTING.md). A pytest-xdist worker inherits its controller's folder and makes its
    own inside it."""
    folder = tempfile.mkdtemp(prefix="book-tests-")
    os.environ["TMPDIR"] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


def import_chapter_files(notebook, folder, monkeypatch):
    """Write the files of `notebook`'s `%%writefile` cells into `folder`, make it the working
    folder and the first on `sys.path` (where the processes that `run_ranks` and `mp.spawn`
    start import them from), forget modules of the same names imported before, and return
    `importlib.import_module`."""
    import importlib

    names = write_chapter_files(notebook, folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.chdir(folder)
    for name in names:
        monkeypatch.delitem(sys.modules, name.removesuffix(".py"), raising=False)
    return importlib.import_module


def random_digits(count: int, seed: int):
    """`count` random 28x28 images and labels as float64 NCHW tensors (utils.pytorch_ddp's
    `to_tensors`), for the DDP workers of chapters 6 and 13."""
    import numpy as np
    import torch

    from utils.pytorch_ddp import to_tensors

    rng = np.random.default_rng(seed)
    images = rng.random((count, 28, 28, 1), dtype=np.float32)
    return to_tensors(images, rng.integers(0, 10, count), dtype=torch.float64)


def toc_pages() -> list[str]:
    """The pages `_toc.yml` lists after the root, in order, through its parts."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    parts = toc.get("parts", [{"chapters": toc.get("chapters", [])}])
    return [entry["file"] for part in parts for entry in part["chapters"]]


def import_recipe(name: str):
    """A recipe's module (recipes/NAME.py; NAME may be `pytorch/measure`), imported as its
    launcher would: with its folder first on the path, for the files beside it that it
    imports, and none of another recipe folder's modules of the same names."""
    import importlib.util

    path = ROOT / "recipes" / f"{name}.py"
    folder = path.parent
    recipes = ROOT / "recipes"
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) and Path(module.__file__).parent
        if "." not in name and where in (recipes, *recipes.iterdir()) and where != folder:
            del sys.modules[name]  # e.g. recipes/data.py, when pytorch/data.py is wanted
    sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(folder))


def figure_texts(figure) -> list[str]:
    """The texts drawn on a matplotlib figure's axes, in the order they were added."""
    return [text.get_text() for axis in figure.axes for text in axis.texts]


def run_as_typed(text: str, folder: Path, timeout_s: float) -> subprocess.CompletedProcess:
    """Shell lines as a reader types them, in a fresh `folder` holding a copy of `recipes/`
    (what the recipes page says to take from the repository) and the book's `utils` and
    environment (`.venv`, as README makes it), that environment's `python` and `torchrun`
    first on the PATH; stops at the first line that fails."""
    shutil.copytree(ROOT / "recipes", folder / "recipes")
    (folder / "utils").symlink_to(ROOT / "utils")
    (folder / ".venv").symlink_to(Path(sys.executable).parents[1])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-e", "-c", text],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
