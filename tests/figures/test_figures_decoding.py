"""figures.decoding: traces carry the true numbers, tokens at positions with the tokens as they
are as ticks, shape errors, inline HTML and beam tables. (Head labels and head masks for
ablation are transformer.core.kinds': tests/core/test_kinds.py.)"""

import re

import numpy as np
import plotly.graph_objects as go
import pytest
from figure_ticks import cell_data, tick_texts, ticks

from figures.decoding import (
    CHOSEN_COLOR,
    OTHER_COLOR,
    alignment_fig,
    beam_table,
    differing_positions,
    heads_grid_fig,
    highlighted_source_html,
    html_token,
    nbest_table,
    self_attention_row_fig,
    step_attention_fig,
    tokens_html,
    top_k_fig,
)

SOURCE = ["<s>", "▁march", "▁", "5", "5", "</s>"]
POSITIONS = list(range(len(SOURCE)))
SHOWN = [t.replace("▁", "␣") for t in SOURCE]  # how the figures draw the word-start mark
TOP_K = [("▁", 8, 0.75), ("3", 10, 0.125), ("</s>", 3, 0.0625)]
RNG = np.random.default_rng(0)


def softmax_rows(shape):
    x = np.exp(RNG.normal(size=shape))
    return x / x.sum(axis=-1, keepdims=True)


def test_top_k_bars_most_probable_on_top_chosen_coloured():
    fig = top_k_fig(TOP_K, chosen_id=10, title="step 3")
    (bar,) = fig.data
    assert bar.orientation == "h"
    assert list(bar.y) == [0, 1, 2] and tick_texts(fig.layout.yaxis) == ["␣", "3", "</s>"]
    assert list(bar.hovertext) == ["␣", "3", "&lt;/s&gt;"] and "%{hovertext}" in bar.hovertemplate
    np.testing.assert_array_equal(bar.x, [0.75, 0.125, 0.0625])
    assert list(bar.customdata) == [8, 10, 3]
    assert list(bar.marker.color) == [OTHER_COLOR, CHOSEN_COLOR, OTHER_COLOR]
    assert fig.layout.yaxis.autorange == "reversed"
    assert list(bar.text) == ["0.750", "0.125", "0.062"] and "p = %{text}" in bar.hovertemplate


def test_top_k_adds_a_chosen_token_outside_the_top_k():
    fig = top_k_fig(TOP_K, chosen_id=14, chosen=("6", 14, 0.01))
    (bar,) = fig.data
    assert tick_texts(fig.layout.yaxis)[-1] == "6" and bar.x[-1] == 0.01
    assert list(bar.marker.color) == [OTHER_COLOR] * 3 + [CHOSEN_COLOR]
    # A chosen token already listed is not repeated.
    assert len(top_k_fig(TOP_K, 8, chosen=("▁", 8, 0.75)).data[0].y) == 3


def test_top_k_rejects_malformed_rows():
    with pytest.raises(ValueError, match="top_k"):
        top_k_fig([], 0)
    with pytest.raises(ValueError, match="top_k"):
        top_k_fig([("a", 1)], 1)


def test_step_attention_one_head_is_bars_over_the_source():
    weights = softmax_rows(6)
    fig = step_attention_fig(weights, SOURCE, "cross")
    (bar,) = fig.data
    assert isinstance(bar, go.Bar)
    assert list(bar.x) == POSITIONS
    assert ticks(fig.layout.xaxis) == list(enumerate(SHOWN))  # "5" twice, as it is
    assert "source %{x:d} (%{customdata})" in bar.hovertemplate and bar.customdata[4] == "5"
    np.testing.assert_allclose(bar.y, weights)


def test_step_attention_all_heads_is_a_heatmap_row_per_head():
    weights = softmax_rows((4, 6))
    fig = step_attention_fig(weights, SOURCE)
    (heat,) = fig.data
    assert isinstance(heat, go.Heatmap)
    np.testing.assert_allclose(heat.z, weights)
    assert list(heat.x) == POSITIONS and tick_texts(fig.layout.xaxis) == SHOWN
    assert cell_data(heat)[2, 0] == "<s>" and "source %{x:d} (%{customdata})" in heat.hovertemplate
    assert list(heat.y) == ["head 0", "head 1", "head 2", "head 3"]
    assert ".3f" in heat.hovertemplate


@pytest.mark.parametrize("weights", [np.ones(5), np.ones((4, 7))])
def test_step_attention_errors_name_both_sizes(weights):
    with pytest.raises(ValueError, match=rf"{weights.shape[-1]}.*6 "):
        step_attention_fig(weights, SOURCE)


def test_heads_grid_one_panel_per_head():
    weights = softmax_rows((4, 6))
    fig = heads_grid_fig(weights, SOURCE, "layer 1")
    assert len(fig.data) == 4
    for h, bar in enumerate(fig.data):
        assert list(bar.x) == POSITIONS
        assert f"head {h}<br>source %{{x:d}} (%{{customdata}})" in bar.hovertemplate
        np.testing.assert_allclose(bar.y, weights[h])
    assert tick_texts(fig.layout.xaxis4) == SHOWN
    assert [a.text for a in fig.layout.annotations] == [f"head {h}" for h in range(4)]
    with pytest.raises(ValueError, match="7 columns but 6"):
        heads_grid_fig(np.ones((4, 7)), SOURCE)


def test_self_attention_row_over_the_prefix():
    prefix = ["<s>", "▁", "2"]
    weights = softmax_rows(3)
    fig = self_attention_row_fig(weights, prefix)
    (heat,) = fig.data
    np.testing.assert_allclose(heat.z, weights[None])
    assert list(heat.x) == [0, 1, 2] and fig.layout.xaxis.ticktext == ("&lt;s&gt;", "␣", "2")
    assert "prefix %{x:d} (%{customdata})" in heat.hovertemplate
    (heat,) = self_attention_row_fig(softmax_rows((2, 3)), prefix).data
    assert list(heat.y) == ["head 0", "head 1"]
    with pytest.raises(ValueError, match=r"\(4,\).*3 prefix tokens"):
        self_attention_row_fig(np.ones(4), prefix)


def test_alignment_heatmap_labels_values_and_errors():
    targets = ["▁", "2", "0", "</s>"]
    matrix = softmax_rows((4, 6))
    fig = alignment_fig(matrix, targets, SOURCE, "alignment")
    (heat,) = fig.data
    np.testing.assert_allclose(heat.z, matrix)
    assert list(heat.x) == POSITIONS and tick_texts(fig.layout.xaxis) == SHOWN
    assert list(heat.y) == [0, 1, 2, 3] and tick_texts(fig.layout.yaxis) == ["␣", "2", "0", "</s>"]
    assert "target %{y:d} (%{customdata[0]})<br>source %{x:d} (%{customdata[1]})" in (
        heat.hovertemplate)
    assert tuple(cell_data(heat)[3, 4]) == ("</s>", "5")
    assert "%{z:.3f}" in heat.hovertemplate
    assert fig.layout.yaxis.autorange == "reversed"
    with pytest.raises(ValueError, match="5 rows but 4"):
        alignment_fig(np.ones((5, 6)), targets, SOURCE)
    with pytest.raises(ValueError, match="3 columns but 6"):
        alignment_fig(np.ones((4, 3)), targets, SOURCE)


def test_highlighted_source_escapes_tokens_and_uses_the_weights():
    weights = np.array([0.05, 0.5, 0.1, 0.25, 0.0, 0.1])
    out = highlighted_source_html(SOURCE, weights)
    assert "<s>" not in out and "</s>" not in out
    assert "&#60;s&#62;" in out and "&#60;/s&#62;" in out
    alphas = [float(a) for a in re.findall(r"rgba\(37, 99, 235, ([0-9.]+)\)", out)]
    np.testing.assert_allclose(alphas, weights / weights.max(), atol=1e-3)
    assert "weight 0.500" in out and "weight 0.250" in out
    assert out.count("font-weight: 700") == 3  # the three most attended
    with pytest.raises(ValueError, match=r"\(5,\).*6 tokens"):
        highlighted_source_html(SOURCE, np.ones(5))


def test_highlighted_source_all_zero_weights_and_markup_characters():
    out = highlighted_source_html(["*", "$x$", "_"], np.zeros(3))
    assert "rgba(37, 99, 235, 0.000)" in out and "font-weight" not in out
    assert "*" not in re.sub(r"<[^>]*>", "", out) and "$" not in out  # no Markdown, no LaTeX
    assert html_token("<b>&") == "&#60;b&#62;&#38;"


def test_tokens_html_highlights_positions_and_escapes():
    out = tokens_html(["<s>", "▁", "2"], [2])
    assert out.count(CHOSEN_COLOR) == 1 and "&#60;s&#62;" in out and "<s>" not in out
    assert out.index(CHOSEN_COLOR) > out.index("␣") and "▁" not in out  # the visible mark
    assert differing_positions(["a", "b", "c"], ["a", "x"]) == [1, 2]
    assert differing_positions(["a"], ["a", "b"]) == []


def test_beam_tables():
    table = beam_table([(["▁", "2"], -0.25), (["▁", "9"], -5.5)])
    assert table == {"rank": [1, 2], "hypothesis": ["▁ 2", "▁ 9"], "log-prob": [-0.25, -5.5]}
    assert beam_table([])["rank"] == []
    table = nbest_table([(["▁", "2", "</s>"], -0.5, -0.45), (["</s>"], -3.0, -2.9)])
    assert table["length"] == [3, 1] and table["score"] == [-0.45, -2.9]
