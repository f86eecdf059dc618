"""utils.figures_foundations: the figures of the Foundations part (chapter 2). Each is drawn from
values its chapter computes."""

import pytest

from utils.figures_foundations import draw_data_parallel_step


def test_a_data_parallel_step_has_a_column_per_device_and_one_all_reduce():
    figure = draw_data_parallel_step(
        [[0, 1], [2, 3], [4, 5]], [[0.1, 0.2]] * 3, [0.3, 0.6], [[0.9, 0.8]] * 3
    )
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert [t for t in texts if t.startswith("device")] == ["device 0", "device 1", "device 2"]
    assert sum("all-reduce" in t for t in texts) == 1
    assert "examples 4-5" in texts and "weights\n[0.900, 0.800]" in texts
    with pytest.raises(ValueError, match="one entry per device"):
        draw_data_parallel_step([[0]], [], [0.0], [[1.0]])
