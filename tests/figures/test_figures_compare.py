"""figures.compare: side-by-side maps on one colour axis, difference maps, importance bars and
training runs. (Head labels are transformer.core.kinds': tests/core/test_kinds.py.)"""

import numpy as np
import pytest
from figure_ticks import cell_data, tick_texts, ticks

from explorer.models import training_run
from figures.compare import difference_fig, importance_fig, side_by_side_fig, token_log_prob_fig
from transformer.core.kinds import KIND_NAMES

Q, K = ["<s>", "a", "b"], ["x", "y", "x", "</s>"]


def maps(n=3, q=3, k=4, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.random((n, q, k))
    return list(w / w.sum(-1, keepdims=True))


def test_side_by_side_shapes_and_shared_coloraxis():
    ms = maps()
    fig = side_by_side_fig(ms, ["A", "B", "C"], Q, K)
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == 3
    assert {t.coloraxis for t in heatmaps} == {"coloraxis"}
    for trace, m in zip(heatmaps, ms, strict=True):
        np.testing.assert_array_equal(np.asarray(trace.z), m)
        assert np.asarray(trace.z).shape == (3, 4)
    assert fig.layout.coloraxis.cmin == 0
    assert fig.layout.coloraxis.cmax == pytest.approx(max(m.max() for m in ms))
    assert [a.text for a in fig.layout.annotations] == ["A", "B", "C"]
    assert side_by_side_fig(ms, list("ABC"), Q, K, zmax=1).layout.coloraxis.cmax == 1


def test_side_by_side_cells_at_positions_ticked_with_the_tokens_as_they_are():
    fig = side_by_side_fig(maps(1), ["A"], Q, K)
    assert list(fig.data[0].y) == [0, 1, 2] and list(fig.data[0].x) == [0, 1, 2, 3]
    assert fig.layout.yaxis.ticktext == ("&lt;s&gt;", "a", "b")
    assert ticks(fig.layout.xaxis) == [(0, "x"), (1, "y"), (2, "x"), (3, "</s>")]  # "x" twice
    assert "%{z:.3f}" in fig.data[0].hovertemplate
    assert "key %{x:d} (%{customdata[1]})" in fig.data[0].hovertemplate
    assert tuple(cell_data(fig.data[0])[0, 2]) == ("<s>", "x")


def test_side_by_side_tokens_per_map_for_different_sizes():
    fig = side_by_side_fig([np.eye(3), np.ones((2, 4)) / 4], ["enc", "cross"],
                           [["a", "b", "c"], ["<s>", "1"]], [["a", "b", "c"], K])
    assert np.asarray(fig.data[0].z).shape == (3, 3)
    assert tick_texts(fig.layout.yaxis2) == ["<s>", "1"]
    assert tick_texts(fig.layout.xaxis2) == K
    assert fig.data[0].xaxis == "x" and fig.data[1].xaxis == "x2"


@pytest.mark.parametrize("call, message", [
    (lambda: side_by_side_fig(maps(2), ["A", "B"], Q, K[:3]), "has 4 columns but 3 column"),
    (lambda: side_by_side_fig(maps(2), ["A", "B"], Q[:2], K), "has 3 rows but 2 row labels"),
    (lambda: side_by_side_fig(maps(2), ["A"], Q, K), "2 maps but 1 titles"),
    (lambda: side_by_side_fig([], [], Q, K), "at least one map"),
    (lambda: side_by_side_fig(maps(2), ["A", "B"], [Q], [K]), "2 maps but 1 lists"),
    (lambda: difference_fig(np.ones((3, 4)), np.ones((3, 3)), Q, K), "map b has 3 columns but 4"),
    (lambda: difference_fig(np.ones((2, 4)), np.ones((2, 4)), Q, K), "map a has 2 rows but 3"),
    (lambda: token_log_prob_fig(["a", "b"], [0.1], [0.1, 0.2]), "2 tokens but 1 original"),
])
def test_errors_name_the_sizes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_difference_values_and_diverging_scale():
    a, b = maps(2)
    fig = difference_fig(a, b, Q, K, title="A − B")
    trace = fig.data[0]
    np.testing.assert_array_equal(np.asarray(trace.z), a - b)
    assert trace.zmid == 0
    bound = np.abs(a - b).max()
    assert (trace.zmin, trace.zmax) == pytest.approx((-bound, bound))
    data = cell_data(trace)
    np.testing.assert_array_equal(data[..., 2:].astype(float), np.stack([a, b], -1))
    assert tuple(data[0, 3, :2]) == ("<s>", "</s>")
    assert "a %{customdata[2]:.3f} − b %{customdata[3]:.3f}" in trace.hovertemplate
    assert "query %{y:d} (%{customdata[0]})" in trace.hovertemplate
    assert "%{z:.3f}" in trace.hovertemplate
    assert fig.layout.title.text == "A − B"
    assert list(trace.y) == [0, 1, 2] and tick_texts(fig.layout.yaxis) == Q
    assert tick_texts(fig.layout.xaxis) == K
    same = difference_fig(a, a, Q, K).data[0]
    assert np.asarray(same.z).max() == 0 and same.zmax > 0  # a flat difference still has a range


def test_training_run():
    names = ["dates.ckpt", "dates.epoch02.ckpt", "dates.epoch10.ckpt", "dates.epoch01.ckpt",
             "other.ckpt", "other2.epoch01.ckpt"]
    expected = [(1, "dates.epoch01.ckpt"), (2, "dates.epoch02.ckpt"), (10, "dates.epoch10.ckpt"),
                (None, "dates.ckpt")]
    assert training_run(names, "dates.ckpt") == expected
    assert training_run(names, "dates.epoch02.ckpt") == expected
    assert training_run(names, "other.ckpt") == []
    assert training_run(names, "other2.epoch01.ckpt") == [(1, "other2.epoch01.ckpt")]


def test_importance_bars_sorted_and_coloured_by_kind():
    entries = [{"kind": "encoder", "layer": 0, "head": 0, "delta_log_prob": -0.5},
               {"kind": "cross", "layer": 1, "head": 2, "delta_log_prob": -3.0},
               {"kind": "decoder", "layer": 0, "head": 1, "delta_log_prob": 0.25},
               {"kind": "cross", "layer": 0, "head": 0, "delta_log_prob": -0.1}]
    fig = importance_fig(entries)
    assert [t.name for t in fig.data] == list(KIND_NAMES)
    assert len({t.marker.color for t in fig.data}) == 3
    assert list(fig.layout.yaxis.categoryarray) == [
        "cross L1 H2", "encoder L0 H0", "cross L0 H0", "decoder L0 H1"]
    cross = next(t for t in fig.data if t.name == "cross")
    assert dict(zip(cross.y, cross.x)) == {"cross L1 H2": -3.0, "cross L0 H0": -0.1}


def test_token_log_prob_bars():
    fig = token_log_prob_fig(["2", "0", "</s>"], [-0.1, -0.2, -0.3], [-1.0, -0.2, -5.0])
    assert [t.name for t in fig.data] == ["original model", "heads silenced"]
    assert list(fig.data[1].y) == [-1.0, -0.2, -5.0]
    assert list(fig.data[0].x) == [0, 1, 2]
    assert fig.layout.xaxis.ticktext == ("2", "0", "&lt;/s&gt;")
    assert "token %{x:d} (%{customdata})" in fig.data[0].hovertemplate
    repeated = token_log_prob_fig(["0", "0"], [-0.1, -0.2], [-0.3, -0.4])
    assert ticks(repeated.layout.xaxis) == [(0, "0"), (1, "0")]


def test_importance_bars_carry_their_values_when_one_dwarfs_the_others():
    from figures.compare import importance_fig

    entries = [{"kind": "cross", "layer": 0, "head": h, "delta_log_prob": d}
               for h, d in enumerate((-0.01, -25.0, -0.002, 0.0004))]
    fig = importance_fig(entries)
    (bars,) = fig.data
    assert list(bars.text) == ["-25", "-0.01", "-0.002", "+0.0004"]  # most harmful first
    assert bars.textposition == "outside" and bars.cliponaxis is False
    low, high = fig.layout.xaxis.range
    assert low < -25 and high > 0.0004  # every label fits
