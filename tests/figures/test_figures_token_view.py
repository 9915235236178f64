"""figures.token_view: which lines are drawn, how they look, labels and shape errors."""

import numpy as np
import plotly.graph_objects as go
import pytest

from figures.token_view import LEVELS, drawn_lines, head_colour, token_view_fig

QUERIES = ["<s>", "a", "a"]
KEYS = ["<s>", "x", "y", "</s>"]
# Two heads, three queries, four keys; each row sums to 1, with one exact 0 (a blocked key).
WEIGHTS = np.array([
    [[0.7, 0.2, 0.1, 0.0], [0.25, 0.25, 0.25, 0.25], [0.05, 0.05, 0.3, 0.6]],
    [[1.0, 0.0, 0.0, 0.0], [0.4, 0.3, 0.2, 0.1], [0.01, 0.09, 0.45, 0.45]],
])
HEADS = ["head 0", "head 3"]


def column(fig, name):
    (trace,) = [t for t in fig.data if t.name == name and t.mode == "markers+text"]
    return trace


def test_every_positive_weight_is_one_line():
    fig = token_view_fig(WEIGHTS, QUERIES, KEYS, head_labels=HEADS)
    lines = drawn_lines(fig)
    expected = {(h, i, j) for h, i, j in zip(*np.nonzero(WEIGHTS > 0))}
    assert set(lines) == expected and len(lines) == len(expected) == 20
    for trace in fig.data:  # segments: (query x, key x, None) per line
        if isinstance(trace.meta, dict):
            assert list(trace.x) == [0.0, 1.0, None] * (len(trace.x) // 3)


def test_opacity_levels_follow_the_weight():
    fig = token_view_fig(WEIGHTS[:1], QUERIES, KEYS, head_labels=HEADS[:1])
    levels = {}
    for trace in fig.data:
        if isinstance(trace.meta, dict):
            ys = list(trace.y)
            for n in range(0, len(ys), 3):
                levels[(ys[n], ys[n + 1])] = trace.meta["level"]
    assert levels[(0, 0)] == 7 and levels[(2, 3)] == 6 and levels[(2, 0)] == 1
    widths = {t.meta["level"]: t.line.width for t in fig.data if isinstance(t.meta, dict)}
    assert widths[7] > widths[3] > widths[1]
    assert len([t for t in fig.data if isinstance(t.meta, dict)]) <= LEVELS


def test_threshold_hides_light_lines():
    fig = token_view_fig(WEIGHTS, QUERIES, KEYS, head_labels=HEADS, min_weight=0.3)
    assert set(drawn_lines(fig)) == {(h, i, j) for h, i, j in zip(*np.nonzero(WEIGHTS >= 0.3))}
    assert len(drawn_lines(token_view_fig(WEIGHTS, QUERIES, KEYS, head_labels=HEADS,
                                          min_weight=1.01))) == 0


def test_query_index_keeps_only_that_querys_lines():
    fig = token_view_fig(WEIGHTS, QUERIES, KEYS, head_labels=HEADS, query_index=2)
    lines = drawn_lines(fig)
    assert {i for _, i, _ in lines} == {2} and len(lines) == 8
    queries = column(fig, "queries")
    assert queries.text[2] == "<b>a</b>" and queries.textfont.color[0] != queries.textfont.color[2]
    assert "0.6000" in column(fig, "keys").hovertext[3]


def test_labels_escaped_and_heads_coloured():
    fig = token_view_fig(WEIGHTS, QUERIES, KEYS, head_labels=HEADS, colours=["#ff0000", "#0000ff"])
    assert list(column(fig, "queries").text) == ["&lt;s&gt;", "a", "a"]
    assert list(column(fig, "keys").text) == ["&lt;s&gt;", "x", "y", "&lt;/s&gt;"]
    assert list(column(fig, "queries").y) == [0, 1, 2]
    legend = [t for t in fig.data if t.showlegend is not False and t.mode == "lines"]
    assert [t.name for t in legend] == HEADS
    head3 = [t for t in fig.data if isinstance(t.meta, dict) and t.meta["head"] == 1]
    assert all(t.line.color.startswith("rgba(0,0,255,") for t in head3)
    assert "head 3: &lt;s&gt; 0.4000" in column(fig, "queries").hovertext[1]
    assert head_colour(0) != head_colour(1) and head_colour(10) == head_colour(0)


def test_no_tokens_draws_an_empty_view():
    fig = token_view_fig(np.zeros((1, 0, 0)), [], [], head_labels=["head 0"])
    assert isinstance(fig, go.Figure) and drawn_lines(fig) == []


@pytest.mark.parametrize("kwargs, message", [
    (dict(query_tokens=QUERIES[:2]), "3 queries but there are 2 query tokens"),
    (dict(key_tokens=KEYS + ["z"]), "4 keys but there are 5 key tokens"),
    (dict(head_labels=["head 0"]), "2 heads but there are 1 head labels"),
    (dict(colours=["#ff0000"]), "2 heads but there are 1 colours"),
    (dict(query_index=3), "query_index 3 is out of range for 3 queries"),
    (dict(weights=WEIGHTS[0]), "must be 3-D"),
])
def test_errors_name_both_sizes(kwargs, message):
    args = dict(weights=WEIGHTS, query_tokens=QUERIES, key_tokens=KEYS, head_labels=HEADS)
    args.update(kwargs)
    weights, queries, keys = args.pop("weights"), args.pop("query_tokens"), args.pop("key_tokens")
    with pytest.raises(ValueError, match=message):
        token_view_fig(weights, queries, keys, **args)
