"""Attention against independent references: Keras' own MultiHeadAttention and NumPy."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer import MultiHeadAttention, scaled_dot_product_attention

ATOL = 1e-5


# ----------------------------------------------------------------------------- NumPy reference
def np_softmax_masked(scores, mask=None):
    """Row softmax where mask==0 keys get exactly 0 and rows with no allowed key are all 0."""
    scores = np.asarray(scores, np.float64)
    if mask is None:
        mask = np.ones_like(scores, dtype=bool)
    mask = np.broadcast_to(np.asarray(mask).astype(bool), scores.shape)
    masked = np.where(mask, scores, -np.inf)
    row_max = masked.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(mask, np.exp(masked - row_max), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0.0, 1.0, total)


def np_sdpa(q, k, v, mask=None):
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = np_softmax_masked(scores, mask)
    return weights @ v, weights, scores


def np_mha(layer_weights, query, value, num_heads, mask=None, head_mask=None):
    """Multi-head attention from scratch; layer_weights: dict name -> array (from our layer)."""
    query = np.asarray(query, np.float64)
    value = np.asarray(value, np.float64)
    d_model = query.shape[-1]
    d_k = d_model // num_heads

    def proj(x, name):
        return x @ layer_weights[f"{name}/kernel"] + layer_weights[f"{name}/bias"]

    def split(x):  # (B, T, d_model) -> (B, H, T, d_k)
        b, t, _ = x.shape
        return x.reshape(b, t, num_heads, d_k).transpose(0, 2, 1, 3)

    q, k, v = split(proj(query, "query")), split(proj(value, "key")), split(proj(value, "value"))
    context, weights, scores = np_sdpa(q, k, v, mask)
    if head_mask is not None:
        context = context * np.asarray(head_mask, np.float64)[None, :, None, None]
    b, h, t, _ = context.shape
    merged = context.transpose(0, 2, 1, 3).reshape(b, t, h * d_k)
    return proj(merged, "output"), weights, (q, k, v, scores)


def layer_weight_dict(layer):
    """Our layer's weights keyed 'query/kernel', ... (read by path, not by internals)."""
    out = {}
    for w in layer.weights:
        parts = w.path.split("/")
        out["/".join(parts[-2:])] = np.asarray(w.numpy(), np.float64)
    assert set(out) == {f"{n}/{p}" for n in ("query", "key", "value", "output")
                        for p in ("kernel", "bias")}
    return out


# ----------------------------------------------------------------------------- fixtures
D_MODEL, HEADS = 12, 3
D_K = D_MODEL // HEADS


def make_layers(seed=0):
    """Our MHA with random (non-zero) biases, and Keras' MHA holding the same weights."""
    keras.utils.set_random_seed(seed)
    ours = MultiHeadAttention(D_MODEL, HEADS, name="ours")
    x = np.zeros((1, 2, D_MODEL), np.float32)
    ours(x, x)
    rng = np.random.default_rng(seed)
    for w in ours.weights:
        if w.path.endswith("bias"):
            w.assign(rng.normal(0, 0.3, w.shape).astype(np.float32))
    theirs = keras.layers.MultiHeadAttention(HEADS, key_dim=D_K, name="reference")
    theirs(x, x)
    w = layer_weight_dict(ours)
    pairs = [
        (theirs.query_dense, "query"),
        (theirs.key_dense, "key"),
        (theirs.value_dense, "value"),
    ]
    for dense, name in pairs:
        dense.kernel.assign(w[f"{name}/kernel"].reshape(D_MODEL, HEADS, D_K))
        dense.bias.assign(w[f"{name}/bias"].reshape(HEADS, D_K))
    theirs.output_dense.kernel.assign(w["output/kernel"].reshape(HEADS, D_K, D_MODEL))
    theirs.output_dense.bias.assign(w["output/bias"])
    return ours, theirs


@pytest.fixture(scope="module")
def layers():
    return make_layers()


def random_inputs(batch, tq, tk, seed=1):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, tq, D_MODEL)).astype(np.float32)
    value = rng.normal(size=(batch, tk, D_MODEL)).astype(np.float32)
    return query, value


def key_padding(lengths, tk):
    """(B, Tk) bool, True for the first `length` keys."""
    return np.arange(tk)[None, :] < np.asarray(lengths)[:, None]


# ----------------------------------------------------------------------------- Oracle 1: Keras
@pytest.mark.parametrize("tq, tk", [(5, 5), (3, 7), (6, 2)])
def test_matches_keras_mha_without_mask(layers, tq, tk):
    ours, theirs = layers
    query, value = random_inputs(2, tq, tk)
    result = ours(query, value)
    ref_out, ref_scores = theirs(query, value, return_attention_scores=True)
    assert result["output"].shape == (2, tq, D_MODEL)
    assert result["weights"].shape == (2, HEADS, tq, tk)
    np.testing.assert_allclose(result["output"], ref_out, atol=ATOL)
    np.testing.assert_allclose(result["weights"], ref_scores, atol=ATOL)


@pytest.mark.parametrize("tq, tk", [(5, 5), (3, 7), (6, 4)])
def test_matches_keras_mha_with_padding_mask(layers, tq, tk):
    ours, theirs = layers
    query, value = random_inputs(3, tq, tk, seed=2)
    keep = key_padding([tk, 2, 1], tk)  # (B, Tk), every row keeps at least one key
    ours_mask = keep[:, None, None, :].astype(np.float32)  # (B, 1, 1, Tk)
    keras_mask = np.broadcast_to(keep[:, None, :], (3, tq, tk))  # (B, Tq, Tk) bool
    result = ours(query, value, attention_mask=ours_mask)
    ref_out, ref_scores = theirs(query, value, attention_mask=keras_mask,
                                 return_attention_scores=True)
    np.testing.assert_allclose(result["output"], ref_out, atol=ATOL)
    np.testing.assert_allclose(result["weights"], ref_scores, atol=ATOL)
    # The mask must matter: without it the answer is different.
    unmasked = ours(query, value)
    assert not np.allclose(unmasked["output"], ref_out, atol=1e-3)


def test_matches_keras_mha_with_causal_and_padding_mask(layers):
    ours, theirs = layers
    t = 5
    query, _ = random_inputs(2, t, t, seed=3)
    keep = key_padding([5, 3], t)
    mask = np.tril(np.ones((t, t), bool))[None] & keep[:, None, :]  # (B, T, T)
    result = ours(query, query, attention_mask=mask[:, None].astype(np.float32))
    ref_out, ref_scores = theirs(query, query, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(result["output"], ref_out, atol=ATOL)
    np.testing.assert_allclose(result["weights"], ref_scores, atol=ATOL)


def test_matches_keras_mha_with_bool_mask_argument(layers):
    # Our layer also accepts a boolean mask of the Keras shape broadcast over heads.
    ours, theirs = layers
    query, value = random_inputs(2, 4, 6, seed=4)
    rng = np.random.default_rng(4)
    mask = rng.random((2, 4, 6)) < 0.6
    mask[..., 0] = True
    result = ours(query, value, attention_mask=mask[:, None])
    ref_out, ref_scores = theirs(query, value, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(result["output"], ref_out, atol=ATOL)
    np.testing.assert_allclose(result["weights"], ref_scores, atol=ATOL)


def test_matches_numpy_mha_including_qkv(layers):
    ours, _ = layers
    query, value = random_inputs(2, 3, 5, seed=5)
    keep = key_padding([5, 2], 5)[:, None, None, :]
    result = ours(query, value, attention_mask=keep.astype(np.float32), return_qkv=True)
    out, weights, (q, k, v, scores) = np_mha(layer_weight_dict(ours), query, value, HEADS, keep)
    np.testing.assert_allclose(result["output"], out, atol=ATOL)
    np.testing.assert_allclose(result["weights"], weights, atol=ATOL)
    assert result["q"].shape == (2, HEADS, 3, D_K)
    assert result["k"].shape == result["v"].shape == (2, HEADS, 5, D_K)
    np.testing.assert_allclose(result["q"], q, atol=ATOL)
    np.testing.assert_allclose(result["k"], k, atol=ATOL)
    np.testing.assert_allclose(result["v"], v, atol=ATOL)
    np.testing.assert_allclose(result["scores"], scores, atol=ATOL)  # before masking
    assert set(ours(query, value)) == {"output", "weights"}


# ----------------------------------------------------------------------------- properties
def test_rows_sum_to_one_and_blocked_keys_exactly_zero(layers):
    ours, _ = layers
    query, value = random_inputs(3, 4, 6, seed=6)
    keep = key_padding([6, 3, 1], 6)
    mask = keep[:, None, None, :].astype(np.float32)
    weights = np.asarray(ours(query, value, attention_mask=mask)["weights"])
    np.testing.assert_allclose(weights.sum(-1), np.ones((3, HEADS, 4)), atol=1e-6)
    blocked = np.broadcast_to(~keep[:, None, None, :], weights.shape)
    assert blocked.any()
    assert np.all(weights[blocked] == 0.0)  # exactly, not just small
    assert np.all(weights[~blocked] > 0.0)


def test_fully_blocked_query_row_is_all_zero_not_nan(layers):
    ours, _ = layers
    query, value = random_inputs(2, 3, 4, seed=7)
    mask = np.ones((2, 1, 3, 4), np.float32)
    mask[0, 0, 1, :] = 0.0  # query 1 of batch 0 may attend nothing
    mask[1] = 0.0  # batch 1 may attend nothing at all
    result = ours(query, value, attention_mask=mask, return_qkv=True)
    weights = np.asarray(result["weights"])
    output = np.asarray(result["output"])
    assert np.isfinite(weights).all() and np.isfinite(output).all()
    assert np.all(weights[0, :, 1] == 0.0)
    assert np.all(weights[1] == 0.0)
    np.testing.assert_allclose(weights[0, :, [0, 2]].sum(-1), 1.0, atol=1e-6)
    # With no key to attend, the context is zero and the output is the output bias alone.
    bias = layer_weight_dict(ours)["output/bias"]
    np.testing.assert_allclose(output[1], np.broadcast_to(bias, output[1].shape), atol=ATOL)
    np.testing.assert_allclose(output[0, 1], bias, atol=ATOL)


@pytest.mark.parametrize("head", range(HEADS))
def test_head_mask_zeroes_that_heads_context(layers, head):
    ours, _ = layers
    query, value = random_inputs(2, 3, 5, seed=8)
    keep = key_padding([5, 4], 5)[:, None, None, :]
    head_mask = np.ones(HEADS, np.float32)
    head_mask[head] = 0.0
    masked = ours(query, value, attention_mask=keep.astype(np.float32), head_mask=head_mask)
    expected, expected_w, _ = np_mha(layer_weight_dict(ours), query, value, HEADS, keep, head_mask)
    np.testing.assert_allclose(masked["output"], expected, atol=ATOL)
    # The attention weights themselves are not changed by silencing a head's output.
    np.testing.assert_allclose(masked["weights"], expected_w, atol=ATOL)
    full = ours(query, value, attention_mask=keep.astype(np.float32))
    assert not np.allclose(masked["output"], full["output"], atol=1e-3)
    all_ones = ours(query, value, attention_mask=keep.astype(np.float32),
                    head_mask=np.ones(HEADS, np.float32))
    np.testing.assert_allclose(all_ones["output"], full["output"], atol=1e-6)


def test_head_mask_all_zero_gives_output_bias(layers):
    ours, _ = layers
    query, value = random_inputs(2, 3, 5, seed=9)
    out = np.asarray(ours(query, value, head_mask=np.zeros(HEADS, np.float32))["output"])
    bias = layer_weight_dict(ours)["output/bias"]
    np.testing.assert_allclose(out, np.broadcast_to(bias, out.shape), atol=ATOL)


def test_keys_come_from_value_and_query_order_is_respected(layers):
    # Cross-attention: permuting the value sequence permutes the weights' key axis and
    # leaves the output unchanged; permuting queries permutes the output rows.
    ours, _ = layers
    query, value = random_inputs(1, 3, 5, seed=10)
    perm = np.array([3, 0, 4, 1, 2])
    a = ours(query, value)
    b = ours(query, value[:, perm])
    np.testing.assert_allclose(b["output"], a["output"], atol=ATOL)
    np.testing.assert_allclose(np.asarray(b["weights"]), np.asarray(a["weights"])[..., perm], atol=ATOL)
    qperm = np.array([2, 0, 1])
    c = ours(query[:, qperm], value)
    np.testing.assert_allclose(c["output"], np.asarray(a["output"])[:, qperm], atol=ATOL)


def test_rejects_d_model_not_divisible_by_heads():
    with pytest.raises(ValueError, match="d_model"):
        MultiHeadAttention(10, 3)


def test_weights_have_the_paper_shapes(layers):
    ours, _ = layers
    shapes = {"/".join(w.path.split("/")[-2:]): tuple(w.shape) for w in ours.weights}
    assert shapes == {
        "query/kernel": (D_MODEL, D_MODEL), "query/bias": (D_MODEL,),
        "key/kernel": (D_MODEL, D_MODEL), "key/bias": (D_MODEL,),
        "value/kernel": (D_MODEL, D_MODEL), "value/bias": (D_MODEL,),
        "output/kernel": (D_MODEL, D_MODEL), "output/bias": (D_MODEL,),
    }


# ----------------------------------------------------------------------------- scaled dot-product
def _sdpa_inputs(seed=11):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    k = rng.normal(size=(2, 3, 6, 5)).astype(np.float32)
    v = rng.normal(size=(2, 3, 6, 7)).astype(np.float32)
    return q, k, v


def _mask_cases():
    rng = np.random.default_rng(12)
    random_mask = (rng.random((2, 3, 4, 6)) < 0.5).astype(np.float32)
    random_mask[0, 0, 2] = 0.0  # one fully blocked row
    return {
        "none": None,
        "padding": key_padding([6, 2], 6)[:, None, None, :].astype(np.float32),
        "causal_2d": np.tril(np.ones((4, 6), np.float32)),
        "random_full": random_mask,
        "bool": key_padding([3, 5], 6)[:, None, None, :],
    }


@pytest.mark.parametrize("case", sorted(_mask_cases()))
def test_scaled_dot_product_attention_matches_numpy(case):
    q, k, v = _sdpa_inputs()
    mask = _mask_cases()[case]
    out, weights, scores = scaled_dot_product_attention(
        tf.constant(q), tf.constant(k), tf.constant(v), None if mask is None else tf.constant(mask))
    ref_out, ref_w, ref_scores = np_sdpa(q, k, v, mask)
    assert out.shape == (2, 3, 4, 7) and weights.shape == scores.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(out, ref_out, atol=ATOL)
    np.testing.assert_allclose(weights, ref_w, atol=ATOL)
    np.testing.assert_allclose(scores, ref_scores, atol=ATOL)
    weights = np.asarray(weights)
    if mask is not None:
        blocked = np.broadcast_to(np.asarray(mask) == 0, weights.shape)
        assert np.all(weights[blocked] == 0.0)
    assert np.isfinite(weights).all() and np.isfinite(np.asarray(out)).all()


def test_scaled_dot_product_attention_hand_computed():
    # One query, two keys: scores [1, 0] / sqrt(1)... worked by hand with d_k = 4.
    q = np.array([[[2.0, 0.0, 0.0, 0.0]]], np.float32)  # (1, 1, 4)
    k = np.array([[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]], np.float32)  # (1, 2, 4)
    v = np.array([[[10.0], [20.0]]], np.float32)  # (1, 2, 1)
    out, weights, scores = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(scores, [[[1.0, 0.0]]], atol=1e-6)  # 2 / sqrt(4) = 1
    w0 = np.e / (np.e + 1.0)
    np.testing.assert_allclose(weights, [[[w0, 1.0 - w0]]], atol=1e-6)
    np.testing.assert_allclose(out, [[[10.0 * w0 + 20.0 * (1.0 - w0)]]], atol=1e-5)
    out, weights, _ = scaled_dot_product_attention(q, k, v, np.array([[[0.0, 1.0]]], np.float32))
    np.testing.assert_array_equal(weights, [[[0.0, 1.0]]])
    np.testing.assert_allclose(out, [[[20.0]]], atol=1e-6)
