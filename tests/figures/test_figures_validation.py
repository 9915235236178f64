"""The figures built without Plotly's per-property validation (figures.common.unvalidated_figure)
are ones Plotly's validation accepts, and equal to what a validated build of the same dicts
gives: nothing is lost by skipping it."""

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from figures import aggregate, arithmetic, compare, decoding, mask_maps, positional
from figures.attention_maps import attention_heatmap_fig, linked_view_fig, model_view_fig
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
LOOK_AHEAD = np.tril(np.ones((4, 4)))  # (q, k), 1 = may attend
ARITHMETIC = arithmetic.head_arithmetic(np.arange(3.0), rows((4, 3), 1), rows((4, 2), 2),
                                        LOOK_AHEAD[1], blocked_score=-1e9)
CODES = np.random.default_rng(3).normal(size=(4, 6))  # (positions, d_model)
FIGURES |= {
    "score steps": lambda: arithmetic.score_steps_fig(ARITHMETIC, SOURCE, title="t"),
    "contributions": lambda: arithmetic.contributions_fig(
        ARITHMETIC["weighted_values"], ARITHMETIC["context"], SOURCE),
    "K matrix": lambda: arithmetic.matrix_fig(ARITHMETIC["K"], SOURCE, ["0", "1", "2"], "K"),
    "q vector": lambda: arithmetic.vector_fig(ARITHMETIC["q"], ["0", "1", "2"], "q"),
    "layer grid": lambda: aggregate.layer_grid_fig(rows((2, 3, 4)), TARGET, SOURCE,
                                                   ["layer 0", "layer 1"], title="t"),
    "mask heatmap": lambda: mask_maps.mask_heatmap_fig(LOOK_AHEAD, SOURCE, SOURCE, "t"),
    "batch mask": lambda: mask_maps.batch_mask_fig(np.array([[1, 1, 0], [1, 1, 1]]), np.ones((2, 3)),
                                               [TARGET, TARGET], ["a", "b"], "t"),
    "masking row": lambda: mask_maps.masking_row_fig(np.arange(4.0), LOOK_AHEAD[1], rows(4), SOURCE,
                                                 "t", blocked_score=-1e9),
    "position similarity": lambda: positional.similarity_fig(CODES @ CODES.T, SOURCE),
    "encoder input": lambda: positional.encoder_input_fig(CODES, CODES, 2 * CODES, SOURCE),
    "encoder input, own scales": lambda: positional.encoder_input_fig(
        CODES, CODES, 2 * CODES, SOURCE, shared_scale=False),
    "side by side": lambda: compare.side_by_side_fig([rows((3, 4)), rows((4, 4))], ["a", "b"],
                                                     [TARGET, SOURCE], [SOURCE, SOURCE]),
    "difference": lambda: compare.difference_fig(rows((3, 4)), rows((3, 4), 1), TARGET, SOURCE),
    "heads grid": lambda: decoding.heads_grid_fig(rows((3, 4)), SOURCE, "t"),
    "alignment": lambda: decoding.alignment_fig(rows((3, 4)), TARGET, SOURCE, "t"),
    "top k": lambda: decoding.top_k_fig([("▁a", 3, 0.5), ("b", 4, 0.2)], 9, ("c", 9, 0.01), "t"),
    "step attention, one head": lambda: decoding.step_attention_fig(rows(4), SOURCE, "t"),
    "step attention, heads": lambda: decoding.step_attention_fig(rows((2, 4)), SOURCE),
    "self-attention row": lambda: decoding.self_attention_row_fig(rows((2, 3)), TARGET, "t"),
}


@pytest.mark.parametrize("build", FIGURES.values(), ids=FIGURES.keys())
def test_plotly_validation_accepts_the_unvalidated_figures(build):
    fig = build()
    validated = go.Figure(fig.to_dict())  # raises ValueError on any invalid property or value
    assert json.loads(pio.to_json(validated)) == json.loads(pio.to_json(fig))


def test_a_named_colour_scale_is_expanded_as_plotly_expands_it():
    from figures.common import named_colorscale

    for name in ("Blues", "RdBu", "Viridis", "RdBu_r"):
        validated = go.Figure(go.Heatmap(z=[[1.0]], colorscale=name)).data[0].colorscale
        assert named_colorscale(name) == [list(stop) for stop in validated]


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
    shared = subplot_layout(1, 2, shared_yaxes=True)  # shared axes: make_subplots' own layout
    assert shared["yaxis2"]["matches"] == "y"


def _grid_options(rows: int, cols: int) -> list[dict]:
    """The option sets the figures give subplot_layout without shared axes (a model view's
    spacing and row and column titles; subplot titles, some empty), and make_subplots'
    defaults."""
    return [{},
            dict(horizontal_spacing=0.02, vertical_spacing=min(0.06, 0.3 / max(rows, 1)),
                 row_titles=[f"layer {i}" for i in range(rows)],
                 column_titles=[f"head {h}" for h in range(cols)]),
            dict(subplot_titles=[f"t{i}" if i % 3 else "" for i in range(rows * cols)]),
            dict(subplot_titles=["a"] * (rows * cols), horizontal_spacing=0.05),
            dict(vertical_spacing=0.02), dict(row_titles=["x"] * rows)]


@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 3), (2, 3), (3, 1), (5, 7), (12, 16)])
def test_a_grid_without_shared_axes_is_make_subplots_layout_to_the_last_bit(rows, cols):
    """subplot_layout computes such a grid itself (figures.common._plain_grid: make_subplots
    took 0.2-1.0 s for a 12 x 16 model view); every domain and title is make_subplots'."""
    from plotly.subplots import make_subplots

    for options in _grid_options(rows, cols):
        made = make_subplots(rows=rows, cols=cols, **options).layout.to_plotly_json()
        made.pop("template", None)
        made.setdefault("annotations", [])
        assert subplot_layout(rows, cols, **options) == made, options


def test_a_grid_make_subplots_refuses_is_refused():
    with pytest.raises(ValueError, match="Horizontal spacing"):
        subplot_layout(1, 16, horizontal_spacing=0.07)
    with pytest.raises(ValueError, match="Vertical spacing"):
        subplot_layout(4, 1, vertical_spacing=0.5)
