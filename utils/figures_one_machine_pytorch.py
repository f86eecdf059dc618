"""Figures of the part "One machine, PyTorch" (chapter 6): DataParallel beside DDP."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

from utils.figures_common import ARROW, BLUE, GREEN, GREY, ORANGE, box


def draw_dp_and_ddp(
    dp_slices: Sequence[tuple[str, int]],
    ddp_slices: Sequence[tuple[str, int]],
):
    """`nn.DataParallel`'s one process above `DistributedDataParallel`'s one process per
    device, on the same kind of device; returns the figure.

    Introduced in chapter 6. `dp_slices` holds one `(device, examples)` pair per device
    DataParallel's scatter feeds (device 0 first), `ddp_slices` one per DDP rank (rank 0
    first): the device it trains on and the examples it takes per step. Every device is
    of one kind ("cuda:0", "cuda:1", ...), so that the two designs are compared on the
    same machine. The panels are stacked and narrow, so that the text reads on a phone.
    """
    if not dp_slices or not ddp_slices:
        raise ValueError(
            "draw_dp_and_ddp: give at least one DataParallel slice and one DDP rank."
        )
    kinds = {str(device).split(":")[0] for device, _ in [*dp_slices, *ddp_slices]}
    if len(kinds) != 1:
        raise ValueError(
            "draw_dp_and_ddp: draw both designs on one kind of device (all cuda:N, "
            f"say); got {sorted(kinds)}."
        )
    n, m = len(dp_slices), len(ddp_slices)
    columns = max(n, m)
    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(2.6 * columns + 0.4, 7.6), height_ratios=[4.0, 3.6]
    )
    for axis, height in ((top, 4.0), (bottom, 3.6)):
        axis.set(xlim=(-0.1, columns + 0.1), ylim=(0, height))
        axis.axis("off")
    total = sum(examples for _, examples in dp_slices)

    # DataParallel: one process, one thread per device, everything returns to device 0.
    middle = columns / 2
    top.set_title(
        "nn.DataParallel: one process, a thread per device", fontsize=11, weight="bold"
    )
    top.add_patch(
        plt.Rectangle(
            (-0.05, 0.05), columns + 0.1, 3.85, fill=False, ec=GREEN["edgecolor"]
        )
    )
    box(
        top,
        middle,
        3.4,
        f"scatter: a batch of {total}\ninto {n} slices",
        ORANGE,
        fontsize=10,
    )
    for device, (name, examples) in enumerate(dp_slices):
        x = (device + 0.5) * columns / n
        top.annotate("", xy=(x, 2.55), xytext=(middle, 2.95), arrowprops=ARROW)
        box(
            top,
            x,
            2.0,
            f"thread {device}, {name}\na model replica\n{examples} examples",
            BLUE,
            fontsize=10,
        )
        top.annotate("", xy=(middle, 0.95), xytext=(x, 1.45), arrowprops=ARROW)
    first = dp_slices[0][0]
    box(
        top,
        middle,
        0.55,
        f"gather on {first}: the loss,\nbackward, the weights",
        ORANGE,
        fontsize=10,
    )

    # DDP: one process per device, each with its own model copy and slice.
    bottom.set_title(
        "DistributedDataParallel: a process per device", fontsize=11, weight="bold"
    )
    for rank, (name, examples) in enumerate(ddp_slices):
        x = (rank + 0.5) * columns / m
        width = 0.9 * columns / m
        bottom.add_patch(
            plt.Rectangle(
                (x - width / 2, 1.2), width, 2.3, fill=False, ec=GREEN["edgecolor"]
            )
        )
        bottom.text(
            x,
            3.25,
            f"process {rank}",
            ha="center",
            va="center",
            fontsize=10,
            color="#2d6b3d",
        )
        box(bottom, x, 2.65, f"rank {rank}, {name}", BLUE, fontsize=10)
        box(bottom, x, 2.0, "its own model", GREY, fontsize=10)
        box(bottom, x, 1.5, f"{examples} examples", BLUE, fontsize=10)
        bottom.annotate("", xy=(x, 0.85), xytext=(x, 1.2), arrowprops=ARROW)
    box(
        bottom,
        middle,
        0.45,
        "all-reduce of the gradients,\nduring backward",
        ORANGE,
        fontsize=10,
    )
    figure.tight_layout()
    return figure
