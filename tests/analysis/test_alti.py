"""ALTI+ (Ferrando et al. 2022): OpenedModel.contributions(method="alti") against the paper's
equations written out in plain NumPy here, on the bundled model, on random post-LN, pre-LN and
RMS-norm variants, and on imported models (Marian, BART, mBART, T5).

The oracle shares nothing with the library's arithmetic: it calls the model's Keras layers
eagerly for every sublayer's input and output (so the residual of each cross-attention comes
from the model, not rebuilt), computes each term f_h(x_j) from the value projection's weights,
linearises the LayerNorm as the paper's matrix, (I - 11^T / d) diag(gamma) / sigma, loops over
every (query, key) pair, and rolls out with the paper's block equations.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from testkit.variants import random_variant
from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.analysis.alti import Norm, Sublayer, alti_rollout, sublayer_contributions
from transformer.importers import load_checkpoint as load_any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCE, TARGET = "june 3rd, 1987", "1987-06-03"
TOL = 1e-5


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(DEFAULT_CHECKPOINT)


variant = functools.partial(random_variant, num_decoder_layers=3)


# ------------------------------------------------------------------ the paper, in NumPy
def f64(x):
    return np.asarray(x, np.float64)


def paper_norm(layer, config):
    """(apply(z), linear(v, z)) of a post-LN norm: LN(z) and the paper's L_z(v) =
    v (I - 11^T / d) diag(gamma) / sigma(z) (RMSNorm: v diag(gamma) / rms(z))."""
    eps = config.layer_norm_epsilon
    if config.norm == "rms":
        gamma = f64(layer.scale)

        def sigma(z):
            return np.sqrt((z ** 2).mean() + eps)
        centre = np.eye(len(gamma))
        beta = np.zeros(len(gamma))
    else:
        gamma, beta = f64(layer.gamma), f64(layer.beta)

        def sigma(z):
            return np.sqrt(z.var() + eps)
        centre = np.eye(len(gamma)) - np.ones((len(gamma), len(gamma))) / len(gamma)

    def linear(v, z):
        return v @ centre @ np.diag(gamma) / sigma(z)

    def apply(z):
        return linear(z, z) + beta
    return apply, linear


def paper_terms(attention, alpha, x_values, mask_row):
    """T_i(x_j) = sum_h alpha^h_ij (x_j W_V^h + b_V^h) W_O^h for every (i, j): (q, k, d)."""
    heads, head_dim = attention.num_heads, attention.head_dim
    w_v, w_o = f64(attention.value.kernel), f64(attention.output_dense.kernel)
    b_v = f64(attention.value.bias) if attention.use_bias else np.zeros(w_v.shape[1])
    terms = np.zeros(alpha.shape[1:] + (w_o.shape[1],))
    for h in range(heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        f = (x_values @ w_v[:, cols] + b_v[cols]) @ w_o[cols]  # (k, d)
        terms += (alpha[h] * mask_row[h])[:, :, None] * f[None]
    return terms


def paper_contributions(terms, residual, b_o, norm, y_model, cross):
    """c_ij = max(0, ||y_i||_1 - ||y_i - x_{i<-j}||_1) normalised, one (i, j) at a time."""
    queries, keys = terms.shape[:2]
    columns = keys + 1 if cross else keys
    c = np.zeros((queries, columns))
    for i in range(queries):
        pieces = [terms[i, j] + (residual[i] if (not cross and j == i) else 0.0)
                  for j in range(keys)]
        if cross:
            pieces.append(residual[i])
        z = sum(pieces) + (b_o if b_o is not None else 0.0)
        if norm is not None:
            apply, linear = norm
            y = apply(z)
            pieces = [linear(p, z) for p in pieces]
        else:
            y = z
        # the terms and biases rebuild the model's own sublayer output
        np.testing.assert_allclose(y, y_model[i], rtol=1e-4, atol=1e-4)
        for j, p in enumerate(pieces):
            c[i, j] = max(0.0, np.abs(y).sum() - np.abs(y - p).sum())
        c[i] /= c[i].sum()
    return c


def paper_alti(ckpt, source_ids, target_ids, head_mask=None):
    """Every sublayer's contributions and the rollout, from the model called layer by layer."""
    model, c = ckpt.model, ckpt.config
    masks = {k: np.ones((len(layers), c.num_heads)) for k, layers in
             (("encoder", model.encoder_layers), ("decoder", model.decoder_layers),
              ("cross", model.decoder_layers))}
    for kind, given in (head_mask or {}).items():
        masks[kind] = f64(given)
    src, tgt = np.asarray([source_ids]), np.asarray([target_ids])
    enc = model.encode(src, return_hidden_states=True,
                       head_mask=masks["encoder"].astype(np.float32))
    memory, memory_mask = enc["memory"], enc["mask"]
    x = model.source_embedding(src)
    encoder = []

    def position_bias(stack, length):  # T5's relative position bias, None elsewhere
        bias = getattr(model, f"{stack}_position_bias")
        return None if bias is None else bias(np.arange(length), np.arange(length))

    def sublayer(layer, name, x, keys, mask, head_mask, bias=None, cross=False):
        """One attention sublayer of `layer` called eagerly: its contributions and output y."""
        attention, norm_layer = getattr(layer, name), getattr(layer, f"{name}_layer_norm")
        h = norm_layer(x) if c.norm_first else x
        att = attention(h, h if keys is None else keys, attention_mask=mask,
                        position_bias=bias, head_mask=head_mask.astype(np.float32))
        z = x + att["output"]
        y = z if c.norm_first else norm_layer(z)
        norm = None if c.norm_first else paper_norm(norm_layer, c)
        terms = paper_terms(attention, f64(att["weights"])[0],
                            f64(h if keys is None else keys)[0], head_mask)
        b_o = f64(attention.output_dense.bias) if c.use_bias else None
        return paper_contributions(terms, f64(x)[0], b_o, norm, f64(y)[0], cross), y

    bias = position_bias("encoder", len(source_ids))
    for i, layer in enumerate(model.encoder_layers):
        contributions, _ = sublayer(layer, "self_attention", x, None, memory_mask,
                                    masks["encoder"][i], bias)
        encoder.append(contributions)
        x = layer(x, attention_mask=memory_mask, position_bias=bias,
                  head_mask=masks["encoder"][i].astype(np.float32))["output"]
    self_mask = model.target_mask(tgt)
    x = model.target_embedding(tgt)
    decoder, cross = [], []
    bias = position_bias("decoder", len(target_ids))
    for i, layer in enumerate(model.decoder_layers):
        contributions, y = sublayer(layer, "self_attention", x, None, self_mask,
                                    masks["decoder"][i], bias)
        decoder.append(contributions)
        # cross-attention: its residual is the self-attention sublayer's output y
        contributions, _ = sublayer(layer, "cross_attention", y, memory, memory_mask,
                                    masks["cross"][i], cross=True)
        cross.append(contributions)
        x = layer(x, memory, self_mask=self_mask, cross_mask=memory_mask, position_bias=bias,
                  self_head_mask=masks["decoder"][i].astype(np.float32),
                  cross_head_mask=masks["cross"][i].astype(np.float32))["output"]
    return encoder, decoder, cross


def paper_rollout(encoder, decoder, cross):
    """The paper's rollout: R_enc = C_L ... C_1; per decoder layer the joint block
    [C^cross_src R_enc | C^cross_res C^self] and R_l = J^src + J^tgt R_{l-1}^src | J^tgt R_{l-1}^tgt."""
    n = cross[0].shape[1] - 1
    r_enc = np.eye(n)
    for c in encoder:
        r_enc = c @ r_enc
    r = None
    for c_self, c_cross in zip(decoder, cross):
        j_src = c_cross[:, :n] @ r_enc
        j_tgt = np.diag(c_cross[:, n]) @ c_self
        r = (np.hstack([j_src, j_tgt]) if r is None
             else np.hstack([j_src + j_tgt @ r[:, :n], j_tgt @ r[:, n:]]))
    return r_enc, r


def check_against_paper(ckpt, source=SOURCE, target=TARGET, head_mask=None):
    result = ckpt.contributions(source, target, method="alti", head_mask=head_mask)
    source_ids = ckpt.encode_source(source)
    output_ids = ckpt.encode_target(target)
    target_ids = [ckpt.config.start_id] + output_ids[:-1]
    assert result["target_tokens"] == ckpt.target_tokenizer.ids_to_pieces(target_ids)
    encoder, decoder, cross = paper_alti(ckpt, source_ids, target_ids, head_mask)
    for name, expected in (("encoder_layers", encoder), ("decoder_layers", decoder),
                           ("cross_layers", cross)):
        np.testing.assert_allclose(result[name], np.stack(expected), atol=TOL, err_msg=name)
    r_enc, r = paper_rollout(encoder, decoder, cross)
    n = len(source_ids)
    np.testing.assert_allclose(result["encoder_rollout"][-1], r_enc, atol=TOL)
    np.testing.assert_allclose(result["source"], r[:, :n], atol=TOL)
    np.testing.assert_allclose(result["target"], r[:, n:], atol=TOL)
    np.testing.assert_allclose(result["source_share"], r[:, :n].sum(1), atol=TOL)
    return result


def check_invariants(result):
    source, target, share = result["source"], result["target"], result["source_share"]
    t, n = source.shape
    assert target.shape == (t, t) and share.shape == (t,)
    assert len(result["source_tokens"]) == n and len(result["output_tokens"]) == t
    for name in ("source", "target", "encoder_layers", "decoder_layers", "cross_layers",
                 "encoder_rollout", "rollout"):
        assert (result[name] >= 0).all(), name
    np.testing.assert_allclose(source.sum(1) + target.sum(1), 1.0, atol=1e-6)
    for name in ("encoder_layers", "decoder_layers", "cross_layers", "encoder_rollout",
                 "rollout"):
        np.testing.assert_allclose(result[name].sum(-1), 1.0, atol=1e-6, err_msg=name)
    assert ((share >= 0) & (share <= 1 + 1e-6)).all()
    assert np.all(np.triu(target, 1) == 0)  # no output token draws on a later decoder input
    assert np.all(np.triu(result["decoder_layers"], 1) == 0)


# ------------------------------------------------------------------ the tests
def test_bundled_model_equals_the_paper(bundled):
    check_invariants(check_against_paper(bundled))


@pytest.mark.parametrize("overrides", [
    dict(),  # post-LN LayerNorm, the paper's
    dict(norm_first=True),  # pre-LN (mBART, NLLB, Pegasus)
    dict(norm="rms", use_bias=False),  # post-LN with RMSNorm, no biases
    dict(norm="rms", use_bias=False, norm_first=True, attention_scale=False),  # T5's wiring
], ids=["post_ln", "pre_ln", "post_rms", "pre_rms"])
def test_random_variants_equal_the_paper(bundled, overrides):
    ckpt = variant(bundled, seed=3, **overrides)
    check_invariants(check_against_paper(ckpt))


def test_silenced_heads_add_nothing_and_equal_the_paper(bundled):
    ckpt = variant(bundled, seed=5, num_heads=4, head_dim=4)
    head_mask = {"encoder": np.array([[1, 0, 1, 1], [1, 1, 1, 1]], np.float32),
                 "cross": np.array([[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]], np.float32)}
    result = check_against_paper(ckpt, head_mask=head_mask)
    check_invariants(result)
    # cross layer 0 has every head silenced: all it passes on is the residual
    np.testing.assert_allclose(result["cross_layers"][0, :, -1], 1.0, atol=1e-6)
    plain = ckpt.contributions(SOURCE, TARGET, method="alti")
    assert not np.allclose(plain["cross_layers"][0], result["cross_layers"][0])


@pytest.mark.parametrize("family", ["marian", "bart", "mbart", "t5"])
def test_imported_models_equal_the_paper(family):
    ckpt = load_any(str(FIXTURES / family))
    result = check_against_paper(ckpt, "The quick brown fox, 42 times.",
                                 "Le renard brun, 42 fois.")
    check_invariants(result)


def test_the_translation_is_what_is_attributed_when_no_target_is_typed(bundled):
    result = bundled.contributions(SOURCE, method="alti")
    typed = bundled.contributions(SOURCE, output_ids=bundled.translate(SOURCE).token_ids,
                                  method="alti")
    assert result["output_tokens"] == typed["output_tokens"]
    np.testing.assert_array_equal(result["source"], typed["source"])
    check_invariants(result)
    # the dates model reads the date off the source: most of each digit comes from there
    assert result["source_share"].mean() > 0.5


# ------------------------------------------------------------------ the arithmetic alone
def test_one_head_self_attention_by_hand():
    """One head, d_model 2, identity projections, pre-LN: the terms are alpha_ij x_j (+ x_i)."""
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    alpha = np.array([[[0.75, 0.25], [0.5, 0.5]]])  # (H, q, k)
    layer = Sublayer(weights=alpha, v=x[None], w_o=np.eye(2), b_o=None, residual=x)
    out = sublayer_contributions(layer)
    # query 0: terms [1.75, 0] and [0, 0.5]; y = [1.75, 0.5]
    y0 = np.array([1.75, 0.5])
    gains0 = [np.abs(y0).sum() - np.abs(y0 - [1.75, 0]).sum(),
              np.abs(y0).sum() - np.abs(y0 - [0, 0.5]).sum()]
    np.testing.assert_allclose(out["contributions"][0], np.array(gains0) / sum(gains0))
    np.testing.assert_allclose(out["output"], x + alpha[0] @ x)


def test_post_ln_terms_rebuild_the_norms_output():
    rng = np.random.default_rng(0)
    heads, q, d = 2, 3, 6
    weights = rng.dirichlet(np.ones(q), size=(heads, q))  # (H, q, k)
    v = rng.normal(size=(heads, q, 3))
    w_o, b_o = rng.normal(size=(heads * 3, d)), rng.normal(size=d)
    residual = rng.normal(size=(q, d))
    norm = Norm("layer", rng.normal(size=d), rng.normal(size=d), 1e-5)
    layer = Sublayer(weights, v, w_o, b_o, residual, norm)
    z = residual + layer.attention_output()
    np.testing.assert_allclose(sublayer_contributions(layer)["output"], norm(z), atol=1e-12)
    mean, var = z.mean(-1, keepdims=True), z.var(-1, keepdims=True)
    np.testing.assert_allclose(norm(z), (z - mean) / np.sqrt(var + 1e-5) * norm.gamma
                               + norm.beta, atol=1e-12)


def test_rollout_of_identity_layers_keeps_tokens_apart():
    """Layers that mix nothing: the encoder rollout is I, and a decoder whose cross-attention
    passes on only the residual takes nothing from the source."""
    n, t = 3, 4
    identity_cross = np.hstack([np.zeros((t, n)), np.ones((t, 1))])
    out = alti_rollout([np.eye(n)] * 2, [np.eye(t)] * 2, [identity_cross] * 2)
    np.testing.assert_array_equal(out["encoder_rollout"][-1], np.eye(n))
    np.testing.assert_array_equal(out["source_share"], np.zeros(t))
    np.testing.assert_array_equal(out["target"], np.eye(t))
    all_source = np.hstack([np.full((t, n), 1 / n), np.zeros((t, 1))])
    out = alti_rollout([np.eye(n)], [np.eye(t)], [all_source])
    np.testing.assert_allclose(out["source_share"], np.ones(t))


def test_sublayer_shapes_are_checked():
    with pytest.raises(ValueError, match="as many queries as keys"):
        sublayer_contributions(Sublayer(np.ones((1, 2, 3)) / 3, np.ones((1, 3, 2)), np.eye(2),
                                        None, np.ones((2, 2))))
    with pytest.raises(ValueError, match=r"v must be \(heads, keys, head_dim\)"):
        sublayer_contributions(Sublayer(np.ones((1, 2, 2)) / 2, np.ones((1, 3, 2)), np.eye(2),
                                        None, np.ones((2, 2))))
