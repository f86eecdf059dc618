"""utils.figures_one_machine_pytorch: the figures of the part "One machine, PyTorch" (chapter 6).
Each is drawn from values its chapter computes."""

import pytest

from tests.helpers import figure_texts
from utils.figures_one_machine_pytorch import draw_dp_and_ddp


def test_dp_and_ddp_show_one_process_above_one_process_per_device():
    slices = [("cuda:0", 4), ("cuda:1", 3)]
    figure = draw_dp_and_ddp(slices, [("cuda:0", 32), ("cuda:1", 32)])
    texts = figure_texts(figure)
    assert "scatter: a batch of 7\ninto 2 slices" in texts
    assert any(t.startswith("gather on cuda:0") for t in texts)
    assert "thread 1, cuda:1\na model replica\n3 examples" in texts
    assert "rank 1, cuda:1" in texts and texts.count("32 examples") == 2
    assert [t for t in texts if t.startswith("process")] == ["process 0", "process 1"]
    assert not any("cpu" in t or "gloo" in t for t in texts)  # no process ids, one kind
    with pytest.raises(ValueError, match="at least one DataParallel slice"):
        draw_dp_and_ddp([], [("cuda:0", 8)])
    with pytest.raises(ValueError, match="one kind of device"):
        draw_dp_and_ddp(slices, [("cpu", 32), ("cpu", 32)])
