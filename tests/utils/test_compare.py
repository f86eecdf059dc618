"""utils.compare: comparing weights."""

import numpy as np
import pytest

from utils.compare import max_abs_difference


def test_max_abs_difference():
    a = [np.zeros((2, 2), np.float32), np.ones(3, np.float32)]
    b = [np.zeros((2, 2), np.float32), np.array([1, 1.5, 1], np.float32)]
    assert max_abs_difference(a, a) == 0.0
    assert max_abs_difference(a, b) == pytest.approx(0.5)
    assert max_abs_difference([], []) == 0.0


@pytest.mark.parametrize(
    "other, message",
    [([np.zeros((2, 2))], "2 arrays with 1"), ([np.zeros(4), np.zeros(3)], "shapes")],
)
def test_max_abs_difference_refuses_mismatches(other, message):
    with pytest.raises(ValueError, match=message):
        max_abs_difference([np.zeros((2, 2)), np.zeros(3)], other)
