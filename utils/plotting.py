"""Figures (chapters 2-6, 8-11, 14-18 and the appendix): training curves, and pictures
drawn from the values a chapter computes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgb
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


# Light face colours with a darker edge of the same hue: they read on the white card a figure
# is drawn on, in the book's light theme and its dark one.
_BLUE = {"facecolor": "#e8f0fa", "edgecolor": "#4a78b0"}  # a device, a process's work
_ORANGE = {"facecolor": "#fbeede", "edgecolor": "#c07a2c"}  # a collective, a reduction
_GREEN = {"facecolor": "#e6f4ea", "edgecolor": "#3c8c50"}  # a process, a checkpoint
_RED = {"facecolor": "#fbe3e3", "edgecolor": "#b03a3a"}  # an interruption, lost work
_GREY = {"facecolor": "#f0f0f0", "edgecolor": "#777777"}  # a store, a model copy
_ARROW = {"arrowstyle": "->", "color": "#555555"}


def _box(axis, x, y, text, colours, *, fontsize=9, weight="normal", **extra):
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


def _around_a_ring(count: int, x_radius: float, y_radius: float) -> np.ndarray:
    """(x, y) of `count` devices on an ellipse around (0, 0): device 0 on top, clockwise."""
    angles = np.pi / 2 - 2 * np.pi * np.arange(count) / count
    return np.stack([x_radius * np.cos(angles), y_radius * np.sin(angles)], axis=1)


def _numbers(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in values) + "]"


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
    figure, axis = plt.subplots(figsize=(2.9 * n + 1.8, 4.2))
    axis.set(xlim=(0, n), ylim=(0, 4.2))
    axis.axis("off")
    rows = [  # (height, label, colours, the text in each device's box)
        (
            3.2,
            f"1. mirrored variable:\none copy of {variable}\nper device",
            _BLUE,
            [f"{variable}[:{len(c)}]\n{_numbers(c)}" for c in copies],
        ),
        (
            1.95,
            f"2. strategy.run:\neach replica's {value}\nfrom its slice",
            _BLUE,
            [f"replica {d}: {value}\n{v:.4f}" for d, v in enumerate(per_replica)],
        ),
    ]
    for height, label, colours, texts in rows:
        axis.text(-0.08, height, label, ha="right", va="center", fontsize=9)
        for device, text in enumerate(texts):
            _box(axis, device + 0.5, height, text, colours)
    _box(
        axis,
        n / 2,
        0.55,
        f"3. strategy.reduce({reduction}) of the {value}s: {reduced:.4f}",
        _ORANGE,
    )
    axis.text(-0.08, 0.55, "one value\nback", ha="right", va="center", fontsize=9)
    for device, name in enumerate(devices):
        x = device + 0.5
        axis.annotate("", xy=(x, 2.35), xytext=(x, 2.8), arrowprops=_ARROW)
        axis.annotate("", xy=(n / 2, 0.85), xytext=(x, 1.6), arrowprops=_ARROW)
        axis.text(x, 4.0, name, ha="center", va="center", fontsize=10, weight="bold")
    figure.tight_layout()
    return figure


def draw_dp_and_ddp(
    dp_pid: int,
    dp_slices: Sequence[tuple[str, int]],
    ddp_ranks: Sequence[Mapping[str, object]],
):
    """`nn.DataParallel`'s one process beside `DistributedDataParallel`'s one process per
    device; returns the figure.

    Introduced in chapter 6. `dp_pid` is the process that ran DataParallel, `dp_slices`
    one `(device, examples)` pair per device its scatter feeds (device 0 first), and
    `ddp_ranks` one mapping per DDP process with its `rank`, `pid`, `device`, `backend`
    and `batch` (the examples it takes per step).
    """
    if not dp_slices or not ddp_ranks:
        raise ValueError(
            "draw_dp_and_ddp: give at least one DataParallel slice and one DDP rank."
        )
    keys = {"rank", "pid", "device", "backend", "batch"}
    if any(not keys <= set(rank) for rank in ddp_ranks):
        raise ValueError(
            "draw_dp_and_ddp: give each DDP rank as a mapping with keys "
            + ", ".join(sorted(keys))
            + "."
        )
    n, m = len(dp_slices), len(ddp_ranks)
    figure, (left, right) = plt.subplots(
        1, 2, figsize=(2.3 * (n + m) + 1.6, 5.0), width_ratios=[n + 0.4, m + 0.4]
    )
    for axis, width in ((left, n), (right, m)):
        axis.set(xlim=(-0.2, width + 0.2), ylim=(0, 5))
        axis.axis("off")
    total = sum(examples for _, examples in dp_slices)

    # DataParallel: one process, one thread per device, everything returns to device 0.
    left.set_title("nn.DataParallel: one process", fontsize=10, weight="bold")
    left.add_patch(
        plt.Rectangle((-0.15, 0.05), n + 0.3, 4.7, fill=False, ec="#3c8c50", lw=1.2)
    )
    left.text(0.0, 4.55, f"process {dp_pid}", fontsize=9, va="center", color="#3c8c50")
    _box(left, n / 2, 4.0, f"scatter: a batch of {total} into {n} slices", _ORANGE)
    for device, (name, examples) in enumerate(dp_slices):
        x = device + 0.5
        left.annotate("", xy=(x, 3.2), xytext=(n / 2, 3.75), arrowprops=_ARROW)
        _box(
            left,
            x,
            2.6,
            f"thread {device}\n{name}\nreplicated model\nforward: {examples} examples",
            _BLUE,
        )
        left.annotate("", xy=(n / 2, 1.45), xytext=(x, 2.0), arrowprops=_ARROW)
    _box(
        left,
        n / 2,
        0.85,
        f"gather on {dp_slices[0][0]}: the loss,\nbackward into its weights",
        _ORANGE,
    )

    # DDP: one process per device, each with its own model copy and slice.
    right.set_title(
        "DistributedDataParallel: one process per device", fontsize=10, weight="bold"
    )
    for column, rank in enumerate(ddp_ranks):
        x = column + 0.5
        right.add_patch(
            plt.Rectangle(
                (column + 0.05, 1.45), 0.9, 3.3, fill=False, ec="#3c8c50", lw=1.2
            )
        )
        right.text(
            x, 4.5, f"process {rank['pid']}", ha="center", fontsize=9, color="#3c8c50"
        )
        _box(
            right,
            x,
            3.75,
            f"rank {rank['rank']}\n{rank['device']} ({rank['backend']})",
            _BLUE,
        )
        _box(right, x, 2.95, "its own\nmodel copy", _GREY)
        _box(right, x, 2.1, f"its own slice:\n{rank['batch']} examples", _BLUE)
        right.annotate("", xy=(x, 1.15), xytext=(x, 1.65), arrowprops=_ARROW)
    _box(
        right,
        m / 2,
        0.75,
        "all-reduce of the gradients\nduring backward (average)",
        _ORANGE,
    )
    figure.tight_layout()
    return figure


def draw_resume_timeline(
    attempts: Sequence[Mapping[str, object]], steps_per_epoch: int
):
    """A training that was interrupted and resumed, on a time axis counted in steps;
    returns the figure.

    Introduced in chapter 8. `attempts` holds one mapping per attempt, in order: its
    `start` and `stop` step, the steps after which it wrote a `checkpoints`, and whether
    it was `interrupted`. A later attempt starts where the earlier one's last checkpoint
    left it; the steps between that checkpoint and the interruption are drawn as lost
    (done again by the next attempt). Dotted lines mark the epochs, `steps_per_epoch` each.
    """
    if not attempts or steps_per_epoch < 1:
        raise ValueError(
            "draw_resume_timeline: give at least one attempt and steps_per_epoch >= 1."
        )
    for number, attempt in enumerate(attempts):
        start, stop = attempt["start"], attempt["stop"]
        if not 0 <= start <= stop or not all(
            start <= c <= stop for c in attempt["checkpoints"]
        ):
            raise ValueError(
                f"draw_resume_timeline: attempt {number + 1} needs 0 <= start <= stop "
                "and its checkpoints between them."
            )
        if number and start > attempts[number - 1]["stop"]:
            raise ValueError(
                f"draw_resume_timeline: attempt {number + 1} starts after the one before "
                "it stopped; a resumed run starts at or before that point."
            )
    end = max(attempt["stop"] for attempt in attempts)
    rows = len(attempts)
    figure, axis = plt.subplots(figsize=(9, 1.1 * rows + 1.5))
    axis.set(xlim=(-0.02 * end, end * 1.02), ylim=(-0.7, rows - 0.2))
    for boundary in range(0, end + 1, steps_per_epoch):
        axis.axvline(boundary, color="#999999", linestyle=":", linewidth=1)
        if boundary < end:
            axis.text(
                boundary + steps_per_epoch / 2,
                rows - 0.35,
                f"epoch {boundary // steps_per_epoch}",
                ha="center",
                fontsize=9,
                color="#555555",
            )
    for number, attempt in enumerate(attempts):
        y = rows - 1 - number
        start, stop = attempt["start"], attempt["stop"]
        axis.barh(y, stop - start, left=start, height=0.36, linewidth=1, **_BLUE)
        checkpoints = list(attempt["checkpoints"])
        axis.plot(
            checkpoints,
            [y] * len(checkpoints),
            "D",
            color="#3c8c50",
            markersize=7,
            label="checkpoint written" if number == 0 else None,
        )
        for step in checkpoints:
            axis.text(step, y + 0.28, str(step), ha="center", fontsize=9)
        if attempt["interrupted"]:
            axis.plot(
                stop,
                y,
                "X",
                color="#b03a3a",
                markersize=11,
                label="interruption",
            )
            axis.text(
                stop + 0.015 * end,
                y - 0.3,
                f"interrupted after step {stop}",
                ha="left",
                va="center",
                fontsize=9,
                color="#b03a3a",
            )
        if number + 1 < rows:
            resumed = attempts[number + 1]["start"]
            if resumed < stop:  # the work between the checkpoint and the crash is lost
                axis.barh(
                    y,
                    stop - resumed,
                    left=resumed,
                    height=0.36,
                    hatch="///",
                    linewidth=1,
                    label=f"lost, redone: {stop - resumed} steps",
                    **_RED,
                )
            axis.annotate(
                "", xy=(resumed, y - 0.8), xytext=(resumed, y - 0.2), arrowprops=_ARROW
            )
            axis.text(
                resumed - 0.01 * end,
                y - 0.5,
                f"restore the checkpoint\nof step {resumed}",
                ha="right",
                va="center",
                fontsize=9,
            )
    labels = [f"attempt {n + 1}" + (" (resumed)" if n else "") for n in range(rows)]
    axis.set_yticks(range(rows - 1, -1, -1), labels, fontsize=9)
    axis.set_xlabel("step (batches trained)", fontsize=9)
    axis.tick_params(axis="x", labelsize=9)
    for side in ("top", "right", "left"):
        axis.spines[side].set_visible(False)
    handles, names = axis.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    axis.legend(
        unique.values(),
        unique.keys(),
        fontsize=9,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.25 if rows > 1 else -0.4),
        ncol=3,
        frameon=False,
    )
    figure.tight_layout()
    return figure


def draw_torchrun_launch(agents: Sequence[Mapping[str, object]], endpoint: str):
    """torchrun's processes: one agent per machine, each starting its worker processes,
    and the rendezvous store the agents meet at; returns the figure.

    Introduced in chapter 9. `agents` holds one mapping per torchrun agent: its `name`
    ("node 0"), whether it `hosts_store` (exactly one does), and its `workers` as
    `(rank, local_rank)` pairs; the ranks of all workers together are 0..N-1, each once.
    `endpoint` is the store's address, as given to `--rdzv-endpoint` ("127.0.0.1:29400").
    """
    if not agents:
        raise ValueError("draw_torchrun_launch: give at least one agent.")
    hosts = [i for i, agent in enumerate(agents) if agent.get("hosts_store")]
    if len(hosts) != 1:
        raise ValueError(
            "draw_torchrun_launch: exactly one agent must host the rendezvous store "
            f"(hosts_store=True); {len(hosts)} do."
        )
    ranks = sorted(rank for agent in agents for rank, _ in agent["workers"])
    if ranks != list(range(len(ranks))):
        raise ValueError(
            f"draw_torchrun_launch: the workers' ranks must be 0..N-1, each once; got {ranks}."
        )
    host = hosts[0]
    most = max(len(agent["workers"]) for agent in agents)
    height = 0.75 * most + 2.2
    figure, axis = plt.subplots(figsize=(2.8 * len(agents) + 0.6, height * 0.9 + 0.4))
    axis.set(xlim=(-0.1, len(agents) + 0.1), ylim=(0, height))
    axis.axis("off")
    store_y = height - 0.45
    _box(axis, host + 0.5, store_y, f"rendezvous store (c10d)\n{endpoint}", _ORANGE)
    for column, agent in enumerate(agents):
        top = height - 1.1
        axis.add_patch(
            plt.Rectangle(
                (column + 0.06, 0.1), 0.88, top - 0.1, fill=False, ec="#3c8c50", lw=1.2
            )
        )
        role = "torchrun agent, hosts the store" if column == host else "torchrun agent"
        axis.text(
            column + 0.5,
            top - 0.35,
            f"{agent['name']}\n{role}",
            ha="center",
            va="center",
            fontsize=9,
            weight="bold",
            color="#2d6b3d",
        )
        for row, (rank, local_rank) in enumerate(sorted(agent["workers"])):
            _box(
                axis,
                column + 0.5,
                top - 1.1 - 0.75 * row,
                f"worker process\nrank {rank} / local rank {local_rank}",
                _BLUE,
            )
        if column == host:
            axis.annotate(
                "",
                xy=(column + 0.5, store_y - 0.3),
                xytext=(column + 0.5, top),
                arrowprops={**_ARROW, "arrowstyle": "-"},
            )
        else:
            axis.annotate(
                "",
                xy=(host + 0.5 + (0.25 if column > host else -0.25), store_y - 0.2),
                xytext=(column + 0.5, top),
                arrowprops={
                    **_ARROW,
                    "connectionstyle": f"arc3,rad={0.15 if column > host else -0.15}",
                },
            )
    figure.tight_layout()
    return figure


def plot_step_timeline(timelines: Sequence[Mapping[str, Sequence[Sequence[float]]]]):
    """A few DDP steps on one time axis, one row per process: the steps, the backward
    computations and the all-reduces, each as (start, duration) in ms; returns the figure.

    Introduced in chapter 17. `timelines[r]` holds rank r's "step", "backward" and
    "all-reduce" intervals, as chapter 17's `timeline_worker` (timeline.py) writes them.
    """
    lanes = ("step", "backward", "all-reduce")
    if not timelines or any(set(lanes) - set(t) for t in timelines):
        raise ValueError(
            f"plot_step_timeline: give one mapping per process, each with {lanes}."
        )
    colours = {"step": "#d9d9d9", "backward": "#4a78b0", "all-reduce": "#c07a2c"}
    figure, axis = plt.subplots(figsize=(11, 1.1 + 0.9 * len(timelines)))
    ticks = []
    for rank, timeline in enumerate(timelines):
        for offset, lane in enumerate(lanes):
            y = rank * 3 + offset  # from the top, once the axis is inverted
            axis.broken_barh(
                [tuple(interval) for interval in timeline[lane]],
                (y - 0.4, 0.8),
                facecolors=colours[lane],
            )
            ticks.append((y, f"rank {rank}: {lane}"))
    axis.set_yticks([y for y, _ in ticks], [label for _, label in ticks], fontsize=8)
    axis.invert_yaxis()  # rank 0 on top
    axis.set_xlabel("ms since the first profiled step began")
    axis.grid(axis="x", alpha=0.3)
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
    figure, axes = plt.subplots(
        1, panels, figsize=(2.35 * panels, 0.55 * devices + 1.3)
    )
    for axis, (title, held) in zip(axes, [("before", list(before)), *after.items()]):
        axis.set(xlim=(0, 1), ylim=(devices - 0.4, -0.8))
        axis.axis("off")
        axis.set_title(title, fontsize=10)
        for device, values in enumerate(held):
            kept = values is None
            values = before[device] if kept else values
            text = " ".join(f"{v:g}" for v in np.atleast_1d(values))
            colours = _GREY if kept or title == "before" else _ORANGE
            _box(axis, 0.5, device, f"dev {device}: {text}", colours, fontsize=8)
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
    columns = (len(states) + 1) // 2
    figure, axes = plt.subplots(2, columns, figsize=(3.3 * columns, 7.0))
    for axis in axes.ravel()[len(states) :]:
        axis.axis("off")
    centres = _around_a_ring(n, 1.3, 1.3)
    shades = plt.get_cmap("Blues")
    for axis, state, title, sent in zip(axes.ravel(), states, titles, messages):
        axis.set(xlim=(-2.15, 2.15), ylim=(-1.75, 1.95), aspect="equal")
        axis.axis("off")
        axis.set_title(title, fontsize=9)
        for device, (x, y) in enumerate(centres):
            axis.text(x, y + 0.36, f"dev {device}", ha="center", fontsize=8)
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
                    fontsize=7,
                    color="white" if count == n else "black",
                )
        for source, target, chunk in sent:
            start, end = centres[source], centres[target]
            axis.annotate(
                "",
                xy=end * 0.42,
                xytext=start * 0.42,
                arrowprops={**_ARROW, "color": "#c07a2c", "lw": 1.4},
            )
            middle = (start + end) / 2 * 0.62
            axis.text(*middle, f"c{chunk}", fontsize=7, color="#8a5218", ha="center")
    figure.suptitle(
        f"Ring all-reduce over {n} devices: a device's squares are its chunks c0-c{n - 1}, "
        "each numbered by how many devices' values it sums; arrows: the step's messages"
    )
    figure.tight_layout()
    return figure


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
    figure, axes = plt.subplots(
        1, len(sharded), figsize=(2.6 * len(sharded), 3.6), sharey=True
    )
    for axis, (stage, split) in zip(np.atleast_1d(axes), sharded.items()):
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
            fontsize=8,
        )
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("bytes per parameter")
    figure.legend(
        *first.get_legend_handles_labels(), loc="lower center", ncol=len(kinds)
    )
    figure.suptitle("What each device holds (filled) of each kind of state (outlined)")
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    return figure


# One hue per device, the module's own first; a block is a light tint of it, edged in it.
_DEVICE_HUES = ["#4a78b0", "#c07a2c", "#3c8c50", "#8a6bb0"]
_DEVICE_HUES += ["#b03a3a", "#2a8c8c", "#b0508a", "#8c7a2a"]


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
        for hue in (_DEVICE_HUES * n)[:n]
    ]
    figure, axes = plt.subplots(
        1,
        len(kernels),
        figsize=(3.6 * len(kernels) + 1.8, 4.4),
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
                plt.Rectangle((left, top), width, height, ls="--", lw=1.2, **_GREY)
            )
            axis.text(
                0.5,
                0.5,
                f"every device holds all of it:\n{shape} on each of the {n}",
                ha="center",
                va="center",
                fontsize=8,
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
                fontsize=8,
                rotation=90 if across and n > 4 else 0,
            )
    figure.legend(
        handles=[
            plt.Rectangle((0, 0), 1, 1, lw=1.2, label=f"dev {d}: {name}", **colours[d])
            for d, name in enumerate(devices)
        ],
        loc="outside right center",
        fontsize=8,
        title=f"mesh axis {axis_name!r}",
        title_fontsize=9,
        frameon=False,
    )
    figure.suptitle(
        f"What each device holds: a DeviceMesh of {n} along {axis_name!r}", fontsize=10
    )
    return figure


#: Boxes in one row of a sequence figure: more would shrink the labels at the page's width.
_BOXES_PER_ROW = 6


def draw_collective_sequence(calls: Sequence[Sequence], layers: Mapping[int, str]):
    """A step's collectives in the order they ran, one box each, with its kind, the layer
    it belongs to and its elements; returns the figure.

    Introduced in chapter 15. `calls` holds (kind, elements) pairs, as
    `utils.pytorch_ddp.collectives` returns them; `layers` maps a layer's element count
    to its name (a count not in it is labelled by its size only)."""
    if not calls:
        raise ValueError("draw_collective_sequence: the step called no collective.")
    colours = {"all-gather": _BLUE, "reduce-scatter": _ORANGE, "all-reduce": _GREEN}
    columns = min(len(calls), _BOXES_PER_ROW)
    rows = -(-len(calls) // _BOXES_PER_ROW)
    figure, axis = plt.subplots(figsize=(1.35 * columns + 0.6, 1.4 * rows + 0.5))
    axis.set(xlim=(-0.6, columns - 0.4), ylim=(-1.4 * (rows - 1) - 0.9, 0.9))
    axis.axis("off")
    for position, (kind, elements) in enumerate(calls):
        column, row = position % _BOXES_PER_ROW, position // _BOXES_PER_ROW
        label = f"{kind}\n{layers.get(elements, '')}\n{elements:,}".replace(
            "\n\n", "\n"
        )
        _box(axis, column, -1.4 * row, label, colours.get(kind, _GREY), fontsize=9)
        if column:
            axis.annotate(
                "",
                xy=(column - 0.42, -1.4 * row),
                xytext=(column - 0.58, -1.4 * row),
                arrowprops=_ARROW,
            )
    axis.set_title(
        "One step's collectives, in the order they ran (row by row)", fontsize=11
    )
    figure.tight_layout()
    return figure


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
    figure, (funnel, ring) = plt.subplots(1, 2, figsize=(10, 4.6))
    centres = _around_a_ring(devices, 1.8, 1.35)
    for axis in (funnel, ring):
        axis.set(xlim=(-2.35, 2.35), ylim=(-1.9, 1.9), aspect="equal")
        axis.axis("off")
        for device, (x, y) in enumerate(centres):
            _box(axis, x, y, f"GPU {device}", _BLUE)
    total = 2 * devices * hub_each_way
    _box(
        funnel,
        0,
        0,
        f"CPU: the weights,\nthe merged output\n{total:,.0f} {unit} per step",
        _ORANGE,
    )
    for x, y in centres:
        inner, outer = (
            (0.42, 0.82) if abs(x) > abs(y) else (0.36, 0.76)
        )  # clear of boxes
        funnel.annotate(
            "",
            xy=(x * outer, y * outer),
            xytext=(x * inner, y * inner),
            arrowprops={**_ARROW, "arrowstyle": "<->", "lw": 1.2},
        )
    funnel.set_title(
        f"multi_gpu_model: {hub_each_way:,.0f} {unit} each way\nbetween every GPU and one device",
        fontsize=10,
    )
    for device in range(devices):
        start, end = centres[device], centres[(device + 1) % devices]
        ring.annotate(
            "",
            xy=start + 0.8 * (end - start),
            xytext=start + 0.2 * (end - start),
            arrowprops={**_ARROW, "color": "#c07a2c", "lw": 1.4},
        )
    ring.set_title(
        f"ring all-reduce: each GPU sends {ring_each:,.0f} {unit} to the next\n"
        "(under twice the model, however many GPUs)",
        fontsize=10,
    )
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
    figure, axis = plt.subplots(figsize=(10.5, 1.3 + 0.8 * replicas))
    axis.set(xlim=(0, 10.5), ylim=(-0.8, replicas + 0.2))
    axis.axis("off")
    scaled = [s / global_batch for s in sums]
    for replica, (total, size, share) in enumerate(zip(sums, sizes, scaled)):
        y = replicas - replica - 0.5
        _box(
            axis,
            1.7,
            y,
            f"replica {replica}: {size} examples,\nlosses sum to {total:.3f}",
            _BLUE,
            fontsize=8,
        )
        _box(
            axis,
            4.7,
            y,
            f"/ {global_batch} (the global batch)\n= {share:.4f}",
            _BLUE,
            fontsize=8,
        )
        axis.annotate("", xy=(3.55, y), xytext=(2.95, y), arrowprops=_ARROW)
        axis.annotate("", xy=(7.75, replicas / 2), xytext=(5.9, y), arrowprops=_ARROW)
    _box(
        axis,
        8.6,
        replicas / 2,
        f"SUM over replicas\n= {sum(scaled):.4f}\none device's mean\n= {one_device:.4f}",
        _ORANGE,
        fontsize=8,
    )
    axis.text(
        5.25,
        -0.5,
        f"MEAN over replicas instead: {sum(scaled) / replicas:.4f}, the loss divided by {replicas}",
        ha="center",
        fontsize=8,
        color="#b03a3a",
    )
    figure.tight_layout()
    return figure


def draw_tf_config(configs: Sequence[Mapping]):
    """A `MultiWorkerMirroredStrategy` cluster from each worker's `TF_CONFIG`: one box per
    task with its address and role, and the all-reduce that joins them; returns the
    figure.

    Introduced in chapter 10. `configs[i]` is worker i's parsed `TF_CONFIG`; all must
    describe the same cluster. With no `chief` task, worker 0 is the chief."""
    if not configs or any(c["cluster"] != configs[0]["cluster"] for c in configs):
        raise ValueError(
            "draw_tf_config: give each worker's TF_CONFIG, one cluster for all."
        )
    cluster = configs[0]["cluster"]
    tasks = [
        (kind, index, address)
        for kind in cluster
        for index, address in enumerate(cluster[kind])
    ]
    has_chief = "chief" in cluster
    figure, axis = plt.subplots(figsize=(3.2 * len(tasks) + 0.6, 2.6))
    axis.set(xlim=(-0.6, len(tasks) - 0.4), ylim=(-1.2, 1.1))
    axis.axis("off")
    for position, (kind, index, address) in enumerate(tasks):
        chief = kind == "chief" or (not has_chief and kind == "worker" and index == 0)
        role = "\nthe chief: writes checkpoints" if chief else ""
        task = f'"task": {{"type": "{kind}", "index": {index}}}'
        _box(
            axis,
            position,
            0.35,
            f"{kind} {index}, {address}\n{task}{role}",
            _GREEN if chief else _BLUE,
            fontsize=8,
        )
    if len(tasks) > 1:
        axis.annotate(
            "",
            xy=(len(tasks) - 1, -0.45),
            xytext=(0, -0.45),
            arrowprops={**_ARROW, "arrowstyle": "<->", "color": "#c07a2c"},
        )
        axis.text(
            (len(tasks) - 1) / 2,
            -0.75,
            "all-reduce of the gradients, every step",
            ha="center",
            fontsize=8,
            color="#8a5218",
        )
    axis.set_title(
        'Every worker gets the same "cluster" and its own "task"', fontsize=10
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


def draw_files_read(shares: Mapping[str, Sequence[Sequence[float]]]):
    """What each worker trains on under each auto-shard policy: a panel per policy, a row
    per worker, a square per file, filled by the share of that file's examples the worker
    got; returns the figure.

    Introduced in chapter 11. `shares[policy][w][f]` is that share, from 0 to 1; every
    policy has the same workers and files."""
    shapes = {np.shape(share) for share in shares.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(
            "draw_files_read: give every policy a share per worker and file, the same "
            "workers and files for all."
        )
    workers, files = next(iter(shapes))
    figure, axes = plt.subplots(
        1, len(shares), figsize=(0.36 * files * len(shares) + 1.2, 0.5 * workers + 1.3)
    )
    for axis, (policy, share) in zip(np.atleast_1d(axes), shares.items()):
        for worker in range(workers):
            hue = np.array(to_rgb(_DEVICE_HUES[worker % len(_DEVICE_HUES)]))
            row = workers - 1 - worker
            for file in range(files):
                part = float(share[worker][file])
                axis.add_patch(
                    plt.Rectangle(
                        (file, row),
                        0.9,
                        0.9,
                        facecolor=(1 - 0.6 * part) + 0.6 * part * hue,
                        edgecolor=hue if part else "#bbbbbb",
                    )
                )
                label = "all" if part == 1 else f"{part:.0%}" if part else ""
                axis.text(
                    file + 0.45, row + 0.45, label, ha="center", va="center", fontsize=8
                )
        axis.set(xlim=(-0.1, files), ylim=(-0.1, workers), xlabel="file")
        axis.set_title(policy, fontsize=10)
        axis.set_xticks(
            [f + 0.45 for f in range(files)], [str(f) for f in range(files)]
        )
        axis.set_yticks(
            [workers - 1 - w + 0.45 for w in range(workers)],
            [f"worker {w}" for w in range(workers)],
        )
        axis.tick_params(length=0)
        for spine in axis.spines.values():
            spine.set_visible(False)
    figure.suptitle(
        "The share of each file's examples each worker trains on", fontsize=10
    )
    figure.tight_layout()
    return figure
