"""figures.model.history_fig, issue 24 item 8: both axes ticked at round values on one grid (the
accuracy axis had ticks at 0.367 and 0.735, the loss grid's lines carried over), and the lowest
reachable loss named in the subtitle instead of a label drawn over the curves."""

import numpy as np
import pytest

from figures.model import history_fig, nice_ticks, smoothed_loss_floor

# The bundled checkpoint's curves, cut to four epochs: losses end on the floor (0.565).
HISTORY = {"loss": [1.295, 0.607, 0.581, 0.574], "masked_accuracy": [0.715, 0.99, 0.996, 0.998],
           "val_loss": [0.609, 0.572, 0.57, 0.569],
           "val_masked_accuracy": [0.99, 1.0, 1.0, 1.0]}


def is_round(value: float) -> bool:
    """A tick a reader takes in at a glance: at most two significant digits."""
    return value == 0 or float(f"{value:.2g}") == pytest.approx(value, abs=1e-12)


@pytest.mark.parametrize("label_smoothing", [None, 0.1])
def test_both_axes_have_round_ticks_on_one_grid(label_smoothing):
    fig = history_fig(HISTORY, label_smoothing=label_smoothing, vocab_size=16)
    loss, accuracy = fig.layout.yaxis, fig.layout.yaxis2
    assert loss.tickvals and accuracy.tickvals  # chosen, not Plotly's synced grid
    assert all(is_round(v) for v in (*loss.tickvals, *accuracy.tickvals))
    assert accuracy.tickvals[0] == 0 and accuracy.tickvals[-1] == 1
    assert max(v for k, vs in HISTORY.items() if "loss" in k for v in vs) <= loss.tickvals[-1]
    # One grid: each loss tick stands at the height of an accuracy tick.
    np.testing.assert_allclose(np.array(loss.tickvals) / loss.range[1],
                               np.array(accuracy.tickvals) / accuracy.range[1])
    assert tuple(accuracy.range) == (0, 1.02)


def test_the_lowest_reachable_loss_is_named_off_the_curves():
    fig = history_fig(HISTORY, label_smoothing=0.1, vocab_size=16)
    floor = smoothed_loss_floor(0.1, 16)
    assert not fig.layout.annotations  # nothing written over the curves
    (line,) = [s for s in fig.layout.shapes if s.type == "line"]
    assert line.y0 == pytest.approx(floor)
    assert f"the dashed line is the lowest reachable loss, {floor:.3f}" in (
        fig.layout.title.subtitle.text)
    assert fig.layout.margin.t >= 90  # room for the subtitle's second line


@pytest.mark.parametrize("top, expected", [
    (1.295, [0, 0.3, 0.6, 0.9, 1.2, 1.5]),
    (1.0, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    (4.1, [0, 1, 2, 3, 4, 5]),
    (0.6, [0, 0.15, 0.3, 0.45, 0.6]),
    (float("nan"), [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
])
def test_nice_ticks(top, expected):
    ticks, intervals = nice_ticks(top)
    assert ticks == pytest.approx(expected) and intervals == len(expected) - 1
