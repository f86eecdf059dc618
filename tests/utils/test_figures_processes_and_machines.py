"""utils.figures_processes_and_machines: the figures of the part "Several processes and machines"
(chapters 9 to 11). Each is drawn from values its chapter computes."""

import pytest

from tests.helpers import figure_texts
from utils.figures_processes_and_machines import (
    draw_files_read,
    draw_tf_config,
    draw_torchrun_launch,
)


def test_torchrun_launch_draws_agents_workers_and_the_store():
    agents = [
        {"name": "node 0", "hosts_store": True, "workers": [(0, 0), (1, 1)]},
        {"name": "node 1", "hosts_store": False, "workers": [(2, 0), (3, 1)]},
    ]
    figure = draw_torchrun_launch(agents, "127.0.0.1:29400")
    texts = figure_texts(figure)
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


def test_files_read_fills_each_worker_s_square_by_its_share_of_the_file():
    shares = {"FILE": [[1, 0, 1, 0], [0, 1, 0, 1]], "DATA": [[0.5] * 4, [0.5] * 4]}
    figure = draw_files_read(shares)
    file_axis, data_axis = figure.axes
    assert [t.get_text() for t in file_axis.texts] == ["all", "", "all", "", "", "all", "", "all"]
    assert {t.get_text() for t in data_axis.texts} == {"50%"}
    assert len(data_axis.patches) == 8 and data_axis.get_title() == "DATA"
    with pytest.raises(ValueError, match="the same workers and files"):
        draw_files_read({"FILE": [[1, 0]], "DATA": [[0.5, 0.5, 0.5]]})
