"""Long sequences (issue 24, item 4): with a 400-token target every figure keeps a bounded height
and opens on a window of rows (not a 14,500 px image), labels a thinned axis by a rule that
never mislabels a row, stays small enough to send, and the token view's lines and the decoding
page's chips are capped with a way to see them all."""

import json
import re

import numpy as np
import plotly.io as pio
import pytest

from figures import (
    aggregate,
    arithmetic,
    attention_maps,
    compare,
    decoding,
    mask_maps,
    token_view,
)
from figures.common import MAX_HEIGHT, MAX_TICKS, WINDOW_ROWS, tick_text

T, N = 400, 30
TARGET = [f"▁w{i % 7}" for i in range(T)]  # repeats: a thinned axis must not read as words
SOURCE = [f"s{i}" for i in range(N)]
RNG = np.random.default_rng(0)


def rows(q, k):
    w = RNG.random((q, k))
    return w / w.sum(-1, keepdims=True)


LOOK_AHEAD = np.tril(np.ones((T, T)))
FIGURES = {
    "attention TxT": lambda: attention_maps.attention_heatmap_fig(rows(T, T), TARGET, TARGET,
                                                             blocked=LOOK_AHEAD == 0),
    "attention TxN": lambda: attention_maps.attention_heatmap_fig(rows(T, N), TARGET, SOURCE),
    "model view": lambda: attention_maps.model_view_fig(RNG.random((2, 4, T, T)), TARGET, TARGET),
    "linked view": lambda: attention_maps.linked_view_fig(
        rows(N, N), rows(T, T), rows(T, N), SOURCE, TARGET, selected_target=3,
        blocked={"decoder": LOOK_AHEAD == 0}),
    "look-ahead mask": lambda: mask_maps.mask_heatmap_fig(LOOK_AHEAD, TARGET, TARGET, "mask"),
    "batch mask": lambda: mask_maps.batch_mask_fig(np.ones((3, T)), np.ones((3, T), int),
                                               [TARGET] * 3, ["a", "b", "c"], "batch"),
    "masked row": lambda: mask_maps.masking_row_fig(RNG.random(T), LOOK_AHEAD[5], rows(1, T)[0],
                                                TARGET, "row", blocked_score=-1e9),
    "layer grid": lambda: aggregate.layer_grid_fig(np.stack([rows(T, N)] * 2), TARGET, SOURCE,
                                                   ["layer 0", "layer 1"]),
    "side by side": lambda: compare.side_by_side_fig([rows(T, T)] * 2, ["a", "b"], TARGET,
                                                     TARGET),
    "difference": lambda: compare.difference_fig(rows(T, T), rows(T, T), TARGET, TARGET),
    "K matrix": lambda: arithmetic.matrix_fig(RNG.random((T, 16)), TARGET,
                                              [str(d) for d in range(16)], "K"),
    "contributions": lambda: arithmetic.contributions_fig(RNG.random((T, 16)), RNG.random(16),
                                                          TARGET),
    "alignment": lambda: decoding.alignment_fig(rows(T, N), TARGET, SOURCE),
    "self-attention row": lambda: decoding.self_attention_row_fig(rows(1, T)[0], TARGET),
    "token view": lambda: token_view.token_view_fig(RNG.random((4, T, T)) / T, TARGET, TARGET,
                                                    head_labels=list(range(4))),
}


def axes(layout: dict):
    return [(name, axis) for name, axis in layout.items() if re.fullmatch(r"[xy]axis\d*", name)]


@pytest.fixture(scope="module", params=list(FIGURES))
def built(request):
    fig = FIGURES[request.param]()
    return request.param, fig, json.loads(pio.to_json(fig, validate=False))


def test_every_figure_is_at_most_max_height_and_small_enough_to_send(built):
    name, fig, spec = built
    assert spec["layout"]["height"] <= MAX_HEIGHT + 60, name  # + a horizontal colour bar
    assert len(pio.to_json(fig, validate=False)) < 6_000_000, name  # 400 x 400: was 10-33 MB


def test_a_long_token_axis_opens_on_a_window_of_rows(built):
    name, _, spec = built
    for axis_name, axis in axes(spec["layout"]):
        if axis_name.startswith("y") and len(axis.get("tickvals") or ()) > 1 and axis.get(
                "ticktext") and axis["tickvals"][-1] >= WINDOW_ROWS:
            low, high = sorted(axis["range"])
            assert high - low <= WINDOW_ROWS, (name, axis_name)


def test_every_label_sits_on_its_own_row_and_a_thinned_axis_writes_its_position(built):
    name, _, spec = built
    texts = tick_text(TARGET)
    for axis_name, axis in axes(spec["layout"]):
        values, labels = axis.get("tickvals") or [], axis.get("ticktext") or []
        if len(values) < 2 or not any("w" in str(label) for label in labels):
            continue  # not a target-token axis
        assert len(values) <= MAX_TICKS, (name, axis_name)
        for value, label in zip(values, labels, strict=True):
            assert label == f"{value}: {texts[value]}", (name, axis_name, value, label)


def test_no_per_cell_text_or_gaps_on_a_400_token_mask():
    # Issue 24: the look-ahead and decoder masks of a 400-token translation rendered blank
    # (316 x 14,500 px, 160,000 cells each with its "1" or "0" and a 1 px gap).
    (trace,) = FIGURES["look-ahead mask"]().data
    assert trace.texttemplate is None and trace.xgap is None and trace.ygap is None
    assert trace.customdata is None and "%{y:d}" in trace.hovertemplate


def test_a_masked_row_shades_a_run_of_blocked_keys_once_per_panel():
    fig = FIGURES["masked row"]()
    assert len(fig.layout.shapes) == 3  # keys 6 .. 399 blocked: one rectangle per panel


def test_the_token_view_draws_the_strongest_lines_up_to_its_cap_and_every_line_on_request():
    weights = RNG.random((4, T, T)) / T  # 640,000 lines above weight 0
    fig = token_view.token_view_fig(weights, TARGET, TARGET, head_labels=list(range(4)))
    drawn = token_view.drawn_lines(fig)
    assert len(drawn) == token_view.MAX_LINES == fig.layout.meta["lines"]
    assert fig.layout.meta["lines_possible"] == 4 * T * T
    weakest_drawn = min(weights[h, q, k] for h, q, k in drawn)
    assert (weights >= weakest_drawn).sum() == token_view.MAX_LINES  # the strongest ones
    small = weights[:1, :20, :20]
    every = token_view.token_view_fig(small, TARGET[:20], TARGET[:20], head_labels=[0],
                                      max_lines=None)
    assert len(token_view.drawn_lines(every)) == 400
    assert "the strongest 2000 of 640000" in token_view.lines_summary(2000, 4, 0.0, 640000)
    assert 0 < token_view.DEFAULT_MIN_WEIGHT <= 0.1


def test_token_chips_are_capped_with_every_token_one_click_away():
    tokens = [f"t{i}" for i in range(383)]
    html = decoding.tokens_html(tokens, [382])
    shown, folded = html.split("<details>")
    assert shown.count("<span style=\"background") == decoding.MAX_CHIPS
    assert "t382</span>" in shown and "… 323 more …" in shown  # the chosen token stays shown
    assert f"Show all {len(tokens)} tokens" in folded and folded.count("<span style") == 383
    assert "<details>" not in decoding.tokens_html(tokens[:40])
    middle = decoding.visible_chips(383, [200])
    assert 200 in middle and len(middle) <= decoding.MAX_CHIPS


def test_colour_bars_of_one_row_maps_lie_under_them_instead_of_squashed():
    fig = arithmetic.vector_fig(RNG.random(16), [str(d) for d in range(16)], "q")
    bar = fig.data[0].colorbar
    assert bar.orientation == "h" and bar.yref == "container"
    tall = arithmetic.matrix_fig(RNG.random((12, 16)), [f"k{i}" for i in range(12)],
                                 [str(d) for d in range(16)], "K")
    assert tall.data[0].colorbar.orientation is None  # a tall plot keeps its vertical bar
    one = decoding.self_attention_row_fig([1.0], ["<s>"])
    assert one.data[0].colorbar.orientation == "h"


def test_the_plotly_toolbar_stands_at_the_right_edge_off_the_titles(built):
    name, _, spec = built
    assert spec["layout"]["modebar"]["orientation"] == "v", name
