"""Value-weighted attention (Kobayashi et al. 2020; issue 27, items 1 and 7):
transformer.analysis.value_norm and OpenedModel.contributions(method="value_norm") against the
paper's equation re-implemented here in plain NumPy from the model's own Keras weights: each
attention layer's input x (the hidden state, through the sublayer's norm for a pre-LN model,
the encoder's output for cross-attention), x W_V + b_V per head, times the head's rows of W_O,
norms of alpha_ij f_h(x_j) and of their sum over heads; equal to 1e-5 on tiny random models
(post- and pre-LN, head_dim != d_model / num_heads, no biases with RMS norms as T5, one head,
a silenced head), on the bundled model and on the T5 fixture. With one head the norms are the
attention times ||f(x)||; the head sum is the norm of the sum, never more than the heads' sum of
norms; unknown and planned methods are a ValueError naming the one there is."""

from pathlib import Path

import numpy as np
import pytest

from testkit.variants import random_variant
from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.analysis.value_norm import (
    gram_factor,
    head_slices,
    transformed_norms,
    transformed_values,
    value_weighted,
)
from transformer.core.kinds import KIND_NAMES, head_masks
from transformer.importers import load_checkpoint as load_any
from transformer.inference import contributions as contributions_module
from transformer.inference.contributions import METHODS, value_norm_maps
from transformer.inference.maps import attention_maps

SOURCE, TARGET = "Friday, March 5, 2021", "2021-03-05"
T5 = Path(__file__).resolve().parents[1] / "fixtures" / "t5"
TOL = 1e-5


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def t5():
    return load_any(str(T5))


variant = random_variant


# ------------------------------------------------------------------ the paper, in NumPy
def numpy_norm(layer, x, config):
    """The model's norm layer applied in NumPy from its weights: LayerNorm (gamma, beta) or
    T5's RMS norm (scale)."""
    x = np.asarray(x, np.float64)
    eps = config.layer_norm_epsilon
    if config.norm == "rms":
        scale = np.asarray(layer.scale, np.float64)
        return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * scale
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * np.asarray(layer.gamma, np.float64)
            + np.asarray(layer.beta, np.float64))


def attention_inputs(ckpt, source_ids, target_ids, head_mask=None):
    """The model called eagerly: each kind's attention weights (L, H, q, k) and, per layer, the
    x its value projection reads (k, d_model) with that layer's attention object."""
    model, c = ckpt.model, ckpt.config
    masks = None if head_mask is None else {k: np.asarray(m) for k, m in head_mask.items()}
    out = model((np.asarray([source_ids]), np.asarray([target_ids])), return_attention=True,
                return_hidden_states=True, head_mask=masks)
    encoder = np.asarray(out["encoder_hidden_states"])[:, 0]  # (L_enc + 1, N, d_model)
    decoder = np.asarray(out["decoder_hidden_states"])[:, 0]  # (L_dec + 1, T, d_model)
    memory = encoder[-1]  # the encoder's output (its final norm applied, pre-LN)

    def sublayer_input(layer, norm, hidden):
        return numpy_norm(getattr(layer, norm), hidden, c) if c.norm_first else hidden

    inputs = {
        "encoder": [(sublayer_input(layer, "self_attention_layer_norm", encoder[i]),
                     layer.self_attention) for i, layer in enumerate(model.encoder_layers)],
        "decoder": [(sublayer_input(layer, "self_attention_layer_norm", decoder[i]),
                     layer.self_attention) for i, layer in enumerate(model.decoder_layers)],
        "cross": [(memory, layer.cross_attention) for layer in model.decoder_layers],
    }
    weights = {name: np.asarray(out[f"{name}_attention"], np.float64)[:, 0]
               for name in KIND_NAMES}  # (L, H, q, k)
    return weights, inputs


def paper_value_norm(alpha, x, attention, mask_row=None):
    """Kobayashi et al.'s eq.: alpha (H, q, k), x (k, d_model) -> (||alpha_ij f_h(x_j)|| (H, q, k),
    ||sum_h alpha^h_ij f_h(x_j)|| (q, k), ||f_h(x_j)|| (H, k)), f_h(x) = (x W_V^h + b_V^h) W_O^h."""
    heads, head_dim = attention.num_heads, attention.head_dim
    w_v = np.asarray(attention.value.kernel, np.float64)  # (d_model, H * head_dim)
    b_v = (np.asarray(attention.value.bias, np.float64) if attention.use_bias
           else np.zeros(w_v.shape[1]))
    w_o = np.asarray(attention.output_dense.kernel, np.float64)  # (H * head_dim, d_model)
    per_head = np.zeros(alpha.shape)
    norms = np.zeros((heads, x.shape[0]))
    total = np.zeros(alpha.shape[1:] + (w_o.shape[1],))  # (q, k, d_model)
    for h in range(heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        f = (x @ w_v[:, cols] + b_v[cols]) @ w_o[cols]  # (k, d_model): f_h(x_j)
        a = alpha[h] * (1.0 if mask_row is None else mask_row[h])
        terms = a[:, :, None] * f[None]  # (q, k, d_model): alpha^h_ij f_h(x_j)
        per_head[h] = np.linalg.norm(terms, axis=-1)
        norms[h] = np.linalg.norm(f, axis=-1)
        total += terms
    return per_head, np.linalg.norm(total, axis=-1), norms


def oracle(ckpt, result, head_mask=None):
    """The paper's three arrays per kind for the ids of `result`."""
    weights, inputs = attention_inputs(ckpt, result["source_ids"], result["target_ids"],
                                       head_mask)
    masks = head_masks(ckpt.config, given=head_mask)
    expected = {}
    for name in KIND_NAMES:
        rows = [paper_value_norm(weights[name][i], x, attention, masks[name][i])
                for i, (x, attention) in enumerate(inputs[name])]
        expected[name] = np.stack([r[0] for r in rows])
        expected[f"{name}_summed"] = np.stack([r[1] for r in rows])
        expected[f"{name}_norms"] = np.stack([r[2] for r in rows])
    return expected


def assert_paper(ckpt, result, head_mask=None):
    expected = oracle(ckpt, result, head_mask)
    for key, value in expected.items():
        assert result[key].shape == value.shape, key
        scale = max(1.0, float(np.abs(value).max()))
        np.testing.assert_allclose(result[key], value, rtol=TOL, atol=TOL * scale, err_msg=key)


# ------------------------------------------------------------------ the models
VARIANTS = {
    "post-LN": {},
    "pre-LN": dict(norm_first=True),
    "head_dim 12": dict(head_dim=12),
    "T5-like": dict(norm_first=True, norm="rms", use_bias=False, attention_scale=False,
                    head_dim=4, num_heads=3),
    "one head": dict(num_heads=1),
}


@pytest.mark.parametrize("name", VARIANTS)
def test_tiny_models_equal_the_paper(bundled, name):
    ckpt = variant(bundled, **VARIANTS[name])
    assert_paper(ckpt, ckpt.contributions(SOURCE, TARGET, method="value_norm"))


def test_bundled_model_equals_the_paper(bundled):
    assert_paper(bundled, bundled.contributions(SOURCE, TARGET))
    translated = bundled.contributions(SOURCE)  # the model's own translation
    assert "".join(translated["output_tokens"]).replace("▁", "").startswith("2021-03-05")
    assert_paper(bundled, translated)


def test_t5_fixture_equals_the_paper(t5):
    assert not t5.config.use_bias and not t5.config.attention_scale and t5.config.norm_first
    result = t5.contributions("The house is wonderful.", "Das Haus ist wunderbar.")
    assert "encoder_position_bias" not in result
    assert_paper(t5, result)


def test_a_silenced_head_contributes_nothing(bundled):
    ckpt = variant(bundled, num_heads=4, seed=3)
    head_mask = head_masks(ckpt.config, silenced=[("cross", 0, 1), ("encoder", 1, 3)])
    result = ckpt.contributions(SOURCE, TARGET, head_mask=head_mask)
    assert not result["cross"][0, 1].any() and not result["encoder"][1, 3].any()
    assert result["cross"][0, 0].any()
    assert_paper(ckpt, result, head_mask)


def test_one_head_is_attention_times_the_value_norm(bundled):
    ckpt = variant(bundled, num_heads=1, seed=5)
    result = ckpt.contributions(SOURCE, TARGET)
    maps = ckpt.attention(SOURCE, TARGET)
    weights, inputs = attention_inputs(ckpt, result["source_ids"], result["target_ids"])
    for name in KIND_NAMES:
        # ||f(x_j)|| from the paper's f, not from the module under test
        norms = np.stack([paper_value_norm(weights[name][i], x, attention)[2]
                          for i, (x, attention) in enumerate(inputs[name])])  # (L, 1, k)
        np.testing.assert_allclose(result[name], maps[name] * norms[:, :, None, :],
                                   rtol=TOL, atol=TOL)
        np.testing.assert_allclose(result[f"{name}_summed"], result[name][:, 0], rtol=1e-6)


def test_the_result_has_the_maps_keys_and_the_sums(bundled):
    maps = bundled.attention(SOURCE, TARGET)
    result = bundled.contributions(SOURCE, TARGET)
    added = {f"{name}_{what}" for name in KIND_NAMES for what in ("summed", "norms")}
    assert set(result) == set(maps) | added
    for key in ("source_tokens", "target_tokens", "output_tokens"):
        assert result[key] == maps[key]
    for key in ("source_ids", "target_ids", "output_ids", "log_probs", "encoder_mask",
                "decoder_mask", "cross_mask"):
        np.testing.assert_array_equal(result[key], maps[key])
    for name in KIND_NAMES:
        layers, heads, queries, keys = maps[name].shape
        assert result[name].shape == (layers, heads, queries, keys)
        assert result[name].dtype == np.float32
        assert result[f"{name}_summed"].shape == (layers, queries, keys)
        assert result[f"{name}_norms"].shape == (layers, heads, keys)
        assert not result[name][..., ~maps[f"{name}_mask"]].any()  # blocked keys: 0
        # the norm of a sum is at most the sum of the norms
        assert (result[f"{name}_summed"] <= result[name].sum(axis=1) * (1 + 1e-6) + 1e-6).all()


def test_the_values_pass_is_the_details_pass(bundled):
    """attention_maps(values=True) hands out V alone, the details' V; value_norm_maps of the
    details maps a page already holds equals OpenedModel.contributions, the maps untouched."""
    source, output = bundled.encode_source(SOURCE), bundled.encode_target(TARGET)
    values = attention_maps(bundled, [source], [output], values=True)[0]
    details = bundled.attention(SOURCE, TARGET, details=True)
    for name in KIND_NAMES:
        assert f"{name}_q" not in values and f"{name}_scores" not in values
        np.testing.assert_allclose(values[f"{name}_v"], details[f"{name}_v"], rtol=1e-6,
                                   atol=1e-6)
    kept = {key: value.copy() for key, value in details.items() if isinstance(value, np.ndarray)}
    converted = value_norm_maps(details, bundled.model)
    result = bundled.contributions(SOURCE, TARGET)
    assert set(converted) == set(result)
    for name in KIND_NAMES:
        for key in (name, f"{name}_summed", f"{name}_norms"):
            np.testing.assert_allclose(converted[key], result[key], rtol=1e-5, atol=1e-6)
    for key, value in kept.items():
        np.testing.assert_array_equal(details[key], value)


def test_every_method_the_issue_names_is_registered_and_another_is_a_value_error(bundled):
    assert set(METHODS) == {"value_norm", "alti", "saliency", "input_x_gradient",
                            "integrated_gradients", "value_zeroing", "alti_logit"}
    with pytest.raises(ValueError, match=r"must be one of 'value_norm', .*, got 'attention'$"):
        bundled.contributions(SOURCE, TARGET, method="attention")


def test_a_new_method_is_one_registry_entry(bundled, monkeypatch):
    calls = []
    answer = contributions_module.TokenContributions(
        source_tokens=[], target_tokens=[], output_tokens=[], source=np.zeros((1, 1)),
        target=np.zeros((1, 1)))

    def fake(ckpt, source, target, **options):
        calls.append((ckpt, source, target, options))
        return answer

    monkeypatch.setitem(contributions_module.METHODS, "alti",
                        contributions_module.Method("alti", "ALTI+", "contribution", fake))
    assert bundled.contributions(SOURCE, TARGET, method="alti", steps=3) is answer
    assert calls == [(bundled, SOURCE, TARGET, {"steps": 3})]


# ------------------------------------------------------------------ the arithmetic alone
def random_case(rng, layers=2, heads=3, queries=5, keys=6, head_dim=4, d_model=7):
    weights = rng.random((layers, heads, queries, keys)).astype(np.float32)
    weights /= weights.sum(-1, keepdims=True)
    v = rng.normal(size=(layers, heads, keys, head_dim)).astype(np.float32)
    w_o = rng.normal(size=(layers, heads * head_dim, d_model)).astype(np.float32)
    return weights, v, w_o


def direct(weights, v, w_o):
    """The (L, q, k, d_model) sum built outright, its norm; and f_h(x_j) (L, H, k, d_model)."""
    f = np.einsum("lhkd,lhde->lhke", v.astype(np.float64),
                  head_slices(w_o.astype(np.float64), v.shape[1]))
    terms = weights[..., None].astype(np.float64) * f[:, :, None]  # (L, H, q, k, d_model)
    return np.linalg.norm(terms, axis=-1), np.linalg.norm(terms.sum(axis=1), axis=-1), f


@pytest.mark.parametrize("size", [(5, 6), (70, 80)], ids=["matmul", "term by term"])
@pytest.mark.parametrize("heads", [1, 2, 5])
def test_head_sum_is_the_norm_of_the_sum(size, heads):
    """Both ways the module adds up a^T G_j a (below and above _FACTOR_FROM cells)."""
    rng = np.random.default_rng(heads)
    weights, v, w_o = random_case(rng, heads=heads, queries=size[0], keys=size[1])
    per_head, summed, f = direct(weights, v, w_o)
    out = value_weighted(weights, v, w_o)
    np.testing.assert_allclose(out["weighted"], per_head, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["summed"], summed, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["norms"], np.linalg.norm(f, axis=-1), rtol=1e-5)
    np.testing.assert_allclose(transformed_values(v, w_o), f, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(transformed_norms(v, w_o), out["norms"], rtol=1e-6)


@pytest.mark.parametrize("size", [(5, 6), (70, 80)], ids=["matmul", "term by term"])
def test_heads_that_cancel_sum_to_zero(size):
    """f_1 = -f_0 with the same weights: the sum is 0 (not NaN from rounding below 0)."""
    rng = np.random.default_rng(0)
    weights, v, w_o = random_case(rng, heads=2, queries=size[0], keys=size[1])
    weights[:, 1] = weights[:, 0]
    v[:, 1] = -v[:, 0]
    w_o[:, 4:] = w_o[:, :4]  # head 1's rows of W_O are head 0's
    out = value_weighted(weights, v, w_o)
    assert np.isfinite(out["summed"]).all()
    assert out["summed"].max() <= 1e-5 * out["weighted"].max()


def test_head_mask_and_shapes():
    rng = np.random.default_rng(1)
    weights, v, w_o = random_case(rng)
    mask = np.ones((2, 3), np.float32)
    mask[1, 2] = 0.0
    out = value_weighted(weights, v, w_o, head_mask=mask)
    kept = weights * mask[:, :, None, None]
    np.testing.assert_allclose(out["summed"], direct(kept, v, w_o)[1], rtol=1e-5, atol=1e-6)
    assert not out["weighted"][1, 2].any()
    with pytest.raises(ValueError, match="head_mask must be"):
        value_weighted(weights, v, w_o, head_mask=np.ones(3))
    with pytest.raises(ValueError, match="weights must be"):
        value_weighted(weights[:, :2], v, w_o)
    with pytest.raises(ValueError, match="W_O must be"):
        value_weighted(weights, v, w_o[:, :-1])
    with pytest.raises(ValueError, match="v must be"):
        value_weighted(weights, v[0], w_o)


@pytest.mark.parametrize("size", [(5, 6), (70, 80)], ids=["matmul", "factor"])
def test_heads_that_nearly_cancel_keep_their_small_sum(size):
    """f_1 = -f_0 + 1e-4 noise: the sum is 1e-4 of the terms, and stays within 1e-6 of them
    (the Gram form in float32 would be off by up to 3e-4)."""
    rng = np.random.default_rng(2)
    weights, v, w_o = random_case(rng, heads=2, queries=size[0], keys=size[1])
    weights[:, 1] = weights[:, 0]
    v[:, 1] = -v[:, 0] + rng.normal(0, 1e-4, v[:, 0].shape).astype(np.float32)
    w_o[:, 4:] = w_o[:, :4]
    per_head, summed, _ = direct(weights, v, w_o)
    out = value_weighted(weights, v, w_o)
    terms = per_head.sum(axis=1)  # (L, q, k): sum_h a_h ||f_h||
    assert summed.max() < 1e-3 * terms.max()
    assert np.abs(out["summed"] - summed).max() <= 1e-6 * terms.max()


def test_gram_factor_of_full_and_deficient_rank():
    rng = np.random.default_rng(4)
    f = rng.normal(size=(7, 3, 5))  # (keys, H, d): full rank
    deficient = f.copy()
    deficient[:, 2] = 2 * f[:, 0] - f[:, 1]  # head 2 in the span of heads 0 and 1
    deficient[3, 1] = f[3, 0]  # and, for one key, head 1 equal to head 0
    zero = np.zeros((2, 3, 5))  # a key whose values are all 0
    for vectors in (f, deficient, zero):
        gram = vectors @ vectors.transpose(0, 2, 1)  # (keys, H, H)
        factor = gram_factor(gram)
        assert np.isfinite(factor).all() and not np.triu(factor, 1).any()
        np.testing.assert_allclose(factor @ factor.transpose(0, 2, 1), gram, atol=1e-9)
