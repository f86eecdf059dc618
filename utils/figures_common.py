"""What the figure modules share (utils/figures_*.py, one per part of the book): the colours,
a rounded text box, places on a ring, a short vector as text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Light face colours with a darker edge of the same hue: they read on the white card a figure
# is drawn on, in the book's light theme and its dark one.
BLUE = {"facecolor": "#e8f0fa", "edgecolor": "#4a78b0"}  # a device, a process's work
ORANGE = {"facecolor": "#fbeede", "edgecolor": "#c07a2c"}  # a collective, a reduction
GREEN = {"facecolor": "#e6f4ea", "edgecolor": "#3c8c50"}  # a process, a checkpoint
RED = {"facecolor": "#fbe3e3", "edgecolor": "#b03a3a"}  # an interruption, lost work
GREY = {"facecolor": "#f0f0f0", "edgecolor": "#777777"}  # a store, a model copy
ARROW = {"arrowstyle": "->", "color": "#555555"}


def box(axis, x, y, text, colours, *, fontsize=9, weight="normal", **extra):
    """A rounded text box centred on (x, y)."""
    return axis.text(
        x,
        y,
        text,
        ha="center",
        va="center",
        fontsize=fontsize,
        weight=weight,
        bbox={"boxstyle": "round,pad=0.4", "linewidth": 1, **colours},
        **extra,
    )


def around_a_ring(count: int, x_radius: float, y_radius: float) -> np.ndarray:
    """(x, y) of `count` devices on an ellipse around (0, 0): device 0 on top, clockwise."""
    angles = np.pi / 2 - 2 * np.pi * np.arange(count) / count
    return np.stack([x_radius * np.cos(angles), y_radius * np.sin(angles)], axis=1)


def numbers(values: Sequence[float]) -> str:
    """A short vector as text, three decimals each: "[0.100, 0.200]"."""
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"


# One hue per device, device 0's first; a block is a light tint of it, edged in it.
DEVICE_HUES = ["#4a78b0", "#c07a2c", "#3c8c50", "#8a6bb0"]
DEVICE_HUES += ["#b03a3a", "#2a8c8c", "#b0508a", "#8c7a2a"]
