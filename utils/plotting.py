"""Figures (chapters 2 and 3)."""

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


def draw_data_parallel_step(
    examples: Sequence[Sequence[int]],
    gradients: Sequence[Sequence[float]],
    total: Sequence[float],
    weights: Sequence[Sequence[float]],
):
    """One synchronous data-parallel step as it ran, one column per device; returns the
    figure.

    Introduced in chapter 2. `examples[d]` are the batch's example numbers device d got,
    `gradients[d]` its gradient from them, `total` the all-reduced sum every device
    received, and `weights[d]` device d's weights after its update.
    """
    if not len(examples) == len(gradients) == len(weights) >= 1:
        raise ValueError(
            "draw_data_parallel_step: give one entry per device in each list."
        )
    n = len(examples)

    def numbers(values):
        return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"

    figure, axis = plt.subplots(figsize=(2.9 * n + 1.6, 4.4))
    axis.set(xlim=(0, n), ylim=(0, 4.3))
    axis.axis("off")
    box = {"boxstyle": "round,pad=0.4", "linewidth": 1}
    rows = [  # (height, label, the text in each device's box)
        (
            3.7,
            "1. its slice\nof the batch",
            [f"examples {e[0]}-{e[-1]}" for e in examples],
        ),
        (
            2.6,
            "2. forward and\nbackward, alone",
            [f"gradient\n{numbers(g)}" for g in gradients],
        ),
        (0.5, "4. the same\nupdate", [f"weights\n{numbers(w)}" for w in weights]),
    ]
    for height, label, texts in rows:
        axis.text(-0.08, height, label, ha="right", va="center", fontsize=9)
        for device, text in enumerate(texts):
            axis.text(
                device + 0.5,
                height,
                text,
                ha="center",
                va="center",
                fontsize=9,
                bbox={**box, "facecolor": "#e8f0fa", "edgecolor": "#4a78b0"},
            )
    axis.text(
        n / 2,
        1.55,
        f"3. all-reduce: every device receives the sum {numbers(total)}",
        ha="center",
        va="center",
        fontsize=9,
        bbox={**box, "facecolor": "#fbeede", "edgecolor": "#c07a2c"},
    )
    arrow = {"arrowstyle": "->", "color": "#555555"}
    for device in range(n):
        x = device + 0.5
        for top, bottom in ((3.45, 2.95), (2.2, 1.8), (1.3, 0.9)):
            axis.annotate("", xy=(x, bottom), xytext=(x, top), arrowprops=arrow)
        axis.text(
            x,
            4.2,
            f"device {device}",
            ha="center",
            va="center",
            fontsize=10,
            weight="bold",
        )
    figure.tight_layout()
    return figure
