"""The maps the pages show come from a compiled teacher-forced pass (transformer.inference.forward),
traced once per architecture and shared, with sources and targets as they are (padded to buckets
under XLA alone): every key of the maps equals the eager reference (attention_maps(compiled=False))
for the bundled model, across bucket boundaries (padded there as under XLA), with details and
head masks, for a model that attends to its padding
(mask_padding=False: its source is never bucketed), one fed a fixed source length
(pad_source_to) and a Marian-like one (tied output, start id = pad id); two models of one
config share one trace, and a head mask is an input, not a retrace."""


import numpy as np
import pytest

from testkit.variants import random_variant
from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.core.kinds import KIND_NAMES, head_masks
from transformer.inference import compiled as compiled_module
from transformer.inference import decoded, forward
from transformer.inference.compiled import bucket, source_bucket, target_bucket
from transformer.inference.maps import attention_maps

SOURCE = "Friday, March 5, 2021"
TARGET = "2021-03-05"
# lengths on both sides of the buckets 16 and 32 (and one short one)
LENGTHS = (3, 15, 16, 17, 31, 32, 33)


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(DEFAULT_CHECKPOINT)


variant = random_variant


def random_ids(config, n, seed, vocab=None):
    """n ids that are none of the specials (a source or an output without its </s>)."""
    rng = np.random.default_rng(seed)
    return rng.integers(4, vocab or config.src_vocab_size, n).tolist()


def outputs(config, t, seed):
    """t output ids ending with </s> (all from the small target vocabulary)."""
    return random_ids(config, t - 1, seed, config.tgt_vocab_size) + [config.end_id]


def assert_same_maps(compiled: dict, eager: dict):
    """Every key of both dicts, equal: tokens and ints exactly, floats to float32 tolerance
    (scores are sums of products that partly cancel: the tolerance scales with the array)."""
    assert sorted(compiled) == sorted(eager)
    for key, expected in eager.items():
        actual = compiled[key]
        if isinstance(expected, list):  # tokens
            assert actual == expected, key
            continue
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, key
        if expected.dtype.kind in "iub":
            np.testing.assert_array_equal(actual, expected, err_msg=key)
        else:  # float32 rounding of sums in another order: ~32 ulps of the array's largest
            scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=4e-6 * scale,
                                       err_msg=key)


def both(ckpt, sources, outs, head_mask=None, details=False):
    """(compiled, eager) maps of the same sentences."""
    return (attention_maps(ckpt, sources, outs, head_mask, details),
            attention_maps(ckpt, sources, outs, head_mask, details, compiled=False))


# ============================================================================ the bundled model
def test_the_bundled_models_maps_equal_the_eager_pass(bundled):
    for target in (None, TARGET):
        for details in (False, True):
            maps = bundled.attention(SOURCE, target, details=details)
            eager = attention_maps(bundled, [maps["source_ids"].tolist()],
                                   [maps["output_ids"].tolist()], details=details,
                                   compiled=False)[0]
            assert_same_maps(maps, eager)
    assert set(maps) >= {f"{kind}_{what}" for kind in KIND_NAMES
                         for what in ("q", "k", "v", "scores")}


def test_without_xla_sources_and_targets_are_not_padded(bundled, monkeypatch):
    """The compiled pass gets each side as long as it is: padding to buckets is for XLA alone
    (compiled.padded_to_buckets), and would only add work."""
    c = bundled.config
    assert [(source_bucket(c, n), target_bucket(c, n)) for n in LENGTHS] == \
        [(n, n) for n in LENGTHS]
    widths, real = [], forward.pad_to
    monkeypatch.setattr(forward, "pad_to", lambda ids, width, pad: widths.append(width) or
                        real(ids, width, pad))
    maps = bundled.attention(SOURCE, TARGET)
    n, t = len(maps["source_ids"]), len(maps["output_ids"])
    assert widths == [n, t, t] and bucket(n, c.max_len) > n  # a source its bucket would pad
    monkeypatch.setattr(compiled_module, "PAD_TO_BUCKETS", True)
    widths.clear()
    padded = bundled.attention(SOURCE, TARGET)
    assert widths == [bucket(n, c.max_len), target_bucket(c, t), target_bucket(c, t)]
    assert_same_maps(padded, maps)


@pytest.mark.parametrize("n", LENGTHS)
def test_sources_and_targets_across_bucket_boundaries(bundled, n, monkeypatch):
    """Padded to buckets (as under XLA), every number is the eager pass's."""
    monkeypatch.setattr(compiled_module, "PAD_TO_BUCKETS", True)
    c = bundled.config
    for t in LENGTHS:
        assert bucket(n, c.max_len) >= n and target_bucket(c, t) >= t
        assert source_bucket(c, n) == bucket(n, c.max_len)
        compiled, eager = both(bundled, [random_ids(c, n, n)], [outputs(c, t, t)], details=True)
        assert_same_maps(compiled[0], eager[0])
        assert compiled[0]["encoder"].shape[-1] == n and compiled[0]["decoder"].shape[-1] == t


@pytest.mark.parametrize("padded", [False, True], ids=["as_they_are", "bucketed"])
def test_a_batch_of_unequal_lengths_is_split_back(bundled, padded, monkeypatch):
    monkeypatch.setattr(compiled_module, "PAD_TO_BUCKETS", padded)
    c = bundled.config
    sources = [random_ids(c, n, n) for n in (5, 17, 33)]
    outs = [outputs(c, t, t) for t in (16, 2, 20)]
    for compiled, eager in zip(*both(bundled, sources, outs, details=True)):
        assert_same_maps(compiled, eager)


def test_a_head_mask_is_a_tensor_input_not_a_retrace(bundled):
    c = bundled.config
    source, out = [random_ids(c, 12, 1)], [outputs(c, 9, 2)]
    plain = attention_maps(bundled, source, out)[0]
    fn = forward.forward_function(bundled.model)
    traced = fn.tracing_count()
    rng = np.random.default_rng(3)
    for _ in range(3):
        mask = {kind: (rng.random(m.shape) > 0.5).astype(np.float32)
                for kind, m in head_masks(c).items()}
        compiled, eager = both(bundled, source, out, head_mask=mask)
        assert_same_maps(compiled[0], eager[0])
        assert not np.allclose(compiled[0]["log_probs"], plain["log_probs"])
    silenced = head_masks(c, [("cross", 1, 0)])
    compiled, eager = both(bundled, source, out, head_mask=silenced, details=True)
    assert_same_maps(compiled[0], eager[0])
    assert fn.tracing_count() == traced  # masks are inputs: no new trace


def test_an_untyped_target_is_the_translation_and_one_forward_pass(bundled, monkeypatch):
    from transformer.inference import maps as maps_module

    calls = []
    real = maps_module.forward
    monkeypatch.setattr(maps_module, "forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    maps = bundled.attention(SOURCE)
    assert len(calls) == 1
    assert maps["output_ids"].tolist() == bundled.translate(SOURCE).token_ids
    mask = head_masks(bundled.config, [("cross", 0, 1), ("cross", 1, 2)])
    masked = bundled.attention(SOURCE, head_mask=mask)
    assert masked["output_ids"].tolist() == bundled.translate(SOURCE, head_mask=mask).token_ids


def test_teacher_forcings_top_k_and_hidden_states_equal_the_eager_pass(bundled):
    c = bundled.config
    for n, t in ((7, 5), (17, 16), (16, 33)):
        src, tgt = [random_ids(c, n, n)], [[c.start_id] + outputs(c, t, t)[:-1]]
        out = [outputs(c, t, t)]
        kw = dict(details=True, hidden_states=True, top_k=decoded.TOP_K)
        compiled = forward.forward(bundled.model, src, tgt, out, **kw)
        eager = forward.eager_forward(bundled.model, src, tgt, out, **kw)
        assert_same_maps(compiled, eager)
        assert compiled["decoder_hidden_states"].shape[2] == t


# ============================================================================ other configs
def test_a_model_that_attends_to_padding_gets_no_source_bucket(bundled, monkeypatch):
    monkeypatch.setattr(compiled_module, "PAD_TO_BUCKETS", True)  # as under XLA
    ckpt = variant(bundled, seed=4, mask_padding=False)
    c = ckpt.config
    assert [source_bucket(c, n) for n in LENGTHS] == list(LENGTHS)
    for n in LENGTHS:
        for t in (1, 16, 17):
            compiled, eager = both(ckpt, [random_ids(c, n, n)], [outputs(c, t, t)], details=True)
            assert_same_maps(compiled[0], eager[0])
    compiled, eager = both(ckpt, [random_ids(c, 9, 9), random_ids(c, 20, 20)],
                           [outputs(c, 3, 3), outputs(c, 18, 18)])  # padded to 20 as given
    for a, b in zip(compiled, eager):
        assert_same_maps(a, b)
    maps = ckpt.attention(SOURCE, TARGET, details=True)
    eager = attention_maps(ckpt, [maps["source_ids"].tolist()], [maps["output_ids"].tolist()],
                           details=True, compiled=False)[0]
    assert_same_maps(maps, eager)


def test_bucketing_the_source_of_a_model_that_attends_to_padding_would_show(bundled, monkeypatch):
    """The check above can fail: padding this model's source changes its maps."""
    ckpt = variant(bundled, seed=4, mask_padding=False)
    c = ckpt.config
    source, out = [random_ids(c, 9, 9)], [outputs(c, 5, 5)]
    eager = attention_maps(ckpt, source, out, compiled=False)[0]
    monkeypatch.setattr(forward, "source_bucket", lambda config, n: bucket(n, config.max_len))
    wrong = attention_maps(ckpt, source, out)[0]
    assert not np.allclose(wrong["encoder"], eager["encoder"], atol=1e-3)


@pytest.mark.parametrize("mask_padding", [True, False])
def test_a_model_fed_a_fixed_source_length(bundled, mask_padding, monkeypatch):
    monkeypatch.setattr(compiled_module, "PAD_TO_BUCKETS", True)
    ckpt = variant(bundled, seed=5, pad_source_to=24, mask_padding=mask_padding)
    assert source_bucket(ckpt.config, 24) == 24  # never padded beyond what it is fed
    for source, target in ((SOURCE, TARGET), ("5 march", "2021-03-05 2021-03-05 2021-03-05")):
        maps = ckpt.attention(source, target, details=True)
        assert maps["encoder"].shape[-1] == 24
        eager = attention_maps(ckpt, [maps["source_ids"].tolist()],
                               [maps["output_ids"].tolist()], details=True, compiled=False)[0]
        assert_same_maps(maps, eager)


def test_a_marian_like_model_tied_output_and_start_id_the_pad_id(bundled):
    vocab = bundled.config.src_vocab_size
    ckpt = variant(bundled, seed=6, tgt_vocab_size=vocab, share_embeddings=True, tie_output=True,
                   output_bias=True, start_id=0, pad_id=0, end_id=3, activation="swish",
                   positional="sinusoidal_concat", layer_norm_epsilon=1e-5, source_start=False)
    c = ckpt.config
    small = bundled.config.tgt_vocab_size  # the target tokenizer names these ids only
    for n, t in ((4, 3), (16, 17), (33, 15)):
        out = random_ids(c, t - 1, t, small) + [c.end_id]
        compiled, eager = both(ckpt, [random_ids(c, n, n)], [out], details=True)
        assert_same_maps(compiled[0], eager[0])
    # the tied projection, x E^T + b, against NumPy
    x = np.random.default_rng(7).normal(size=(2, 5, c.d_model)).astype(np.float32)
    embeddings = ckpt.model.target_token_embedding.embeddings.numpy()
    np.testing.assert_allclose(ckpt.model.project(x).numpy(),
                               x @ embeddings.T + ckpt.model.output_bias.numpy(),
                               rtol=1e-5, atol=1e-4)


def test_pre_ln_model(bundled):
    ckpt = variant(bundled, seed=8, norm_first=True, positional="learned", activation="gelu")
    c = ckpt.config
    compiled, eager = both(ckpt, [random_ids(c, 18, 1), random_ids(c, 6, 2)],
                           [outputs(c, 7, 3), outputs(c, 17, 4)], details=True)
    for a, b in zip(compiled, eager):
        assert_same_maps(a, b)


# ============================================================================ one trace, shared
def test_two_models_of_one_config_share_one_trace_with_their_own_weights(bundled):
    first = variant(bundled, seed=9, dff=40, num_decoder_layers=1)  # a config no other test has
    second = variant(bundled, seed=10, dff=40, num_decoder_layers=1)
    assert first.config == second.config
    fn = forward.forward_function(first.model)
    assert fn is forward.forward_function(second.model)
    c = first.config
    results = {}
    for name, ckpt in (("first", first), ("second", second)):
        for n, t in ((5, 4), (17, 16), (33, 33)):
            source, out = [random_ids(c, n, n)], [outputs(c, t, t)]
            compiled, eager = both(ckpt, source, out)
            assert_same_maps(compiled[0], eager[0])
            results[name, n] = compiled[0]["log_probs"]
    assert fn.tracing_count() == 1  # two models, three lengths each: one trace
    assert not np.allclose(results["first", 5], results["second", 5])  # their own weights
    for variable in second.model.weights:  # changed weights are read at the next call
        variable.assign(variable.numpy() * 0.5)
    source, out = [random_ids(c, 6, 6)], [outputs(c, 4, 4)]
    assert_same_maps(*(m[0] for m in both(second, source, out)))
    assert fn.tracing_count() == 1


def test_with_xla_each_bucket_compiles_and_the_numbers_stay(bundled, monkeypatch):
    ckpt = variant(bundled, seed=11, num_encoder_layers=1, num_decoder_layers=1)
    monkeypatch.setattr("transformer.inference.compiled.JIT_COMPILE", True)
    c = ckpt.config
    for n, t in ((5, 4), (15, 16)):  # one bucket pair: (16, 16)
        compiled, eager = both(ckpt, [random_ids(c, n, n)], [outputs(c, t, t)], details=True)
        assert_same_maps(compiled[0], eager[0])
    assert forward.forward_function(ckpt.model, details=True).tracing_count() == 1


def test_t5s_position_bias_is_in_the_maps_and_in_the_scores(bundled):
    """Issue 26: a model with T5's relative position bias hands out the bias each stack adds
    (the pages show it as a term of the scores): scores = q k^T + bias, unscaled, for every
    layer and head, compiled and eager alike."""
    ckpt = variant(bundled, seed=5, norm="rms", use_bias=False, attention_scale=False,
                   positional="none", relative_attention=True, relative_buckets=8,
                   relative_max_distance=10, norm_first=True)
    c = ckpt.config
    source, out = [random_ids(c, 7, 1)], [outputs(c, 5, 2)]
    compiled, eager = both(ckpt, source, out, details=True)
    for maps in (compiled[0], eager[0]):
        for stack, kind, length in (("encoder", "encoder", 7), ("decoder", "decoder", 5)):
            bias = maps[f"{stack}_position_bias"]  # (H, len, len)
            assert bias.shape == (c.num_heads, length, length)
            assert np.ptp(bias) > 0  # distances differ, so do their buckets' values
            q, k = maps[f"{kind}_q"], maps[f"{kind}_k"]  # (L, H, len, head_dim)
            np.testing.assert_allclose(maps[f"{kind}_scores"],
                                       q @ np.swapaxes(k, -1, -2) + bias[None], atol=1e-4)
        assert "cross_position_bias" not in maps
    np.testing.assert_allclose(compiled[0]["encoder_position_bias"],
                               eager[0]["encoder_position_bias"], atol=1e-6)


# ============================================================================ one layer's details
def test_one_layers_details_are_that_layers_of_every_layers_from_one_trace(bundled):
    """Issue 36: a page that shows one layer (the arithmetic of one head, the Masks page's
    row, T5's bias) gets that layer's Q, K, V and scores alone, the same numbers as the
    every-layer pass, from one trace whatever the layer (the layer is an input); the maps
    themselves are every layer's, as without details."""
    ckpt = variant(bundled, seed=12, dff=44, num_encoder_layers=3, num_decoder_layers=2,
                   norm="rms", use_bias=False, attention_scale=False, positional="none",
                   relative_attention=True, relative_buckets=8, relative_max_distance=10,
                   norm_first=True)
    c = ckpt.config
    sources, outs = [random_ids(c, 9, 1), random_ids(c, 20, 2)], [outputs(c, 6, 3),
                                                                   outputs(c, 17, 4)]
    every = attention_maps(ckpt, sources, outs, details=True)
    layers = {"encoder": 3, "decoder": 2, "cross": 2}
    for kind, count in layers.items():
        for layer in range(count):
            for compiled in (True, False):
                one = attention_maps(ckpt, sources, outs, details=True, compiled=compiled,
                                     detail_of=(kind, layer))
                for maps, full in zip(one, every):
                    assert maps["detail_of"] == (kind, layer)
                    assert not [key for key in maps if key.endswith(("_q", "_k", "_v", "_scores"))
                                and not key.startswith(kind)]  # no other kind's details
                    for what in ("q", "k", "v", "scores"):
                        key = f"{kind}_{what}"
                        assert maps[key].shape == (1,) + full[key].shape[1:]
                        np.testing.assert_allclose(maps[key][0], full[key][layer], atol=2e-5)
                    for name in (*KIND_NAMES, "encoder_position_bias", "decoder_position_bias",
                                 "log_probs"):
                        np.testing.assert_allclose(maps[name], full[name], atol=2e-5)
    fn = forward.forward_function(ckpt.model, details=True, one_layer=True)
    assert fn.tracing_count() == 1  # seven layers, two batch shapes: one trace
    for wrong in (("encoder", 3), ("cross", 2), ("cross", -1), ("self", 0)):
        with pytest.raises(ValueError, match="layer|kind"):
            attention_maps(ckpt, sources, outs, details=True, detail_of=wrong)
    with pytest.raises(ValueError, match="details=True"):
        forward.forward(ckpt.model, [sources[0]], [outs[0]], detail_of=("encoder", 0))


def test_one_layers_details_of_a_non_finite_pass_name_where(bundled):
    """A NaN in the chosen layer's scores is said with that layer's name (check_forward with
    detail_of); one in another layer's maps too."""
    from transformer.inference.numerics import NumericalError, check_forward

    out = forward.forward(bundled.model, [random_ids(bundled.config, 5, 1)],
                          [outputs(bundled.config, 4, 2)], details=True,
                          detail_of=("cross", 1))
    check_forward(out, detail_of=("cross", 1))  # finite: nothing said
    out["cross_scores"] = out["cross_scores"].copy()
    out["cross_scores"][0, 0, 0, 2, 1] = np.nan
    with pytest.raises(NumericalError, match="decoder layer 1's cross-attention"):
        check_forward(out, detail_of=("cross", 1))
