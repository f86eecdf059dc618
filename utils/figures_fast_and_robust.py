"""Figures of the part "Fast and robust" (chapter 8): a training interrupted and resumed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt

from utils.figures_common import (
    ARROW,
    BLUE,
    RED,
)


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
    figure, axis = plt.subplots(figsize=(6.8, 1.1 * rows + 1.5))
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
        axis.barh(y, stop - start, left=start, height=0.36, linewidth=1, **BLUE)
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
                    **RED,
                )
            axis.annotate(
                "", xy=(resumed, y - 0.8), xytext=(resumed, y - 0.2), arrowprops=ARROW
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
