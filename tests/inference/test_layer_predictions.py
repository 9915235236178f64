"""The logit lens (issue 27, items 5 and 7): OpenedModel.layer_predictions reads every decoder
layer's output through the final norm and the output projection. Its last layer is the model's
own output: the probabilities of OpenedModel.attention's "log_probs", rank 0 everywhere on the
model's greedy translation. Every layer against a NumPy re-implementation from the Keras
weights (the norm's gamma and beta or T5's scale, the projection's kernel or the tied
embedding, its bias, T5's output_scale) on tiny random models, post- and pre-LN (never
normalised twice), on the bundled model and the T5 fixture; ranks 0 exactly where the chosen
token is the argmax; the top-k sorted with ties to the lower id; k cut to the vocabulary."""

import functools
from pathlib import Path

import numpy as np
import pytest

from testkit.variants import random_variant
from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.importers import load_checkpoint as load_any
from transformer.inference.forward import forward
from transformer.inference.logit_lens import top_k_ids

SOURCE, TARGET = "Friday, March 5, 2021", "2021-03-05"
T5 = Path(__file__).resolve().parents[1] / "fixtures" / "t5"


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def t5():
    return load_any(str(T5))


variant = functools.partial(random_variant, num_decoder_layers=3)


def numpy_lens(ckpt, result) -> np.ndarray:
    """Every decoder layer's probabilities (L, T, V) from the Keras weights, in NumPy, on the
    hidden states of the compiled pass the pages use (transformer.inference.forward: its
    float32 rounding, not the eager pass's, whose differ by a few units in the last place and
    which this test is not about); layers 1 .. L-1 through decoder_norm when pre-LN (post-LN:
    as they are); the last layer is the model's own output, the same pass's log-softmax over
    the whole vocabulary, which the NumPy projection of its hidden state matches to 1e-4."""
    model, c = ckpt.model, ckpt.config
    out = forward(model, result["source_ids"][None], result["target_ids"][None],
                  result["output_ids"][None], hidden_states=True, top_k=c.tgt_vocab_size)
    hidden = np.asarray(out["decoder_hidden_states"], np.float64)[1:, 0]  # (L, T, d_model)
    if c.norm_first:
        norm = model.decoder_norm
        x = hidden[:-1]
        if c.norm == "rms":
            x = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + c.layer_norm_epsilon) \
                * np.asarray(norm.scale, np.float64)
        else:
            x = ((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True)
                                                           + c.layer_norm_epsilon)
                 * np.asarray(norm.gamma, np.float64) + np.asarray(norm.beta, np.float64))
        hidden = np.concatenate([x, hidden[-1:]])
    if c.tie_output:
        kernel = np.asarray(model.target_token_embedding.embeddings, np.float64).T
        bias = np.asarray(model.output_bias, np.float64) if c.output_bias else 0.0
    else:
        kernel = np.asarray(model.output_projection.kernel, np.float64)
        bias = (np.asarray(model.output_projection.bias, np.float64) if c.output_bias
                else 0.0)
    logits = (hidden * c.output_scale) @ kernel + bias  # (L, T, V)
    own = np.empty(logits.shape[1:])  # (T, V): the pass's log-probabilities, id by id
    np.put_along_axis(own, out["top_ids"][0], out["top_log_probs"][0], axis=-1)
    shifted = logits[-1] - logits[-1].max(-1, keepdims=True)
    np.testing.assert_allclose(shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)), own,
                               rtol=1e-4, atol=1e-4)
    logits[-1] = own  # the model's own (a log-softmax: the softmax below gives it back)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return probs / probs.sum(-1, keepdims=True)


def assert_lens(ckpt, result, k):
    probs = numpy_lens(ckpt, result)  # (L, T, V)
    layers, steps = probs.shape[:2]
    chosen = result["output_ids"]
    np.testing.assert_allclose(result["chosen_probs"],
                               probs[:, np.arange(steps), chosen], rtol=1e-5, atol=1e-7)
    expected_rank = (probs > probs[:, np.arange(steps), chosen][..., None]).sum(-1)
    np.testing.assert_array_equal(result["chosen_rank"], expected_rank)
    top = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    np.testing.assert_array_equal(result["top_ids"], top)
    np.testing.assert_allclose(result["top_probs"], np.take_along_axis(probs, top, -1),
                               rtol=1e-5, atol=1e-7)
    assert result["chosen_rank"].shape == (layers, steps)
    assert result["chosen_rank"].dtype == np.int32


def assert_last_layer_is_the_model(ckpt, result, maps):
    """The last layer's row is the model's output: its probabilities are exp(log_probs) of
    OpenedModel.attention (float32 there), top-1 ranks 0, the rest not."""
    np.testing.assert_allclose(np.log(result["chosen_probs"][-1]), maps["log_probs"],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(result["output_ids"], maps["output_ids"])
    assert result["source_tokens"] == maps["source_tokens"]
    assert result["output_tokens"] == maps["output_tokens"]
    top1 = result["top_ids"][..., 0] == result["output_ids"][None]
    np.testing.assert_array_equal(result["chosen_rank"] == 0, top1)


def test_bundled_translation_ranks_zero_at_the_last_layer(bundled):
    result = bundled.layer_predictions(SOURCE)
    maps = bundled.attention(SOURCE)
    assert (result["chosen_rank"][-1] == 0).all()  # greedy: the argmax at every step
    assert_last_layer_is_the_model(bundled, result, maps)
    assert_lens(bundled, result, 5)
    layers, steps = bundled.config.num_decoder_layers, len(maps["output_ids"])
    assert len(result["layers"]) == layers and all(len(row) == steps for row in result["layers"])
    for i in range(layers):
        for t in range(steps):
            pairs = result["layers"][i][t]
            assert [p for _, p in pairs] == result["top_probs"][i, t].tolist()
            assert [token for token, _ in pairs] == bundled.target_tokenizer.ids_to_pieces(
                result["top_ids"][i, t].tolist())
    # the earlier layer does not know the answer yet at every step
    assert (result["chosen_rank"][0] > 0).any()


def test_typed_target_is_the_chosen_token(bundled):
    wrong = "1999-12-31"
    result = bundled.layer_predictions(SOURCE, wrong, k=3)
    maps = bundled.attention(SOURCE, wrong)
    np.testing.assert_array_equal(result["output_ids"], bundled.encode_target(wrong))
    assert (result["chosen_rank"][-1] > 0).any()  # the model would not write 1999-12-31
    assert result["top_ids"].shape == (2, len(result["output_ids"]), 3)
    assert_last_layer_is_the_model(bundled, result, maps)
    assert_lens(bundled, result, 3)


VARIANTS = {
    "post-LN": {},
    "pre-LN": dict(norm_first=True),
    "T5-like": dict(norm_first=True, norm="rms", use_bias=False, attention_scale=False,
                    tie_output=True, share_embeddings=False, output_bias=False,
                    output_scale=0.25),
    "tied with a logits bias": dict(tie_output=True, output_bias=True),
}


@pytest.mark.parametrize("name", VARIANTS)
def test_tiny_models_equal_numpy(bundled, name):
    ckpt = variant(bundled, **VARIANTS[name])
    result = ckpt.layer_predictions(SOURCE, TARGET, k=4)
    assert_last_layer_is_the_model(ckpt, result, ckpt.attention(SOURCE, TARGET))
    assert_lens(ckpt, result, 4)


def test_t5_fixture(t5):
    assert t5.config.norm_first and t5.config.output_scale != 1.0
    source = "The house is wonderful."
    result = t5.layer_predictions(source, k=5)
    assert (result["chosen_rank"][-1] == 0).all()
    assert_last_layer_is_the_model(t5, result, t5.attention(source))
    assert_lens(t5, result, 5)


def test_output_ids_head_mask_and_k(bundled):
    ids = bundled.translate_plain(SOURCE).token_ids
    given = bundled.layer_predictions(SOURCE, output_ids=ids, k=2)
    np.testing.assert_array_equal(given["output_ids"], ids)
    vocabulary = bundled.config.tgt_vocab_size
    everything = bundled.layer_predictions(SOURCE, TARGET, k=vocabulary + 10)
    assert everything["top_ids"].shape[-1] == vocabulary  # cut to the vocabulary
    np.testing.assert_allclose(everything["top_probs"].sum(-1), 1.0, rtol=1e-6)
    mask = {"cross": np.zeros((2, bundled.config.num_heads), np.float32)}
    silenced = bundled.layer_predictions(SOURCE, TARGET, head_mask=mask)
    maps = bundled.attention(SOURCE, TARGET, head_mask=mask)
    np.testing.assert_allclose(np.log(silenced["chosen_probs"][-1]), maps["log_probs"],
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="k must be at least 1"):
        bundled.layer_predictions(SOURCE, TARGET, k=0)


def test_top_k_ties_keep_the_lower_id():
    log_probs = np.log(np.array([[0.1, 0.3, 0.1, 0.3, 0.2], [0.2, 0.2, 0.2, 0.2, 0.2]]))
    np.testing.assert_array_equal(top_k_ids(log_probs, 3), [[1, 3, 4], [0, 1, 2]])
    np.testing.assert_array_equal(top_k_ids(log_probs, 9), [[1, 3, 4, 0, 2], [0, 1, 2, 3, 4]])
