"""The output policy (tests/output_policy.py) that nbval compares chapters with."""

import pytest

from tests.output_policy import ABSOLUTE, TolerantText, numbers_match, outputs_match


@pytest.mark.parametrize(
    "reference, actual",
    [
        # Seen between two x86 machines and two thread counts: last digits of floats.
        ("train accuracy 92.7%, test 92.3%", "train accuracy 92.6%, test 92.4%"),
        ("epoch losses: [1.8953, 0.7016, 0.3944]", "epoch losses: [1.8953, 0.7016, 0.3943]"),
        ("identical update 4e-08", "identical update 0e+00"),
        ("by hand vs one device 2.0e-07", "by hand vs one device 2.1e-07"),
        ("largest difference 0.0e+00", "largest difference 7.5e-08"),
        (
            "largest difference from one process: 2.2e-16",
            "largest difference from one process: 3.3e-16",
        ),
        (
            "loss difference 7e-05, weight difference 6e-03",
            "loss difference 4e-05, weight difference 4e-03",
        ),
        ("final loss 0.05", "final loss 0.06"),  # one unit of the last printed digit
        ("loss 2.29, accuracy 21.7%", "loss 2.31, accuracy 22.1%"),  # within 5%
        ("same text", "same text"),
    ],
)
def test_rounding_differences_match(reference, actual):
    assert outputs_match(reference, actual)


@pytest.mark.parametrize(
    "reference, actual",
    [
        ("test accuracy 92.7%", "test accuracy 40.1%"),  # a real regression
        ("final loss 0.39", "final loss 0.52"),
        ("largest difference 4e-08", "largest difference 3e-04"),
        ("largest difference 0e+00", "largest difference 0.5"),  # 0e+00 is exactly zero
        ("weight difference 2e-02", "weight difference 4e-04"),  # sizes more than 10x apart
        ("weight difference 2e-02", "weight difference -2e-02"),
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
def test_real_differences_do_not_match(reference, actual):
    assert not outputs_match(reference, actual)


def test_absolute_tolerance_is_rounding_sized():
    assert numbers_match("0.0", f"{ABSOLUTE / 2:.1e}")
    assert not numbers_match("0.0e+00", f"{ABSOLUTE * 10:.1e}")


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
