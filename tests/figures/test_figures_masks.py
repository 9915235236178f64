"""figures.mask_maps: traces, token ticks at positions, shape errors, blocked keys drawn apart, true
numbers plotted, the blocked score received (never hard-coded)."""

import functools

import numpy as np
import plotly.graph_objects as go
import pytest
from figure_ticks import cell_data, tick_texts, ticks

from figures import mask_maps
from figures.mask_maps import batch_mask_fig, mask_heatmap_fig

BLOCKED = -1e9  # the model's constant (transformer.model.attention.BLOCKED_SCORE), passed in
masked_softmax = functools.partial(mask_maps.masked_softmax, blocked_score=BLOCKED)
masking_row_fig = functools.partial(mask_maps.masking_row_fig, blocked_score=BLOCKED)

KEYS = ["<s>", "5", "march", "5", "</s>", "<pad>"]
MASK = np.array([1, 1, 1, 1, 1, 0], float)
SCORES = np.array([0.5, -1.25, 2.0, 0.75, 0.125, 3.0])
LOOK_AHEAD = np.tril(np.ones((4, 4)))


def by_name(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def test_mask_heatmap_values_and_ticks():
    tokens = ["<s>", "a", "b", "a"]
    fig = mask_heatmap_fig(LOOK_AHEAD, tokens, tokens, "Look-ahead mask (T, T) = (4, 4)")
    (trace,) = fig.data
    assert isinstance(trace, go.Heatmap)
    np.testing.assert_array_equal(np.asarray(trace.z), LOOK_AHEAD)
    assert list(trace.x) == list(trace.y) == [0, 1, 2, 3]
    expected = [(0, "<s>"), (1, "a"), (2, "b"), (3, "a")]  # "a" twice, as it is
    assert ticks(fig.layout.xaxis) == ticks(fig.layout.yaxis) == expected
    assert fig.layout.title.text == "Look-ahead mask (T, T) = (4, 4)"
    assert fig.layout.yaxis.autorange == "reversed"  # query 0 on top, as in the matrix
    assert ".3f" in trace.hovertemplate
    assert "query %{y:d} (%{customdata[0]})<br>key %{x:d} (%{customdata[1]})" in trace.hovertemplate
    data = cell_data(trace)
    assert tuple(data[0, 1]) == ("<s>", "a", "blocked") and data[1, 0, 2] == "may attend"


def test_mask_heatmap_rectangular_memory_mask():
    memory = np.ones((3, 5)) * np.array([1, 1, 1, 0, 0])
    fig = mask_heatmap_fig(memory, ["<s>", "x", "y"], list("abcde"), "memory")
    assert np.asarray(fig.data[0].z).shape == (3, 5)
    assert tick_texts(fig.layout.xaxis) == list("abcde")


@pytest.mark.parametrize("rows, cols, message", [
    (["a", "b", "c"], list("abcd"), "4 rows but 3 row labels"),
    (list("abcd"), ["a", "b"], "4 columns but 2 column labels"),
])
def test_mask_heatmap_names_both_sizes(rows, cols, message):
    with pytest.raises(ValueError, match=message):
        mask_heatmap_fig(LOOK_AHEAD, rows, cols, "t")


def test_batch_mask_fig_cells_show_tokens():
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], float)
    ids = np.array([[2, 7, 3, 0], [2, 8, 9, 3]])
    tokens = [["<s>", "x", "</s>", "<pad>"], ["<s>", "y", "z", "</s>"]]
    fig = batch_mask_fig(mask, ids, tokens, ["row 0", "row 1"],
                         "Padding mask (B, 1, 1, N) = (2, 1, 1, 4)")
    (trace,) = fig.data
    np.testing.assert_array_equal(np.asarray(trace.z), mask)
    assert list(trace.y) == [0, 1] and tick_texts(fig.layout.yaxis) == ["row 0", "row 1"]
    assert list(trace.x) == [0, 1, 2, 3]
    assert trace.text[0][3] == "&lt;pad&gt;" and trace.text[1][2] == "z"
    assert tuple(cell_data(trace)[0, 3]) == ("0", "blocked (padding)", "row 0", "<pad>")


def test_batch_mask_fig_names_both_sizes():
    mask = np.ones((2, 3))
    with pytest.raises(ValueError,
                       match=r"ids have shape \(2, 4\) but the mask has shape \(2, 3\)"):
        batch_mask_fig(mask, np.ones((2, 4)), [list("abc")] * 2, ["r0", "r1"], "t")
    with pytest.raises(ValueError, match=r"row lengths \[3, 2\] but the mask has shape \(2, 3\)"):
        batch_mask_fig(mask, np.ones((2, 3)), [list("abc"), list("ab")], ["r0", "r1"], "t")
    with pytest.raises(ValueError, match="2 rows but 3 row labels"):
        batch_mask_fig(mask, np.ones((2, 3)), [list("abc")] * 2, ["r0", "r1", "r2"], "t")


def test_masking_row_fig_three_panels():
    weights = masked_softmax(SCORES, MASK)
    fig = masking_row_fig(SCORES, MASK, weights, KEYS, title="row")
    assert [t.name for t in fig.data] == ["raw score", "masked score", "blocked", "softmax weight"]
    assert [type(t) for t in fig.data] == [go.Bar, go.Bar, go.Scatter, go.Bar]
    assert [a.text for a in fig.layout.annotations][:3] == [
        "1. Raw scores QKᵀ/√d_k (before masking)",
        "2. Scores after masking (blocked keys get −1e9: weight 0)",
        "3. Softmax weights (the model's attention row)"]
    for name in ("raw score", "masked score", "softmax weight"):
        assert list(by_name(fig, name).x) == [0, 1, 2, 3, 4, 5]
    # The repeated "5" is its own column, at position 3, with the same tick text.
    assert ticks(fig.layout.xaxis3) == list(enumerate(KEYS))
    np.testing.assert_array_equal(by_name(fig, "raw score").y, SCORES)
    for name in ("raw score", "masked score", "softmax weight"):
        trace = by_name(fig, name)
        assert ".4f" in trace.hovertemplate and "key %{x:d} (%{customdata})" in trace.hovertemplate
        assert trace.customdata[3] == "5" and trace.customdata[0] == "&lt;s&gt;"


def test_masking_row_fig_draws_blocked_keys_apart():
    fig = masking_row_fig(SCORES, MASK, masked_softmax(SCORES, MASK), KEYS)
    masked = by_name(fig, "masked score").y
    assert masked[:5] == tuple(SCORES[:5]) and masked[5] is None  # a gap, not a tiny number
    blocked = by_name(fig, "blocked")
    assert list(blocked.x) == [5] and list(blocked.customdata) == ["&lt;pad&gt;"]
    assert list(blocked.text) == ["blocked"] and "(−1e9)" in blocked.hovertemplate
    shaded = [(s.x0, s.x1) for s in fig.layout.shapes]
    assert shaded and set(shaded) == {(4.5, 5.5)}


def test_masking_row_fig_plots_the_given_weights():
    weights = np.array([0.1, 0.2, 0.3, 0.15, 0.25, 0.0])
    fig = masking_row_fig(SCORES, MASK, weights, KEYS)
    np.testing.assert_array_equal(by_name(fig, "softmax weight").y, weights)


def test_masking_row_fig_nothing_blocked():
    fig = masking_row_fig(SCORES, np.ones(6), masked_softmax(SCORES, np.ones(6)), KEYS)
    assert len(by_name(fig, "blocked").x) == 0 and not fig.layout.shapes
    assert None not in by_name(fig, "masked score").y


@pytest.mark.parametrize("name, args", [
    ("scores", (SCORES[:5], MASK, SCORES)),
    ("mask", (SCORES, MASK[:4], SCORES)),
    ("weights", (SCORES, MASK, np.ones(7))),
])
def test_masking_row_fig_names_both_sizes(name, args):
    with pytest.raises(ValueError, match=rf"{name} has shape \(\d,\) but there are 6 key tokens"):
        masking_row_fig(*args, KEYS)


def test_masked_softmax():
    weights = masked_softmax(SCORES, MASK)
    expected = np.exp(SCORES[:5]) / np.exp(SCORES[:5]).sum()
    np.testing.assert_allclose(weights[:5], expected)
    assert weights[5] == 0.0
    np.testing.assert_array_equal(masked_softmax([1.0, 2.0], [0, 0]), [0.0, 0.0])  # all blocked
    with pytest.raises(ValueError, match=r"shape \(6,\) but the mask has shape \(5,\)"):
        masked_softmax(SCORES, MASK[:5])


def test_the_blocked_score_is_received_not_hard_coded():
    with pytest.raises(TypeError, match="blocked_score"):
        mask_maps.masked_softmax(SCORES, MASK)
    with pytest.raises(TypeError, match="blocked_score"):
        mask_maps.masking_row_fig(SCORES, MASK, SCORES, KEYS)
    fig = mask_maps.masking_row_fig(SCORES, MASK, SCORES, KEYS, blocked_score=-1e4)
    assert "blocked keys get −10000: weight 0" in fig.layout.annotations[1].text
    assert "(−10000)" in by_name(fig, "blocked").hovertemplate
    # The model's rule with a mild blocked score: the blocked key keeps exactly 0, the others
    # share what exp(-1e4) leaves (nothing, in float64).
    np.testing.assert_allclose(mask_maps.masked_softmax(SCORES, MASK, blocked_score=-1e4),
                               masked_softmax(SCORES, MASK), atol=0)
    # A blocked score that does not swamp the scores shows: the softmax is the model's rule.
    mild = mask_maps.masked_softmax([0.0, 0.0], [1, 0], blocked_score=-1.0)
    np.testing.assert_allclose(mild, [1.0 / (1.0 + np.exp(-1.0)), 0.0])


def test_masked_softmax_equals_the_models_attention():
    tf = pytest.importorskip("tensorflow")
    from transformer.core.masking import BLOCKED_SCORE
    from transformer.model.attention import scaled_dot_product_attention
    from transformer.model.masks import decoder_mask

    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 3, 5, 4)).astype(np.float32) for _ in range(3))
    mask = decoder_mask(np.array([[1, 5, 6, 0, 0], [1, 5, 6, 7, 8]]))  # (2, 1, 5, 5)
    _, weights, scores = scaled_dot_product_attention(tf.constant(q), tf.constant(k),
                                                      tf.constant(v), mask)
    expected = mask_maps.masked_softmax(scores.numpy(), np.broadcast_to(mask.numpy(), scores.shape),
                                    blocked_score=BLOCKED_SCORE)
    np.testing.assert_allclose(weights.numpy(), expected, atol=1e-6)


@pytest.mark.parametrize("options", [{}, {"mask_padding": False}, {"start_id": 0}],
                         ids=["padding masked", "no padding mask", "start id = pad id"])
def test_masked_softmax_redoes_every_kind_with_the_models_masks(options):
    """With the masks a model returns (source_mask for encoder and cross keys, target_mask for
    the decoder), the NumPy redo equals every attention row of every layer and kind: the Masks
    page's check holds for every mask option a recipe sets."""
    pytest.importorskip("tensorflow")
    from transformer import Transformer, TransformerConfig
    from transformer.core.masking import BLOCKED_SCORE

    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=8, num_heads=2,
                               dff=16, num_encoder_layers=2, num_decoder_layers=2, max_len=8,
                               **options)
    model = Transformer(config).build_weights()
    pad = config.pad_id
    source_ids = np.array([[5, 6, 7, 2, pad, pad], [5, 6, 7, 8, 9, 2]])  # (B, N)
    target_ids = np.array([[config.start_id, 7, pad, pad], [config.start_id, 7, 8, 9]])  # (B, T)
    out = model((source_ids, target_ids), return_qkv=True)
    keys = {"encoder": out["source_mask"], "decoder": out["target_mask"],
            "cross": out["source_mask"]}
    for kind, mask in keys.items():
        scores = np.asarray(out[f"{kind}_scores"])  # (L, B, H, Tq, Tk)
        mask = np.broadcast_to(np.asarray(mask)[np.newaxis], scores.shape)
        np.testing.assert_allclose(
            mask_maps.masked_softmax(scores, mask, blocked_score=BLOCKED_SCORE),
            np.asarray(out[f"{kind}_attention"]), atol=1e-6, err_msg=kind)
