"""utils.figures_at_scale: the figures of the part "At scale" (chapters 14 to 18). Each is drawn
from values its chapter computes."""

import pytest

from tests.helpers import figure_texts
from utils.figures_at_scale import (
    draw_device_mesh,
    draw_zero_holdings,
    plot_against_length,
    plot_compute_and_communication,
    plot_step_timeline,
)


def test_zero_holdings_fill_a_device_s_own_slice_of_what_a_stage_splits():
    sharded = {"replicated": (), "ZeRO-1": ("optimizer state",)}
    figure = draw_zero_holdings(sharded, {"weights": 2, "optimizer state": 12}, devices=2)
    replicated, zero1 = figure.axes
    filled = [[(p.get_y(), p.get_height()) for p in a.patches if p.fill] for a in figure.axes]
    assert filled[0] == [(0, 2), (0, 2), (2, 12), (2, 12)]  # everything, on both devices
    assert filled[1] == [(0, 2), (0, 2), (2, 6), (8, 6)]  # device d: slice d of Adam's state
    with pytest.raises(ValueError, match="two devices"):
        draw_zero_holdings(sharded, {"weights": 2}, devices=1)


def kernel(shape, spec, shard, devices):
    return {"shape": shape, "spec": spec, "per device": [shard] * devices}


def mesh_kernels(n):
    """Chapter 16's kernels on n devices: the hidden one split by columns, the logits by rows."""
    return {
        "mlp/hidden/kernel": kernel([64, 256], [None, "batch"], [64, 256 // n], n),
        "mlp/logits/kernel": kernel([256, 10], ["batch", None], [256 // n, 10], n),
    }


def test_device_mesh_cuts_each_kernel_into_the_blocks_its_devices_hold():
    figure = draw_device_mesh(["TFRT_CPU_0", "TFRT_CPU_1"], mesh_kernels(2))
    hidden, logits = figure.axes
    assert hidden.get_title() == "mlp/hidden/kernel (None, 'batch')\nfull shape [64, 256]"
    assert [t.get_text() for t in hidden.texts] == ["dev 0\n[64, 128]", "dev 1\n[64, 128]"]
    assert [t.get_text() for t in logits.texts] == ["dev 0\n[128, 10]", "dev 1\n[128, 10]"]
    # columns split: blocks side by side; rows split: one above the other (row 0 on top)
    (a, b), (c, d) = hidden.patches, logits.patches
    assert a.get_y() == b.get_y() and a.get_x() < b.get_x() and a.get_height() == b.get_height()
    assert c.get_x() == d.get_x() and c.get_y() < d.get_y() and c.get_width() == d.get_width()
    assert a.get_facecolor() == c.get_facecolor() != b.get_facecolor()  # coloured by device
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == ["dev 0: TFRT_CPU_0", "dev 1: TFRT_CPU_1"]
    assert figure.legends[0].get_title().get_text() == "mesh axis 'batch'"


def test_a_spec_may_leave_out_its_trailing_nones_as_jax_does():
    logits = kernel([256, 10], ["batch"], [128, 10], 2)  # PartitionSpec('batch')
    figure = draw_device_mesh(["cuda:0", "cuda:1"], {"mlp/logits/kernel": logits})
    assert figure.axes[0].get_title().startswith("mlp/logits/kernel ('batch', None)")


def test_a_replicated_kernel_is_one_rectangle_every_device_holds():
    replicated = kernel([64, 256], [None, None], [64, 256], 2)
    figure = draw_device_mesh(["cuda:0", "cuda:1"], {"mlp/hidden/kernel": replicated})
    (axis,) = figure.axes
    assert len(axis.patches) == 1 and axis.patches[0].get_linestyle() == "--"
    assert [t.get_text() for t in axis.texts] == [
        "every device holds all of it:\n[64, 256] on each of the 2"
    ]


def test_device_mesh_draws_eight_devices_and_a_bias_as_one_row():
    kernels = {**mesh_kernels(8), "mlp/hidden/bias": kernel([256], ["batch"], [32], 8)}
    figure = draw_device_mesh([f"cuda:{d}" for d in range(8)], kernels)
    assert [len(axis.patches) for axis in figure.axes] == [8, 8, 8]
    bias = figure.axes[2]
    assert len({p.get_y() for p in bias.patches}) == 1  # one row
    assert bias.texts[7].get_text() == "dev 7\n[32]" and bias.texts[7].get_rotation() == 90
    assert figure.axes[1].texts[7].get_rotation() == 0  # rows are wide enough
    assert len(figure.legends[0].get_texts()) == 8


def test_device_mesh_names_the_kernel_whose_layout_does_not_fit():
    two = ["cuda:0", "cuda:1"]
    with pytest.raises(ValueError, match="at least one device and one kernel"):
        draw_device_mesh([], mesh_kernels(2))
    one_shard = kernel([256, 10], ["batch", None], [128, 10], 1)
    with pytest.raises(ValueError, match="mlp/logits/kernel needs one shard shape per device"):
        draw_device_mesh(two, {**mesh_kernels(2), "mlp/logits/kernel": one_shard})
    with pytest.raises(ValueError, match="bias's spec needs one entry per dimension"):
        draw_device_mesh(two, {"bias": kernel([256], [None, "batch"], [128], 2)})
    with pytest.raises(ValueError, match="each 'batch' \\(at most once\\) or None"):
        draw_device_mesh(two, {"hidden": kernel([64, 256], [None, "model"], [64, 128], 2)})
    with pytest.raises(ValueError, match="each 'batch' \\(at most once\\) or None"):
        draw_device_mesh(two, {"hidden": kernel([64, 256], ["batch"] * 2, [32, 128], 2)})
    with pytest.raises(ValueError, match="each shard of hidden must be its shape"):
        draw_device_mesh(two, {"hidden": kernel([64, 256], ["batch", None], [64, 128], 2)})
    with pytest.raises(ValueError, match="each shard of bias must be"):  # 10 over 4 devices
        draw_device_mesh(two * 2, {"bias": kernel([10], ["batch"], [2], 4)})


def test_step_timeline_has_three_lanes_per_process_told_apart_by_colour():
    timeline = {"step": [[0, 10]], "backward": [[5, 3]], "all-reduce": [[6, 2]]}
    figure = plot_step_timeline([timeline, timeline])
    (axis,) = figure.axes
    assert [t.get_text() for t in axis.get_yticklabels()] == ["rank 0", "rank 1"]
    legend = [t.get_text() for t in axis.get_legend().get_texts()]
    assert legend == ["step", "backward", "all-reduce"]
    assert len(axis.collections) == 6  # a lane per kind and process
    with pytest.raises(ValueError, match="each with"):
        plot_step_timeline([{"step": []}])


def test_against_length_draws_one_line_per_series_on_log_axes():
    figure = plot_against_length([64, 128], {"a": [1, 2], "b": [3, 12]}, "bytes")
    (axis,) = figure.axes
    assert [line.get_label() for line in axis.get_lines()] == ["a", "b"]
    assert axis.get_xscale() == axis.get_yscale() == "log"
    assert [t.get_text() for t in axis.get_xticklabels()] == ["64", "128"]


def test_compute_and_communication_has_a_panel_per_case_with_two_lines():
    case = {"batches": [1, 2, 4], "backward_s": [1, 2, 4], "all_reduce_s": 3, "unit": "tokens"}
    figure = plot_compute_and_communication({"x": case, "y": case})
    assert [axis.get_title() for axis in figure.axes] == ["x", "y"]
    flat = figure.axes[0].get_lines()[1].get_ydata()
    assert list(flat) == [3, 3, 3] and figure.axes[0].get_xlabel() == "batch per device (tokens)"
    assert list(figure.axes[0].get_lines()[2].get_xdata()) == [3, 3]  # where they cross


def test_the_collective_sequence_draws_one_box_a_call_in_order():
    """Chapter 15's figure: a box per collective, numbered in the order they ran, named by
    the unit the elements belong to (or their count); a step with none is an error."""
    from utils.figures_at_scale import draw_collective_sequence

    calls = [["all-gather", 30], ["all-gather", 100], ["reduce-scatter", 7]]
    figure = draw_collective_sequence(calls, {30: "the root", 100: "a block"})
    shown = ["1. all-gather\nthe root", "2. all-gather\na block", "3. reduce-scatter\n7"]
    assert [text for text in figure_texts(figure) if text] == shown
    with pytest.raises(ValueError, match="the step called no collective"):
        draw_collective_sequence([], {})
