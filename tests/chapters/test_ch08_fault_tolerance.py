"""Chapter 8's claim that `keras.utils.set_random_seed` and op determinism give bit-identical
weights in two separate processes, not only in one (the chapter shows one process)."""

import sys

import numpy as np
import pytest

from tests.helpers import code_cells, load_notebook, source
from utils.launch import run_processes

CHAPTER = "chapters/08_fault_tolerance.ipynb"


def chapter_code(defining: str) -> str:
    """The code of chapter 8's cell that contains `defining`, up to its first blank pair of
    lines after the definition (the cell's own runs follow)."""
    cell = next(source(c) for c in code_cells(load_notebook(CHAPTER)) if defining in source(c))
    return cell.split("\n\n\n")[0]


@pytest.mark.full  # starts Python programs: the full proof's
def test_two_processes_with_both_switches_train_bit_identical_weights(tmp_path):
    program = "\n".join(
        [
            "import sys",
            "import keras",
            "import numpy as np",
            "import tensorflow as tf",
            "from utils import load_mnist_subset",
            chapter_code("EXAMPLES = "),  # the chapter's knobs
            "tf.config.experimental.enable_op_determinism()",
            "(x_train, y_train), _ = load_mnist_subset()",
            "x_train, y_train = x_train[:EXAMPLES], y_train[:EXAMPLES]",
            chapter_code("def seeded_run"),
            "weights = seeded_run(1)",
            "np.save(sys.argv[1], np.concatenate([w.ravel() for w in weights]))",
        ]
    )
    runs = [str(tmp_path / f"process{i}.npy") for i in range(2)]
    run_processes([[sys.executable, "-c", program, run] for run in runs], timeout_s=300)
    first, second = (np.load(run) for run in runs)
    assert first.size > 1000 and np.array_equal(first, second)
