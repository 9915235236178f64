"""figures.arithmetic: one head's arithmetic by hand, against the bundled model, and its figures."""

import numpy as np
import plotly.graph_objects as go
import pytest

from figures.arithmetic import (contributions_fig, head_arithmetic, matrix_fig,
                                max_abs_difference, score_steps_fig, steps_table, vector_fig)

# d_k = 4 (√d_k = 2), three keys, d_v = 2.
Q = [1.0, 0.0, 2.0, 0.0]
K = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]
V = [[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]
KEYS = ["<s>", "a", "a"]


def test_hand_computed_three_keys():
    r = head_arithmetic(Q, K, V)
    np.testing.assert_allclose(r["dots"], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(r["scaled"], [0.5, 1.0, 1.5])
    np.testing.assert_array_equal(r["mask"], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(r["masked"], r["scaled"])
    # e^0.5, e^1, e^1.5 over their sum 8.848675...
    np.testing.assert_allclose(r["weights"], [0.18632372, 0.30719589, 0.50648039], atol=1e-8)
    np.testing.assert_allclose(r["weighted_values"],
                               [[0.18632372, 0.0], [0.0, 0.30719589], [1.01296078, 1.01296078]],
                               atol=1e-8)
    np.testing.assert_allclose(r["context"], [1.19928451, 1.32015667], atol=1e-8)
    assert r["d_k"] == 4


def test_blocked_key_gets_exactly_zero():
    r = head_arithmetic(Q, K, V, mask_row=[1, 1, 0])
    assert r["weights"][2] == 0.0
    np.testing.assert_allclose(r["weights"], [0.37754067, 0.62245933, 0.0], atol=1e-8)
    assert r["masked"][2] == pytest.approx(1.5 - 1e9)
    np.testing.assert_array_equal(r["weighted_values"][2], [0.0, 0.0])
    np.testing.assert_allclose(r["context"], [0.37754067, 0.62245933], atol=1e-8)


def test_all_blocked_row_is_zero_without_nan():
    r = head_arithmetic(Q, K, V, mask_row=[False, False, False])
    np.testing.assert_array_equal(r["weights"], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(r["context"], [0.0, 0.0])
    assert not any(np.isnan(r[k]).any() for k in ("weights", "weighted_values", "context"))


@pytest.mark.parametrize("q, k, v, mask, message", [
    (Q, np.ones((3, 5)), V, None, "K has shape \\(3, 5\\) but q_row has d_k = 4"),
    (Q, K, np.ones((2, 2)), None, "V has shape \\(2, 2\\) but K has 3 keys"),
    (Q, K, V, [1, 1], "mask_row has shape \\(2,\\) but K has 3 keys"),
    ([Q], K, V, None, "q_row must be 1-D"),
])
def test_shape_errors_name_both_sizes(q, k, v, mask, message):
    with pytest.raises(ValueError, match=message):
        head_arithmetic(q, k, v, mask)


def test_max_abs_difference_and_steps_table():
    assert max_abs_difference([1.0, 2.0], [1.5, 1.0]) == 1.0
    assert max_abs_difference([], []) == 0.0
    with pytest.raises(ValueError, match="shape \\(2,\\) with shape \\(3,\\)"):
        max_abs_difference([1, 2], [1, 2, 3])
    table, columns = steps_table(head_arithmetic(Q, K, V, [1, 1, 0]))
    assert table.shape == (5, 3)
    assert table[4, 2] == 0.0  # the blocked key's weight
    assert columns == ["dots", "scaled", "mask", "masked", "weights"]


def test_figures_carry_the_numbers_and_labels():
    r = head_arithmetic(Q, K, V, mask_row=[1, 1, 0])
    fig = score_steps_fig(r, KEYS, "steps")
    heatmaps = [t for t in fig.data if isinstance(t, go.Heatmap)]
    by_name = {t.name: t for t in heatmaps}
    assert list(by_name["dots"].x) == ["&lt;s&gt;", "a", "a ·2"]
    np.testing.assert_allclose(np.asarray(by_name["weight"].z)[0], r["weights"])
    masked = np.asarray(by_name["masked"].z, dtype=float)[0]
    assert np.isnan(masked[2]) and masked[0] == 0.5  # the blocked key is drawn apart
    blocked = np.asarray(by_name["blocked"].z, dtype=float)[0]
    assert blocked[2] == 1.0 and np.isnan(blocked[:2]).all()
    assert all(".6f" in t.hovertemplate for t in heatmaps if t.name != "blocked")

    fig = contributions_fig(r["weighted_values"], r["context"], KEYS)
    np.testing.assert_allclose(np.asarray(fig.data[1].z)[0], r["context"])
    assert list(fig.data[0].y) == ["&lt;s&gt;", "a", "a ·2"]

    fig = matrix_fig(K, KEYS, ["0", "1", "2", "3"], "K")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), K)
    assert ".6f" in fig.data[0].hovertemplate
    fig = vector_fig(Q, ["0", "1", "2", "3"], "q", name="q")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z)[0], Q)


def test_figure_shape_errors():
    r = head_arithmetic(Q, K, V)
    with pytest.raises(ValueError, match="3 keys but there are 2 key tokens"):
        score_steps_fig(r, ["a", "b"])
    with pytest.raises(ValueError, match="shape \\(3, 4\\) but there are 2 row and 4 column"):
        matrix_fig(K, ["a", "b"], list("0123"), "K")
    with pytest.raises(ValueError, match="shape \\(4,\\) but there are 3 labels"):
        vector_fig(Q, list("012"), "q")
    with pytest.raises(ValueError, match="context has shape \\(3,\\)"):
        contributions_fig(r["weighted_values"], [1.0, 2.0, 3.0], KEYS)


@pytest.fixture(scope="module")
def bundled_maps():
    import transformer

    ckpt = transformer.load_checkpoint(transformer.DEFAULT_CHECKPOINT)
    return ckpt.attention("Friday, March 5, 2021", details=True)


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_matches_the_bundled_model(bundled_maps, kind):
    maps = bundled_maps
    last = maps[kind].shape[0] - 1
    query = maps[kind].shape[2] // 2
    for layer in (0, last):
        r = head_arithmetic(maps[f"{kind}_q"][layer, 0, query], maps[f"{kind}_k"][layer, 0],
                            maps[f"{kind}_v"][layer, 0], maps[f"{kind}_mask"][query])
        np.testing.assert_allclose(r["weights"], maps[kind][layer, 0, query], atol=1e-5)
        np.testing.assert_allclose(r["scaled"], maps[f"{kind}_scores"][layer, 0, query],
                                   atol=1e-4)
        assert r["weights"][~maps[f"{kind}_mask"][query]].sum() == 0.0
