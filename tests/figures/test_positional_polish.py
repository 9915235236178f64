"""figures.positional, issue 24 item 8: the dot-product map of positions uses a sequential colour
scale when its values are one-signed (a sinusoid's are all positive), keeps the diverging scale
centred on 0 for signed values, fills its width (no square constraint leaving wide margins) and
ticks a position axis with a few round, horizontal numbers instead of every other position
written as "2: 2"; offset_fig reads the map along its diagonals."""

import numpy as np
import plotly.graph_objects as go
import pytest
from figure_ticks import tick_texts

from figures.positional import dot_similarity, offset_fig, similarity_fig, value_scale
from transformer import positional_encoding

BLUES = go.Heatmap(colorscale="Blues").colorscale
BLUE_TOP, RED_BOTTOM = "rgb(5,48,97)", "rgb(103,0,31)"  # ColorBrewer RdBu's ends


def sinusoid_similarity(length=64, d_model=128):
    return dot_similarity(positional_encoding(length, d_model))


def test_positive_dot_products_get_a_sequential_scale_over_their_range():
    sim = sinusoid_similarity()
    assert sim.min() > 0  # the case the issue saw: every value positive
    heatmap = similarity_fig(sim, [str(p) for p in range(64)]).data[0]
    assert [tuple(c) for c in heatmap.colorscale] == [tuple(c) for c in BLUES]
    assert heatmap.zmid is None
    assert heatmap.zmin == pytest.approx(sim.min()) and heatmap.zmax == pytest.approx(sim.max())


def test_negative_values_get_a_reversed_red_scale_and_signed_ones_stay_diverging():
    assert value_scale(-np.arange(1, 5.0)) == dict(colorscale="Reds", reversescale=True,
                                                    zmin=-4.0, zmax=-1.0)
    signed = np.array([[-2.0, 1.0], [1.0, 3.0]])
    heatmap = similarity_fig(signed, ["0", "1"]).data[0]
    assert heatmap.colorscale[-1][1] == BLUE_TOP and heatmap.colorscale[0][1] == RED_BOTTOM
    assert heatmap.zmid == 0 and heatmap.zmin == -3 and heatmap.zmax == 3
    assert value_scale(np.zeros((2, 2)))["zmid"] == 0  # constant: nothing to stretch


def test_the_map_fills_its_width_with_tight_margins():
    fig = similarity_fig(sinusoid_similarity(), [str(p) for p in range(64)])
    assert fig.layout.yaxis.scaleanchor is None and fig.layout.yaxis.constrain is None
    margin = fig.layout.margin
    assert max(margin.l, margin.r, margin.b) <= 10 and margin.t <= 60


def test_position_axes_have_few_round_horizontal_ticks():
    fig = similarity_fig(sinusoid_similarity(), [str(p) for p in range(64)])
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.tickmode == "auto" and axis.nticks <= 12
        assert axis.ticktext is None  # no "0: 0", "2: 2", ... labels
        assert axis.tickangle in (None, "auto")
    assert fig.layout.yaxis.autorange == "reversed"
    # Tokens as labels keep the token axis (cells ticked with their tokens).
    fig = similarity_fig(np.eye(3), ["<s>", "a", "</s>"])
    assert tick_texts(fig.layout.xaxis) == ["<s>", "a", "</s>"]


def test_offset_fig_reads_the_map_along_its_diagonals():
    sim = sinusoid_similarity(16, 32)
    fig = offset_fig(sim)
    band_high, band_low, mean = fig.data
    np.testing.assert_allclose(np.asarray(mean.y), sim[0], rtol=1e-5)  # sinusoids: one value
    assert band_high.visible is False and band_low.visible is False and not mean.showlegend
    learned = np.array([[4.0, 1.0, 0.0], [1.0, 2.0, 3.0], [0.0, 3.0, 5.0]])
    band_high, band_low, mean = offset_fig(learned).data
    np.testing.assert_allclose(np.asarray(mean.y), [11 / 3, 2.0, 0.0])
    np.testing.assert_allclose(np.asarray(band_low.y), [2.0, 1.0, 0.0])
    np.testing.assert_allclose(np.asarray(band_high.y), [5.0, 3.0, 0.0])
    assert band_low.visible is True and mean.showlegend

