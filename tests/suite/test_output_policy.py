"""The output policy (tests/output_policy.py) that nbval compares chapters with, tested both
ways: what real runs on other settings printed must match, realistic regressions must not."""

from types import SimpleNamespace

import pytest

from tests.output_policy import (
    DIFFERENCE_FACTOR,
    PERCENT_POINTS,
    TolerantText,
    numbers_match,
    outputs_match,
    printed_numbers,
)

# Measured with `python -m tools.output_variation` on the committed chapters: the committed
# number, what a run printed instead, and where (setting, chapter, cell). Settings: 1 and 8
# threads per operation (TF_NUM_INTRAOP_THREADS, OMP_NUM_THREADS), oneDNN's kernels off
# (TF_ENABLE_ONEDNN_OPTS=0, TensorFlow's default on CPUs without AVX-512 VNNI or AMX).
# Colab's library versions (TensorFlow 2.20, Keras 3.13) changed no printed number.
MEASURED = [
    ("decimal", "0.3944", "0.3943", "oneDNN off, chapter 3 cell 10: an epoch's loss"),
    ("decimal", "0.666", "0.667", "8 threads, chapter 8 cell 8"),
    ("difference", "1.4e-16", "1.7e-16", "1 thread, chapter 6 cell 12: float64 DDP"),
    ("difference", "2.0e-07", "1.8e-07", "oneDNN off, chapter 5 cell 10"),
    ("difference", "2e-07", "4e-07", "1 thread, chapter 9 cell 9: torchrun vs one process"),
    ("difference", "2e-08", "1e-08", "oneDNN off, chapter 3 cell 12"),
    ("difference", "4e-03", "6e-03", "1 thread, chapter 3 cell 10: weights after training"),
    ("difference", "4e-03", "9e-04", "oneDNN off, chapter 3 cell 10: weights after training"),
    ("difference", "4e-05", "2e-06", "oneDNN off, chapter 3 cell 10: losses after training"),
    ("difference", "4e-05", "7e-05", "1 thread, chapter 3 cell 10: losses after training"),
    ("difference", "4e-08", "0e+00", "1 thread, chapter 3 cell 18: one update"),
    ("difference", "4e-08", "6e-08", "8 threads, chapter 3 cell 18: one update"),
    ("difference", "5.6e-17", "4.2e-17", "8 threads, chapter 3 cell 8: float64"),
    ("difference", "6e-06", "3e-06", "1 thread, chapter 12 cell 11"),
    ("difference", "8e-12", "7e-12", "oneDNN off, chapter 13 cell 8"),
    ("percent", "0.5", "0.4", "oneDNN off, chapter 13 cell 8"),
    ("percent", "76.7", "76.8", "oneDNN off, appendix cell 8"),
    ("percent", "85.7", "85.9", "1 thread, chapter 5 cell 12"),
    ("percent", "91.9", "89.5", "oneDNN off, chapter 12 cell 6: batch 256, lr x8"),
    ("percent", "91.9", "90.4", "1 thread, chapter 12 cell 6: batch 256, lr x8"),
    ("percent", "92.4", "89.3", "1 thread + oneDNN, chapter 12 cell 4: batch 256, lr x8"),
    ("percent", "92.1", "91.7", "1 thread, chapter 5 cell 12"),
    ("percent", "92.7", "92.6", "8 threads, chapter 1 cell 25"),
    # 2 threads with oneDNN's kernels: TensorFlow's defaults, as typed, on a 2-core machine
    # with AVX-512 VNNI (cells counted as nbval counts them, code cells from 0)
    ("decimal", "0.4881", "0.488", "2 threads + oneDNN, chapter 3 cell 4: a loss share"),
    ("decimal", "1.0361", "1.0360", "2 threads + oneDNN, chapter 3 cell 4: the summed loss"),
    ("difference", "1e-05", "4e-05", "2 threads + oneDNN, chapter 3 cell 7: losses"),
    ("difference", "5e-04", "4e-03", "2 threads + oneDNN, chapter 3 cell 7: weights"),
    ("difference", "7.5e-08", "0.0e+00", "2 threads + oneDNN, appendix cell 3: outputs"),
    ("difference", "3.3e-16", "2.2e-16", "2 threads + oneDNN, chapter 6 cell 7: float64"),
    ("difference", "6e-07", "5e-07", "2 threads + oneDNN, chapter 9 cell 5: torchrun"),
    ("difference", "1e-08", "2e-08", "2 threads + oneDNN, chapter 10 cell 6: 2 workers"),
    ("difference", "7e-06", "6e-06", "2 threads + oneDNN, chapter 12 cell 8: BN statistics"),
    ("difference", "2e-15", "1e-15", "2 threads + oneDNN, chapter 14 cell 5: ZeRO-1"),
    ("percent", "89.3", "91.9", "2 threads + oneDNN, chapter 12 cell 4: batch 256, lr x8"),
    ("percent", "91.5", "92.1", "2 threads + oneDNN, chapter 5 cell 10"),
    ("percent", "0.4", "0.5", "2 threads + oneDNN, chapter 13 cell 8: flushed to zero"),
]

# Measured in cells that assert a bound and give it as their `difference_bound`: the
# committed number, what a run printed instead, the cell's bound, and where.
MEASURED_IN_BOUNDED_CELLS = [
    ("0e+00", "4e-08", 1e-6, "2 threads + oneDNN, chapter 3 cell 13: uneven batches"),
    ("4e-06", "0e+00", 1e-5, "2 threads + oneDNN, chapter 3 cell 16: loaded model"),
    ("4e-06", "0e+00", 1e-4, "2 threads + oneDNN, appendix cell 7: reloaded template"),
    ("2e-06", "0e+00", 1e-4, "2 threads + oneDNN, chapter 8 cell 10: 2 -> 1 devices"),
    ("0e+00", "4e-06", 1e-5, "another 2-core machine, chapter 3 cell 16 (issue 48)"),
]


@pytest.mark.parametrize("kind, committed, measured, where", MEASURED, ids=lambda v: str(v))
def test_measured_variations_match(kind, committed, measured, where):
    assert numbers_match(committed, measured, kind), where


@pytest.mark.parametrize(
    "committed, measured, bound, where", MEASURED_IN_BOUNDED_CELLS, ids=lambda v: str(v)
)
def test_measured_variations_in_bounded_cells_match(committed, measured, bound, where):
    kind = "zero" if float(committed) == 0 else "difference"
    assert numbers_match(committed, measured, kind, bound), where
    assert outputs_match(f"gap {committed}", f"gap {measured}", bound), where


@pytest.mark.parametrize(
    "committed, rerun",
    [
        ("test accuracy 92.4%", "test accuracy 87.8%"),  # 4.6 points
        ("test accuracy 92.7%", "test accuracy 40.1%"),
        ("loss 0.3944", "loss 0.3"),  # the committed value has four digits
        ("final loss 0.39", "final loss 0.52"),
        ("mean 2.29", "mean 2.36"),  # 3%
        ("largest difference 0e+00", "largest difference 1e-05"),  # an exact zero
        ("largest difference 0e+00", "largest difference 4e-08"),
        ("largest difference 0.0e+00", "largest difference 0.5"),
        ("weight difference 4e-03", "weight difference 2e-01"),  # 50x
        ("largest difference 4e-08", "largest difference 3e-04"),  # beyond rounding
        ("weight difference 2e-02", "weight difference -2e-02"),
        ("weight difference 4e-03", "weight difference 0.004"),  # another format
        ("[400 400 400]", "[400 400 399]"),  # integers: counts are exact
        ("shape (32, 28, 28, 1)", "shape (32, 28, 28, 2)"),
        ("epoch 3/3", "epoch 3/4"),
        ("identical: True", "identical: False"),
        ("on device:CPU:0", "on device:CPU:1"),
        ("TensorFlow 2.21.0", "TensorFlow 2.21.1"),  # versions are text, not floats
        ("loss 0.39", "loss 0.39 (rounded)"),  # any other text
        ("a 1.0 b", "a 1 b"),  # a float printed as an integer is a change of format
    ],
)
def test_regressions_do_not_match(committed, rerun):
    assert not outputs_match(committed, rerun)


def test_whole_lines_as_a_rerun_prints_them():
    assert outputs_match(
        "epoch losses, mirrored:   [1.8953, 0.7016, 0.3944]",
        "epoch losses, mirrored:   [1.8953, 0.7016, 0.3943]",
    )
    assert outputs_match(
        "largest loss difference 4e-05, largest weight difference 4e-03",
        "largest loss difference 2e-06, largest weight difference 9e-04",
    )
    assert outputs_match("final loss 0.05", "final loss 0.06")  # one unit of the last digit


def test_each_kind_is_recognised():
    line = "acc 92.7%, loss 0.3944, gap 0e+00, diff 4e-03, steps 150, TF 2.21.0"
    assert printed_numbers(line) == [
        ("92.7", "percent"),
        ("0.3944", "decimal"),
        ("0e+00", "zero"),
        ("4e-03", "difference"),
        ("150", "integer"),
    ]


def test_the_tolerances_sit_just_above_what_was_measured():
    ratios = [
        max(float(a) / float(b), float(b) / float(a))
        for kind, a, b, _ in MEASURED
        if kind == "difference" and float(a) * float(b) > 0
    ]
    points = [abs(float(a) - float(b)) for kind, a, b, _ in MEASURED if kind == "percent"]
    assert max(ratios) <= DIFFERENCE_FACTOR < 1.5 * max(ratios)
    assert max(points) <= PERCENT_POINTS < 1.5 * max(points)


@pytest.mark.parametrize(
    "committed, rerun, bound, match",
    [
        # below the bound the cell asserts: the same finding
        ("prediction difference 0e+00", "prediction difference 4e-06", 1e-5, True),
        ("prediction difference 2e-06", "prediction difference 9e-05", 1e-4, True),
        # beyond the bound the cell asserts: a finding of its own
        ("prediction difference 0e+00", "prediction difference 2e-05", 1e-5, False),
        ("prediction difference 4e-06", "prediction difference 3e-04", 1e-4, False),
        # no bound given: a printed zero is an exact result (the cell asserts `== 0`)
        ("prediction difference 0e+00", "prediction difference 4e-06", None, False),
        ("prediction difference 4e-06", "prediction difference 0e+00", None, False),
        ("weight difference 0.0e+00", "weight difference 0.0e+00", None, True),
        # a bound loosens differences, never integers, text or the format
        ("2 -> 1 in 0e+00", "2 -> 2 in 0e+00", 1e-4, False),
        ("difference 0e+00", "difference 0.00001", 1e-4, False),
    ],
)
def test_a_cell_s_difference_bound(committed, rerun, bound, match):
    assert outputs_match(committed, rerun, bound) is match
    assert (TolerantText(committed, bound) == rerun) is match


def test_tolerant_text_is_what_nbval_compares_with():
    reference = TolerantText("loss 0.3944\n")
    assert reference == "loss 0.3943\n" and not reference != "loss 0.3943\n"
    assert reference != "loss 0.9\n"
    assert TolerantText("x") != 3 and isinstance(reference, str)


def test_nbval_uses_the_policy(pytestconfig):
    """tests/nbval_policy.py wraps nbval's sanitizer so that its `!=` comparison follows the
    policy."""
    from nbval.plugin import IPyNbCell

    class Parent:
        sanitize_patterns = {r"\d+ ms": "DURATION"}

    cell = IPyNbCell.__new__(IPyNbCell)
    cell.parent, cell.cell = Parent(), SimpleNamespace(metadata={})
    sanitized = IPyNbCell.sanitize(cell, "step 12 ms, loss 0.3944")
    assert isinstance(sanitized, TolerantText) and sanitized == "step DURATION, loss 0.3943"
    assert IPyNbCell.sanitize(cell, "gap 0e+00") != "gap 4e-06"
    cell.cell = SimpleNamespace(metadata={"difference_bound": 1e-5})
    assert IPyNbCell.sanitize(cell, "gap 0e+00") == "gap 4e-06"
