"""Contrastive gradient attributions (issue 41, item 1): "why this token rather than that one",
saliency, input x gradient and integrated gradients of log p(y_t) - log p(f_t) with respect to
the source and target-prefix token vectors (OpenedModel.contributions(..., foil=...)).

Oracles, written here apart from transformer.inference.gradients' batched passes: the gradient
of the difference from one GradientTape over the model's own encode/decode on unbatched vectors,
one output step at a time (saliency and input x gradient re-derived from it in NumPy, integrated
gradients as the midpoint rule over the same path, summed here); the attributed score against
the model's raw logits (log p(y) - log p(f) = z(y) - z(f): the softmax's normaliser cancels);
integrated gradients' completeness against the change in the difference; steps without a foil
equal the plain attribution. On the bundled model, a pre-LN one and the Marian fixture (a
Hugging Face family: scaled embeddings, its own positions).
"""


import numpy as np
import pytest
import tensorflow as tf

SOURCE, TARGET = "5 March 2021", "2021-03-05"
MARIAN_SOURCE = "the old man walks to the station"


CASES = {"bundled": (SOURCE, TARGET), "pre_ln": (SOURCE, TARGET), "marian": (MARIAN_SOURCE, None)}


def _inputs(ckpt, source, target):
    """(source ids, decoder inputs, output ids, source vectors (N, d), target vectors (T, d))."""
    source_ids = ckpt.encode_source(source)
    out = (ckpt.encode_target(target) if target is not None
           else ckpt.translate_plain(source).token_ids)
    target_ids = [ckpt.config.start_id] + out[:-1]
    embed = lambda layer, ids: layer.token_embedding(tf.constant([ids]))[0].numpy()  # noqa: E731
    return (source_ids, target_ids, out, embed(ckpt.model.source_embedding, source_ids),
            embed(ckpt.model.target_embedding, target_ids))


def _runner_up(ckpt, source_ids, target_ids, out) -> list[int]:
    """Each step's most probable token other than its output token (the model's own logits)."""
    logits = ckpt.model((tf.constant([source_ids]), tf.constant([target_ids])))[0].numpy()
    logits[np.arange(len(out)), out] = -np.inf
    return [int(i) for i in logits.argmax(-1)]


def _tape(ckpt, source_ids, target_ids, t, chosen, foil, e_src, e_tgt):
    """(log p(chosen) - log p(foil) at step t, its gradients (N, d), (T, d)) from one tape over
    the model's encode and decode, one sentence."""
    model = ckpt.model
    src = tf.constant(e_src[None], tf.float32)
    tgt = tf.constant(e_tgt[None], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch([src, tgt])
        enc = model.encode(tf.constant([source_ids]), source_vectors=src)
        dec = model.decode(tf.constant([target_ids]), enc["memory"], enc["mask"],
                           target_vectors=tgt)
        log_probs = tf.nn.log_softmax(tf.cast(dec["logits"][0, t], tf.float32))
        score = log_probs[chosen] - (log_probs[foil] if foil is not None else 0.0)
    g_src, g_tgt = tape.gradient(score, [src, tgt])
    return float(score), g_src[0].numpy(), g_tgt[0].numpy()


@pytest.mark.parametrize("which", list(CASES))
def test_saliency_and_input_x_gradient_of_the_difference_equal_one_tapes(which, request):
    ckpt = request.getfixturevalue(which)
    source, target = CASES[which]
    source_ids, target_ids, out, e_src, e_tgt = _inputs(ckpt, source, target)
    foils = _runner_up(ckpt, source_ids, target_ids, out)
    foils[0] = None  # a step without a foil: its plain log-probability
    saliency = ckpt.contributions(source, target, method="saliency", foil=foils,
                                  output_ids=None if target else out)
    ixg = ckpt.contributions(source, target, method="input_x_gradient", foil=foils,
                             output_ids=None if target else out)
    plain = ckpt.contributions(source, target, method="saliency",
                               output_ids=None if target else out)
    assert saliency["foil_ids"] == foils
    assert saliency["foil_tokens"] == [None] + ckpt.target_tokenizer.ids_to_pieces(foils[1:])
    for t in range(len(out)):
        score, g_src, g_tgt = _tape(ckpt, source_ids, target_ids, t, out[t], foils[t], e_src,
                                    e_tgt)
        assert saliency["scores"][t] == pytest.approx(score, abs=2e-5)
        np.testing.assert_allclose(saliency["source"][t], np.linalg.norm(g_src, axis=-1),
                                   rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(saliency["target"][t], np.linalg.norm(g_tgt, axis=-1),
                                   rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(ixg["source"][t], np.linalg.norm(g_src * e_src, axis=-1),
                                   rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(ixg["target"][t], np.linalg.norm(g_tgt * e_tgt, axis=-1),
                                   rtol=1e-4, atol=1e-6)
    # the step without a foil is the plain attribution; the others differ from it
    np.testing.assert_allclose(saliency["source"][0], plain["source"][0], rtol=1e-5, atol=1e-7)
    assert not np.allclose(saliency["source"][1:], plain["source"][1:], rtol=1e-3)
    np.testing.assert_allclose(saliency["log_probs"], plain["log_probs"], atol=1e-6)


@pytest.mark.parametrize("which", ["bundled", "marian"])
def test_the_score_is_the_logit_difference(which, request):
    """log p(y) - log p(f) = z(y) - z(f): the attributed score from the model's raw logits, and
    foil_log_probs = log_probs - scores."""
    ckpt = request.getfixturevalue(which)
    source, target = CASES[which]
    source_ids, target_ids, out, _, _ = _inputs(ckpt, source, target)
    foils = _runner_up(ckpt, source_ids, target_ids, out)
    got = ckpt.contributions(source, target, method="input_x_gradient", foil=foils,
                             output_ids=None if target else out)
    logits = ckpt.model((tf.constant([source_ids]), tf.constant([target_ids])))[0].numpy()
    steps = np.arange(len(out))
    np.testing.assert_allclose(got["scores"], logits[steps, out] - logits[steps, foils],
                               atol=5e-5)
    np.testing.assert_allclose(got["foil_log_probs"], got["log_probs"] - got["scores"],
                               atol=1e-5)
    # the runner-up is less probable than the output token: every difference is positive
    assert (got["scores"] > 0).all()


def test_integrated_gradients_of_the_difference_are_the_paths_mean_gradient(pre_ln):
    """Integrated gradients with 4 steps equal the midpoint rule over the same straight path
    from the pad vectors, each point's gradient from one tape; the rows sum to the change in
    the difference (the completeness gap is measured against it)."""
    source_ids, target_ids, out, e_src, e_tgt = _inputs(pre_ln, SOURCE, TARGET)
    foils = _runner_up(pre_ln, source_ids, target_ids, out)
    steps = 4
    ig = pre_ln.contributions(SOURCE, TARGET, method="integrated_gradients", steps=steps,
                              foil=foils)
    embed = lambda layer: layer.token_embedding(  # noqa: E731
        tf.constant([[pre_ln.config.pad_id]]))[0, 0].numpy()
    b_src = np.broadcast_to(embed(pre_ln.model.source_embedding), e_src.shape)
    b_tgt = np.broadcast_to(embed(pre_ln.model.target_embedding), e_tgt.shape)
    for t in range(len(out)):
        mean_src, mean_tgt = 0.0, 0.0
        for s in range(steps):
            a = (s + 0.5) / steps
            _, g_src, g_tgt = _tape(pre_ln, source_ids, target_ids, t, out[t], foils[t],
                                    b_src + a * (e_src - b_src), b_tgt + a * (e_tgt - b_tgt))
            mean_src, mean_tgt = mean_src + g_src / steps, mean_tgt + g_tgt / steps
        np.testing.assert_allclose(ig["source"][t], (mean_src * (e_src - b_src)).sum(-1),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ig["target"][t], np.tril(
            (mean_tgt * (e_tgt - b_tgt)).sum(-1)[None], t)[0], rtol=1e-4, atol=1e-5)
        baseline, _, _ = _tape(pre_ln, source_ids, target_ids, t, out[t], foils[t], b_src,
                               b_tgt)
        assert ig["baseline_scores"][t] == pytest.approx(baseline, abs=2e-5)
    total = ig["source"].sum(1) + ig["target"].sum(1)
    np.testing.assert_allclose(ig["completeness_gap"],
                               total - (ig["scores"] - ig["baseline_scores"]), atol=1e-5)
    fine = pre_ln.contributions(SOURCE, TARGET, method="integrated_gradients", steps=64,
                                foil=foils)
    change = fine["scores"] - fine["baseline_scores"]
    assert np.abs(fine["completeness_gap"]).max() < 0.02 * max(1.0, np.abs(change).max())


def test_the_contrast_is_found_in_the_batched_passes_of_every_size(pre_ln, monkeypatch):
    """By point and by token, in passes of every size, the contrastive rows agree."""
    from transformer.inference import gradients

    source_ids, target_ids, out, _, _ = _inputs(pre_ln, SOURCE, TARGET)
    foils = _runner_up(pre_ln, source_ids, target_ids, out)
    whole = pre_ln.contributions(SOURCE, TARGET, method="integrated_gradients", steps=5,
                                 foil=foils)
    for per_batch in (1, 3, 2 * len(out)):
        monkeypatch.setattr(gradients, "_batch_rows", lambda model, n, t, k=per_batch: k)
        got = pre_ln.contributions(SOURCE, TARGET, method="integrated_gradients", steps=5,
                                   foil=foils)
        for key in ("source", "target", "scores", "baseline_scores", "log_probs"):
            np.testing.assert_allclose(got[key], whole[key], rtol=1e-5, atol=1e-6)


def test_bad_foils_are_refused(bundled):
    out = bundled.encode_target(TARGET)
    with pytest.raises(ValueError, match=r"one id \(or None\) per output token: \d+, got 2"):
        bundled.contributions(SOURCE, TARGET, method="saliency", foil=[1, 2])
    with pytest.raises(ValueError, match="the foil of step 0 is its output token itself"):
        bundled.contributions(SOURCE, TARGET, method="saliency", foil=[out[0]] + [None] *
                              (len(out) - 1))
    vocab = bundled.config.tgt_vocab_size
    with pytest.raises(ValueError, match=rf"foil of step 1 must be an id .*\(0 to {vocab - 1}\)"):
        bundled.contributions(SOURCE, TARGET, method="saliency",
                              foil=[None, vocab] + [None] * (len(out) - 2))
    with pytest.raises(TypeError):  # a method that takes no foil says so
        bundled.contributions(SOURCE, TARGET, method="alti", foil=[None] * len(out))
