"""One name per knob (CONTRIBUTING.md, "Names"): the batch per device, the global batch, the
processes and the devices are named alike in every chapter, recipe, tool and page.

Read with `ast` from the chapters' code cells (and the files their `%%writefile` cells
write) and every .py file under recipes/, utils/ and tools/; the retired flags are also
looked for, as text, in the pages, the Slurm scripts and the tests. A framework's own names
stay as they are (TensorFlow's `num_replicas_in_sync` and `get_per_replica_batch_size`,
PyTorch's `world_size`, `batch_size=` of Keras, tf.data and `DataLoader`), and so does the
prose where it explains TensorFlow's "replica".
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers import NOTEBOOKS, ROOT, code_cells, load_notebook, source

VOCABULARY = """the book's vocabulary:
  the batch per device: BATCH_PER_DEVICE (knob), --batch-per-device (flag),
    batch_per_device (variable, argument)
  the global batch: GLOBAL_BATCH (a knob; PREFIX_GLOBAL_BATCH for one experiment's),
    --global-batch, global_batch
  processes: PROCESSES (a count); devices: DEVICES (the list; its count len(DEVICES)),
    --devices and --cpu-devices (counts)
  other batches: BASE_BATCH / --base-batch (the batch a learning rate was tuned for),
    MICRO_BATCH (one micro-batch of gradient accumulation)"""

#: identifiers (any case) the vocabulary retired, with what replaced them
RETIRED_IDENTIFIERS = {
    r"per_(replica|process|rank|gpu|worker|device)_batch": "batch_per_device",
    r"batch_per_(replica|process|rank|gpu|worker)": "batch_per_device",
    r"cpu_replicas": "cpu_devices",
}
#: a knob (an upper-case name a chapter or module assigns) that names a batch must be one of
KNOB_BATCH = re.compile(r"(\w+_)?(GLOBAL_BATCH|BATCH_PER_DEVICE)|BASE_BATCH|MICRO_BATCH")
#: upper-case names for a count of processes or devices that the vocabulary replaced
RETIRED_COUNTS = re.compile(r"WORLD_SIZE|N(UM)?_?(PROCS|PROCESSES|DEVICES|GPUS|REPLICAS)")
#: flags the vocabulary retired, in any text
RETIRED_FLAGS = re.compile(
    r"--(batch-per-(replica|process|rank|gpu|worker)|per-(device|replica|process)-batch"
    r"|batch-size|cpu-replicas|replicas)(?![\w-])"
)
#: what a flag whose name says "batch" may be
FLAG_BATCH = {"--batch-per-device", "--global-batch", "--base-batch"}


#: a framework's own names that the patterns above would catch
FRAMEWORK_NAMES = {"get_per_replica_batch_size"}  # tf.distribute.InputContext's


def _retired_identifier(name: str) -> str | None:
    if name in FRAMEWORK_NAMES:
        return None
    for pattern, replacement in RETIRED_IDENTIFIERS.items():
        if re.search(pattern, name, re.IGNORECASE):
            return f"{name} (now {replacement.upper() if name.isupper() else replacement})"
    return None


def _knob_problem(name: str) -> str | None:
    """What is wrong with an upper-case name assigned at a module's top level, if anything."""
    if not name.isupper():
        return None
    if re.search(r"BATCH(_SIZE)?$|BATCH_SIZE", name) and not KNOB_BATCH.fullmatch(name):
        return f"{name} (a batch knob is GLOBAL_BATCH or BATCH_PER_DEVICE)"
    if RETIRED_COUNTS.fullmatch(name):
        return f"{name} (a count of processes is PROCESSES; of devices, len(DEVICES))"
    return None


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _flag_definitions(tree: ast.Module) -> set[str]:
    """The flags `add_argument` (or an alias named `add`) defines."""
    flags = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("add_argument", "add")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("--")
        ):
            flags.add(node.args[0].value)
    return flags


def problems_in_code(code: str) -> list[str]:
    """The names in `code` (a module) that break the vocabulary."""
    tree = ast.parse(code)
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.keyword) and node.arg:
            names = [node.arg]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value] if node.value.isidentifier() else []  # getattr, check_args
            found += [f"{m.group(0)} (a retired flag)" for m in RETIRED_FLAGS.finditer(node.value)]
        found += [p for p in map(_retired_identifier, names) if p]
    found += [p for p in map(_knob_problem, sorted(_top_level_names(tree))) if p]
    found += [
        f"{flag} (a batch flag is one of {sorted(FLAG_BATCH)})"
        for flag in sorted(_flag_definitions(tree))
        if "batch" in flag and flag not in FLAG_BATCH
    ]
    return sorted(set(found))


def notebook_modules(path: Path) -> list[tuple[str, str]]:
    """(where, code) for each code cell of a notebook: the cell, or the file its
    `%%writefile` cell writes; other magic and shell lines are left out."""
    modules = []
    for index, cell in enumerate(code_cells(load_notebook(path))):
        lines = source(cell).splitlines()
        where = f"{path.name}, code cell {index + 1}"
        if lines and lines[0].startswith("%%writefile"):
            where += f" ({lines[0].split()[-1]})"
            lines = lines[1:]
        elif lines and lines[0].startswith("%%"):
            continue  # a cell in another language (%%bash)
        code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)
        modules.append((where, code))
    return modules


def _python_files() -> list[Path]:
    return sorted(
        p
        for part in ("recipes", "utils", "tools")
        for p in (ROOT / part).rglob("*.py")
        if "__pycache__" not in p.parts
    )


def _text_files() -> list[Path]:
    """What the book shows or runs as text: pages, Slurm scripts, the tests (not this one)."""
    files = [*ROOT.glob("*.md"), *(ROOT / "recipes").rglob("*.sbatch")]
    files += [p for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name]
    return sorted(files)


def _fail(where: str, problems: list[str]) -> None:
    if problems:
        pytest.fail(f"{where} uses {'; '.join(problems)}.\n{VOCABULARY}", pytrace=False)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapters_name_their_knobs_with_the_vocabulary(notebook):
    problems = [
        f"{where}: {problem}"
        for where, code in notebook_modules(ROOT / notebook)
        for problem in problems_in_code(code)
    ]
    _fail(str(notebook), problems)


def test_recipes_utils_and_tools_name_their_knobs_with_the_vocabulary():
    problems = [
        f"{path.relative_to(ROOT)}: {problem}"
        for path in _python_files()
        for problem in problems_in_code(path.read_text())
    ]
    _fail("the code", problems)


def test_pages_scripts_and_tests_use_no_retired_flag():
    cells = [
        (f"{notebook.name}, cell {i + 1}", source(cell))
        for notebook in (ROOT / n for n in NOTEBOOKS)
        for i, cell in enumerate(load_notebook(notebook)["cells"])
    ]
    texts = cells + [(str(p.relative_to(ROOT)), p.read_text()) for p in _text_files()]
    problems = [
        f"{where}: {match.group(0)}"
        for where, text in texts
        for match in RETIRED_FLAGS.finditer(text)
    ]
    _fail("the pages", sorted(problems))


@pytest.mark.parametrize(
    "code",
    [
        "PER_REPLICA_BATCH = 32",
        "PER_PROCESS_BATCH = 32",
        "BN_PER_REPLICA_BATCH = 4",
        "BATCH_SIZE = 64",
        "BATCH = 16",
        "PRECISION_BATCH = 64",
        "WORLD_SIZE = 2",
        "NUM_DEVICES = 2",
        "def f(per_rank_batch): pass",
        "x = args.batch_per_replica",
        "f(per_device_batch=8)",
        "check_args(args, ('epochs', 'batch_per_replica'))",
        "parser.add_argument('--batch-per-replica', type=int)",
        "add('--batch', type=int)",
        "parser.add_argument('--cpu-replicas', type=int)",
        "command = 'python -m utils.bench --replicas 1 2'",
    ],
)
def test_the_retired_names_fail(code):
    assert problems_in_code(code)


def test_the_vocabulary_and_the_frameworks_names_pass():
    code = """
BATCH_PER_DEVICE = 32
BN_BATCH_PER_DEVICE = 4
GLOBAL_BATCH = BATCH_PER_DEVICE * strategy.num_replicas_in_sync
INPUT_GLOBAL_BATCH = 64
GLOBAL_BATCHES = (64, 512)
BASE_BATCH, MICRO_BATCH, PROCESSES = 32, 16, 2
batch = context.get_per_replica_batch_size(GLOBAL_BATCH)
loader = DataLoader(data, batch_size=BATCH_PER_DEVICE)
world_size = int(os.environ["WORLD_SIZE"])
parser.add_argument("--batch-per-device", type=int)
parser.add_argument("--global-batch", type=int)
parser.add_argument("--cpu-devices", type=int)
record = {"examples_per_s_per_replica": 1.0, "replicas": 2}
"""
    assert problems_in_code(code) == []
