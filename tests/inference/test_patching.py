"""Activation patching (issue 41, item 4): OpenedModel.patch.

Oracle written here: the model re-run eagerly, batch 1, once per site, with a hook on the Keras
layers that restores the site: the clean run's value captured at the same place by the same
hook (a stack layer's output, or the embedding's, at one position; a head's context vectors
where MultiHeadAttention merges its heads), then put there in the corrupted run. The step's
score is read from that pass. On the bundled model (the dates pair the README shows), a random
pre-LN variant (noise corruption), the Marian fixture and the T5 fixture (relative position
bias, RMS norm, pre-LN, a scaled tied output)."""

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from transformer.inference.patching import SITES, recovered

T5 = Path(__file__).resolve().parents[1] / "fixtures" / "t5"
CLEAN, CORRUPTED = "March 5, 2021", "March 6, 2021"


@pytest.fixture(scope="module")
def t5():
    from transformer import load_checkpoint

    return load_checkpoint(T5)


CASES = {  # clean, corrupted (or noised positions), typed target
    "bundled": (CLEAN, CORRUPTED, None),
    "pre_ln": (CLEAN, [3], None),
    "marian": ("she is happy", "she is sad", "the cat sleeps here"),
    "t5": ("the black cat sleeps", "the red cat sleeps", "a cat"),
}


def _stack_point(model, site: str, layer: int):
    """The object whose call's output is the residual stream at hidden index `layer`."""
    if site == "encoder_layers":
        return model.source_embedding if layer == 0 else model.encoder_layers[layer - 1]
    return model.target_embedding if layer == 0 else model.decoder_layers[layer - 1]


def _attention(model, site: str, layer: int):
    if site == "encoder_heads":
        return model.encoder_layers[layer].self_attention
    block = model.decoder_layers[layer]
    return block.self_attention if site == "decoder_heads" else block.cross_attention


def _hooked_score(ckpt, source_ids, vectors, prefix, out_id, foil, hook):
    """The step's score with `hook` = (object, method name, wrapper) in place (None: none)."""
    obj, name, wrapper = hook or (ckpt.model, "encode", lambda f: f)
    original = getattr(obj, name)
    setattr(obj, name, wrapper(original))
    try:
        model = ckpt.model
        enc = model.encode(tf.constant([source_ids]), source_vectors=vectors)
        logits = model.decode(tf.constant([prefix]), enc["memory"], enc["mask"])["logits"]
    finally:
        delattr(obj, name)
    log_probs = tf.nn.log_softmax(tf.cast(logits[0, -1], tf.float64)).numpy()
    return float(log_probs[out_id] - (0.0 if foil is None else log_probs[foil]))


def _capture_and_restore(ckpt, clean_run, corrupt_run, prefix, out_id, foil, site, layer, index):
    """The score with one site restored: run the clean pass with a capturing hook, then the
    corrupted one with a restoring hook at the same place."""
    captured = {}
    if site in ("encoder_layers", "decoder_layers"):
        obj, name = _stack_point(ckpt.model, site, layer), "call"
        is_block = layer > 0

        def capture(original):
            def call(*args, **kwargs):
                result = original(*args, **kwargs)
                captured["value"] = (result["output"] if is_block else result).numpy()
                return result
            return call

        def restore(original):
            def call(*args, **kwargs):
                result = original(*args, **kwargs)
                x = result["output"] if is_block else result
                x = x.numpy().copy()
                x[:, index] = captured["value"][:, index]
                x = tf.constant(x)
                return {**result, "output": x} if is_block else x
            return call
    else:
        obj, name = _attention(ckpt.model, site, layer), "merge_heads"

        def capture(original):
            def merge(context):
                captured["value"] = context.numpy()
                return original(context)
            return merge

        def restore(original):
            def merge(context):
                context = context.numpy().copy()
                context[:, index] = captured["value"][:, index]
                return original(tf.constant(context))
            return merge

    _hooked_score(ckpt, *clean_run, prefix, out_id, foil, (obj, name, capture))
    return _hooked_score(ckpt, *corrupt_run, prefix, out_id, foil, (obj, name, restore))


def _runs(ckpt, clean, corrupted):
    """(ids, token vectors or None) of the clean and the corrupted source, as patch builds
    them (noise: seed 0, 3 sigma of the embedding matrix)."""
    ids = ckpt.encode_source(clean)
    if isinstance(corrupted, str):
        return (ids, None), (ckpt.encode_source(corrupted), None)
    table = ckpt.model.source_token_embedding.embeddings
    rows = tf.gather(table, ids).numpy()[np.newaxis]
    sigma = float(tf.math.reduce_std(tf.cast(table, tf.float64)))
    noised = rows.copy()
    noised[0, corrupted] += np.random.default_rng(0).normal(
        0.0, 3.0 * sigma, (len(corrupted), rows.shape[-1])).astype(rows.dtype)
    return (ids, tf.constant(rows)), (ids, tf.constant(noised))


def _patched(ckpt, which, foil=None):
    clean, corrupted, target = CASES[which]
    if isinstance(corrupted, str):
        return ckpt.patch(clean, corrupted, target, foil=foil)
    return ckpt.patch(clean, target=target, corrupt_positions=corrupted, foil=foil)


@pytest.mark.parametrize("which", list(CASES))
def test_every_site_equals_the_model_rerun_with_a_hook(which, request):
    ckpt = request.getfixturevalue(which)
    clean, corrupted, _ = CASES[which]
    got = _patched(ckpt, which)
    step, out_id = got["step"], got["token_id"]
    output = ckpt.encode_target(CASES[which][2]) if CASES[which][2] else \
        ckpt.translate_plain(clean).token_ids
    prefix = [ckpt.config.start_id] + list(output[:step])
    clean_run, corrupt_run = _runs(ckpt, clean, corrupted)
    assert got["clean_score"] == pytest.approx(
        _hooked_score(ckpt, *clean_run, prefix, out_id, None, None),
        abs=1e-5)
    for site in SITES:
        layers, width = got[site].shape
        for layer in range(layers):
            for index in range(width):
                expected = _capture_and_restore(ckpt, clean_run, corrupt_run, prefix, out_id,
                                                None, site, layer, index)
                assert got[site][layer, index] == pytest.approx(expected, abs=2e-4), \
                    (site, layer, index)


@pytest.mark.parametrize("which", ["bundled", "t5"])
def test_a_foil_scores_the_logit_difference(which, request):
    ckpt = request.getfixturevalue(which)
    plain = _patched(ckpt, which)
    step = plain["step"]
    foil = next(i for i in range(ckpt.config.tgt_vocab_size)
                if i not in (plain["token_id"], ckpt.config.pad_id))
    got = _patched(ckpt, which, foil=foil)
    assert got["step"] == step and got["metric"] == "log p(token) - log p(foil)"
    clean, corrupted, target = CASES[which]
    clean_run, corrupt_run = _runs(ckpt, clean, corrupted)
    output = ckpt.encode_target(target) if target else ckpt.translate_plain(clean).token_ids
    prefix = [ckpt.config.start_id] + list(output[:step])
    for site, layer, index in (("cross_heads", 1, 1), ("encoder_layers", 1, 3)):
        expected = _capture_and_restore(ckpt, clean_run, corrupt_run, prefix, got["token_id"],
                                        foil, site, layer, index)
        assert got[site][layer, index] == pytest.approx(expected, abs=2e-4)


def test_the_dates_pair_shows_the_day_and_the_head_that_carries_it(bundled):
    """March 5 against March 6: the step that writes the day; restoring the day's source
    position at any encoder layer gives the clean answer back, no other position does, and
    one cross-attention head of the last layer carries most of it."""
    got = bundled.patch(CLEAN, CORRUPTED)
    assert got["token"] == "5" and got["output_tokens"][got["step"] - 1] == "0"
    assert got["clean_score"] > -0.5 > -3.0 > got["corrupted_score"]
    day = got["source_tokens"].index("5")
    enc = got["encoder_layers_recovered"]
    assert np.all(enc[:, day] > 0.95)
    assert np.all(np.abs(np.delete(enc, day, axis=1)) < 0.3)
    cross = got["cross_heads_recovered"]
    assert cross.max() > 0.5 and np.sum(cross > 0.5) == 1
    assert got["encoder_layers_picks"][0, day] == got["token_id"]  # the clean run's "5"
    # the decoder's last layer at the step's own position is the clean run's output there
    assert got["decoder_layers_recovered"][-1, -1] == pytest.approx(1.0, abs=1e-5)


def test_the_corrupted_runs_pick_as_the_foil(bundled):
    """foil="corrupted": the clean answer against the corrupted one ("5" against "6")."""
    got = bundled.patch(CLEAN, CORRUPTED, foil="corrupted")
    plain = bundled.patch(CLEAN, CORRUPTED)
    assert got["foil_token"] == "6" and got["foil"] == plain["corrupted_picks"][got["step"]]
    assert got["clean_score"] > 0 > got["corrupted_score"]  # 5 wins, then 6 wins
    with pytest.raises(ValueError, match="also picks the token"):
        bundled.patch(CLEAN, CORRUPTED, step=0, foil="corrupted")
    with pytest.raises(ValueError, match="an id or 'corrupted'"):
        bundled.patch(CLEAN, CORRUPTED, foil="runner-up")


def test_the_default_step_is_the_first_the_corruption_changes(bundled):
    got = bundled.patch(CLEAN, CORRUPTED)
    clean, corrupt = got["step_scores"].T
    assert np.all(np.abs(clean[:got["step"]] - corrupt[:got["step"]]) < 0.5)
    assert bundled.patch(CLEAN, CORRUPTED, step=2)["step"] == 2


def test_recovered_is_the_fraction_of_the_gap():
    assert recovered([-5.0, -3.0, -1.0], clean=-1.0, corrupted=-5.0) == pytest.approx(
        [0.0, 0.5, 1.0])
    assert np.isnan(recovered([1.0, 2.0], clean=2.0, corrupted=2.0)).all()


@pytest.mark.parametrize("kwargs, message", [
    (dict(corrupted="March 15, 2021"), "as many"),
    (dict(corrupted=CLEAN), "clean one's ids"),
    (dict(), "one of the two"),
    (dict(corrupted=CORRUPTED, corrupt_positions=[1]), "one of the two"),
    (dict(corrupt_positions=[]), "at least one"),
    (dict(corrupt_positions=[99]), "source positions must be"),
    (dict(corrupted=CORRUPTED, step=99), "step must be"),
    (dict(corrupted=CORRUPTED, sites=["nowhere"]), "sites must be"),
    (dict(corrupted=CORRUPTED, foil=10_000), "foil must be"),
])
def test_bad_requests_are_refused_with_a_sentence(bundled, kwargs, message):
    with pytest.raises(ValueError, match=message):
        bundled.patch(CLEAN, **kwargs)


def test_one_kind_and_progress(bundled):
    seen = []
    got = bundled.patch(CLEAN, CORRUPTED, sites=["cross_heads", "encoder_layers"],
                        on_progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]  # one pass for the layers, one for the heads
    assert "decoder_layers" not in got and got["cross_heads"].shape == (2, 4)
    assert got["encoder_layers"].shape == (3, len(got["source_tokens"]))


def test_one_trace_per_architecture(bundled):
    from transformer.inference.patching import _patch_function, _runs_function

    bundled.patch(CLEAN, CORRUPTED)
    functions = [*_patch_function(bundled.model).values(), _runs_function(bundled.model)]
    before = [fn.tracing_count() for fn in functions]
    assert before == [1, 1, 1]
    bundled.patch("June 30, 1999", "June 29, 1999", step=4)
    bundled.patch(CLEAN, corrupt_positions=[1, 2])
    assert [fn.tracing_count() for fn in functions] == before
