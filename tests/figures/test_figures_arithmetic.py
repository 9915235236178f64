"""figures.arithmetic: one head's arithmetic by hand, against the bundled model, and its figures
(key axes at positions ticked with the tokens; the blocked score received, never hard-coded)."""

import functools
import json

import numpy as np
import plotly.graph_objects as go
import pytest
from figure_ticks import cell_data, tick_texts, ticks

from figures import arithmetic
from figures.arithmetic import (
    contributions_fig,
    matrix_fig,
    max_abs_difference,
    score_steps_fig,
    steps_table,
    vector_fig,
)
from transformer.core.kinds import KIND_NAMES

BLOCKED = -1e9  # the model's constant (transformer.model.attention.BLOCKED_SCORE), passed in
head_arithmetic = functools.partial(arithmetic.head_arithmetic, blocked_score=BLOCKED)

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
    assert r["blocked_score"] == BLOCKED
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


def test_the_blocked_score_is_received_not_hard_coded():
    with pytest.raises(TypeError, match="blocked_score"):
        arithmetic.head_arithmetic(Q, K, V, [1, 1, 0])
    r = arithmetic.head_arithmetic(Q, K, V, [1, 1, 0], blocked_score=-1e4)
    assert r["masked"][2] == pytest.approx(1.5 - 1e4) and r["weights"][2] == 0.0
    fig = score_steps_fig(r, KEYS)
    assert "4. masked (+ −10000)" in [a.text for a in fig.layout.annotations]
    blocked = next(t for t in fig.data if t.name == "blocked")
    assert np.asarray(blocked.text)[0, 2] == "−10000" and "(−10000)" in blocked.hovertemplate
    assert arithmetic.step_titles(-1e9)[3] == "masked (+ −1e9)"


def shown_text(trace) -> np.ndarray:
    """What Plotly writes in each cell of a heatmap: a texttemplate without a %{...} field is
    written on EVERY cell (NaN ones included); "%{text}" writes the cell's text."""
    shape = np.asarray(trace.z).shape
    if trace.texttemplate is None:
        return np.full(shape, "", dtype=object)
    if "%{" not in trace.texttemplate:
        return np.full(shape, trace.texttemplate, dtype=object)
    if trace.texttemplate == "%{text}":
        return np.asarray(trace.text, dtype=object)
    z = np.asarray(trace.z, dtype=float)  # "%{z:.3f}": the number, nothing where z is NaN
    spec = trace.texttemplate[len("%{z:"):-1]
    return np.vectorize(lambda v: "" if np.isnan(v) else format(v, spec), otypes=[object])(z)


def test_masked_row_labels_only_blocked_cells_as_blocked():
    # Decoder self-attention, query 2 of 5 target tokens: keys 0..2 may be attended, 3 and 4
    # are blocked by the look-ahead mask. (Issue 17, item 1.)
    rng = np.random.default_rng(3)
    K5, V5 = rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    r = head_arithmetic(rng.normal(size=4), K5, V5, mask_row=[1, 1, 1, 0, 0])
    fig = score_steps_fig(r, ["<s>", "2", "0", "2", "1"])
    masked = next(t for t in fig.data if t.name == "masked")
    blocked = next(t for t in fig.data if t.name == "blocked")
    under, over = shown_text(masked)[0], shown_text(blocked)[0]
    assert list(over) == ["", "", "", "−1e9", "−1e9"]  # only the blocked cells
    assert list(under[:3]) == [f"{v:.3f}" for v in r["scaled"][:3]]  # their real scores
    np.testing.assert_array_equal(np.asarray(masked.z, float)[0, :3], r["scaled"][:3])
    assert np.isnan(np.asarray(blocked.z, float)[0, :3]).all()
    # Hover too: the grey trace answers only over its own cells (Plotly's default would also
    # answer over its empty ones, saying "blocked" over the unblocked keys).
    assert blocked.hoverongaps is False and masked.hoverongaps is False


def test_figures_carry_the_numbers_and_labels():
    r = head_arithmetic(Q, K, V, mask_row=[1, 1, 0])
    fig = score_steps_fig(r, KEYS, "steps")
    heatmaps = [t for t in fig.data if isinstance(t, go.Heatmap)]
    by_name = {t.name: t for t in heatmaps}
    assert list(by_name["dots"].x) == [0, 1, 2]
    assert ticks(fig.layout.xaxis5) == [(0, "<s>"), (1, "a"), (2, "a")]  # "a" twice, as it is
    assert "key %{x:d} (%{customdata[1]})" in by_name["dots"].hovertemplate
    assert tuple(cell_data(by_name["dots"])[0, 2]) == ("q·Kᵀ", "a")
    assert "key %{x:d} (%{customdata[0]})" in by_name["blocked"].hovertemplate
    np.testing.assert_allclose(np.asarray(by_name["weight"].z)[0], r["weights"])
    masked = np.asarray(by_name["masked"].z, dtype=float)[0]
    assert np.isnan(masked[2]) and masked[0] == 0.5  # the blocked key is drawn apart
    blocked = np.asarray(by_name["blocked"].z, dtype=float)[0]
    assert blocked[2] == 1.0 and np.isnan(blocked[:2]).all()
    assert all(".6f" in t.hovertemplate for t in heatmaps if t.name != "blocked")

    fig = contributions_fig(r["weighted_values"], r["context"], KEYS)
    np.testing.assert_allclose(np.asarray(fig.data[1].z)[0], r["context"])
    assert list(fig.data[0].y) == [0, 1, 2]
    assert tick_texts(fig.layout.yaxis) == ["<s>", "a", "a"]
    assert "key %{y:d} (%{customdata[0]})<br>dimension %{x:d}<br>" in fig.data[0].hovertemplate

    fig = matrix_fig(K, KEYS, ["0", "1", "2", "3"], "K")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), K)
    assert ".6f" in fig.data[0].hovertemplate
    assert ticks(fig.layout.yaxis) == [(0, "<s>"), (1, "a"), (2, "a")]
    assert tick_texts(fig.layout.xaxis) == ["0", "1", "2", "3"]
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


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_matches_the_bundled_model(bundled_maps, kind):
    from transformer.core.masking import BLOCKED_SCORE

    maps = bundled_maps
    last = maps[kind].shape[0] - 1
    query = maps[kind].shape[2] // 2
    for layer in (0, last):
        r = arithmetic.head_arithmetic(
            maps[f"{kind}_q"][layer, 0, query], maps[f"{kind}_k"][layer, 0],
            maps[f"{kind}_v"][layer, 0], maps[f"{kind}_mask"][query],
            blocked_score=BLOCKED_SCORE)
        np.testing.assert_allclose(r["weights"], maps[kind][layer, 0, query], atol=1e-5)
        np.testing.assert_allclose(r["scaled"], maps[f"{kind}_scores"][layer, 0, query],
                                   atol=1e-4)
        assert r["weights"][~maps[f"{kind}_mask"][query]].sum() == 0.0


def test_t5s_scores_are_unscaled_with_the_position_bias_added():
    """T5: no ÷ √d_k, its relative position bias a term of the scores, said in the row titles."""
    bias = np.array([0.5, -1.0, 2.0])
    r = head_arithmetic(Q, K, V, scale=False, position_bias=bias)
    dots = np.asarray(K) @ np.asarray(Q)
    np.testing.assert_allclose(r["scaled"], dots + bias)
    plain = head_arithmetic(Q, K, V)
    np.testing.assert_allclose(plain["scaled"], dots / np.sqrt(len(Q)))
    assert plain["position_bias"] is None
    np.testing.assert_array_equal(r["position_bias"], bias)
    drawn = json.dumps(score_steps_fig(r, KEYS).to_plotly_json(), default=str)
    assert "not scaled + position bias" in drawn
    assert arithmetic.step_titles(-1e9)[1] == "÷ √d_k"
    with pytest.raises(ValueError, match="position_bias has shape"):
        head_arithmetic(Q, K, V, position_bias=[1.0])
