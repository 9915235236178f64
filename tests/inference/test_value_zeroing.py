"""Value zeroing (issue 41, item 3): OpenedModel.contributions(method="value_zeroing").

Oracle, written here apart from transformer.inference.value_zeroing's batched layer runs: the
whole model re-run eagerly with a hook on one attention layer (its project_key_value wrapped so
that key j's value vectors come out zero in every head), that layer's output read from the
pass's hidden states (the layers before it untouched, so its input is the clean one), and the
cosine distance to the clean pass's written out in NumPy; on the bundled model, a pre-LN one
(whose last layer is read after the stack's closing norm, as the hidden states hold it), a
T5-style one (relative position bias, RMS norm, gated FFN) and the Marian fixture. The
normalised rows against inseq are in test_inseq.py.
"""


import numpy as np
import pytest
import tensorflow as tf

from testkit.variants import random_variant

SOURCE, TARGET = "5 March 2021", "2021-03-05"


@pytest.fixture(scope="module")
def t5_like(bundled):
    return random_variant(bundled, seed=8, norm_first=True, positional="none",
                          relative_attention=True, norm="rms", feedforward="gated",
                          use_bias=False, attention_scale=False)


CASES = {"bundled": (SOURCE, TARGET), "pre_ln": (SOURCE, TARGET), "t5_like": (SOURCE, TARGET),
         "marian": ("the old man walks to the station", "le vieil homme marche")}


def _hidden(ckpt, source_ids, target_ids):
    """The clean pass's hidden states: encoder (L_enc + 1, N, d), decoder (L_dec + 1, T, d)."""
    model = ckpt.model
    enc = model.encode(tf.constant([source_ids]), return_hidden_states=True)
    dec = model.decode(tf.constant([target_ids]), enc["memory"], enc["mask"],
                       return_hidden_states=True)
    return enc["hidden_states"][:, 0].numpy(), dec["hidden_states"][:, 0].numpy()


def _zeroed_pass(ckpt, attention, j, source_ids, target_ids):
    """The hidden states with `attention`'s key j's values zeroed (a hook on that one layer)."""
    original = attention.project_key_value

    def hooked(value):
        k, v = original(value)  # (B, H, S, head_dim)
        keep = tf.one_hot(j, tf.shape(v)[2], on_value=0.0, off_value=1.0)
        return k, v * keep[None, None, :, None]

    attention.project_key_value = hooked
    try:
        return _hidden(ckpt, source_ids, target_ids)
    finally:
        del attention.project_key_value  # the class's method again


def _distance(clean, zeroed) -> np.ndarray:
    clean, zeroed = clean.astype(np.float64), zeroed.astype(np.float64)
    cos = (clean * zeroed).sum(-1) / (np.linalg.norm(clean, axis=-1)
                                      * np.linalg.norm(zeroed, axis=-1))
    return 1.0 - cos


@pytest.mark.parametrize("which", list(CASES))
def test_every_layer_and_kind_equals_the_model_rerun_with_a_hook(which, request):
    ckpt = request.getfixturevalue(which)
    source, target = CASES[which]
    got = ckpt.contributions(source, target, method="value_zeroing")
    source_ids = ckpt.encode_source(source)
    out = ckpt.encode_target(target)
    target_ids = [ckpt.config.start_id] + out[:-1]
    n, t_len = len(source_ids), len(target_ids)
    assert got["encoder"].shape == (ckpt.config.num_encoder_layers, n, n)
    assert got["decoder"].shape == (ckpt.config.num_decoder_layers, t_len, t_len)
    assert got["cross"].shape == (ckpt.config.num_decoder_layers, t_len, n)
    assert got["output_tokens"] == ckpt.target_tokenizer.ids_to_pieces(out)
    clean_enc, clean_dec = _hidden(ckpt, source_ids, target_ids)
    model = ckpt.model
    for kind, layers, keys in (
            ("encoder", [la.self_attention for la in model.encoder_layers], n),
            ("decoder", [la.self_attention for la in model.decoder_layers], t_len),
            ("cross", [la.cross_attention for la in model.decoder_layers], n)):
        for i, attention in enumerate(layers):
            for j in sorted({0, keys // 2, keys - 1}):
                enc, dec = _zeroed_pass(ckpt, attention, j, source_ids, target_ids)
                expected = (_distance(clean_enc[i + 1], enc[i + 1]) if kind == "encoder"
                            else _distance(clean_dec[i + 1], dec[i + 1]))
                np.testing.assert_allclose(got[kind][i, :, j], expected, rtol=1e-3, atol=3e-6,
                                           err_msg=f"{which}: {kind} layer {i}, key {j}")
    assert got["cross"].max() > 1e-3 and got["encoder"].max() > 1e-3  # the hook moved things
    # a later token's values never reach an earlier one; the rows of the normalised maps are
    # distributions
    assert (np.triu(got["decoder"], 1) == 0).all()
    sums = got["cross_normalized"].sum(-1)
    assert np.allclose(sums[sums > 0], 1.0, atol=1e-5)


def test_silenced_heads_are_refused_and_the_record_says_what_it_is(bundled):
    from transformer.inference.contributions import METHODS
    from transformer.inference.outputs import ContextMixing

    record = METHODS["value_zeroing"]
    assert record.output is ContextMixing and not record.contributions_page
    got = bundled.contributions(SOURCE, TARGET, method="value_zeroing")
    assert isinstance(got, ContextMixing) and got.cross is got["cross"]
    with pytest.raises(ValueError, match="silenced heads"):
        bundled.contributions(SOURCE, TARGET, method="value_zeroing",
                              head_mask={"cross": np.zeros((2, 4), np.float32)})
