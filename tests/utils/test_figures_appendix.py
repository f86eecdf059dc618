"""utils.figures_appendix: the figures of the appendix on multi_gpu_model. Each is drawn from
values its chapter computes."""

import pytest

from utils.figures_appendix import draw_funnel_and_ring


def test_funnel_and_ring_label_what_each_design_moves():
    figure = draw_funnel_and_ring(4, hub_each_way=400, ring_each=600, unit="MB")
    funnel, ring = figure.axes
    assert "400 MB each way" in funnel.get_title() and "600 MB" in ring.get_title()
    assert any("3,200 MB per step" in t.get_text() for t in funnel.texts)  # 2 x 4 x 400
    with pytest.raises(ValueError, match="two devices"):
        draw_funnel_and_ring(1, hub_each_way=1, ring_each=1, unit="MB")
