"""The output policy (tests/output_policy.py) that nbval compares chapters with, tested both
ways: what real runs on other settings printed must match, realistic regressions must not."""

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
    ("decimal", "0.666", "0.667", "8 threads, chapter 9 cell 8"),
    ("difference", "1.4e-16", "1.7e-16", "1 thread, chapter 7 cell 12: float64 DDP"),
    ("difference", "2.0e-07", "1.8e-07", "oneDNN off, chapter 5 cell 10"),
    ("difference", "2e-07", "4e-07", "1 thread, chapter 10 cell 9: torchrun vs one process"),
    ("difference", "2e-08", "1e-08", "oneDNN off, chapter 3 cell 12"),
    ("difference", "4e-03", "6e-03", "1 thread, chapter 3 cell 10: weights after training"),
    ("difference", "4e-03", "9e-04", "oneDNN off, chapter 3 cell 10: weights after training"),
    ("difference", "4e-05", "2e-06", "oneDNN off, chapter 3 cell 10: losses after training"),
    ("difference", "4e-05", "7e-05", "1 thread, chapter 3 cell 10: losses after training"),
    ("difference", "4e-08", "0e+00", "1 thread, chapter 3 cell 18: one update"),
    ("difference", "4e-08", "6e-08", "8 threads, chapter 3 cell 18: one update"),
    ("difference", "5.6e-17", "4.2e-17", "8 threads, chapter 3 cell 8: float64"),
    ("difference", "6e-06", "3e-06", "1 thread, chapter 12 cell 11"),
    ("difference", "8e-12", "7e-12", "oneDNN off, chapter 12 cell 17"),
    ("percent", "0.5", "0.4", "oneDNN off, chapter 12 cell 17"),
    ("percent", "76.7", "76.8", "oneDNN off, chapter 6 cell 8"),
    ("percent", "85.7", "85.9", "1 thread, chapter 5 cell 12"),
    ("percent", "91.9", "89.5", "oneDNN off, chapter 12 cell 6: batch 256, lr x8"),
    ("percent", "91.9", "90.4", "1 thread, chapter 12 cell 6: batch 256, lr x8"),
    ("percent", "92.4", "89.3", "1 thread + oneDNN, chapter 12 cell 4: batch 256, lr x8"),
    ("percent", "92.1", "91.7", "1 thread, chapter 5 cell 12"),
    ("percent", "92.7", "92.6", "8 threads, chapter 1 cell 25"),
]


@pytest.mark.parametrize("kind, committed, measured, where", MEASURED, ids=lambda v: str(v))
def test_measured_variations_match(kind, committed, measured, where):
    assert numbers_match(committed, measured, kind), where


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


def test_tolerant_text_is_what_nbval_compares_with():
    reference = TolerantText("loss 0.3944\n")
    assert reference == "loss 0.3943\n" and not reference != "loss 0.3943\n"
    assert reference != "loss 0.9\n"
    assert TolerantText("x") != 3 and isinstance(reference, str)


def test_nbval_uses_the_policy(pytestconfig):
    """conftest.py wraps nbval's sanitizer so that its `!=` comparison follows the policy."""
    from nbval.plugin import IPyNbCell

    class Parent:
        sanitize_patterns = {r"\d+ ms": "DURATION"}

    cell = IPyNbCell.__new__(IPyNbCell)
    cell.parent = Parent()
    sanitized = IPyNbCell.sanitize(cell, "step 12 ms, loss 0.3944")
    assert isinstance(sanitized, TolerantText) and sanitized == "step DURATION, loss 0.3943"
