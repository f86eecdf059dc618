"""Figures (chapter 3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator


def plot_curves(
    histories: Mapping[str, Mapping[str, Sequence[float]]],
    metrics: Sequence[str],
    *,
    title: str | None = None,
):
    """One panel per metric, one line per training run; returns the figure.

    Introduced in chapter 3. `histories` maps a run's label to its Keras history dict.
    """
    figure, axes = plt.subplots(
        1, len(metrics), figsize=(4.5 * len(metrics), 3.2), squeeze=False
    )
    for axis, metric in zip(axes[0], metrics):
        for (label, history), style in zip(
            histories.items(), cycle(["-o", "--s", ":^", "-.v"])
        ):
            values = history[metric]
            axis.plot(range(1, len(values) + 1), values, style, label=label, alpha=0.8)
        axis.set_xlabel("epoch")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_title(metric)
        axis.grid(alpha=0.3)
    axes[0][0].legend()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure
