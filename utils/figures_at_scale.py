"""Figures of the part "At scale" (chapters 14 to 18): what each device holds under ZeRO and
on a device mesh, a DDP step's timeline, a transformer's costs against length and batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgb

from utils.figures_common import (
    ARROW,
    BLUE,
    DEVICE_HUES,
    GREY,
    ORANGE,
    box,
)


def draw_zero_holdings(
    sharded: Mapping[str, Sequence[str]],
    bytes_per_parameter: Mapping[str, float],
    devices: int,
):
    """Who holds what under each ZeRO stage: one panel per stage, one column per device,
    one block per kind of state (its height the bytes per parameter), filled where that
    device holds it: all of it when replicated, its own 1/devices slice when sharded;
    returns the figure.

    Introduced in chapter 14. `sharded` maps each stage to the kinds it splits, as
    chapter 14's SHARDED does; `bytes_per_parameter` maps each kind to its bytes."""
    if devices < 2 or not sharded:
        raise ValueError("draw_zero_holdings: give at least one stage and two devices.")
    kinds = list(bytes_per_parameter)
    colours = dict(zip(kinds, ["#4a78b0", "#c07a2c", "#6a9f58", "#8a6bb0"]))
    height = sum(bytes_per_parameter.values())
    columns = min(len(sharded), 2)  # two stages a row: the labels stay 9 px or more
    rows = -(-len(sharded) // columns)
    figure, axes = plt.subplots(
        rows,
        columns,
        figsize=(2.9 * columns + 0.5, 3.0 * rows + 0.6),
        sharey=True,
        squeeze=False,
    )
    for axis in axes.ravel()[len(sharded) :]:
        axis.remove()
    for axis, (stage, split) in zip(axes.ravel(), sharded.items()):
        bottom = 0.0
        for kind in kinds:
            size = bytes_per_parameter[kind]
            for device in range(devices):
                axis.add_patch(  # the whole of this kind, as an outline
                    plt.Rectangle(
                        (device + 0.1, bottom), 0.8, size, fill=False, ec="#999999"
                    )
                )
                start, share = (
                    (device / devices, 1 / devices) if kind in split else (0, 1)
                )
                axis.add_patch(
                    plt.Rectangle(
                        (device + 0.1, bottom + start * size),
                        0.8,
                        share * size,
                        fc=colours[kind],
                        ec="none",
                        label=kind if device == 0 else None,
                    )
                )
            bottom += size
        axis.set(xlim=(0, devices), ylim=(0, height), title=stage)
        axis.set_xticks(
            [d + 0.5 for d in range(devices)],
            [f"dev {d}" for d in range(devices)],
            fontsize=9,
        )
    for axis in axes[:, 0]:
        axis.set_ylabel("bytes per parameter")
    first = axes[0, 0]
    figure.legend(
        *first.get_legend_handles_labels(), loc="lower center", ncol=len(kinds)
    )
    figure.suptitle("What each device holds (filled)\nof each kind of state (outlined)")
    figure.tight_layout(rect=(0, 0.05 if rows > 1 else 0.08, 1, 1))
    return figure


def _full_spec(kernel: Mapping[str, Sequence]) -> list:
    """A variable's spec with one entry per dimension: JAX leaves out trailing Nones."""
    spec = list(kernel["spec"])
    return spec + [None] * (len(kernel["shape"]) - len(spec))


def draw_device_mesh(
    devices: Sequence[str],
    kernels: Mapping[str, Mapping[str, Sequence]],
    *,
    axis_name: str = "batch",
):
    """What each device of a one-axis `DeviceMesh` holds of each variable: one panel per
    variable, its rectangle (rows by columns, in proportion up to 2:1) cut into the block
    each device holds, coloured by device and labelled with its index and shard shape; a
    replicated variable is one grey rectangle that every device holds; returns the figure.

    Introduced in chapter 16. `devices` names the mesh's devices in order; `kernels` maps
    a variable's path to its "shape", its "spec" (per dimension, `axis_name` or None; as
    in JAX's `PartitionSpec`, missing trailing entries are None) and its "per device"
    shard shapes, in device order. A 1-D variable (a bias) is one row."""
    n = len(devices)
    if not n or not kernels:
        raise ValueError("draw_device_mesh: give at least one device and one kernel.")
    for path, kernel in kernels.items():
        shape, spec = list(kernel["shape"]), _full_spec(kernel)
        shards = [list(shard) for shard in kernel["per device"]]
        if len(shards) != n:
            raise ValueError(
                f"draw_device_mesh: {path} needs one shard shape per device ({n}); "
                f"it has {len(shards)}."
            )
        if (
            len(spec) != len(shape)
            or spec.count(axis_name) > 1
            or any(axis not in (None, axis_name) for axis in spec)
        ):
            raise ValueError(
                f"draw_device_mesh: {path}'s spec needs one entry per dimension of its "
                f"shape {shape}, each {axis_name!r} (at most once) or None."
            )
        cut = [axis == axis_name for axis in spec]
        expected = [size // n if c else size for size, c in zip(shape, cut)]
        uneven = any(size % n for size, c in zip(shape, cut) if c)
        if uneven or any(shard != expected for shard in shards):
            raise ValueError(
                f"draw_device_mesh: each shard of {path} must be its shape {shape} with "
                f"the dimension on {axis_name!r} divided by its {n} devices (a whole "
                f"number of times); got {shards}."
            )
    colours = [
        {"facecolor": 0.3 * np.array(to_rgb(hue)) + 0.7, "edgecolor": hue}
        for hue in (DEVICE_HUES * n)[:n]
    ]
    figure, axes = plt.subplots(
        1,
        len(kernels),
        figsize=(3.3 * len(kernels), 4.4),
        squeeze=False,
        layout="constrained",
    )
    for axis, (path, kernel) in zip(axes[0], kernels.items()):
        shape, spec = list(kernel["shape"]), _full_spec(kernel)
        axis.set(xlim=(-0.02, 1.02), ylim=(1.02, -0.02), aspect="equal")  # row 0 on top
        axis.axis("off")
        axis.set_title(f"{path} {tuple(spec)}\nfull shape {shape}", fontsize=9)
        ratio = 0.2 if len(shape) == 1 else np.clip(shape[0] / shape[1], 0.5, 2)
        width, height = min(1, 1 / ratio), min(1, ratio)
        left, top = (1 - width) / 2, (1 - height) / 2
        if axis_name not in spec:
            axis.add_patch(
                plt.Rectangle((left, top), width, height, ls="--", lw=1.2, **GREY)
            )
            axis.text(
                0.5,
                0.5,
                f"every device holds all of it:\n{shape} on each of the {n}",
                ha="center",
                va="center",
                fontsize=9,
            )
            continue
        across = spec.index(axis_name) == len(shape) - 1  # columns: blocks side by side
        for device, shard in enumerate(kernel["per device"]):
            x, y, w, h = (
                (left + device * width / n, top, width / n, height)
                if across
                else (left, top + device * height / n, width, height / n)
            )
            axis.add_patch(plt.Rectangle((x, y), w, h, lw=1.2, **colours[device]))
            axis.text(
                x + w / 2,
                y + h / 2,
                f"dev {device}\n{list(shard)}",
                ha="center",
                va="center",
                fontsize=9,
                rotation=90 if across and n > 4 else 0,
            )
    figure.legend(
        handles=[
            plt.Rectangle((0, 0), 1, 1, lw=1.2, label=f"dev {d}: {name}", **colours[d])
            for d, name in enumerate(devices)
        ],
        loc="outside lower center",
        ncol=min(n, 4),
        fontsize=9,
        title=f"mesh axis {axis_name!r}",
        title_fontsize=9,
        frameon=False,
    )
    figure.suptitle(
        f"What each device holds: a DeviceMesh of {n} along {axis_name!r}", fontsize=10
    )
    return figure


def draw_collective_sequence(calls: Sequence[Sequence], units: Mapping[int, str]):
    """One step's collectives in the order they ran, four a row, each with its kind and the
    unit of sharding it moved; returns the figure.

    Introduced in chapter 15. `calls` holds (kind, elements) pairs, as
    `utils.pytorch_ddp.collectives` returns them; `units` maps a unit's element count to
    its name (a count not in it is shown as the count)."""
    if not calls:
        raise ValueError("draw_collective_sequence: the step called no collective.")
    colours = {"all-gather": BLUE, "reduce-scatter": ORANGE}
    per_row = 4
    rows = -(-len(calls) // per_row)
    figure, axis = plt.subplots(figsize=(6.2, 1.05 * rows + 0.5))
    axis.set(xlim=(-0.6, per_row - 0.4), ylim=(-1.05 * (rows - 1) - 0.5, 0.5))
    axis.axis("off")
    for position, (kind, elements) in enumerate(calls):
        column, row = position % per_row, position // per_row
        label = f"{position + 1}. {kind}\n{units.get(elements, f'{elements:,}')}"
        box(axis, column, -1.05 * row, label, colours.get(kind, GREY), fontsize=9)
        if column:
            start, end = (column - 0.55, -1.05 * row), (column - 0.45, -1.05 * row)
            axis.annotate("", xy=end, xytext=start, arrowprops=ARROW)
    figure.tight_layout()
    return figure


def plot_step_timeline(timelines: Sequence[Mapping[str, Sequence[Sequence[float]]]]):
    """A few DDP steps on one time axis, three lanes per process: the steps, the backward
    computations and the all-reduces, each as (start, duration) in ms; returns the figure.

    Introduced in chapter 17. `timelines[r]` holds rank r's "step", "backward" and
    "all-reduce" intervals, as chapter 17's `timeline_worker` (timeline.py) writes them.
    The lanes are told apart by colour (the legend), so that one label per process is
    enough and the figure stays narrow enough to read on a phone.
    """
    lanes = ("step", "backward", "all-reduce")
    if not timelines or any(set(lanes) - set(t) for t in timelines):
        raise ValueError(
            f"plot_step_timeline: give one mapping per process, each with {lanes}."
        )
    colours = {"step": "#d9d9d9", "backward": "#4a78b0", "all-reduce": "#c07a2c"}
    figure, axis = plt.subplots(figsize=(6.4, 1.3 + 1.0 * len(timelines)))
    for rank, timeline in enumerate(timelines):
        for offset, lane in enumerate(lanes):
            y = rank * 3.6 + offset  # from the top, once the axis is inverted
            axis.broken_barh(
                [tuple(interval) for interval in timeline[lane]],
                (y - 0.42, 0.84),
                facecolors=colours[lane],
                label=lane if rank == 0 else None,
            )
    axis.set_yticks(
        [rank * 3.6 + 1 for rank in range(len(timelines))],
        [f"rank {rank}" for rank in range(len(timelines))],
        fontsize=10,
    )
    axis.tick_params(axis="both", labelsize=10, length=0)
    axis.invert_yaxis()  # rank 0 on top
    axis.set_xlabel("ms since the first profiled step began", fontsize=10)
    axis.grid(axis="x", alpha=0.3)
    for side in ("top", "right", "left"):
        axis.spines[side].set_visible(False)
    axis.legend(
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=3,
        fontsize=10,
        frameon=False,
    )
    figure.tight_layout()
    return figure


def plot_against_length(
    lengths: Sequence[int], series: Mapping[str, Sequence[float]], ylabel
):
    """One line per entry of `series` (its label: its values at `lengths`), on
    logarithmic axes, with the sequence length across (chapter 18)."""
    figure, axis = plt.subplots(figsize=(6, 3.6))
    for (label, values), style in zip(
        series.items(), cycle(["-o", "--s", ":^", "-.v"])
    ):
        axis.plot(lengths, values, style, label=label)
    axis.set(
        xscale="log", yscale="log", xlabel="sequence length (tokens)", ylabel=ylabel
    )
    axis.set_xticks(list(lengths), [str(length) for length in lengths])
    axis.minorticks_off()
    axis.legend(fontsize="small")
    figure.tight_layout()
    return figure


def plot_compute_and_communication(cases: Mapping[str, Mapping[str, object]]):
    """One panel per case, one above another (chapter 18): the backward pass's time
    against the batch per device, and the all-reduce's time, which the batch does not
    change; where the lines cross (dotted), the all-reduce stops fitting behind the
    backward pass. Each case holds
    `batches`, `backward_s` (one per batch), `all_reduce_s` and `unit` (what a batch
    counts)."""
    figure, axes = plt.subplots(
        len(cases), 1, figsize=(6.5, 2.8 * len(cases)), squeeze=False
    )
    for axis, (title, case) in zip(axes[:, 0], cases.items()):
        batches = list(case["batches"])
        axis.plot(batches, case["backward_s"], "-o", label="backward pass")
        axis.plot(
            batches, [case["all_reduce_s"]] * len(batches), "--", label="all-reduce"
        )
        crossing = case["all_reduce_s"] / (case["backward_s"][-1] / batches[-1])
        axis.axvline(
            crossing, linestyle=":", color="grey", label=f"equal at {crossing:.3g}"
        )
        axis.set(xscale="log", yscale="log", title=title, ylabel="seconds per step")
        axis.minorticks_off()
        axis.set_xlabel(f"batch per device ({case['unit']})")
        axis.legend(fontsize="small")
    figure.tight_layout()
    return figure
