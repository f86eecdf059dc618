"""Every shell command a page shows runs as typed.

A ```bash block on the quick start, the recipes page or a chapter either runs on a CPU
machine exactly as written, or its first line says what it needs (`MARKS`) and the page
also runs its programs on the CPU. The quick start's blocks are the very commands its
cells run (`run(f"...")` with the page's knobs); the other runnable blocks are run here,
as typed, in a fresh folder holding what the page says to copy (the full proof)."""

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT, code_cells, load_notebook, run_as_typed, source

#: The first line of a block that a CPU machine cannot run, and what it needs.
MARKS = ("# needs GPUs", "# needs several machines", "# needs a Slurm cluster")
NETWORK = "# needs the network"  # an install line: its pins are the book's
PAGES = ["on_your_own_machine.md", "gpu_results.md"] + sorted(
    str(path.relative_to(ROOT)) for path in (ROOT / "chapters").glob("*.ipynb")
)
BLOCK = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.M | re.S)
#: What a command of a block may take a few minutes for on two cores.
BLOCK_TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    page: str
    text: str

    @property
    def mark(self) -> str | None:
        first = self.text.splitlines()[0]
        return next((m for m in (*MARKS, NETWORK) if first.startswith(m)), None)

    @property
    def commands(self) -> list[str]:
        """The block's command lines, comments dropped and continued lines joined."""
        joined = re.sub(r"\\\n\s*", "", self.text)
        lines = (line.split("  #")[0].strip() for line in joined.splitlines())
        return [line for line in lines if line and not line.startswith("#")]

    @property
    def programs(self) -> set[str]:
        return {
            Path(word).name for c in self.commands for word in c.split() if word.endswith(".py")
        }


def page_markdown(page: str) -> str:
    if page.endswith(".md"):
        return (ROOT / page).read_text()
    cells = load_notebook(page)["cells"]
    return "\n".join(source(c) for c in cells if c["cell_type"] == "markdown")


def shell_blocks(page: str) -> list[Block]:
    return [Block(page, text) for text in BLOCK.findall(page_markdown(page))]


def knobs(page: str) -> dict:
    """The values of the notebook's `parameters` cell, as committed."""
    namespace: dict = {}
    for cell in code_cells(load_notebook(page)):
        if "parameters" in cell["metadata"].get("tags", []):
            exec(source(cell), namespace)
    return namespace


def commands_the_cells_run(page: str) -> set[str]:
    """The shell lines a notebook's cells hand to its `run` helper, knobs filled in."""
    found = set()
    values = knobs(page)
    for cell in code_cells(load_notebook(page)):
        for call in re.findall(r"\brun\(\s*((?:f?\"[^\"]*\"\s*)+)\)", source(cell)):
            parts = re.findall(r"(f?)\"([^\"]*)\"", call)
            found.add("".join(p.format(**values) if f else p for f, p in parts))
    return found


def programs_the_cells_run(page: str) -> set[str]:
    """The .py files a notebook's code cells name: the page writes and runs them here."""
    cells = code_cells(load_notebook(page))
    return {Path(name).name for c in cells for name in re.findall(r"[\w/.]+\.py\b", source(c))}


ALL_BLOCKS = [block for page in PAGES for block in shell_blocks(page)]


def test_the_pages_have_shell_blocks_to_check():
    pages = {block.page for block in ALL_BLOCKS}
    assert {"chapters/quick_start.ipynb", "on_your_own_machine.md"} <= pages


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.mark in MARKS], ids=lambda b: f"{b.page}:{b.text[:30]}"
)
def test_a_marked_block_has_a_cpu_counterpart_on_its_page(block):
    runnable = {p for b in shell_blocks(block.page) if b.mark is None for p in b.programs}
    if block.page.endswith(".ipynb"):
        runnable |= programs_the_cells_run(block.page)
    missing = block.programs - runnable
    assert not missing, (
        f"{block.page}: the block marked {block.mark!r} runs {sorted(missing)}, which no "
        "command of the page runs on a CPU: add the CPU command beside it"
    )


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if match := re.match(r"^([\w.-]+)(?:\[[\w,-]+\])?==([\w.]+)", line):
            pins[match[1].lower()] = match[2]
    return pins


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.mark == NETWORK], ids=lambda b: b.page
)
def test_an_install_line_pins_the_books_versions(block):
    pins = requirement_pins()
    for command in block.commands:
        assert command.startswith("pip install "), command
        for name, version in re.findall(r"([\w.-]+)(?:\[[\w,-]+\])?==([\w.]+)", command):
            assert pins.get(name.lower()) == version, (
                f"{block.page} installs {name}=={version}; requirements.txt pins "
                f"{pins.get(name.lower())}"
            )


def test_the_quick_starts_commands_are_the_ones_its_cells_run():
    page = "chapters/quick_start.ipynb"
    ran = commands_the_cells_run(page)
    for block in shell_blocks(page):
        if block.mark is None:
            missing = set(block.commands) - ran
            assert not missing, (
                f"the quick start shows {sorted(missing)} but its cells run only {sorted(ran)}: "
                "run the command the page shows (run(f'...') with the knobs)"
            )


#: Commands a test of their own runs as typed, in a fresh folder, and checks what they print.
RUN_BY_THEIR_TEST = {"python recipes/scaling.py --cpu-processes 2": "tests/recipes/test_scaling.py"}


def runnable_elsewhere() -> list[Block]:
    """Blocks that run on a CPU and that neither a cell of their page nor a test of their
    own runs."""
    return [
        b
        for b in ALL_BLOCKS
        if b.mark is None
        and b.page != "chapters/quick_start.ipynb"
        and not set(b.commands) <= RUN_BY_THEIR_TEST.keys()
    ]


def test_a_block_left_to_its_own_test_is_on_its_page():
    shown = {command for block in ALL_BLOCKS for command in block.commands}
    for command, test in RUN_BY_THEIR_TEST.items():
        assert command in shown and (ROOT / test).is_file(), (command, test)


@pytest.mark.full
@pytest.mark.parametrize("block", runnable_elsewhere(), ids=lambda b: f"{b.page}:{b.text[:30]}")
def test_a_runnable_block_runs_as_typed(block, tmp_path):
    """In a fresh folder, as `tests.helpers.run_as_typed` sets one up."""
    done = run_as_typed(block.text, tmp_path, BLOCK_TIMEOUT_S)
    assert done.returncode == 0, (
        f"{block.page}: the block\n{block.text}\nfailed:\n"
        f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
    )
