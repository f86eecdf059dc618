"""utils.plotting: one figure, a panel per metric."""

from utils.plotting import plot_curves


def test_plot_curves_draws_one_line_per_run_and_panel_per_metric():
    histories = {f"run {i}": {"loss": [3, 2, 1], "accuracy": [0.1, 0.5, 0.9]} for i in range(5)}
    figure = plot_curves(histories, ["loss", "accuracy"], title="t")
    assert len(figure.axes) == 2
    assert all(len(axis.get_lines()) == 5 for axis in figure.axes)
