"""Figures of the part "One machine, TensorFlow and Keras" (chapters 3 to 5): training
curves, MirroredStrategy's pieces, the averaged loss, the collectives and the ring."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from utils.figures_common import (
    ARROW,
    BLUE,
    GREY,
    ORANGE,
    around_a_ring,
    box,
    numbers,
)


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
        1, len(metrics), figsize=(3.5 * len(metrics), 3.2), squeeze=False
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


def draw_mirrored_strategy(
    devices: Sequence[str],
    copies: Sequence[Sequence[float]],
    per_replica: Sequence[float],
    reduced: float,
    *,
    variable: str = "kernel",
    value: str = "loss",
    reduction: str = "SUM",
):
    """`MirroredStrategy`'s three pieces as they ran, one column per device; returns the
    figure.

    Introduced in chapter 3. `devices[d]` names device d, `copies[d]` holds the first few
    values of `variable`'s copy on it (`variable.values`), `per_replica[d]` the `value`
    replica d computed from its slice in `strategy.run` (`experimental_local_results`),
    and `reduced` the one value `strategy.reduce(reduction, ...)` gave back.
    """
    if not len(devices) == len(copies) == len(per_replica) >= 1:
        raise ValueError(
            "draw_mirrored_strategy: give one device name, one copy and one per-replica "
            "value per device."
        )
    n = len(devices)
    figure, axis = plt.subplots(figsize=(2.3 * n + 1.6, 4.2))
    axis.set(xlim=(0, n), ylim=(0, 4.2))
    axis.axis("off")
    rows = [  # (height, label, colours, the text in each device's box)
        (
            3.2,
            f"1. mirrored variable:\none copy of {variable}\nper device",
            BLUE,
            [f"{variable}[:{len(c)}]\n{numbers(c)}" for c in copies],
        ),
        (
            1.95,
            f"2. strategy.run:\neach replica's {value}\nfrom its slice",
            BLUE,
            [f"replica {d}: {value}\n{v:.4f}" for d, v in enumerate(per_replica)],
        ),
    ]
    for height, label, colours, texts in rows:
        axis.text(-0.08, height, label, ha="right", va="center", fontsize=9)
        for device, text in enumerate(texts):
            box(axis, device + 0.5, height, text, colours)
    box(
        axis,
        n / 2,
        0.55,
        f"3. strategy.reduce({reduction}) of the {value}s: {reduced:.4f}",
        ORANGE,
    )
    axis.text(-0.08, 0.55, "one value\nback", ha="right", va="center", fontsize=9)
    for device, name in enumerate(devices):
        x = device + 0.5
        axis.annotate("", xy=(x, 2.35), xytext=(x, 2.8), arrowprops=ARROW)
        axis.annotate("", xy=(n / 2, 0.85), xytext=(x, 1.6), arrowprops=ARROW)
        axis.text(x, 4.0, name, ha="center", va="center", fontsize=10, weight="bold")
    figure.tight_layout()
    return figure


def draw_average_loss(
    sums: Sequence[float], sizes: Sequence[int], global_batch: int, one_device: float
):
    """`compute_average_loss`'s arithmetic: each replica's sum of per-example losses,
    divided by the global batch, then summed over the replicas, beside the one-device
    mean; returns the figure.

    Introduced in chapter 4. `sums[r]` is the sum of replica r's `sizes[r]` per-example
    losses; `one_device` is the mean loss of the whole batch on one device."""
    if not sums or len(sums) != len(sizes):
        raise ValueError("draw_average_loss: give one sum and one size per replica.")
    replicas = len(sums)
    figure, axis = plt.subplots(figsize=(6.4, 1.4 + 0.9 * replicas))
    axis.set(xlim=(0, 10.5), ylim=(-0.8, replicas + 0.2))
    axis.axis("off")
    scaled = [s / global_batch for s in sums]
    for replica, (total, size, share) in enumerate(zip(sums, sizes, scaled)):
        y = replicas - replica - 0.5
        box(
            axis,
            1.7,
            y,
            f"replica {replica}: {size} examples,\nlosses sum to {total:.3f}",
            BLUE,
            fontsize=9,
        )
        box(
            axis,
            4.7,
            y,
            f"/ {global_batch} (the global batch)\n= {share:.4f}",
            BLUE,
            fontsize=9,
        )
        axis.annotate("", xy=(3.55, y), xytext=(2.95, y), arrowprops=ARROW)
        axis.annotate("", xy=(7.75, replicas / 2), xytext=(5.9, y), arrowprops=ARROW)
    box(
        axis,
        8.6,
        replicas / 2,
        f"SUM over replicas\n= {sum(scaled):.4f}\none device's mean\n= {one_device:.4f}",
        ORANGE,
        fontsize=9,
    )
    axis.text(
        5.25,
        -0.5,
        f"MEAN over replicas instead: {sum(scaled) / replicas:.4f}, the loss divided by {replicas}",
        ha="center",
        fontsize=9,
        color="#b03a3a",
    )
    figure.tight_layout()
    return figure


def draw_collectives(before: Sequence[Sequence[float]], after: Mapping[str, Sequence]):
    """The collectives as a set: what each device holds before and after each one;
    returns the figure.

    Introduced in chapter 5. `before[d]` is the vector device d holds (one entry per
    chunk); `after` maps a collective's name to what each device holds after it: a
    vector, a single number (one chunk) or None (nothing new: it keeps `before[d]`)."""
    devices = len(before)
    if not devices or not after:
        raise ValueError(
            "draw_collectives: give each device's vector and one collective."
        )
    if any(len(held) != devices for held in after.values()):
        raise ValueError(
            "draw_collectives: every collective needs one entry per device."
        )
    panels = 1 + len(after)
    columns = min(panels, 3)  # more a row would shrink the text below 9 px on the page
    rows = -(-panels // columns)
    figure, axes = plt.subplots(
        rows,
        columns,
        figsize=(2.3 * columns, (0.6 * devices + 1.3) * rows),
        squeeze=False,
    )
    for axis in axes.ravel()[panels:]:
        axis.remove()
    held_by = [("before", list(before)), *after.items()]
    for axis, (title, held) in zip(axes.ravel(), held_by):
        axis.set(xlim=(0, 1), ylim=(devices - 0.4, -0.8))
        axis.axis("off")
        axis.set_title(title, fontsize=11)
        for device, values in enumerate(held):
            kept = values is None
            values = before[device] if kept else values
            text = " ".join(f"{v:g}" for v in np.atleast_1d(values))
            colours = GREY if kept or title == "before" else ORANGE
            box(axis, 0.5, device, f"dev {device}: {text}", colours, fontsize=10)
    figure.tight_layout()
    return figure


def draw_ring_all_reduce(states, titles: Sequence[str], messages: Sequence[Sequence]):
    """A ring all-reduce step by step: the devices on a ring, the chunks each holds
    (shaded by how many devices' contributions they sum) and the messages of the step
    (arrows from each device to the next, labelled with the chunk sent); returns the
    figure.

    Introduced in chapter 5. `states[k][device][chunk]` counts the contributions held
    after panel k; `messages[k]` lists (source, target, chunk) sent to reach panel k
    (none for the first)."""
    if not len(states) == len(titles) == len(messages):
        raise ValueError("draw_ring_all_reduce: one title and message list per state.")
    n = len(states[0])
    columns = min(len(states), 3)  # more a row would shrink the text on a phone
    rows = -(-len(states) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(2.6 * columns, 2.7 * rows + 0.7), squeeze=False
    )
    for axis in axes.ravel()[len(states) :]:
        axis.remove()
    centres = around_a_ring(n, 1.3, 1.3)
    shades = plt.get_cmap("Blues")
    for axis, state, title, sent in zip(axes.ravel(), states, titles, messages):
        axis.set(xlim=(-2.15, 2.15), ylim=(-1.75, 1.95), aspect="equal")
        axis.axis("off")
        axis.set_title(title, fontsize=12)
        for device, (x, y) in enumerate(centres):
            axis.text(x, y + 0.36, f"dev {device}", ha="center", fontsize=11)
            for chunk in range(n):
                count = int(state[device][chunk])
                left = x - 0.16 * n + 0.32 * chunk
                axis.add_patch(
                    plt.Rectangle(
                        (left, y - 0.15), 0.3, 0.3, fc=shades(count / n), ec="#4a78b0"
                    )
                )
                axis.text(
                    left + 0.15,
                    y,
                    count,
                    ha="center",
                    va="center",
                    fontsize=11,
                    color="white" if count == n else "black",
                )
        for source, target, chunk in sent:
            start, end = centres[source], centres[target]
            axis.annotate(
                "",
                xy=end * 0.42,
                xytext=start * 0.42,
                arrowprops={**ARROW, "color": "#c07a2c", "lw": 1.4},
            )
            middle = (start + end) / 2 * 0.62
            axis.text(*middle, f"c{chunk}", fontsize=11, color="#8a5218", ha="center")
    figure.suptitle(
        f"Ring all-reduce over {n} devices: a device's squares are its chunks\n"
        f"c0-c{n - 1}, each numbered by how many devices' values it sums;\n"
        "arrows: the step's messages",
        fontsize=12,
    )
    figure.tight_layout()
    return figure
