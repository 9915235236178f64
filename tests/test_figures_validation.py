"""The figures built without Plotly's per-property validation (figures.common.unvalidated_figure)
are ones Plotly's validation accepts, and equal to what a validated build of the same dicts
gives: nothing is lost by skipping it."""

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from figures.attention import attention_heatmap_fig, linked_view_fig, model_view_fig
from figures.common import subplot_axes, subplot_layout, unvalidated_figure
from figures.token_view import token_view_fig


def rows(shape, seed=0):
    weights = np.random.default_rng(seed).random(shape)
    return weights / weights.sum(-1, keepdims=True)


SOURCE, TARGET = ["<s>", "▁5", "march", "</s>"], ["<s>", "2", "0"]
FIGURES = {
    "heatmap": lambda: attention_heatmap_fig(rows((3, 4)), TARGET, SOURCE, title="t",
                                             blocked=np.eye(3, 4, dtype=bool), highlight_row=1),
    "model view": lambda: model_view_fig(rows((2, 3, 3, 4)), TARGET, SOURCE, selected=(1, 2)),
    "model view, downsampled": lambda: model_view_fig(rows((1, 2, 130, 70)), ["t"] * 130,
                                                      ["s"] * 70),
    "linked view": lambda: linked_view_fig(rows((4, 4)), rows((3, 3)), rows((3, 4)), SOURCE,
                                           TARGET, selected_target=2, title="x",
                                           blocked={"decoder": np.triu(np.ones((3, 3), bool), 1)}),
    "token view": lambda: token_view_fig(rows((2, 3, 4)), TARGET, SOURCE,
                                         head_labels=["head 0", "head 1"], query_index=1),
}


@pytest.mark.parametrize("build", FIGURES.values(), ids=FIGURES.keys())
def test_plotly_validation_accepts_the_unvalidated_figures(build):
    fig = build()
    validated = go.Figure(fig.to_dict())  # raises ValueError on any invalid property or value
    assert json.loads(pio.to_json(validated)) == json.loads(pio.to_json(fig))


def test_an_invalid_property_is_not_caught_there_but_here():
    fig = unvalidated_figure([dict(type="heatmap", z=[[1.0]], zmaxx=1)], {})
    with pytest.raises(ValueError, match="zmaxx"):
        go.Figure(fig.to_dict())


def test_subplot_helpers_match_make_subplots():
    from plotly.subplots import make_subplots

    made = make_subplots(rows=2, cols=3, row_titles=["a", "b"])
    layout = subplot_layout(2, 3, row_titles=["a", "b"])
    assert layout["xaxis5"]["domain"] == list(made.layout.xaxis5.domain)
    assert [a["text"] for a in layout["annotations"]] == ["a", "b"]
    assert subplot_axes(2, 2, 3) == {"xaxis": "x5", "yaxis": "y5"}
    assert subplot_axes(1, 1, 3) == {"xaxis": "x", "yaxis": "y"}
    made.add_trace(go.Scatter(x=[0], y=[0]), row=2, col=2)
    assert (made.data[0].xaxis, made.data[0].yaxis) == ("x5", "y5")
    subplot_layout(2, 3, row_titles=["a", "b"])["xaxis"]["domain"] = [0, 1]  # a fresh copy
    assert subplot_layout(2, 3, row_titles=["a", "b"])["xaxis"]["domain"] != [0, 1]
