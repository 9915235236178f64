"""figures.compare: side-by-side maps on one colour axis, difference maps, importance bars,
head labels and training runs."""

import numpy as np
import pytest

from explorer.models import training_run
from figures.compare import (difference_fig, head_label, head_labels, importance_fig,
                             parse_head_label, side_by_side_fig, token_log_prob_fig)

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


def test_side_by_side_labels_are_escaped_and_distinct():
    fig = side_by_side_fig(maps(1), ["A"], Q, K)
    assert list(fig.data[0].y) == ["&lt;s&gt;", "a", "b"]
    assert list(fig.data[0].x) == ["x", "y", "x ·2", "&lt;/s&gt;"]
    assert "%{z:.3f}" in fig.data[0].hovertemplate


def test_side_by_side_tokens_per_map_for_different_sizes():
    fig = side_by_side_fig([np.eye(3), np.ones((2, 4)) / 4], ["enc", "cross"],
                           [["a", "b", "c"], ["<s>", "1"]], [["a", "b", "c"], K])
    assert np.asarray(fig.data[0].z).shape == (3, 3)
    assert list(fig.data[1].y) == ["&lt;s&gt;", "1"]
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
    np.testing.assert_array_equal(np.asarray(trace.customdata), np.stack([a, b], -1))
    assert "%{z:.3f}" in trace.hovertemplate
    assert fig.layout.title.text == "A − B"
    assert list(trace.y) == ["&lt;s&gt;", "a", "b"]
    same = difference_fig(a, a, Q, K).data[0]
    assert np.asarray(same.z).max() == 0 and same.zmax > 0  # a flat difference still has a range


@pytest.mark.parametrize("head", [("encoder", 0, 0), ("decoder", 3, 7), ("cross", 1, 2),
                                  ("cross", 12, 10)])
def test_head_label_round_trip(head):
    assert parse_head_label(head_label(*head)) == head


def test_head_labels():
    assert head_label("cross", 1, 2) == "cross L1 H2"
    assert parse_head_label(" cross L1 H2 ") == ("cross", 1, 2)
    assert head_labels({"encoder": (1, 2), "cross": (2, 1)}) == [
        "encoder L0 H0", "encoder L0 H1", "cross L0 H0", "cross L1 H0"]
    for bad in ["cross L1", "self L0 H0", "cross L-1 H0", "", "cross 1 2"]:
        with pytest.raises(ValueError, match="cross L1 H2"):
            parse_head_label(bad)
    with pytest.raises(ValueError, match="kind must be one of"):
        head_label("self", 0, 0)


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
    assert [t.name for t in fig.data] == ["encoder", "decoder", "cross"]
    assert len({t.marker.color for t in fig.data}) == 3
    assert list(fig.layout.yaxis.categoryarray) == [
        "cross L1 H2", "encoder L0 H0", "cross L0 H0", "decoder L0 H1"]
    cross = next(t for t in fig.data if t.name == "cross")
    assert dict(zip(cross.y, cross.x)) == {"cross L1 H2": -3.0, "cross L0 H0": -0.1}


def test_token_log_prob_bars():
    fig = token_log_prob_fig(["2", "0", "</s>"], [-0.1, -0.2, -0.3], [-1.0, -0.2, -5.0])
    assert [t.name for t in fig.data] == ["original model", "heads silenced"]
    assert list(fig.data[1].y) == [-1.0, -0.2, -5.0]
    assert list(fig.data[0].x) == ["2", "0", "&lt;/s&gt;"]
