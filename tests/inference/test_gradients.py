"""Gradient attributions (issue 27, item 3): saliency, input x gradient and integrated
gradients of each output token's log-probability with respect to the source and target-prefix
token vectors.

Oracles: the gradient against central finite differences of the model's own log-probability
(float64 arithmetic on the float32 model: a directional derivative along random directions,
and per token along the gradient's own direction), saliency and input x gradient re-derived
from that gradient in NumPy; integrated gradients' completeness (a row's attributions sum to
log p(x) - log p(baseline) within the midpoint rule's error, which shrinks with the steps);
the look-ahead structure (no target column after t), on the bundled model and a pre-LN one.
"""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer import DEFAULT_CHECKPOINT, OpenedModel, load_checkpoint
from transformer.inference import gradients
from transformer.inference.gradients import _log_probs_and_grads, gradient_attributions
from transformer.model.transformer import Transformer

SOURCE, TARGET = "5 March 2021", "2021-03-05"


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def pre_ln(bundled):
    """A random pre-LN model with learned positions and an embedding norm, the bundled
    tokenizers."""
    config = dataclasses.replace(bundled.config, d_model=16, num_heads=2, dff=24, head_dim=None,
                                 num_encoder_layers=2, num_decoder_layers=2, norm_first=True,
                                 positional="learned", embedding_norm=True)
    keras.utils.set_random_seed(3)
    model = Transformer(config).build_weights()
    return OpenedModel(config, model, bundled.source_tokenizer, bundled.target_tokenizer)


def _setup(ckpt, target=TARGET):
    source_ids = ckpt.encode_source(SOURCE)
    out = ckpt.encode_target(target)
    target_ids = [ckpt.config.start_id] + out[:-1]
    embed = lambda layer, ids: layer.token_embedding(tf.constant([ids]))[0].numpy()  # noqa: E731
    return (source_ids, target_ids, out, embed(ckpt.model.source_embedding, source_ids),
            embed(ckpt.model.target_embedding, target_ids))


def _score(ckpt, setup, t, e_src, e_tgt) -> float:
    source_ids, target_ids, out = setup[:3]
    s, _, _ = _log_probs_and_grads(ckpt.model, source_ids, target_ids, out, [t],
                                   e_src[None].astype(np.float32),
                                   e_tgt[None].astype(np.float32))
    return float(s[0])


@pytest.mark.parametrize("which", ["bundled", "pre_ln"])
def test_the_gradient_is_the_finite_difference_of_the_log_probability(which, request):
    ckpt = request.getfixturevalue(which)
    setup = _setup(ckpt)
    source_ids, target_ids, out, e_src, e_tgt = setup
    rng = np.random.default_rng(0)
    for t in (0, len(out) // 2, len(out) - 1):
        _, g_src, g_tgt = _log_probs_and_grads(ckpt.model, source_ids, target_ids, out, [t],
                                               e_src[None], e_tgt[None])
        # a direction on the scale of the embeddings: the gradient's own (a derivative well
        # above float32's noise, which a random direction's is not on a confident model)
        # plus a random part (the other components count too)
        size = np.sqrt(np.sum(e_src ** 2) + np.sum(e_tgt[: t + 1] ** 2))
        norm = np.sqrt(np.sum(g_src ** 2) + np.sum(g_tgt ** 2))
        u_src = g_src[0] / norm * size + 0.3 * rng.normal(size=e_src.shape) * e_src.std()
        u_tgt = g_tgt[0] / norm * size + 0.3 * rng.normal(size=e_tgt.shape) * e_tgt.std()
        u_tgt[t + 1:] = 0.0  # later decoder inputs cannot matter

        def central(eps):
            plus = _score(ckpt, setup, t, e_src + eps * u_src, e_tgt + eps * u_tgt)
            minus = _score(ckpt, setup, t, e_src - eps * u_src, e_tgt - eps * u_tgt)
            return (plus - minus) / (2 * eps)

        numeric = (4 * central(1e-3) - central(2e-3)) / 3  # Richardson: O(eps^4)
        analytic = float(np.sum(g_src[0] * u_src) + np.sum(g_tgt[0] * u_tgt))
        assert analytic == pytest.approx(numeric, rel=1e-2, abs=1e-3), (t, analytic, numeric)
        # no gradient reaches a decoder input after t (the look-ahead mask)
        assert np.all(g_tgt[0, t + 1:] == 0.0)


def test_saliency_and_input_x_gradient_are_the_gradients_norms(bundled):
    setup = _setup(bundled)
    source_ids, target_ids, out, e_src, e_tgt = setup
    saliency = bundled.contributions(SOURCE, TARGET, method="saliency")
    ixg = bundled.contributions(SOURCE, TARGET, method="input_x_gradient")
    t_len, n = len(out), len(source_ids)
    assert saliency["source"].shape == (t_len, n) and saliency["target"].shape == (t_len, t_len)
    assert saliency["source_tokens"] == bundled.source_tokenizer.ids_to_pieces(source_ids)
    assert saliency["output_tokens"] == bundled.target_tokenizer.ids_to_pieces(out)
    for t in range(t_len):  # one row at a time, unbatched
        s, g_src, g_tgt = _log_probs_and_grads(bundled.model, source_ids, target_ids, out, [t],
                                               e_src[None], e_tgt[None])
        np.testing.assert_allclose(saliency["source"][t], np.linalg.norm(g_src[0], axis=-1),
                                   rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(saliency["target"][t], np.linalg.norm(g_tgt[0], axis=-1),
                                   rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(ixg["source"][t], np.linalg.norm(g_src[0] * e_src, axis=-1),
                                   rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(ixg["target"][t], np.linalg.norm(g_tgt[0] * e_tgt, axis=-1),
                                   rtol=1e-4, atol=1e-7)
        assert saliency["log_probs"][t] == pytest.approx(float(s[0]), abs=1e-5)
    # the teacher-forced log-probabilities are the model's own
    maps = bundled.attention(SOURCE, TARGET)
    np.testing.assert_allclose(saliency["log_probs"], maps["log_probs"], atol=1e-5)
    assert np.all(np.triu(saliency["target"], 1) == 0) and np.all(saliency["source"] >= 0)


def test_integrated_gradients_are_complete_and_converge(pre_ln):
    gaps = {}
    for steps in (4, 32):
        ig = pre_ln.contributions(SOURCE, TARGET, method="integrated_gradients", steps=steps)
        total = ig["source"].sum(1) + ig["target"].sum(1)
        change = ig["log_probs"] - ig["baseline_log_probs"]
        np.testing.assert_allclose(ig["completeness_gap"], total - change, atol=1e-5)
        gaps[steps] = float(np.abs(ig["completeness_gap"]).max())
        assert np.abs(change).max() > 0.05  # the baseline changes the output: a real test
    assert gaps[32] < 0.02 * max(1.0, float(np.abs(change).max()))
    assert gaps[32] < gaps[4]
    # the baseline's log-probability is the model's on the pad vectors
    setup = _setup(pre_ln)
    pad_src = pre_ln.model.source_embedding.token_embedding(
        tf.constant([[pre_ln.config.pad_id]]))[0, 0].numpy()
    pad_tgt = pre_ln.model.target_embedding.token_embedding(
        tf.constant([[pre_ln.config.pad_id]]))[0, 0].numpy()
    t = 1
    baseline = _score(pre_ln, setup, t, np.broadcast_to(pad_src, setup[3].shape),
                      np.broadcast_to(pad_tgt, setup[4].shape))
    assert ig["baseline_log_probs"][t] == pytest.approx(baseline, abs=1e-5)


@pytest.mark.parametrize("method", ["saliency", "integrated_gradients"])
def test_both_batchings_in_passes_of_every_size_agree(pre_ln, method, monkeypatch):
    """The rows batched by point (every output token of a point in one pass, its backward
    vectorized) and by output token (the decoder cut after the token's step), in passes of
    every size down to one row, give the same result; the progress bar counts every row once."""
    whole = pre_ln.contributions(SOURCE, TARGET, method=method, steps=7)
    t_len = len(whole["output_tokens"])
    rows = t_len * (9 if method == "integrated_gradients" else 1)
    results = []
    for per_batch in (1, 4, 2 * t_len):  # by token, one row and 4; by point, 2 points a pass
        calls = []
        monkeypatch.setattr(gradients, "_batch_rows", lambda model, n, t, k=per_batch: k)
        results.append(pre_ln.contributions(SOURCE, TARGET, method=method, steps=7,
                                            on_progress=lambda d, total: calls.append((d, total))))
        assert calls[-1] == (rows, rows) and [d for d, _ in calls] == sorted({d for d, _ in calls})
        if per_batch == 1:
            assert len(calls) == rows
    for got in results:
        for key in ("source", "target", "log_probs"):
            np.testing.assert_allclose(got[key], whole[key], rtol=1e-5, atol=1e-6)


def test_the_translation_is_attributed_when_no_target_is_typed(bundled):
    result = bundled.translate(SOURCE)
    got = bundled.contributions(SOURCE, method="saliency")
    assert got["output_tokens"] == result.tokens
    np.testing.assert_allclose(got["log_probs"], [s.log_prob for s in result.steps], atol=1e-4)


def test_bad_options_are_refused(bundled):
    with pytest.raises(ValueError, match="steps must be 1 to 256"):
        bundled.contributions(SOURCE, TARGET, method="integrated_gradients", steps=0)
    with pytest.raises(ValueError, match="method must be one of"):
        gradient_attributions(bundled, SOURCE, [1, 2], method="gradcam")


def test_by_default_the_steps_double_until_every_row_is_complete(bundled):
    """Issue 38: no steps given, integrated gradients try AUTO_STEPS in turn and stop at the
    first whose every row sums to its change within COMPLETE_WITHIN (+ COMPLETE_NATS); the
    answer is the one of that many steps, and the progress runs once, to its end."""
    from transformer.inference.gradients import AUTO_STEPS, is_complete

    calls = []
    auto = bundled.contributions(SOURCE, TARGET, "integrated_gradients",
                                 on_progress=lambda done, total: calls.append((done, total)))
    tried = auto["steps_tried"]
    assert tried == list(AUTO_STEPS[:len(tried)]) and auto["steps"] == tried[-1]
    assert auto["complete"] == is_complete(auto)
    assert auto["complete"] or tried == list(AUTO_STEPS)
    for steps in tried[:-1]:  # the rounds before were not complete
        assert not is_complete(bundled.contributions(SOURCE, TARGET, "integrated_gradients",
                                                     steps=steps))
    fixed = bundled.contributions(SOURCE, TARGET, "integrated_gradients", steps=tried[-1])
    assert "steps_tried" not in fixed
    np.testing.assert_allclose(auto["source"], fixed["source"], atol=1e-6)
    done = [d for d, _ in calls]
    assert done == sorted(done) and all(total == calls[0][1] for _, total in calls)
