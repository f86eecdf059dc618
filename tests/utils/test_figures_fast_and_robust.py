"""utils.figures_fast_and_robust: the figures of the part "Fast and robust" (chapter 8). Each is
drawn from values its chapter computes."""

import pytest

from tests.helpers import figure_texts
from utils.figures_fast_and_robust import draw_resume_timeline


def attempt(start, stop, checkpoints, interrupted):
    return {"start": start, "stop": stop, "checkpoints": checkpoints, "interrupted": interrupted}


def test_resume_timeline_marks_checkpoints_the_interruption_and_the_lost_steps():
    figure = draw_resume_timeline(
        [attempt(0, 50, [15, 30, 45], True), attempt(45, 80, [60, 75, 80], False)], 20
    )
    texts = figure_texts(figure)
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
