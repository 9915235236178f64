"""figures.attention_maps: traces, token ticks at positions, shape errors, hover, blocked cells drawn
apart, colour scales, the model view (one colour axis, block-max downsampling) and the linked
view (its panels' token sides from transformer.core.kinds)."""

import numpy as np
import plotly.graph_objects as go
import pytest
from figure_ticks import cell_data, tick_texts, ticks

from figures.attention_maps import (
    BLOCKED_NAME,
    attention_heatmap_fig,
    block_max_pool,
    clicked_row,
    heatmap_json_size,
    linked_view_fig,
    model_view_cell,
    model_view_fig,
    model_view_tile,
    top_keys,
)
from transformer.core.kinds import KINDS

SRC = ["<s>", "5", "march", "5", "</s>"]
TGT = ["<s>", "2", "0", "0"]
RNG = np.random.default_rng(0)


def softmax_rows(shape):
    x = np.exp(RNG.normal(size=shape))
    return x / x.sum(-1, keepdims=True)


def by_name(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def test_heatmap_trace_rows_are_queries_at_positions_and_ticks_are_the_tokens():
    weights = softmax_rows((len(TGT), len(SRC)))
    fig = attention_heatmap_fig(weights, TGT, SRC, title="cross")
    (trace,) = fig.data
    assert isinstance(trace, go.Heatmap)
    np.testing.assert_array_equal(np.asarray(trace.z), weights)
    assert list(trace.y) == [0, 1, 2, 3] and list(trace.x) == [0, 1, 2, 3, 4]
    # The repeated "0" and "5" are the SAME tick text at two positions.
    assert ticks(fig.layout.yaxis) == [(0, "<s>"), (1, "2"), (2, "0"), (3, "0")]
    assert ticks(fig.layout.xaxis) == [(0, "<s>"), (1, "5"), (2, "march"), (3, "5"), (4, "</s>")]
    assert fig.layout.xaxis.ticktext[0] == "&lt;s&gt;"  # escaped, so Plotly shows "<s>"
    assert fig.layout.yaxis.autorange == "reversed"  # query 0 on top
    assert fig.layout.title.text == "cross"


def test_heatmap_hover_names_position_and_token_and_three_decimals():
    fig = attention_heatmap_fig(np.eye(2), ["a", "b"], ["c", "d"])
    template = fig.data[0].hovertemplate
    assert "query %{y:d} (%{customdata[0]})" in template
    assert "key %{x:d} (%{customdata[1]})" in template
    assert "weight: %{z:.3f}" in template
    data = cell_data(fig.data[0])
    assert data.shape == (2, 2, 2) and tuple(data[1, 0]) == ("b", "c")
    fig = attention_heatmap_fig(np.eye(2), ["a", "b"], ["c", "d"], query_title="target query",
                                key_title="source key")
    assert "target query %{y:d} (" in fig.data[0].hovertemplate


def test_heatmap_hover_tells_repeated_tokens_apart_by_position():
    fig = attention_heatmap_fig(softmax_rows((4, 5)), TGT, SRC)
    data = cell_data(fig.data[0])
    assert tuple(data[2, 1]) == ("0", "5") and tuple(data[3, 3]) == ("0", "5")  # same tokens,
    assert fig.data[0].y[2] != fig.data[0].y[3] and fig.data[0].x[1] != fig.data[0].x[3]  # apart


@pytest.mark.parametrize("n", [1, 200])
def test_heatmap_of_one_and_of_200_tokens(n):
    tokens = ["<s>"] + ["a"] * (n - 1)
    weights = np.full((n, n), 1.0 / n)
    fig = attention_heatmap_fig(weights, tokens, tokens, colour_scale="fit")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), weights)
    assert list(fig.data[0].x) == list(range(n))
    shown = ticks(fig.layout.xaxis)
    if n <= 60:  # every position, its token as it is
        assert shown == [(0, "<s>")] + [(p, "a") for p in range(1, n)]
    else:  # every 5th position, written with its position: never read as a word of tokens
        assert shown == [(0, "0: <s>")] + [(p, f"{p}: a") for p in range(5, n, 5)]
    assert fig.to_json()


@pytest.mark.parametrize("shape, message", [
    ((3, 5), "3 rows but 4 row labels"),
    ((4, 6), "6 columns but 5 column labels"),
])
def test_heatmap_shape_errors_name_both_sizes(shape, message):
    with pytest.raises(ValueError, match=message):
        attention_heatmap_fig(np.zeros(shape), TGT, SRC)


def test_blocked_cells_are_nan_and_drawn_by_their_own_trace():
    weights = np.tril(softmax_rows((4, 4)))
    blocked = ~np.tril(np.ones((4, 4), bool))  # ~mask: True = blocked
    fig = attention_heatmap_fig(weights, TGT, TGT, blocked=blocked)
    z = np.asarray(fig.data[0].z, float)
    assert np.isnan(z[blocked]).all()
    np.testing.assert_array_equal(z[~blocked], weights[~blocked])
    marks = by_name(fig, BLOCKED_NAME)
    marked = ~np.isnan(np.asarray(marks.z, float))
    np.testing.assert_array_equal(marked, blocked)
    assert "blocked" in marks.hovertemplate
    assert np.asarray(marks.text)[0, 3] == "×"
    with pytest.raises(ValueError, match=r"blocked has shape \(3, 3\).*\(4, 4\)"):
        attention_heatmap_fig(weights, TGT, TGT, blocked=np.zeros((3, 3), bool))


def test_no_blocked_trace_when_nothing_is_blocked():
    fig = attention_heatmap_fig(np.eye(2), ["a", "b"], ["c", "d"], blocked=np.zeros((2, 2), bool))
    assert [t.name for t in fig.data] == ["weight"]


def test_fixed_and_fit_colour_scales():
    weights = np.array([[0.2, 0.8], [0.4, 0.6]])
    fixed = attention_heatmap_fig(weights, ["a", "b"], ["c", "d"], colour_scale="fixed")
    assert (fixed.data[0].zmin, fixed.data[0].zmax) == (0, 1)
    fit = attention_heatmap_fig(weights, ["a", "b"], ["c", "d"], colour_scale="fit")
    assert (fit.data[0].zmin, fit.data[0].zmax) == (0.2, 0.8)
    blocked = np.array([[False, True], [False, False]])  # the 0.8 is blocked: not in the range
    fit = attention_heatmap_fig(weights, ["a", "b"], ["c", "d"], colour_scale="fit",
                                blocked=blocked)
    assert (fit.data[0].zmin, fit.data[0].zmax) == (0.2, 0.6)
    flat = attention_heatmap_fig(np.ones((1, 1)), ["a"], ["b"], colour_scale="fit")
    assert flat.data[0].zmin < 1 < flat.data[0].zmax
    with pytest.raises(ValueError, match="colour_scale"):
        attention_heatmap_fig(weights, ["a", "b"], ["c", "d"], colour_scale="log")


def test_highlight_row_outlines_that_row():
    fig = attention_heatmap_fig(softmax_rows((4, 5)), TGT, SRC, highlight_row=2)
    (shape,) = fig.layout.shapes
    assert (shape.y0, shape.y1, shape.x0, shape.x1) == (1.5, 2.5, -0.5, 4.5)
    with pytest.raises(ValueError, match="highlight_row is 4 but there are 4"):
        attention_heatmap_fig(softmax_rows((4, 5)), TGT, SRC, highlight_row=4)


def thumbnail(fig, layer: int, head: int) -> np.ndarray:
    """One head's thumbnail of the model view's one tiled heatmap (its sizes in layout.meta)."""
    sizes = fig.layout.meta["model_view"]
    (grid,) = [t for t in fig.data if isinstance(t, go.Heatmap)]
    return np.asarray(grid.z, float)[model_view_tile(layer, head, sizes["rows"],
                                                     sizes["columns"])]


def test_model_view_grid_is_one_heatmap_on_one_colour_axis():
    weights = softmax_rows((2, 3, 4, 5))
    fig = model_view_fig(weights, TGT, SRC)
    (grid,) = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert grid.coloraxis == "coloraxis"
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)
    z = np.asarray(grid.z, float)
    drawn = np.zeros(z.shape, bool)
    for layer in range(2):
        for head in range(3):  # exact values, each thumbnail where model_view_tile says
            np.testing.assert_array_equal(thumbnail(fig, layer, head), weights[layer, head])
            drawn[model_view_tile(layer, head, 4, 5)] = True
    assert np.isnan(z[~drawn]).all() and (~drawn).any()  # the gaps between them are empty
    assert z.shape == (2 * 4 + 1, 3 * 5 + 2 * 1)  # a gap of one cell (a sixth of 4 or 5)
    assert not fig.layout.xaxis.showticklabels and not fig.layout.yaxis.showticklabels
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["head 0", "head 1", "head 2", "layer 0", "layer 1"]
    (cells,) = [t for t in fig.data if t.name == "cell"]
    assert [tuple(c) for c in cells.customdata] == [(layer, head) for layer in range(2)
                                                   for head in range(3)]
    for (layer, head), x, y in zip(cells.customdata, cells.x, cells.y):  # at each centre
        rows, columns = model_view_tile(layer, head, 4, 5)
        assert (x, y) == ((columns.start + columns.stop - 1) / 2, (rows.start + rows.stop - 1) / 2)
    assert "head %{customdata[1]}" in cells.hovertemplate
    assert "Downsampled" not in fig.layout.title.text


def test_model_view_selected_cell_is_outlined():
    fig = model_view_fig(softmax_rows((2, 3, 4, 5)), TGT, SRC, selected=(1, 2))
    (shape,) = fig.layout.shapes
    assert shape.name == "selected" and (shape.xref, shape.yref) == ("x", "y")
    rows, columns = model_view_tile(1, 2, 4, 5)  # around that thumbnail's cells
    assert (shape.x0, shape.x1, shape.y0, shape.y1) == (
        columns.start - 0.5, columns.stop - 0.5, rows.start - 0.5, rows.stop - 0.5)
    with pytest.raises(ValueError, match="2 layers and 3 heads"):
        model_view_fig(softmax_rows((2, 3, 4, 5)), TGT, SRC, selected=(2, 0))


def test_model_view_shape_errors_name_both_sizes():
    with pytest.raises(ValueError, match="4 query rows but there are 5 query tokens"):
        model_view_fig(np.zeros((1, 1, 4, 5)), SRC, SRC)
    with pytest.raises(ValueError, match="5 key columns but there are 4 key tokens"):
        model_view_fig(np.zeros((1, 1, 4, 5)), TGT, TGT)
    with pytest.raises(ValueError, match="layers, heads, q, k"):
        model_view_fig(np.zeros((4, 5)), TGT, SRC)


def test_model_view_downsamples_long_inputs_to_exact_block_maxima():
    # Values already at 3 decimals, so rounding leaves exactly the block maxima.
    weights = RNG.integers(0, 1000, (2, 2, 130, 70)) / 1000
    fig = model_view_fig(weights, [str(i) for i in range(130)], [str(i) for i in range(70)],
                         max_cells=64)
    z = thumbnail(fig, 1, 1)
    assert z.shape == (44, 35)  # blocks of 3 x 2 cells, the last row block one cell short
    expected = np.array([[weights[1, 1, 3 * i:3 * i + 3, 2 * j:2 * j + 2].max()
                          for j in range(35)] for i in range(44)])
    np.testing.assert_allclose(z, expected, rtol=0, atol=1e-6)  # float32 of 3-decimal values
    assert "Downsampled to 44 × 35" in fig.layout.title.text
    assert "rounded to 3 decimals" in fig.layout.title.text
    small = model_view_fig(softmax_rows((2, 4, 200, 200)), ["t"] * 200, ["t"] * 200)
    assert heatmap_json_size(small) < 2 * 2**20


def test_block_max_pool_by_hand():
    x = np.arange(25.0).reshape(5, 5)
    pooled, factors = block_max_pool(x, max_cells=2)
    assert factors == (3, 3)
    np.testing.assert_array_equal(pooled, [[12, 14], [22, 24]])
    same, factors = block_max_pool(x, max_cells=5)
    assert factors == (1, 1)
    np.testing.assert_array_equal(same, x)


def test_model_view_cell_reads_selection_points():
    assert model_view_cell([{"curve_number": 3, "customdata": [1, 2]}]) == (1, 2)
    assert model_view_cell([{"x": 0}, {"customdata": [0, 3]}]) == (0, 3)
    assert model_view_cell([]) is None
    assert model_view_cell(None) is None
    assert model_view_cell([{"customdata": "x"}]) is None


def test_linked_view_three_panels_one_colour_axis_and_highlight_on_both():
    enc, dec, cross = softmax_rows((5, 5)), np.tril(softmax_rows((4, 4))), softmax_rows((4, 5))
    blocked = {"decoder": ~np.tril(np.ones((4, 4), bool))}
    fig = linked_view_fig(enc, dec, cross, SRC, TGT, selected_target=2, blocked=blocked)
    maps = [t for t in fig.data if t.name == "weight"]
    assert len(maps) == 3
    assert {t.coloraxis for t in maps} == {"coloraxis"}
    np.testing.assert_array_equal(np.asarray(maps[0].z), enc)
    np.testing.assert_array_equal(np.asarray(maps[2].z), cross)
    assert np.isnan(np.asarray(maps[1].z, float)[0, 3])
    assert by_name(fig, BLOCKED_NAME).xaxis == "x2"
    assert list(maps[2].y) == [0, 1, 2, 3] and list(maps[2].x) == [0, 1, 2, 3, 4]
    assert tick_texts(fig.layout.yaxis3) == ["<s>", "2", "0", "0"]
    assert tick_texts(fig.layout.xaxis3) == ["<s>", "5", "march", "5", "</s>"]
    highlights = [s for s in fig.layout.shapes if s.name == "highlight"]
    assert sorted((s.xref, s.yref) for s in highlights) == [("x2", "y2"), ("x3", "y3")]
    assert all((s.y0, s.y1) == (1.5, 2.5) for s in highlights)
    moved = linked_view_fig(enc, dec, cross, SRC, TGT, selected_target=0)
    assert all(s.y0 == -0.5 for s in moved.layout.shapes)


def test_linked_view_panels_follow_the_kinds():
    fig = linked_view_fig(softmax_rows((5, 5)), softmax_rows((4, 4)), softmax_rows((4, 5)), SRC,
                          TGT)
    sides = {"source": SRC, "target": TGT}
    assert [a.text for a in fig.layout.annotations] == [k.label for k in KINDS.values()]
    for col, kind in enumerate(KINDS.values(), start=1):
        suffix = "" if col == 1 else str(col)
        assert tick_texts(fig.layout[f"yaxis{suffix}"]) == sides[kind.query_side]
        assert tick_texts(fig.layout[f"xaxis{suffix}"]) == sides[kind.key_side]
        assert fig.layout[f"xaxis{suffix}"].title.text == f"{kind.key_side} key"
        hovering = [t for t in fig.data if t.hovertemplate]  # the heatmap, or the row picker
        assert f"{kind.query_side} query %{{y:d}}" in hovering[col - 1].hovertemplate
    with pytest.raises(ValueError, match="blocked keys must be among"):
        linked_view_fig(np.eye(5), np.eye(4), np.zeros((4, 5)), SRC, TGT,
                        blocked={"self": np.zeros((4, 4), bool)})


def test_linked_view_shape_errors():
    with pytest.raises(ValueError, match="cross weights has 4 columns but 5 column labels"):
        linked_view_fig(np.eye(5), np.eye(4), np.zeros((4, 4)), SRC, TGT)
    with pytest.raises(ValueError, match="selected_target is 7 but there are 4"):
        linked_view_fig(np.eye(5), np.eye(4), np.zeros((4, 5)), SRC, TGT, selected_target=7)


def test_top_keys_largest_first_and_skips_blocked():
    row = np.array([0.1, 0.5, 0.05, 0.3, 0.05])
    assert top_keys(row, SRC) == [(1, "5", 0.5), (3, "5", 0.3), (0, "<s>", 0.1)]
    blocked = np.array([False, True, False, False, False])
    assert [p for p, _, _ in top_keys(row, SRC, k=3, blocked=blocked)] == [3, 0, 2]
    assert len(top_keys(row[:2], SRC[:2], k=3)) == 2
    with pytest.raises(ValueError, match="shape \\(4,\\) but there are 5"):
        top_keys(row[:4], SRC)


def test_a_click_on_a_target_row_of_the_linked_view_names_the_row():
    fig = linked_view_fig(softmax_rows((5, 5)), softmax_rows((4, 4)), softmax_rows((4, 5)), SRC,
                          TGT, blocked={"decoder": ~np.tril(np.ones((4, 4), bool))})
    pickers = [t for t in fig.data if t.name == "pick a row"]
    assert [(t.xaxis, len(t.x)) for t in pickers] == [("x2", 16), ("x3", 20)]
    cross = pickers[1]
    assert [int(d[0]) for d in cross.customdata] == [r for r in range(4) for _ in range(5)]
    assert cross.marker.opacity == 0 and fig.layout.clickmode == "event+select"
    assert pickers[0].customdata[1][3] == "blocked (masked)"  # row 0, key 1: after row 0
    assert clicked_row([{"customdata": list(cross.customdata[7])}]) == 1
    assert clicked_row([{"customdata": [1, 2]}, {"x": 3}]) is None  # a model-view marker
    assert clicked_row(None) is None
