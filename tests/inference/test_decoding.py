"""Greedy decoding, batched decoding and beam search (transformer/inference/search_ours.py).

Every decoded step's attention is checked against one teacher-forced forward pass of the model;
the cached path against the naive reference; batches against one-by-one decoding.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest

from transformer import (
    DEFAULT_CHECKPOINT,
    BeamDecoding,
    CheckpointError,
    Decoding,
    Transformer,
    TransformerConfig,
    beam_search,
    greedy_decode,
    greedy_decode_batch,
    load_checkpoint,
)
from transformer.inference import compiled, search_ours
from transformer.inference.search_ours import length_normalised

ATOL = 1e-5
MAX_LEN = 8  # the tiny models' config.max_len, and what they decode to
# Tiny decodes keep to a few input shapes ((3, 6) batches, (1, 6) sources) so the compiled step
# function is traced as few times as possible: the suite has to stay fast on a busy CPU.
BATCH_LENGTHS = [6, 3, 5]


# ============================================================================= helpers
def tiny_config(**overrides):
    share = overrides.get("share_embeddings", False)
    base = dict(src_vocab_size=11, tgt_vocab_size=11 if share else 13, d_model=16, num_heads=4,
                dff=32, num_encoder_layers=2, num_decoder_layers=2, max_len=MAX_LEN,
                dropout_rate=0.1)
    base.update(overrides)
    return TransformerConfig(**base)


def build(config, seed=0, end_bias=0.0):
    """A built model whose every weight is random (zero biases keep the argmax varied); end_bias
    on the output projection's end id makes the end token come up now and then."""
    keras.utils.set_random_seed(seed)
    model = Transformer(config).build_weights()
    rng = np.random.default_rng(seed)
    for w in model.weights:
        name = w.path.rsplit("/", 1)[-1]
        if name in ("gamma", "scale"):
            value = 1.0 + rng.normal(0, 0.2, w.shape)
        elif name in ("beta", "bias"):
            value = np.zeros(w.shape)
        elif name == "embeddings":
            value = rng.normal(0, 1.0, w.shape)
        else:
            value = rng.normal(0, 0.2, w.shape)
        w.assign(value.astype(np.float32))
    if end_bias:
        bias = model.output_projection.bias.numpy()
        bias[config.end_id] = end_bias
        model.output_projection.bias.assign(bias)
    return model


END_BIAS = {"post_ln_sinusoidal": 0.8}
CONFIGS = {
    "post_ln_sinusoidal": dict(),
    "pre_ln_learned": dict(norm_first=True, positional="learned"),
    "tied_shared_pre_ln": dict(tie_output=True, share_embeddings=True, norm_first=True,
                               scale_embeddings=False),
    # Issue 26: T5's relative position bias (each cached step's bias against every slot),
    # RMSNorm, no biases or score scaling, a gated FFN; BART's embedding norm; M2M100's
    # sinusoids from pad + 1.
    "t5": dict(norm="rms", use_bias=False, attention_scale=False, positional="none",
               relative_attention=True, relative_buckets=8, relative_max_distance=12,
               norm_first=True, feedforward="gated", activation="gelu_tanh", output_bias=False,
               tie_output=True, share_embeddings=True, output_scale=0.25),
    "bart_m2m100": dict(embedding_norm=True, positional="sinusoidal_fairseq", position_offset=2,
                        activation="gelu"),
}
_MODELS = {}


def tiny(name="post_ln_sinusoidal"):
    """One model per configuration for the whole module (each compiles its own step function)."""
    if name not in _MODELS:
        _MODELS[name] = build(tiny_config(**CONFIGS[name]), seed=7,
                              end_bias=END_BIAS.get(name, 0.0))
    return _MODELS[name]


def sources(config, lengths, seed=0):
    """Random real ids (never pad/start/end) of the given lengths."""
    rng = np.random.default_rng(seed)
    return [rng.integers(3, config.src_vocab_size, n).astype(np.int32) for n in lengths]


def random_head_mask(config, seed=0):
    """0/1 masks for every kind, each with at least one silenced and one open head."""
    rng = np.random.default_rng(seed)
    out = {}
    for kind, layers in (("encoder", config.num_encoder_layers),
                         ("decoder", config.num_decoder_layers),
                         ("cross", config.num_decoder_layers)):
        mask = rng.integers(0, 2, (layers, config.num_heads)).astype(np.float32)
        mask.flat[0], mask.flat[-1] = 0.0, 1.0
        out[kind] = mask
    return out


def teacher_forced(model, source_ids, output_ids, head_mask=None):
    """One full pass on [start] + output_ids: decoder (L, H, T, T), cross (L, H, T, N), logits."""
    target = [model.config.start_id] + [int(i) for i in output_ids][:-1]  # shifted right
    out = model((np.asarray([source_ids], np.int32), np.asarray([target], np.int32)),
                return_attention=True, head_mask=head_mask)
    return (out["decoder_attention"].numpy()[:, 0], out["cross_attention"].numpy()[:, 0],
            out["logits"].numpy()[0].astype(np.float64))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def assert_faithful(model, source_ids, result, head_mask=None, atol=ATOL):
    """Each step's attention is row t of a teacher-forced pass on the step's own prefix, for every
    layer and head of both decoder kinds; its probabilities are that pass's softmax at row t."""
    source_ids = np.asarray(source_ids)
    n = int((source_ids != model.config.pad_id).sum())
    dec, cross, logits = teacher_forced(model, source_ids, result.token_ids, head_mask)
    assert len(result.steps) == len(result.token_ids)
    for t, step in enumerate(result.steps):
        np.testing.assert_allclose(step.self, dec[:, :, t, : t + 1], atol=atol, err_msg=f"self t={t}")
        np.testing.assert_allclose(step.cross, cross[:, :, t, :n], atol=atol, err_msg=f"cross t={t}")
        assert np.all(cross[:, :, t, n:] == 0.0)  # padded source positions get nothing
        probs = softmax(logits[t])
        for _, token_id, p in step.top_k:
            assert p == pytest.approx(probs[token_id], abs=1e-4)
        assert step.log_prob == pytest.approx(np.log(probs[step.token_id]), abs=1e-4)


def assert_same(a, b, atol=ATOL):
    """Same tokens, same per-step attention and probabilities."""
    assert a.token_ids == b.token_ids
    assert a.tokens == b.tokens and a.text == b.text
    assert len(a.steps) == len(b.steps) == len(a.token_ids)
    for t, (x, y) in enumerate(zip(a.steps, b.steps)):
        assert x.token_id == y.token_id
        assert x.self.shape == y.self.shape and x.cross.shape == y.cross.shape
        np.testing.assert_allclose(x.self, y.self, atol=atol, err_msg=f"self t={t}")
        np.testing.assert_allclose(x.cross, y.cross, atol=atol, err_msg=f"cross t={t}")
        np.testing.assert_allclose([p for *_, p in x.top_k], [p for *_, p in y.top_k], atol=atol)
        # The same ids in the same order, but for near-ties: two candidates within atol of each
        # other (the bundled model gives <pad>, <s> and <unk> 0.0055537 each, equal to 1e-8),
        # whose order float noise may swap between two equal paths.
        for (_, i, p), (_, j, _) in zip(x.top_k, y.top_k):
            tied = any(abs(p - other) < atol for _, k, other in x.top_k if k != i)
            assert i == j or tied, (t, x.top_k, y.top_k)
        assert x.log_prob == pytest.approx(y.log_prob, abs=1e-4)


def padded_source(config, seed=9):
    """4 real ids then 2 pads: a (1, 6) source whose real length is 4."""
    return np.concatenate([sources(config, [4], seed=seed)[0], [config.pad_id] * 2]).astype(np.int32)


def early_end_source(model):
    """A length-6 source whose unstopped greedy decoding produces the end id after its first
    step and well before its last."""
    c = model.config
    for seed in range(10):
        srcs = sources(c, [6, 6, 6], seed=100 + seed)
        results = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False,
                                      capture=False)
        for src, r in zip(srcs, results):
            if c.end_id in r.token_ids and 0 < r.token_ids.index(c.end_id) < MAX_LEN - 2:
                return src, r
    pytest.fail("no random source makes the tiny model emit the end id early (change the seed)")


# ============================================================================= bundled model
@pytest.fixture(scope="module")
def ckpt():
    """The bundled checkpoint, loaded once. A training run may be rewriting it: retry a while."""
    deadline = time.monotonic() + 600
    while True:
        try:
            return load_checkpoint(DEFAULT_CHECKPOINT)
        except CheckpointError:
            if time.monotonic() > deadline:
                raise
            time.sleep(10)


FRIDAY = "Friday, March 5, 2021"
DATES = [FRIDAY, "5th of March 2021", "Monday 1 January 2001", "july 4th, 1976", "12/25/1999",
         "2021-03-05"]


# ============================================================================= 1. API
def test_greedy_api_unstopped_runs_exactly_max_len():
    model = tiny()
    c = model.config
    src = padded_source(c)
    result = greedy_decode(model, src, max_len=MAX_LEN, use_cache=True, stop_at_end=False,
                           head_mask=None)
    assert isinstance(result, Decoding)
    assert len(result.token_ids) == len(result.tokens) == len(result.steps) == MAX_LEN
    assert all(type(i) is int for i in result.token_ids)
    assert result.tokens == [str(i) for i in result.token_ids]  # no tokenizer: ids as names
    assert result.text == " ".join(result.tokens)
    assert result.log_prob == pytest.approx(sum(s.log_prob for s in result.steps))
    L, H = c.num_decoder_layers, c.num_heads
    for t, step in enumerate(result.steps):
        assert step.token_id == result.token_ids[t] and step.token == result.tokens[t]
        assert step.token_id not in (c.pad_id, c.start_id)
        assert step.cross.shape == (L, H, 4)  # N = the real source length, padding cut off
        assert step.self.shape == (L, H, t + 1)
        np.testing.assert_allclose(step.cross.sum(-1), 1.0, atol=1e-5)
        np.testing.assert_allclose(step.self.sum(-1), 1.0, atol=1e-5)
        assert len(step.top_k) >= 5
        names, ids, probs = zip(*step.top_k)
        assert all(isinstance(n, str) for n in names) and all(type(i) is int for i in ids)
        assert list(probs) == sorted(probs, reverse=True)
        assert 0.0 < sum(probs) <= 1.0 + 1e-6
        assert len(set(ids)) == len(ids)
        if ids[0] in (c.pad_id, c.start_id):
            # the best token may never be emitted: the choice is the best of the rest
            assert step.token_id == next(i for i in ids if i not in (c.pad_id, c.start_id))
        else:
            assert step.token_id == ids[0]
        assert step.log_prob == pytest.approx(np.log(dict(zip(ids, probs))[step.token_id]),
                                              abs=1e-6)
    assert result.cross_attention().shape == (L, H, MAX_LEN, 4)


def test_stop_at_end_ends_on_end_id_and_unstopped_continues_past_it():
    model = tiny()
    c = model.config
    src, unstopped = early_end_source(model)
    end_at = unstopped.token_ids.index(c.end_id)
    full = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False)
    assert full.token_ids == unstopped.token_ids
    assert len(full.token_ids) == len(full.steps) == MAX_LEN > end_at + 1  # went on past the end
    stopped = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=True)
    assert stopped.token_ids == full.token_ids[: end_at + 1]
    assert stopped.token_ids[-1] == c.end_id
    assert len(stopped.steps) == end_at + 1
    for a, b in zip(stopped.steps, full.steps):
        np.testing.assert_allclose(a.cross, b.cross, atol=ATOL)
        np.testing.assert_allclose(a.self, b.self, atol=ATOL)


def test_bundled_translation_ends_with_end_id(ckpt):
    c = ckpt.config
    result = ckpt.translate(FRIDAY)
    assert result.text == "2021-03-05"
    assert result.token_ids[-1] == c.end_id
    assert c.end_id not in result.token_ids[:-1]
    assert result.tokens == ckpt.target_tokenizer.ids_to_pieces(result.token_ids)
    n = len(ckpt.encode_source(FRIDAY))
    for t, step in enumerate(result.steps):
        assert step.cross.shape == (c.num_decoder_layers, c.num_heads, n)
        assert step.self.shape == (c.num_decoder_layers, c.num_heads, t + 1)
    unstopped = ckpt.translate(FRIDAY, stop_at_end=False)
    assert len(unstopped.token_ids) == len(unstopped.steps) == c.max_len
    assert unstopped.token_ids[: len(result.token_ids)] == result.token_ids


# ============================================================================= 2. cache == naive
@pytest.mark.parametrize("masked", [False, True], ids=["no_head_mask", "head_mask"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_cached_equals_naive(name, masked):
    """A padded batch of sources of different lengths, every step compared."""
    model = tiny(name)
    head_mask = random_head_mask(model.config, seed=3) if masked else None
    srcs = sources(model.config, BATCH_LENGTHS, seed=5)
    cached = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False,
                                 head_mask=head_mask)
    naive = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False,
                                head_mask=head_mask, use_cache=False)
    for a, b, src in zip(cached, naive, srcs):
        assert a.steps[0].cross.shape[-1] == len(src)
        assert_same(a, b)


def test_head_mask_in_the_equality_test_is_not_vacuous():
    model = tiny()
    srcs = sources(model.config, BATCH_LENGTHS, seed=5)
    plain = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False)
    masked = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False,
                                 head_mask=random_head_mask(model.config, seed=3))
    assert any(a.token_ids != b.token_ids or
               not np.allclose(a.steps[-1].cross, b.steps[-1].cross, atol=1e-3)
               for a, b in zip(plain, masked))


# ============================================================================= 3. faithfulness
@pytest.mark.parametrize("name", ["post_ln_sinusoidal", "pre_ln_learned"])
def test_tiny_attention_is_teacher_forced_rows(name):
    model = tiny(name)
    src = padded_source(model.config)
    result = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False)
    assert len(set(result.token_ids)) > 1  # a decoding that actually varies
    assert_faithful(model, src, result)
    head_mask = random_head_mask(model.config, seed=4)
    masked = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False, head_mask=head_mask)
    assert_faithful(model, src, masked, head_mask=head_mask)


def test_tiny_naive_attention_is_teacher_forced_rows():
    model = tiny()
    src = padded_source(model.config)
    assert_faithful(model, src, greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False,
                                              use_cache=False))


def test_bundled_attention_is_teacher_forced_rows(ckpt):
    for text in (FRIDAY, "12/25/1999"):
        src = ckpt.encode_source(text)
        result = ckpt.translate(text, stop_at_end=False)
        assert_faithful(ckpt.model, src, result, atol=1e-4)
        # OpenedModel.attention (teacher forcing on the model's own translation) agrees too
        stopped = ckpt.translate(text)
        maps = ckpt.attention(text)
        assert maps["decoder"].shape[2] == len(stopped.steps)
        for t, step in enumerate(stopped.steps):
            np.testing.assert_allclose(step.cross, maps["cross"][:, :, t], atol=1e-4)
            np.testing.assert_allclose(step.self, maps["decoder"][:, :, t, : t + 1], atol=1e-4)


# ============================================================================= 4. no retracing
@pytest.fixture(scope="module")
def fresh_model():
    """A model no other test decodes with, so its step function's trace count is ours alone."""
    return build(tiny_config(num_encoder_layers=1, num_decoder_layers=1), seed=21)


def _traces(model):
    loop = search_ours.compiled_greedy(model)
    assert loop is search_ours.compiled_greedy(model)  # one compiled function per architecture
    return loop.tracing_count()


def test_step_function_traces_once_for_all_steps(fresh_model):
    src = sources(fresh_model.config, [5], seed=1)[0]
    greedy_decode(fresh_model, src, max_len=6, stop_at_end=False)
    assert _traces(fresh_model) == 1  # 6 steps, one trace
    greedy_decode(fresh_model, src, max_len=6, stop_at_end=False)
    greedy_decode(fresh_model, sources(fresh_model.config, [5], seed=2)[0], max_len=6,
                  stop_at_end=False)
    assert _traces(fresh_model) == 1  # same shapes, other ids: reused


def test_longer_max_len_does_not_retrace(fresh_model):
    src = sources(fresh_model.config, [5], seed=1)[0]
    greedy_decode(fresh_model, src, max_len=6, stop_at_end=False)
    before = _traces(fresh_model)
    greedy_decode(fresh_model, src, max_len=MAX_LEN, stop_at_end=False)
    assert _traces(fresh_model) == before


def test_different_length_source_does_not_retrace(fresh_model):
    src = sources(fresh_model.config, [5], seed=1)[0]
    greedy_decode(fresh_model, src, max_len=6, stop_at_end=False)
    before = _traces(fresh_model)
    greedy_decode(fresh_model, sources(fresh_model.config, [7], seed=3)[0], max_len=6,
                  stop_at_end=False)
    assert _traces(fresh_model) == before


# ============================================================================= 5. head ablation
def all_ones(config):
    return {"encoder": np.ones((config.num_encoder_layers, config.num_heads), np.float32),
            "decoder": np.ones((config.num_decoder_layers, config.num_heads), np.float32),
            "cross": np.ones((config.num_decoder_layers, config.num_heads), np.float32)}


@pytest.mark.parametrize("use_cache", [True, False], ids=["cached", "naive"])
def test_all_ones_head_mask_changes_nothing(use_cache):
    model = tiny("pre_ln_learned")
    srcs = sources(model.config, BATCH_LENGTHS, seed=5)
    plain = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False,
                                use_cache=use_cache)
    masked = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False,
                                 use_cache=use_cache, head_mask=all_ones(model.config))
    for a, b in zip(plain, masked):
        assert_same(a, b, atol=1e-6)


def test_bundled_all_ones_head_mask_changes_nothing(ckpt):
    for use_cache in (True, False):
        assert_same(ckpt.translate(FRIDAY, use_cache=use_cache),
                    ckpt.translate(FRIDAY, use_cache=use_cache, head_mask=all_ones(ckpt.config)),
                    atol=1e-6)


def test_silencing_every_cross_head_changes_the_bundled_translation(ckpt):
    c = ckpt.config
    plain = ckpt.translate(FRIDAY)
    silenced = ckpt.translate(FRIDAY, head_mask={"cross": np.zeros((c.num_decoder_layers,
                                                                    c.num_heads))})
    assert plain.text == "2021-03-05"
    assert silenced.token_ids != plain.token_ids
    assert silenced.text != plain.text


@pytest.mark.parametrize("use_cache", [True, False], ids=["cached", "naive"])
def test_silenced_head_still_reports_its_attention(ckpt, use_cache):
    c = ckpt.config
    mask = np.ones((c.num_decoder_layers, c.num_heads))
    mask[0, 1] = 0.0  # silence cross-attention head 1 of layer 0
    plain = ckpt.translate(FRIDAY, use_cache=use_cache, max_len=1)
    silenced = ckpt.translate(FRIDAY, use_cache=use_cache, max_len=1, head_mask={"cross": mask})
    a, b = plain.steps[0].cross[0], silenced.steps[0].cross[0]  # layer 0, step 0: (H, N)
    np.testing.assert_allclose(b, a, atol=1e-5)  # weights are computed before the mask acts
    np.testing.assert_allclose(b[1].sum(), 1.0, atol=1e-5)  # the silenced head is not blank
    # ... while its output was zeroed: layer 1 and the step's distribution moved
    assert not np.allclose(silenced.steps[0].cross[1], plain.steps[0].cross[1], atol=1e-6)
    assert [p for *_, p in silenced.steps[0].top_k] != [p for *_, p in plain.steps[0].top_k]


def test_tiny_silenced_cross_heads_keep_layer0_step0_weights():
    model = tiny()
    c = model.config
    src = padded_source(c)
    mask = np.ones((c.num_decoder_layers, c.num_heads), np.float32)
    mask[0, :] = 0.0
    for use_cache in (True, False):
        plain = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False, use_cache=use_cache)
        silenced = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False,
                                 use_cache=use_cache, head_mask={"cross": mask})
        np.testing.assert_allclose(silenced.steps[0].cross[0], plain.steps[0].cross[0], atol=1e-6)
        np.testing.assert_allclose(silenced.steps[0].cross[0].sum(-1), 1.0, atol=1e-5)
        assert not np.allclose(silenced.steps[0].cross[1], plain.steps[0].cross[1], atol=1e-4)


# ============================================================================= 6. batches
def test_bundled_batch_equals_one_by_one(ckpt):
    c = ckpt.config
    srcs = [ckpt.encode_source(text) for text in DATES]
    assert len({len(s) for s in srcs}) >= 3  # really different lengths: padding matters
    batch = greedy_decode_batch(ckpt.model, srcs, max_len=c.max_len,
                                tokenizer=ckpt.target_tokenizer)
    assert len(batch) == len(srcs)
    for src, got in zip(srcs, batch):
        alone = greedy_decode(ckpt.model, src, max_len=c.max_len, tokenizer=ckpt.target_tokenizer)
        assert_same(got, alone, atol=1e-5)
        assert got.token_ids[-1] == c.end_id and c.end_id not in got.token_ids[:-1]
        assert got.steps[0].cross.shape[-1] == len(src)
    assert batch[0].text == "2021-03-05"


def test_tiny_batch_equals_one_by_one_unstopped():
    model = tiny()
    c = model.config
    srcs = sources(c, BATCH_LENGTHS, seed=13)
    batch = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False)
    for src, got in zip(srcs, batch):
        assert len(got.token_ids) == MAX_LEN
        assert_same(got, greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False))
    # a (B, N) padded array is accepted as well and means the same
    array = np.full((len(srcs), max(BATCH_LENGTHS)), c.pad_id, np.int32)
    for i, s in enumerate(srcs):
        array[i, : len(s)] = s
    for a, b in zip(greedy_decode_batch(model, array, max_len=MAX_LEN, stop_at_end=False), batch):
        assert_same(a, b)


def test_batch_members_stop_on_their_own_end_token():
    model = tiny()
    c = model.config
    early, _ = early_end_source(model)
    srcs = [early] + sources(c, BATCH_LENGTHS[1:], seed=17)
    alone = [greedy_decode(model, s, max_len=MAX_LEN) for s in srcs]
    batch = greedy_decode_batch(model, srcs, max_len=MAX_LEN)
    assert len({len(r.token_ids) for r in alone}) > 1  # they end at different steps
    assert alone[0].token_ids[-1] == c.end_id and len(alone[0].token_ids) < MAX_LEN
    for a, b in zip(batch, alone):
        assert_same(a, b)
        if c.end_id in b.token_ids:
            assert b.token_ids.index(c.end_id) == len(b.token_ids) - 1
        else:
            assert len(b.token_ids) == MAX_LEN


def test_batch_on_step_and_capture_false():
    model = tiny()
    srcs = sources(model.config, BATCH_LENGTHS, seed=2)
    seen = []
    results = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False, capture=False,
                                  on_step=seen.append)
    assert seen == list(range(MAX_LEN))
    reference = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False)
    for r, ref in zip(results, reference):
        assert r.token_ids == ref.token_ids
        assert all(s.cross is None and s.self is None for s in r.steps)


# ============================================================================= 7. beam search
def assert_beam_equal(a, b, atol=ATOL):
    assert_same(a, b, atol)
    assert a.score == pytest.approx(b.score, abs=1e-4)
    assert len(a.hypotheses) == len(b.hypotheses)
    for x, y in zip(a.hypotheses, b.hypotheses):
        assert_same(x, y, atol)
    assert [[tokens for tokens, _ in step] for step in a.beam_steps] == \
        [[tokens for tokens, _ in step] for step in b.beam_steps]


def assert_beam_consistent(model, src, result, beam_width, alpha=0.6, atol=ATOL):
    assert isinstance(result, BeamDecoding)
    assert result.hypotheses and result.token_ids == result.hypotheses[0].token_ids
    scores = [length_normalised(h.log_prob, len(h.token_ids), alpha) for h in result.hypotheses]
    assert result.score == pytest.approx(scores[0], abs=1e-6)
    assert all(result.score >= s - 1e-9 for s in scores)  # the best is the best
    assert scores == sorted(scores, reverse=True)
    assert len({tuple(h.token_ids) for h in result.hypotheses}) == len(result.hypotheses)
    for h in result.hypotheses:
        assert_faithful(model, src, h, atol=atol)  # its own attention, not a neighbour's
    assert 1 <= len(result.beam_steps) <= model.config.max_len
    for step in result.beam_steps:
        assert len(step) <= beam_width
        step_scores = [s for _, s in step]
        assert step_scores == sorted(step_scores, reverse=True)


def test_beam_of_one_is_greedy():
    model = tiny()
    early, _ = early_end_source(model)
    for src in (early, padded_source(model.config)):
        greedy = greedy_decode(model, src, max_len=MAX_LEN)
        beam = beam_search(model, src, beam_width=1, max_len=MAX_LEN)
        assert_same(beam, greedy)
        assert beam.hypotheses[0].token_ids == greedy.token_ids


def test_bundled_beam_of_one_is_greedy(ckpt):
    text = "Monday 1 January 2001"
    greedy = ckpt.translate(text)
    assert_same(ckpt.translate(text, beam_width=1), greedy)
    beam = beam_search(ckpt.model, ckpt.encode_source(text), beam_width=1,
                       max_len=ckpt.config.max_len, tokenizer=ckpt.target_tokenizer)
    assert_same(beam, greedy)


@pytest.mark.parametrize("use_cache", [True, False])
def test_time_budget_stops_both_paths_after_the_first_step(use_cache):
    """seconds=0: the first step runs, no later one starts (the compiled loop checks the clock
    on the device, the naive one on the host); greedy and beam say they stopped by time."""
    model = tiny()
    src = padded_source(model.config)
    full = greedy_decode(model, src, max_len=MAX_LEN, use_cache=use_cache, stop_at_end=False)
    cut = greedy_decode(model, src, max_len=MAX_LEN, use_cache=use_cache, stop_at_end=False,
                        seconds=0.0)
    assert (full.stopped_by, cut.stopped_by) == ("length", "time")
    assert cut.token_ids == full.token_ids[:1] and len(cut.steps) == 1
    np.testing.assert_allclose(cut.steps[0].cross, full.steps[0].cross, atol=1e-6)
    beam = beam_search(model, src, beam_width=3, max_len=MAX_LEN, use_cache=use_cache,
                       seconds=0.0)
    assert beam.stopped_by == "time" and len(beam.beam_steps) == 1
    roomy = greedy_decode(model, src, max_len=MAX_LEN, use_cache=use_cache, stop_at_end=False,
                          seconds=600.0)
    assert roomy.token_ids == full.token_ids and roomy.stopped_by == "length"


def test_tiny_beam_cached_equals_naive_and_is_consistent():
    model = tiny("pre_ln_learned")
    src = padded_source(model.config, seed=23)
    cached = beam_search(model, src, beam_width=4, max_len=MAX_LEN)
    naive = beam_search(model, src, beam_width=4, max_len=MAX_LEN, use_cache=False)
    assert_beam_equal(cached, naive)
    assert_beam_consistent(model, src, cached, 4)
    assert len(cached.hypotheses) > 1


def test_bundled_beam_cached_equals_naive_and_is_consistent(ckpt):
    src = ckpt.encode_source("5th of March 2021")
    kw = dict(beam_width=4, max_len=ckpt.config.max_len, tokenizer=ckpt.target_tokenizer)
    cached = beam_search(ckpt.model, src, **kw)
    naive = beam_search(ckpt.model, src, use_cache=False, **kw)
    assert_beam_equal(cached, naive, atol=1e-5)
    assert_beam_consistent(ckpt.model, src, cached, 4, atol=1e-4)
    assert len(cached.hypotheses) > 1
    for h in cached.hypotheses:
        assert h.token_ids[-1] == ckpt.config.end_id  # all finished within max_len
        assert ckpt.config.end_id not in h.token_ids[:-1]


def test_bundled_beam_translates_and_translate_returns_beam_decoding(ckpt):
    result = ckpt.translate("5th of March 2021", beam_width=3)
    assert isinstance(result, BeamDecoding)
    assert result.text == "2021-03-05"
    assert result.token_ids[-1] == ckpt.config.end_id
    assert result.tokens == ckpt.target_tokenizer.ids_to_pieces(result.token_ids)
    assert result.hypotheses[0].text == "2021-03-05"
    assert 1 <= len(result.beam_steps[0]) <= 3
    assert not isinstance(ckpt.translate("5th of March 2021"), BeamDecoding)


# ============================================================================= 8. errors
@pytest.mark.parametrize("max_len", [0, MAX_LEN + 1])
def test_bad_max_len(max_len):
    model = tiny()
    src = sources(model.config, [4], seed=1)[0]
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, max_len=max_len)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode_batch(model, [src], max_len=max_len, use_cache=False)
    with pytest.raises(ValueError, match="max_len"):
        beam_search(model, src, beam_width=2, max_len=max_len)


def test_bad_head_mask_shape_names_kind_and_shapes():
    model = tiny()
    c = model.config
    src = sources(c, [4], seed=1)[0]
    wrong = np.ones((c.num_decoder_layers + 1, c.num_heads))
    with pytest.raises(ValueError) as err:
        greedy_decode(model, src, max_len=4, head_mask={"cross": wrong})
    message = str(err.value)
    assert "cross" in message
    assert str((c.num_decoder_layers, c.num_heads)) in message and str(wrong.shape) in message
    with pytest.raises(ValueError, match="decoder"):
        greedy_decode(model, src, max_len=4, use_cache=False,
                      head_mask={"decoder": np.ones(c.num_heads)})
    with pytest.raises(ValueError, match="encoder"):
        beam_search(model, src, beam_width=2, max_len=4,
                    head_mask={"encoder": np.ones((c.num_encoder_layers, c.num_heads + 1))})
    with pytest.raises(ValueError, match="head_mask"):
        greedy_decode(model, src, max_len=4, head_mask={"crosss": np.ones((2, 4))})


def test_bad_sources():
    model = tiny()
    with pytest.raises(ValueError, match="1-D"):
        greedy_decode(model, np.array([[4, 5, 6]]), max_len=4)
    with pytest.raises(ValueError):
        greedy_decode(model, [], max_len=4)
    with pytest.raises(ValueError, match="beam_width"):
        beam_search(model, [4, 5], beam_width=0, max_len=4)


# ============================================================================= 9. one compiled loop
def test_bucket_sizes():
    assert [compiled.bucket(n, 256) for n in (1, 16, 17, 32, 33, 100, 256)] == \
        [16, 16, 32, 32, 64, 128, 256]
    assert compiled.bucket(20, 24) == 24  # never more than the cap ...
    assert compiled.bucket(30, 24) == 30  # ... nor less than the length


def test_sources_and_cache_are_bucketed_unless_padding_is_unmasked(monkeypatch):
    """The cache always has its bucket's length; the source is padded to its bucket under XLA
    (here PAD_TO_BUCKETS, as XLA does) and only there, and never for a model that attends to
    its padding."""
    source = np.full((2, 5), 4, np.int32)
    model = build(tiny_config(max_len=40), seed=1)
    same, cache_len = compiled.bucketed(model, source, 20)
    assert same.shape == (2, 5) and cache_len == 32  # without XLA: as it is
    monkeypatch.setattr(compiled, "PAD_TO_BUCKETS", True)
    padded, cache_len = compiled.bucketed(model, source, 20)
    assert padded.shape == (2, 16) and cache_len == 32
    np.testing.assert_array_equal(padded[:, :5], source)
    assert (padded[:, 5:] == 0).all()
    unmasked = build(tiny_config(max_len=40, mask_padding=False), seed=1)
    same, cache_len = compiled.bucketed(unmasked, source, 20)
    assert same.shape == (2, 5) and cache_len == 32


def test_one_compiled_call_per_decode_and_early_exit():
    """The host calls the compiled loop once per batch; with stop_at_end the loop runs exactly
    as many steps as the longest decoding, not max_len."""
    model = tiny()
    early, _ = early_end_source(model)
    real, calls = search_ours.compiled_greedy, []

    def counted(*args, **kwargs):
        loop = real(*args, **kwargs)
        return lambda *inputs: calls.append(inputs) or loop(*inputs)
    search_ours.compiled_greedy = counted
    try:
        results = greedy_decode_batch(model, [early, early], max_len=MAX_LEN)
        assert len(calls) == 1
        longest = max(len(r.token_ids) for r in results)
        assert longest < MAX_LEN
        out = search_ours._cached_greedy(model, np.stack([early, early]),
                                      compiled.head_mask_tensors(model, None), MAX_LEN, True, True)
        assert len(calls) == 2 and out["tokens"].shape == (longest, 2)
        unstopped = search_ours._cached_greedy(model, np.stack([early]),
                                            compiled.head_mask_tensors(model, None), MAX_LEN, False, True)
        assert unstopped["tokens"].shape == (MAX_LEN, 1)
        assert unstopped["self"].shape == (MAX_LEN, 2, 1, 4, MAX_LEN)  # (T, L, B, H, cache_len)
    finally:
        search_ours.compiled_greedy = real


@pytest.mark.parametrize("overrides", [dict(mask_padding=False), dict(start_id=0)],
                         ids=["padding_unmasked", "start_is_pad"])
def test_cached_equals_naive_for_imported_model_options(overrides):
    """A model that does not mask padding (its sources are not bucketed) and one whose start id
    is its pad id (both are never chosen)."""
    model = build(tiny_config(**overrides), seed=11)
    c = model.config
    srcs = sources(c, BATCH_LENGTHS, seed=31)
    cached = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False)
    naive = greedy_decode_batch(model, srcs, max_len=MAX_LEN, stop_at_end=False, use_cache=False)
    for a, b in zip(cached, naive):
        assert_same(a, b)
        assert not {c.pad_id, c.start_id} & set(a.token_ids)
    for src, got in zip(srcs, cached):
        alone = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False)
        assert_same(alone, greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False,
                                         use_cache=False))
        if c.mask_padding:  # unmasked padding is attended: a padded batch differs from one by one
            assert_same(got, alone)


@pytest.mark.parametrize("name", ["post_ln_sinusoidal", "tied_shared_pre_ln"])
def test_beam_cached_equals_naive_with_head_mask(name):
    model = tiny(name)
    head_mask = random_head_mask(model.config, seed=8)
    for src in (padded_source(model.config, seed=29), sources(model.config, [6], seed=30)[0]):
        for width in (2, 3):
            cached = beam_search(model, src, beam_width=width, max_len=MAX_LEN,
                                 head_mask=head_mask)
            naive = beam_search(model, src, beam_width=width, max_len=MAX_LEN,
                                head_mask=head_mask, use_cache=False)
            assert_beam_equal(cached, naive)
            for h in cached.hypotheses:
                assert_faithful(model, src, h, head_mask=head_mask, atol=1e-4)


def test_beam_loop_traces_once_for_widths_and_lengths(fresh_model):
    c = fresh_model.config
    for width, length in ((2, 5), (3, 7), (2, 4)):
        beam_search(fresh_model, sources(c, [length], seed=width)[0], beam_width=width,
                    max_len=MAX_LEN)
    assert search_ours.compiled_beam(fresh_model).tracing_count() == 1


def test_models_of_one_architecture_share_one_trace_with_their_own_weights():
    """Opening another checkpoint of a known architecture traces nothing: the loop takes the
    weights as inputs. Each model still decodes with its own weights (equal to its naive path,
    which reads its variables directly), and a model whose weights change later is decoded
    with the new values."""
    config = tiny_config(num_encoder_layers=1, num_decoder_layers=2, dff=24)
    first, second = build(config, seed=41), build(config, seed=42)
    src = sources(config, [6], seed=43)[0]
    kw = dict(max_len=MAX_LEN, stop_at_end=False)
    a, b = greedy_decode(first, src, **kw), greedy_decode(second, src, **kw)
    assert search_ours.compiled_greedy(first) is search_ours.compiled_greedy(second)
    assert search_ours.compiled_greedy(second).tracing_count() == 1
    assert_same(a, greedy_decode(first, src, use_cache=False, **kw))
    assert_same(b, greedy_decode(second, src, use_cache=False, **kw))
    assert a.steps[0].log_prob != b.steps[0].log_prob  # other weights, other numbers
    assert_beam_equal(beam_search(second, src, beam_width=3, max_len=MAX_LEN),
                      beam_search(second, src, beam_width=3, max_len=MAX_LEN, use_cache=False))
    for variable in second.weights:
        variable.assign(variable.numpy() * 0.5)
    assert_same(greedy_decode(second, src, **kw), greedy_decode(second, src, use_cache=False, **kw))


def test_xla_loop_equals_graph_loop(monkeypatch):
    model = tiny()
    src = padded_source(model.config)
    plain = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False)
    plain_beam = beam_search(model, src, beam_width=3, max_len=MAX_LEN)
    monkeypatch.setattr(compiled, "JIT_COMPILE", True)
    assert_same(greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False), plain)
    assert_beam_equal(beam_search(model, src, beam_width=3, max_len=MAX_LEN), plain_beam)


# ============================================================================= 10. unbuilt models
# From a fresh process: there the first model to reach the compiled loops is the unbuilt one
# (this module's models have traced them already in this process).
ROOT = Path(__file__).resolve().parents[2]
SHAPE_CLAIM = re.compile(r"^(?P<expr>\S.*?)\s+#\s*(?:\([^)]*\)\s*=\s*)?(?P<shape>\([\d, ]+\))\s*$")


def run_fresh(script: str) -> dict:
    """Run a script in a fresh Python process (the project on its path); its last line of
    stdout, parsed as JSON."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def readme_model_api() -> str:
    """The README's "The model API" example, as written there."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The model API", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_model_api_example_runs_from_a_fresh_process_with_the_shapes_it_states():
    """The example verbatim, each line that states a shape ("out["logits"].shape  # (1, 3, 100)",
    "... # (layers, batch, heads, N, N) = (2, 1, 4, 6, 6)") followed by a check of it."""
    example = readme_model_api()
    assert example.startswith("import numpy as np\nfrom transformer import Transformer")
    lines, claims = [], 0
    for line in example.splitlines():
        lines.append(line)
        claim = SHAPE_CLAIM.match(line)
        if claim:
            claims += 1
            expr, shape = claim["expr"], claim["shape"]
            lines.append(f"assert tuple({expr}) == {shape}, ({expr!r}, tuple({expr}))")
    assert claims >= 4, example  # logits and the three kinds of maps
    out = run_fresh("\n".join(lines + ["import json", "print(json.dumps({'ran': True}))"]))
    assert out == {"ran": True}


UNBUILT_DECODES = """
import json
import numpy as np
from transformer import Transformer, TransformerConfig, beam_search, greedy_decode
from transformer.inference.search_ours import greedy_decode_batch

config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, dff=32,
                           num_encoder_layers=2, num_decoder_layers=2, max_len=12)
source_ids = [1, 7, 8, 9, 5, 2]
out = {}

def ids(decoded):
    return [int(i) for i in decoded.token_ids]

def built_copy(model):
    copy = Transformer(config).build_weights()
    copy.set_weights(model.get_weights())
    return copy

fresh = Transformer(config)
out["built_before"] = fresh.built
out["greedy"] = ids(greedy_decode(fresh, source_ids, max_len=10, stop_at_end=False))
out["greedy_built_copy"] = ids(greedy_decode(built_copy(fresh), source_ids, max_len=10,
                                              stop_at_end=False))
out["greedy_naive"] = ids(greedy_decode(fresh, source_ids, max_len=10, stop_at_end=False,
                                        use_cache=False))
fresh = Transformer(config)
out["beam"] = ids(beam_search(fresh, source_ids, beam_width=3, max_len=10))
out["beam_built_copy"] = ids(beam_search(built_copy(fresh), source_ids, beam_width=3, max_len=10))
fresh = Transformer(config)
out["batch"] = [ids(d) for d in greedy_decode_batch(fresh, [source_ids, source_ids[:3]], max_len=10)]
out["batch_built_copy"] = [ids(d) for d in greedy_decode_batch(
    built_copy(fresh), [source_ids, source_ids[:3]], max_len=10)]
print(json.dumps(out))
"""


def test_decoding_and_beam_search_build_an_unbuilt_model_first_in_a_fresh_process():
    """greedy_decode(Transformer(config), ...) and beam_search on never-called models (the first
    models of the process to reach the compiled loops, and the naive paths) decode, with the ids
    a built copy of the same weights gives."""
    out = run_fresh(UNBUILT_DECODES)
    assert out["built_before"] is False
    assert len(out["greedy"]) == 10  # stop_at_end=False: every step
    assert out["greedy"] == out["greedy_built_copy"] == out["greedy_naive"]
    assert out["beam"] and out["beam"] == out["beam_built_copy"]
    assert out["batch"] == out["batch_built_copy"] and len(out["batch"]) == 2


def test_an_unbuilt_model_is_built_by_its_first_decode():
    model = Transformer(tiny_config(num_encoder_layers=1, num_decoder_layers=1))
    assert not model.built
    src = sources(model.config, [5], seed=3)[0]
    first = greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False)
    assert model.built and len(model.weights) > 0
    assert_same(first, greedy_decode(model, src, max_len=MAX_LEN, stop_at_end=False,
                                     use_cache=False))


def test_a_model_that_attends_to_padding_shows_every_key_it_attends_to():
    """The Keras recipes never mask padding and are fed sources padded to sequence_length: each
    step's cross-attention spreads over the pad keys too, so every key is shown (a row over the
    real tokens alone would not sum to 1 and would not be the model's numbers)."""
    from transformer import Transformer, TransformerConfig
    from transformer.inference.search_ours import beam_search

    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2,
                               dff=32, num_encoder_layers=1, num_decoder_layers=1, max_len=8,
                               mask_padding=False, pad_source_to=8, source_start=False,
                               source_end=False, positional="learned")
    model = Transformer(config).build_weights()
    source = [5, 6, 7] + [config.pad_id] * 5
    teacher = model((np.array([source]), np.array([[config.start_id]])), return_attention=True)
    first_cross = np.asarray(teacher["cross_attention"])[:, 0, :, 0]  # (L, H, N) of step 0
    for result in (greedy_decode(model, source, max_len=4, stop_at_end=False),
                   beam_search(model, source, beam_width=2, max_len=4)):
        for step in result.steps:
            assert step.cross.shape[-1] == len(source)
            np.testing.assert_allclose(step.cross.sum(-1), 1.0, atol=1e-5)
        np.testing.assert_allclose(result.steps[0].cross, first_cross, atol=1e-5)
