"""utils.figures_common, and every figure of the book read at the page's width.

How large a figure's text looks depends on how much the page shrinks its image. The inline
backend saves a figure at matplotlib's 100 dpi, cropped to what it draws (`bbox_inches=
"tight"`), and the book shows the PNG at its own width or the content column's, whichever
is smaller. Text of `p` points is therefore `p * 100 / 72 * min(1, column / width)` CSS
pixels on the page. The columns were measured in Chromium on the built book (the width of
`div.cell_output` in chapter 6): 768 px in a 1280 px wide window, the smallest desktop the
rendered-book tests open (870 px from 1440 px up), and 358 px on a 390 px phone.
"""

import io
from unittest import mock

import matplotlib.pyplot
import numpy as np
import pytest
from matplotlib.text import Text
from PIL import Image

from utils.figures_appendix import draw_funnel_and_ring
from utils.figures_at_scale import (
    draw_collective_sequence,
    draw_device_mesh,
    draw_zero_holdings,
    plot_against_length,
    plot_compute_and_communication,
    plot_step_timeline,
)
from utils.figures_common import BLUE, around_a_ring, box, numbers
from utils.figures_fast_and_robust import draw_resume_timeline
from utils.figures_foundations import draw_data_parallel_step
from utils.figures_one_machine_keras import (
    draw_average_loss,
    draw_collectives,
    draw_mirrored_strategy,
    draw_ring_all_reduce,
    plot_curves,
)
from utils.figures_one_machine_pytorch import draw_dp_and_ddp
from utils.figures_processes_and_machines import (
    draw_files_read,
    draw_tf_config,
    draw_torchrun_launch,
)

DPI = 100  # matplotlib's figure.dpi, which the inline backend keeps
DESKTOP_COLUMN = 768  # px: the content column in a 1280 px window
PHONE_COLUMN = 358  # px: the content column on a 390 px phone
DESKTOP_SMALLEST = 9.0  # px: BOOK_STYLE's "about 9 px or more"
#: On a phone a reader may zoom, but the figure should not need it for its words: at least
#: 6.4 CSS px (19 device pixels on a phone's 3x screen). The figures that chapter
#: text leans on most (chapter 6's processes, chapter 17's timeline) keep 7 px or more.
PHONE_SMALLEST = 6.4
PHONE_READABLE = {"draw_dp_and_ddp": 7.0, "plot_step_timeline": 7.0}


def test_box_centres_its_text_in_the_colours_given():
    figure, axis = matplotlib.pyplot.subplots()
    text = box(axis, 1, 2, "a", BLUE, fontsize=11)
    assert text.get_position() == (1, 2) and text.get_fontsize() == 11
    assert text.get_bbox_patch().get_facecolor()[:3] == pytest.approx((0.91, 0.941, 0.98), abs=0.01)


def test_the_ring_starts_on_top_and_goes_clockwise():
    (x0, y0), (x1, y1), *_ = around_a_ring(4, 2, 1)
    assert (x0, y0) == pytest.approx((0, 1)) and (x1, y1) == pytest.approx((2, 0))
    assert numbers([0.1, 2]) == "[0.100, 2.000]"


def _attempt(start, stop, checkpoints, interrupted):
    return {"start": start, "stop": stop, "checkpoints": checkpoints, "interrupted": interrupted}


def _kernel(shape, spec, shard):
    return {"shape": shape, "spec": spec, "per device": [shard] * 2}


def _timeline(offset):
    steps = [[0, 24], [24, 16], [40, 20]]
    return {
        "step": steps,
        "backward": [[s + 6, 8 - offset] for s, _ in steps],
        "all-reduce": [[s + 8, 12] for s, _ in steps],
    }


def _ring_all_reduce(n=4):
    """Chapter 5's ring on n devices: its states, titles and messages."""
    states, titles, messages = [np.ones((n, n))], ["start"], [[]]
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(n - 1):
            states.append(np.minimum(states[-1] + 1, n))
            titles.append(f"{phase} {step + 1}")
            messages.append([(d, (d + 1) % n, (d - step) % n) for d in range(n)])
    return states, titles, messages


#: Every figure function, called as its chapter calls it (the chapter's sizes: 2 devices or
#: processes, chapter 5's 4, chapter 14's 4 stages, chapter 11's 8 files).
FIGURES = {
    "draw_data_parallel_step": lambda: draw_data_parallel_step(
        [[0, 1, 2, 3], [4, 5, 6, 7]], [[0.1, -0.2]] * 2, [0.2, -0.4], [[0.98, 1.04]] * 2
    ),
    "plot_curves": lambda: plot_curves(
        {run: {"loss": [2, 1, 0.5], "val_accuracy": [0.5, 0.8, 0.9]} for run in ("one", "two")},
        ["loss", "val_accuracy"],
        title="The same training on one device and on two replicas",
    ),
    "draw_mirrored_strategy": lambda: draw_mirrored_strategy(
        ["CPU:0", "CPU:1"], [[0.01, -0.02, 0.03]] * 2, [1.15, 1.17], 2.32, value="loss share"
    ),
    "draw_average_loss": lambda: draw_average_loss([36.8, 37.1], [32, 32], 64, 1.1547),
    "draw_collectives": lambda: draw_collectives(
        np.arange(1, 17).reshape(4, 4),
        {
            "broadcast (from dev 0)": [[1, 2, 3, 4]] * 4,
            "reduce (to dev 0)": [[28, 32, 36, 40], None, None, None],
            "all-reduce": [[28, 32, 36, 40]] * 4,
            "reduce-scatter": [28, 32, 36, 40],
            "all-gather (chunk d of dev d)": [[1, 6, 11, 16]] * 4,
        },
    ),
    "draw_ring_all_reduce": lambda: draw_ring_all_reduce(*_ring_all_reduce()),
    "draw_dp_and_ddp": lambda: draw_dp_and_ddp(
        [("cuda:0", 32), ("cuda:1", 32)], [("cuda:0", 32), ("cuda:1", 32)]
    ),
    "draw_resume_timeline": lambda: draw_resume_timeline(
        [_attempt(0, 50, [15, 30, 45], True), _attempt(45, 90, [60, 75, 90], False)], 15
    ),
    "draw_torchrun_launch": lambda: draw_torchrun_launch(
        [
            {"name": "node 0", "hosts_store": True, "workers": [(0, 0)]},
            {"name": "node 1", "hosts_store": False, "workers": [(1, 0)]},
        ],
        "127.0.0.1:29400",
    ),
    "draw_tf_config": lambda: draw_tf_config(
        [
            {
                "cluster": {"worker": ["localhost:12345", "localhost:12346"]},
                "task": {"type": "worker", "index": i},
            }
            for i in (0, 1)
        ]
    ),
    "draw_files_read": lambda: draw_files_read(
        {
            "FILE": [[1, 0] * 4, [0, 1] * 4],
            "DATA: every file read": [[0.5] * 8] * 2,
            "OFF": [[1] * 8] * 2,
        }
    ),
    "draw_zero_holdings": lambda: draw_zero_holdings(
        {
            "replicated": (),
            "ZeRO-1": ("optimizer state",),
            "ZeRO-2": ("optimizer state", "gradients"),
            "ZeRO-3 / FSDP": ("optimizer state", "gradients", "weights"),
        },
        {"weights": 2, "gradients": 2, "optimizer state": 12},
        devices=4,
    ),
    "draw_collective_sequence": lambda: draw_collective_sequence(
        [["all-gather", 30], *[["all-gather", 100]] * 3, ["reduce-scatter", 100]],
        {30: "the root", 100: "a block"},
    ),
    "draw_device_mesh": lambda: draw_device_mesh(
        ["CpuDevice(id=0)", "CpuDevice(id=1)"],
        {
            "sequential/dense/kernel": _kernel([64, 256], [None, "batch"], [64, 128]),
            "sequential/dense_1/kernel": _kernel([256, 10], ["batch", None], [128, 10]),
        },
    ),
    "plot_step_timeline": lambda: plot_step_timeline([_timeline(0), _timeline(3)]),
    "plot_against_length": lambda: plot_against_length(
        [64, 128, 256, 512],
        {"plain attention": [1e6, 3e6, 1e7, 4e7], "fused attention": [5e5, 1e6, 2e6, 4e6]},
        "bytes saved for one sequence",
    ),
    "plot_compute_and_communication": lambda: plot_compute_and_communication(
        {
            name: {
                "batches": [1, 2, 4, 8],
                "backward_s": [1, 2, 4, 8],
                "all_reduce_s": 3,
                "unit": "sequences",
            }
            for name in ("the chapter's model", "a 7B-shaped model")
        }
    ),
    "draw_funnel_and_ring": lambda: draw_funnel_and_ring(
        4, hub_each_way=400, ring_each=600, unit="MB"
    ),
}


def smallest_text_in_css_px(figure) -> tuple[float, float, float]:
    """The smallest text `figure` draws, in points, and in CSS px on the desktop's and the
    phone's content column."""
    sizes, draw = [], Text.draw

    def record(text, renderer):  # every label, tick label, title and legend entry drawn
        if text.get_visible() and text.get_text().strip():
            sizes.append(text.get_fontsize())
        return draw(text, renderer)

    buffer = io.BytesIO()
    with mock.patch.object(Text, "draw", record):
        figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")  # as shown
    width = Image.open(buffer).size[0]
    points = min(sizes)
    px = points * DPI / 72
    return points, px * min(1, DESKTOP_COLUMN / width), px * min(1, PHONE_COLUMN / width)


def test_every_figure_function_is_measured():
    import utils

    drawn = {name for name in utils.__all__ if name.startswith(("draw_", "plot_"))}
    assert drawn == set(FIGURES)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_figure_s_smallest_text_reads_on_a_desktop_and_a_phone(name):
    points, desktop, phone = smallest_text_in_css_px(FIGURES[name]())
    assert desktop >= DESKTOP_SMALLEST, f"{name}: {points} pt is {desktop:.1f} px on a desktop"
    least = PHONE_READABLE.get(name, PHONE_SMALLEST)
    assert phone >= least, f"{name}: {points} pt is {phone:.1f} px on a phone"
