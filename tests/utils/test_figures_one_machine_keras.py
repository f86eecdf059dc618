"""utils.figures_one_machine_keras: the figures of the part "One machine, TensorFlow and Keras"
(chapters 3 to 5). Each is drawn from values its chapter computes."""

import pytest

from tests.helpers import figure_texts
from utils.figures_one_machine_keras import (
    draw_average_loss,
    draw_collectives,
    draw_mirrored_strategy,
    draw_ring_all_reduce,
    plot_curves,
)


def test_plot_curves_draws_one_line_per_run_and_panel_per_metric():
    histories = {f"run {i}": {"loss": [3, 2, 1], "accuracy": [0.1, 0.5, 0.9]} for i in range(5)}
    figure = plot_curves(histories, ["loss", "accuracy"], title="t")
    assert len(figure.axes) == 2
    assert all(len(axis.get_lines()) == 5 for axis in figure.axes)


def test_mirrored_strategy_shows_each_copy_each_replica_and_one_reduction():
    figure = draw_mirrored_strategy(["CPU:0", "CPU:1"], [[0.1, 0.2], [0.1, 0.2]], [1.25, 1.5], 2.75)
    texts = figure_texts(figure)
    assert {"CPU:0", "CPU:1"} <= set(texts)
    assert texts.count("kernel[:2]\n[0.100, 0.200]") == 2
    assert "replica 1: loss\n1.5000" in texts
    assert sum("strategy.reduce(SUM)" in t and "2.7500" in t for t in texts) == 1
    with pytest.raises(ValueError, match="one copy and one per-replica value"):
        draw_mirrored_strategy(["CPU:0"], [[0.1]], [1.0, 2.0], 3.0)
    with pytest.raises(ValueError, match="per device"):
        draw_mirrored_strategy([], [], [], 0.0)


def test_average_loss_shows_each_replica_s_share_and_their_sum():
    figure = draw_average_loss([30.0, 10.0], [2, 2], 4, one_device=10.0)
    texts = " | ".join(t.get_text() for t in figure.axes[0].texts)
    assert "= 7.5000" in texts and "= 2.5000" in texts  # 30 / 4 and 10 / 4
    assert "SUM over replicas\n= 10.0000" in texts and "instead: 5.0000" in texts
    with pytest.raises(ValueError, match="one sum and one size per replica"):
        draw_average_loss([1.0], [1, 1], 2, one_device=1.0)


def test_collectives_show_every_device_before_and_after_each():
    held = [[1, 2], [3, 4]]
    figure = draw_collectives(held, {"all-reduce": [[4, 6], [4, 6]], "reduce": [[4, 6], None]})
    texts = [[t.get_text() for t in axis.texts] for axis in figure.axes]
    assert texts == [
        ["dev 0: 1 2", "dev 1: 3 4"],
        ["dev 0: 4 6", "dev 1: 4 6"],
        ["dev 0: 4 6", "dev 1: 3 4"],
    ]
    with pytest.raises(ValueError, match="one entry per device"):
        draw_collectives(held, {"broadcast": [[1, 2]]})


def test_the_ring_shows_each_step_s_messages_on_a_ring_of_devices():
    states = [[[1, 1], [1, 1]], [[2, 1], [1, 2]], [[2, 2], [2, 2]]]
    messages = [[], [(0, 1, 1), (1, 0, 0)], [(0, 1, 0), (1, 0, 1)]]
    figure = draw_ring_all_reduce(states, ["start", "reduce-scatter", "all-gather"], messages)
    panels = [axis for axis in figure.axes if axis.patches]
    assert len(panels) == 3 and all(len(axis.patches) == 4 for axis in panels)  # 2 x 2 chunks
    # 2 device labels and 4 counts; then per message an arrow and its chunk's name
    assert [len(axis.texts) for axis in panels] == [6, 10, 10]
    with pytest.raises(ValueError, match="one title and message list per state"):
        draw_ring_all_reduce(states, ["start"], messages)
