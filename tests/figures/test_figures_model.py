"""figures.model's training chart: loss and accuracy on two titled axes, label smoothing
explained where the loss is shown."""

import numpy as np
import pytest

from figures.model import history_fig, smoothed_loss_floor

HISTORY = {"loss": [1.29, 0.61, 0.58], "masked_accuracy": [0.71, 0.99, 0.996],
           "val_loss": [0.61, 0.57, 0.57], "val_masked_accuracy": [0.99, 0.9998, 0.9999]}


def test_loss_and_accuracy_sit_on_two_titled_axes():
    fig = history_fig(HISTORY)
    axis_of = {t.name: t.yaxis for t in fig.data}
    assert axis_of == {"loss": "y", "val_loss": "y", "masked_accuracy": "y2",
                       "val_masked_accuracy": "y2"}
    assert fig.layout.yaxis.title.text == "loss (nats)"
    assert fig.layout.yaxis2.title.text == "accuracy" and fig.layout.yaxis2.side == "right"
    assert tuple(fig.layout.yaxis2.range) == (0, 1.02)
    assert fig.layout.xaxis.title.text == "epoch"


def test_label_smoothing_is_explained_with_the_lowest_reachable_loss():
    fig = history_fig(HISTORY, label_smoothing=0.1, vocab_size=16)
    assert "label-smoothed targets (ε = 0.1" in fig.layout.title.subtitle.text
    assert "cannot reach 0" in fig.layout.title.subtitle.text
    floor = smoothed_loss_floor(0.1, 16)
    (line,) = [s for s in fig.layout.shapes if s.type == "line"]
    assert line.y0 == line.y1 == pytest.approx(floor)
    # by hand: 1 - 0.1 + 0.1/16 on the right token, 0.1/16 on each of the 15 others
    p = np.array([0.9 + 0.1 / 16] + [0.1 / 16] * 15)
    assert floor == pytest.approx(-(p * np.log(p)).sum())
    assert smoothed_loss_floor(0.0, 16) == 0.0
    assert "cross-entropy" in history_fig(HISTORY).layout.title.subtitle.text
