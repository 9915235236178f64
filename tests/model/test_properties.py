"""Property tests (hypothesis) on random tiny models and inputs."""

import functools

import keras
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer import (
    Transformer,
    TransformerConfig,
    decoder_mask,
    greedy_decode,
    look_ahead_mask,
    padding_mask,
)
from transformer.tokenizers.bpemb import BPEmbTokenizer
from transformer.training.data import date_pairs

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
VOCAB = 17
# Four tiny architectures; hypothesis picks one per example and draws the inputs.
CONFIGS = [
    dict(norm_first=False, positional="sinusoidal", tie_output=False, share_embeddings=False),
    dict(norm_first=True, positional="learned", tie_output=False, share_embeddings=False),
    dict(norm_first=False, positional="learned", tie_output=True, share_embeddings=True),
    dict(norm_first=True, positional="sinusoidal", tie_output=True, share_embeddings=False),
]


@functools.lru_cache(maxsize=None)
def tiny_model(index: int) -> Transformer:
    keras.utils.set_random_seed(index)
    config = TransformerConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=8,
                               num_heads=2, dff=16, num_encoder_layers=2, num_decoder_layers=2,
                               max_len=12, **CONFIGS[index])
    return Transformer(config).build_weights()


def padded_batches(max_batch=3, max_len=8, pad_id=0):
    """A (B, L) int batch: real ids in 1..VOCAB-1, each row padded at its end."""
    def build(lengths_and_ids):
        lengths, width, rows = lengths_and_ids
        ids = np.full((len(lengths), width), pad_id, np.int32)
        for b, (n, row) in enumerate(zip(lengths, rows)):
            ids[b, :n] = row[:n]
        return ids
    return st.integers(1, max_len).flatmap(lambda width: st.tuples(
        st.lists(st.integers(1, width), min_size=1, max_size=max_batch),
        st.just(width),
        st.lists(st.lists(st.integers(1, VOCAB - 1), min_size=width, max_size=width),
                 min_size=max_batch, max_size=max_batch)).map(build))


@SETTINGS
@given(ids=padded_batches(), pad_id=st.sampled_from([0]))
def test_masks_match_their_definitions(ids, pad_id):
    pad = np.asarray(padding_mask(ids, pad_id))
    assert pad.shape == (ids.shape[0], 1, 1, ids.shape[1])
    np.testing.assert_array_equal(pad[:, 0, 0], (ids != pad_id).astype(np.float32))
    causal = np.asarray(look_ahead_mask(ids.shape[1]))
    np.testing.assert_array_equal(causal, np.tril(np.ones((ids.shape[1],) * 2)))
    dec = np.asarray(decoder_mask(ids, pad_id))
    np.testing.assert_array_equal(dec[:, 0], pad[:, 0, 0][:, None, :] * causal[None])


@SETTINGS
@given(model_index=st.integers(0, len(CONFIGS) - 1), src=padded_batches(),
       tgt=padded_batches())
def test_attention_rows_sum_to_one_with_zeros_where_blocked(model_index, src, tgt):
    model = tiny_model(model_index)
    batch = min(len(src), len(tgt))
    src, tgt = src[:batch], tgt[:batch]
    out = model((src, tgt), return_attention=True)
    for kind, _queries, keys, causal in (("encoder_attention", src, src, False),
                                        ("decoder_attention", tgt, tgt, True),
                                        ("cross_attention", tgt, src, False)):
        weights = np.asarray(out[kind])  # (L, B, H, q, k)
        assert np.isfinite(weights).all()
        allowed = (keys != 0)[None, :, None, None, :]  # padded keys are blocked
        if causal:
            allowed = allowed & np.tril(np.ones((keys.shape[1],) * 2, bool))[None, None, None]
        assert (weights[~np.broadcast_to(allowed, weights.shape)] == 0).all(), kind
        sums = weights.sum(-1)
        has_key = np.broadcast_to(allowed.any(-1), sums.shape)
        np.testing.assert_allclose(sums[has_key], 1.0, atol=1e-5)


@SETTINGS
@given(model_index=st.integers(0, len(CONFIGS) - 1),
       source=st.lists(st.integers(3, VOCAB - 1), min_size=1, max_size=8),
       max_len=st.integers(1, 10), stop=st.booleans())
def test_cached_decoding_equals_naive_decoding(model_index, source, max_len, stop):
    model = tiny_model(model_index)
    cached = greedy_decode(model, source, max_len=max_len, stop_at_end=stop)
    naive = greedy_decode(model, source, max_len=max_len, stop_at_end=stop, use_cache=False)
    assert cached.token_ids == naive.token_ids
    for a, b in zip(cached.steps, naive.steps):
        np.testing.assert_allclose(a.cross, b.cross, atol=1e-5)
        np.testing.assert_allclose(a.self, b.self, atol=1e-5)


CORPUS = [s for s, _ in date_pairs(400, seed=3)] + ["über café naïve"]
ALPHABET = "".join(sorted(set("".join(CORPUS).lower()) - {" "}))  # every character is in the corpus


@pytest.fixture(scope="module")
def tokenizer():
    return BPEmbTokenizer.train(CORPUS, 120, lowercase=True)


@SETTINGS
@given(words=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=8), max_size=6))
def test_tokenizer_round_trip(tokenizer, words):
    text = " ".join(words)
    ids = tokenizer.encode(text)
    assert tokenizer.unk_id not in ids
    assert tokenizer.decode(ids) == tokenizer.preprocess(text)
    assert tokenizer.ids_to_pieces(ids) == tokenizer.pieces(text)
