"""Figures of the appendix on `multi_gpu_model`: its funnel beside a ring all-reduce."""

from __future__ import annotations

import matplotlib.pyplot as plt

from utils.figures_common import (
    ARROW,
    BLUE,
    ORANGE,
    around_a_ring,
    box,
)


def draw_funnel_and_ring(
    devices: int, hub_each_way: float, ring_each: float, unit: str
):
    """`multi_gpu_model`'s funnel beside a ring all-reduce, for `devices` GPUs: on the left
    every GPU exchanges `hub_each_way` with the one device that holds the weights (the
    weights out, the gradients back), on the right each GPU sends `ring_each` to its
    neighbour; returns the figure.

    Introduced in the multi_gpu_model appendix. The amounts are per training step, in `unit`."""
    if devices < 2:
        raise ValueError("draw_funnel_and_ring: give at least two devices.")
    figure, (funnel, ring) = plt.subplots(1, 2, figsize=(9, 4.6))
    centres = around_a_ring(devices, 1.8, 1.35)
    for axis in (funnel, ring):
        axis.set(xlim=(-2.35, 2.35), ylim=(-1.9, 1.9), aspect="equal")
        axis.axis("off")
        for device, (x, y) in enumerate(centres):
            box(axis, x, y, f"GPU {device}", BLUE, fontsize=12)
    total = 2 * devices * hub_each_way
    box(
        funnel,
        0,
        0,
        f"CPU: the weights,\nthe merged output\n{total:,.0f} {unit} per step",
        ORANGE,
        fontsize=12,
    )
    for x, y in centres:
        inner, outer = (0.6, 0.8) if abs(x) > abs(y) else (0.36, 0.76)  # clear of boxes
        funnel.annotate(
            "",
            xy=(x * outer, y * outer),
            xytext=(x * inner, y * inner),
            arrowprops={**ARROW, "arrowstyle": "<->", "lw": 1.2},
        )
    funnel.set_title(
        f"multi_gpu_model: {hub_each_way:,.0f} {unit} each way\nbetween every GPU and one device",
        fontsize=12,
    )
    for device in range(devices):
        start, end = centres[device], centres[(device + 1) % devices]
        ring.annotate(
            "",
            xy=start + 0.8 * (end - start),
            xytext=start + 0.2 * (end - start),
            arrowprops={**ARROW, "color": "#c07a2c", "lw": 1.4},
        )
    ring.set_title(
        f"ring all-reduce: each GPU sends {ring_each:,.0f} {unit} to the next\n"
        "(under twice the model, however many GPUs)",
        fontsize=12,
    )
    figure.tight_layout()
    return figure
