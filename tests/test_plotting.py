"""utils.plotting: training curves, and the pictures drawn from values a chapter computes."""

import matplotlib.pyplot
import pytest

from utils.plotting import (
    draw_average_loss,
    draw_collective_sequence,
    draw_collectives,
    draw_data_parallel_step,
    draw_device_mesh,
    draw_dp_and_ddp,
    draw_files_read,
    draw_funnel_and_ring,
    draw_mirrored_strategy,
    draw_resume_timeline,
    draw_ring_all_reduce,
    draw_tf_config,
    draw_torchrun_launch,
    draw_zero_holdings,
    plot_against_length,
    plot_compute_and_communication,
    plot_curves,
    plot_step_timeline,
)


@pytest.fixture(autouse=True)
def close_figures():
    """Every test draws a figure; close them all after it."""
    yield
    matplotlib.pyplot.close("all")


def test_plot_curves_draws_one_line_per_run_and_panel_per_metric():
    histories = {f"run {i}": {"loss": [3, 2, 1], "accuracy": [0.1, 0.5, 0.9]} for i in range(5)}
    figure = plot_curves(histories, ["loss", "accuracy"], title="t")
    assert len(figure.axes) == 2
    assert all(len(axis.get_lines()) == 5 for axis in figure.axes)


def test_a_data_parallel_step_has_a_column_per_device_and_one_all_reduce():
    figure = draw_data_parallel_step(
        [[0, 1], [2, 3], [4, 5]], [[0.1, 0.2]] * 3, [0.3, 0.6], [[0.9, 0.8]] * 3
    )
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert [t for t in texts if t.startswith("device")] == ["device 0", "device 1", "device 2"]
    assert sum("all-reduce" in t for t in texts) == 1
    assert "examples 4-5" in texts and "weights\n[0.900, 0.800]" in texts
    with pytest.raises(ValueError, match="one entry per device"):
        draw_data_parallel_step([[0]], [], [0.0], [[1.0]])


def texts_of(figure):
    return [t.get_text() for axis in figure.axes for t in axis.texts]


def test_mirrored_strategy_shows_each_copy_each_replica_and_one_reduction():
    figure = draw_mirrored_strategy(["CPU:0", "CPU:1"], [[0.1, 0.2], [0.1, 0.2]], [1.25, 1.5], 2.75)
    texts = texts_of(figure)
    assert {"CPU:0", "CPU:1"} <= set(texts)
    assert texts.count("kernel[:2]\n[0.100, 0.200]") == 2
    assert "replica 1: loss\n1.5000" in texts
    assert sum("strategy.reduce(SUM)" in t and "2.7500" in t for t in texts) == 1
    with pytest.raises(ValueError, match="one copy and one per-replica value"):
        draw_mirrored_strategy(["CPU:0"], [[0.1]], [1.0, 2.0], 3.0)
    with pytest.raises(ValueError, match="per device"):
        draw_mirrored_strategy([], [], [], 0.0)


def ddp_rank(rank):
    return {"rank": rank, "pid": 100 + rank, "device": "cpu", "backend": "gloo", "batch": 32}


def test_dp_and_ddp_show_one_process_beside_one_process_per_rank():
    figure = draw_dp_and_ddp(7, [("cuda:0", 4), ("cuda:1", 3)], [ddp_rank(0), ddp_rank(1)])
    texts = texts_of(figure)
    assert "process 7" in texts and "process 100" in texts and "process 101" in texts
    assert "scatter: a batch of 7 into 2 slices" in texts
    assert any(t.startswith("gather on cuda:0") for t in texts)
    assert "rank 1\ncpu (gloo)" in texts and texts.count("its own slice:\n32 examples") == 2
    with pytest.raises(ValueError, match="at least one DataParallel slice"):
        draw_dp_and_ddp(7, [], [ddp_rank(0)])
    with pytest.raises(ValueError, match="keys backend, batch, device, pid, rank"):
        draw_dp_and_ddp(7, [("cpu", 8)], [{"rank": 0}])


def attempt(start, stop, checkpoints, interrupted):
    return {"start": start, "stop": stop, "checkpoints": checkpoints, "interrupted": interrupted}


def test_resume_timeline_marks_checkpoints_the_interruption_and_the_lost_steps():
    figure = draw_resume_timeline(
        [attempt(0, 50, [15, 30, 45], True), attempt(45, 80, [60, 75, 80], False)], 20
    )
    texts = texts_of(figure)
    assert [t for t in texts if t.startswith("epoch")] == [f"epoch {e}" for e in range(4)]
    assert "interrupted after step 50" in texts
    assert "restore the checkpoint\nof step 45" in texts
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert legend == ["checkpoint written", "interruption", "lost, redone: 5 steps"]
    # resumed exactly where it stopped: nothing lost
    figure = draw_resume_timeline(
        [attempt(0, 30, [15, 30], True), attempt(30, 45, [45], False)], 15
    )
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert not any("lost" in name for name in legend)
    with pytest.raises(ValueError, match="at least one attempt"):
        draw_resume_timeline([], 10)
    with pytest.raises(ValueError, match="checkpoints between them"):
        draw_resume_timeline([attempt(0, 10, [20], False)], 10)
    with pytest.raises(ValueError, match="starts after the one before"):
        draw_resume_timeline([attempt(0, 10, [], True), attempt(20, 30, [], False)], 10)


def test_torchrun_launch_draws_agents_workers_and_the_store():
    agents = [
        {"name": "node 0", "hosts_store": True, "workers": [(0, 0), (1, 1)]},
        {"name": "node 1", "hosts_store": False, "workers": [(2, 0), (3, 1)]},
    ]
    figure = draw_torchrun_launch(agents, "127.0.0.1:29400")
    texts = texts_of(figure)
    assert "rendezvous store (c10d)\n127.0.0.1:29400" in texts
    assert "node 0\ntorchrun agent, hosts the store" in texts
    assert "node 1\ntorchrun agent" in texts
    workers = [t for t in texts if t.startswith("worker process")]
    assert workers[-1] == "worker process\nrank 3 / local rank 1" and len(workers) == 4
    with pytest.raises(ValueError, match="at least one agent"):
        draw_torchrun_launch([], "127.0.0.1:29400")
    with pytest.raises(ValueError, match="exactly one agent must host"):
        draw_torchrun_launch([{**a, "hosts_store": True} for a in agents], "h:1")
    with pytest.raises(ValueError, match="ranks must be 0..N-1"):
        broken = [agents[0], {**agents[1], "workers": [(1, 0), (3, 1)]}]
        draw_torchrun_launch(broken, "h:1")


def test_step_timeline_has_three_lanes_per_process():
    timeline = {"step": [[0, 10]], "backward": [[5, 3]], "all-reduce": [[6, 2]]}
    figure = plot_step_timeline([timeline, timeline])
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert labels[:3] == ["rank 0: step", "rank 0: backward", "rank 0: all-reduce"]
    assert len(labels) == 6
    with pytest.raises(ValueError, match="each with"):
        plot_step_timeline([{"step": []}])


def test_collectives_show_every_device_before_and_after_each():
    held = [[1, 2], [3, 4]]
    figure = draw_collectives(held, {"all-reduce": [[4, 6], [4, 6]], "reduce": [[4, 6], None]})
    texts = [[t.get_text() for t in axis.texts] for axis in figure.axes]
    assert texts == [
        ["dev 0: 1 2", "dev 1: 3 4"],
        ["dev 0: 4 6", "dev 1: 4 6"],
        ["dev 0: 4 6", "dev 1: 3 4"],
    ]
    with pytest.raises(ValueError, match="one entry per device"):
        draw_collectives(held, {"broadcast": [[1, 2]]})


def test_the_ring_shows_each_step_s_messages_on_a_ring_of_devices():
    states = [[[1, 1], [1, 1]], [[2, 1], [1, 2]], [[2, 2], [2, 2]]]
    messages = [[], [(0, 1, 1), (1, 0, 0)], [(0, 1, 0), (1, 0, 1)]]
    figure = draw_ring_all_reduce(states, ["start", "reduce-scatter", "all-gather"], messages)
    panels = [axis for axis in figure.axes if axis.patches]
    assert len(panels) == 3 and all(len(axis.patches) == 4 for axis in panels)  # 2 x 2 chunks
    # 2 device labels and 4 counts; then per message an arrow and its chunk's name
    assert [len(axis.texts) for axis in panels] == [6, 10, 10]
    with pytest.raises(ValueError, match="one title and message list per state"):
        draw_ring_all_reduce(states, ["start"], messages)


def test_zero_holdings_fill_a_device_s_own_slice_of_what_a_stage_splits():
    sharded = {"replicated": (), "ZeRO-1": ("optimizer state",)}
    figure = draw_zero_holdings(sharded, {"weights": 2, "optimizer state": 12}, devices=2)
    replicated, zero1 = figure.axes
    filled = [[(p.get_y(), p.get_height()) for p in a.patches if p.fill] for a in figure.axes]
    assert filled[0] == [(0, 2), (0, 2), (2, 12), (2, 12)]  # everything, on both devices
    assert filled[1] == [(0, 2), (0, 2), (2, 6), (8, 6)]  # device d: slice d of Adam's state
    with pytest.raises(ValueError, match="two devices"):
        draw_zero_holdings(sharded, {"weights": 2}, devices=1)


def test_a_collective_sequence_names_each_call_s_layer():
    calls = [("all-gather", 160), ("reduce-scatter", 160), ("all-gather", 7)]
    figure = draw_collective_sequence(calls, {160: "layers.0"})
    boxes = [t.get_text() for t in figure.axes[0].texts if t.get_text()]
    assert boxes == ["all-gather\nlayers.0\n160", "reduce-scatter\nlayers.0\n160", "all-gather\n7"]
    with pytest.raises(ValueError, match="no collective"):
        draw_collective_sequence([], {})


def test_funnel_and_ring_label_what_each_design_moves():
    figure = draw_funnel_and_ring(4, hub_each_way=400, ring_each=600, unit="MB")
    funnel, ring = figure.axes
    assert "400 MB each way" in funnel.get_title() and "600 MB" in ring.get_title()
    assert any("3,200 MB per step" in t.get_text() for t in funnel.texts)  # 2 x 4 x 400
    with pytest.raises(ValueError, match="two devices"):
        draw_funnel_and_ring(1, hub_each_way=1, ring_each=1, unit="MB")


def test_average_loss_shows_each_replica_s_share_and_their_sum():
    figure = draw_average_loss([30.0, 10.0], [2, 2], 4, one_device=10.0)
    texts = " | ".join(t.get_text() for t in figure.axes[0].texts)
    assert "= 7.5000" in texts and "= 2.5000" in texts  # 30 / 4 and 10 / 4
    assert "SUM over replicas\n= 10.0000" in texts and "instead: 5.0000" in texts
    with pytest.raises(ValueError, match="one sum and one size per replica"):
        draw_average_loss([1.0], [1, 1], 2, one_device=1.0)


def test_tf_config_marks_worker_0_the_chief_unless_there_is_a_chief_task():
    cluster = {"worker": ["h:1", "h:2"]}
    configs = [{"cluster": cluster, "task": {"type": "worker", "index": i}} for i in (0, 1)]
    texts = [t.get_text() for t in draw_tf_config(configs).axes[0].texts]
    assert [t for t in texts if "chief" in t] == [
        'worker 0, h:1\n"task": {"type": "worker", "index": 0}\nthe chief: writes checkpoints'
    ]
    with_chief = {"chief": ["h:0"], "worker": ["h:1"]}
    configs = [{"cluster": with_chief, "task": {"type": "chief", "index": 0}}]
    texts = [t.get_text() for t in draw_tf_config(configs).axes[0].texts]
    assert [t.split(",")[0] for t in texts if "chief" in t] == ["chief 0"]
    with pytest.raises(ValueError, match="one cluster for all"):
        draw_tf_config([configs[0], {"cluster": cluster, "task": {}}])


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


def test_long_sequences_wrap_into_rows_that_keep_the_labels_readable():
    calls = [("all-gather", 7)] * 8
    texts = [t for t in draw_collective_sequence(calls, {}).axes[0].texts if t.get_text()]
    assert [t.get_position() for t in texts[5:7]] == [(5, 0), (0, -1.4)]


def test_files_read_fills_each_worker_s_square_by_its_share_of_the_file():
    shares = {"FILE": [[1, 0, 1, 0], [0, 1, 0, 1]], "DATA": [[0.5] * 4, [0.5] * 4]}
    figure = draw_files_read(shares)
    file_axis, data_axis = figure.axes
    assert [t.get_text() for t in file_axis.texts] == ["all", "", "all", "", "", "all", "", "all"]
    assert {t.get_text() for t in data_axis.texts} == {"50%"}
    assert len(data_axis.patches) == 8 and data_axis.get_title() == "DATA"
    with pytest.raises(ValueError, match="the same workers and files"):
        draw_files_read({"FILE": [[1, 0]], "DATA": [[0.5, 0.5, 0.5]]})
