"""ALTI-Logit (issue 41, item 2): OpenedModel.contributions(method="alti_logit").

Oracle written here from the paper's equations (Ferrando et al. 2023, eq. for Delta logit and
ALTI-Logit), in matrix form: every norm's linearisation as its (d, d) matrix
diag(gamma / sigma_i) (I - 11^T / d) (RMSNorm: diag(gamma / rms_i)), sigma_i read from the
norm's own input in the model's eager forward pass (a hook on each norm layer); the direct path
of a sublayer's term the product of those matrices; each term T_i(x_j) = sum_h alpha^h_ij
(x_j W_V^h + b_V^h) W_O^h from the pass's weights and values; the rollout ALTI+'s (checked in
tests/analysis/test_alti.py). On the bundled model (post-LN), a random pre-LN variant, the
Marian fixture and the T5 fixture (RMSNorm, a scaled tied output).
Also: the scores are the model's logits; with a foil, the attributions are the token's minus
the foil's; in a pre-LN model the updates of a layer's sublayer sum to that sublayer's
attention output (less b_O) read out through the final norm."""

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

T5 = Path(__file__).resolve().parents[1] / "fixtures" / "t5"
CASES = {"bundled": ("March 5, 2021", None), "pre_ln": ("March 5, 2021", None),
         "marian": ("she is happy", "the cat sleeps here"),
         "t5": ("the black cat sleeps", "a small cat")}


@pytest.fixture(scope="module")
def t5():
    from transformer import load_checkpoint

    return load_checkpoint(T5)


def _capture_norm_inputs(ckpt, source_ids, target_ids):
    """Each decoder norm layer's input in an eager teacher-forced pass, by a hook on the norm
    layers: {(layer, "self"|"cross"|"ffn") or "final": (T, d) float64}, and the logits."""
    model = ckpt.model
    seen, originals = {}, []

    def hook(obj, key):
        original = obj.call

        def call(x, *args, **kwargs):
            seen[key] = np.asarray(x.numpy(), np.float64)[0]
            return original(x, *args, **kwargs)
        obj.call = call
        originals.append(obj)

    for i, layer in enumerate(model.decoder_layers):
        for key, norm in (("self", layer.self_attention_layer_norm),
                          ("cross", layer.cross_attention_layer_norm),
                          ("ffn", layer.feedforward_layer_norm)):
            hook(norm, (i, key))
    if ckpt.config.norm_first:
        hook(model.decoder_norm, "final")
    try:
        enc = model.encode(tf.constant([source_ids]))
        logits = model.decode(tf.constant([target_ids]), enc["memory"], enc["mask"])["logits"]
    finally:
        for obj in originals:
            del obj.call
    return seen, logits.numpy()[0].astype(np.float64)


def _matrix(norm_layer, z, rms: bool) -> np.ndarray:
    """The norm linearised at each row of z (T, d): (T, d, d), applied as v @ M[i]."""
    d = z.shape[-1]
    if rms:
        gamma = norm_layer.scale.numpy().astype(np.float64)
        inv = 1.0 / np.sqrt((z ** 2).mean(-1) + norm_layer.epsilon)
        return np.einsum("t,de->tde", inv, np.diag(gamma))
    gamma = norm_layer.gamma.numpy().astype(np.float64)
    inv = 1.0 / np.sqrt(z.var(-1) + norm_layer.epsilon)
    centre = np.eye(d) - np.ones((d, d)) / d
    return np.einsum("t,de->tde", inv, centre @ np.diag(gamma))


def _written_out(ckpt, source, target, foil=None):
    """source (T, N) and target (T, T) ALTI-Logit by the equations, in matrix form."""
    from transformer.inference.maps import attention_maps, scored_ids

    model, config = ckpt.model, ckpt.config
    ids = scored_ids(ckpt, source, target)
    source_ids = ckpt.encode_source(source)
    target_ids = [config.start_id] + list(ids[:-1])
    maps = attention_maps(ckpt, [source_ids], [ids], values=True)[0]
    alti = ckpt.contributions(source, target, method="alti", output_ids=ids)
    seen, logits = _capture_norm_inputs(ckpt, source_ids, target_ids)
    rms = config.norm == "rms"
    table = (model.target_token_embedding.embeddings.numpy() if config.tie_output
             else model.output_projection.kernel.numpy().T).astype(np.float64)
    u = table[ids] * config.output_scale
    if foil is not None:
        u = u - np.array([table[f] * config.output_scale if f is not None else np.zeros(
            table.shape[1]) for f in foil])
    layers = len(model.decoder_layers)
    t_len, n = len(ids), len(source_ids)
    eye = np.repeat(np.eye(config.d_model)[None], t_len, axis=0)
    paths = {}  # (layer, kind) -> (T, d, d): the direct path from the sublayer's terms
    if config.norm_first:
        final = _matrix(model.decoder_norm, seen["final"], rms)
        for i in range(layers):
            paths[(i, "self")] = paths[(i, "cross")] = final
    else:
        after = eye  # what follows, composed from the output down
        for i in reversed(range(layers)):
            block = model.decoder_layers[i]
            ffn = _matrix(block.feedforward_layer_norm, seen[(i, "ffn")], rms)
            cross = _matrix(block.cross_attention_layer_norm, seen[(i, "cross")], rms)
            own = _matrix(block.self_attention_layer_norm, seen[(i, "self")], rms)
            after = np.einsum("tab,tbc->tac", ffn, after)
            paths[(i, "cross")] = np.einsum("tab,tbc->tac", cross, after)
            after = paths[(i, "self")] = np.einsum("tab,tbc->tac", own, paths[(i, "cross")])
    source_out, target_out = np.zeros((t_len, n)), np.zeros((t_len, t_len))
    r_enc = np.asarray(alti["encoder_rollout"][-1], np.float64)
    for i in range(layers):
        block = model.decoder_layers[i]
        for kind, attention in (("decoder", block.self_attention),
                                ("cross", block.cross_attention)):
            w_o = attention.output_dense.kernel.numpy().astype(np.float64)  # (H * hd, d)
            heads, hd = config.num_heads, config.head_dim
            alpha = maps[kind][i].astype(np.float64)  # (H, T, k)
            v = maps[f"{kind}_v"][i].astype(np.float64)  # (H, k, hd)
            term = np.zeros((t_len, alpha.shape[-1], config.d_model))
            for h in range(heads):  # T_i(x_j) = sum_h alpha (v W_O^h)
                term += alpha[h][:, :, None] * (v[h] @ w_o[h * hd:(h + 1) * hd])[None]
            path = paths[(i, "self" if kind == "decoder" else "cross")]
            delta = np.einsum("tkd,tde,te->tk", term, path, u)  # u . D_t T_t(x_j)
            if kind == "cross":
                source_out += delta @ r_enc
            else:
                prev = (np.concatenate([np.zeros((t_len, n)), np.eye(t_len)], axis=1) if i == 0
                        else np.asarray(alti["rollout"][i - 1], np.float64))
                source_out += (delta @ prev)[:, :n]
                target_out += np.tril((delta @ prev)[:, n:])
    return source_out, target_out, logits, ids


@pytest.mark.parametrize("which", list(CASES))
def test_equals_the_papers_equations_written_out(which, request):
    ckpt = request.getfixturevalue(which)
    source, target = CASES[which]
    got = ckpt.contributions(source, target, method="alti_logit")
    expected_source, expected_target, logits, ids = _written_out(ckpt, source, target)
    scale = max(1.0, np.abs(expected_source).max(), np.abs(expected_target).max())
    np.testing.assert_allclose(got["source"], expected_source, atol=2e-4 * scale)
    np.testing.assert_allclose(got["target"], expected_target, atol=2e-4 * scale)
    # the scores are the model's own logits of the tokens
    np.testing.assert_allclose(got["scores"], logits[np.arange(len(ids)), ids], atol=1e-3)
    # the layers' parts sum to the whole
    np.testing.assert_allclose(got["layer_source"].sum(0), got["source"], atol=1e-4 * scale)


@pytest.mark.parametrize("which", ["bundled", "t5"])
def test_a_foil_attributes_the_logit_difference(which, request):
    ckpt = request.getfixturevalue(which)
    source, target = CASES[which]
    plain = ckpt.contributions(source, target, method="alti_logit")
    steps = len(plain["output_tokens"])
    ids = ckpt.contributions(source, target, method="alti")["output_tokens"]
    out = ckpt.encode_target(target) if target else ckpt.translate(source).token_ids
    foil = [next(i for i in range(3, ckpt.config.tgt_vocab_size) if i != out[t])
            if t % 2 == 0 else None for t in range(steps)]
    got = ckpt.contributions(source, target, method="alti_logit", foil=foil)
    expected_source, expected_target, logits, _ = _written_out(ckpt, source, target, foil)
    scale = max(1.0, np.abs(expected_source).max())
    np.testing.assert_allclose(got["source"], expected_source, atol=2e-4 * scale)
    np.testing.assert_allclose(got["target"], expected_target, atol=2e-4 * scale)
    assert got["foil_tokens"][1] is None and got["foil_ids"][0] == foil[0]
    has = np.array([f is not None for f in foil])
    expected_scores = logits[np.arange(steps), out] - np.where(
        has, logits[np.arange(steps), [f or 0 for f in foil]], 0.0)
    np.testing.assert_allclose(got["scores"], expected_scores, atol=1e-3)
    # steps without a foil are the plain attributions
    np.testing.assert_allclose(got["source"][~has], plain["source"][~has], atol=1e-5)
    assert len(ids) == steps


def test_a_pre_ln_layers_updates_sum_to_its_attention_output_read_out(t5):
    """In a pre-LN stack the residual adds each sublayer's output as it is: a layer's cross
    updates over every key sum to u . D(attention output - b_O), the output captured from the
    model by a hook on the cross-attention layer (T5 has no b_O)."""
    source, target = CASES["t5"]
    got = t5.contributions(source, target, method="alti_logit")
    model = t5.model
    ids = t5.encode_target(target)
    captured, originals = {}, []
    for i, block in enumerate(model.decoder_layers):
        original = block.cross_attention.call

        def call(*args, original=original, i=i, **kwargs):
            result = original(*args, **kwargs)
            captured[i] = result["output"].numpy()[0].astype(np.float64)
            return result
        block.cross_attention.call = call
        originals.append(block.cross_attention)
    try:
        seen, _ = _capture_norm_inputs(t5, t5.encode_source(source),
                                       [t5.config.start_id] + ids[:-1])
    finally:
        for obj in originals:
            del obj.call
    final = _matrix(model.decoder_norm, seen["final"], rms=True)
    u = model.target_token_embedding.embeddings.numpy().astype(np.float64)[ids] * \
        t5.config.output_scale
    for i in range(len(model.decoder_layers)):
        expected = np.einsum("td,tde,te->t", captured[i], final, u)
        np.testing.assert_allclose(got["cross_updates"][i].sum(1), expected, atol=1e-3)


def test_bad_foils_are_refused_with_a_sentence(bundled):
    with pytest.raises(ValueError, match="one id"):
        bundled.contributions("March 5, 2021", method="alti_logit", foil=[1])
