"""explorer.warm.prepare_in_background (issue 24, item 4): in the served app, a model that opens
gets every compiled function the pages call traced and run once in the background (an
opus-mt-sized model's Attention maps, Head arithmetic and Ablation pages each used to pay a
2-3 s trace on their first visit), once per architecture; off where nothing asked for it."""

import dataclasses
import threading

import keras
import numpy as np
import pytest

from explorer import warm
from transformer import DEFAULT_CHECKPOINT, OpenedModel, load_checkpoint
from transformer.inference import search_ours
from transformer.inference.decoded import TOP_K
from transformer.inference.decoder_lens import compiled_lens
from transformer.inference.forward import forward_function
from transformer.inference.gradients import _jacobian_function
from transformer.inference.prepare import KINDS, prepare
from transformer.model.transformer import Transformer


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(DEFAULT_CHECKPOINT)


def small(bundled, dff: int, seed: int = 0) -> OpenedModel:
    """A random model with the bundled tokenizers, of an architecture no other test uses (its
    compiled functions are shared per config across the process)."""
    config = dataclasses.replace(bundled.config, d_model=8, num_heads=2, dff=dff, head_dim=None,
                                 num_encoder_layers=1, num_decoder_layers=1)
    keras.utils.set_random_seed(seed)
    model = Transformer(config).build_weights()
    return OpenedModel(config, model, bundled.source_tokenizer, bundled.target_tokenizer)


def traces(model) -> dict[str, int]:
    """How many times each compiled function the pages call was traced for this architecture."""
    functions = {"greedy": search_ours.compiled_greedy(model, True),
                 "greedy_no_capture": search_ours.compiled_greedy(model, False),
                 "forward": forward_function(model),
                 "forward_top": forward_function(model, top_k=TOP_K),
                 "forward_details_layer": forward_function(model, details=True, one_layer=True),
                 "forward_values": forward_function(model, values=True),
                 "forward_values_hidden": forward_function(model, values=True,
                                                           hidden_states=True),
                 "beam": search_ours.compiled_beam(model),
                 "gradients": _jacobian_function(model),
                 "decoder_lens": compiled_lens(model)}
    assert set(functions) == set(KINDS)
    return {kind: fn.tracing_count() for kind, fn in functions.items()}


@pytest.fixture
def served(monkeypatch):
    """Background preparation on (as explorer.serve turns it on), nothing prepared yet."""
    on = threading.Event()
    on.set()
    monkeypatch.setattr(warm, "_background", on)
    monkeypatch.setattr(warm, "_prepared", set())
    monkeypatch.setattr(warm, "_threads", [])


def test_every_function_is_prepared_once_per_architecture(bundled, served):
    ckpt = small(bundled, dff=37)
    assert set(traces(ckpt.model).values()) == {0}
    thread = warm.prepare_in_background(ckpt)
    assert thread is not None
    warm.wait_prepared(timeout=300)
    assert not thread.is_alive()
    assert traces(ckpt.model) == dict.fromkeys(KINDS, 1)
    same_architecture = small(bundled, dff=37, seed=1)  # another model of the same config
    assert warm.prepare_in_background(same_architecture) is None
    assert warm.prepare_in_background(ckpt) is None
    # What a page then computes traces nothing more, and is that model's own numbers.
    ids = ckpt.encode_source("5 March 2021")
    first = same_architecture.translate("5 March 2021")
    again = ckpt.translate("5 March 2021")
    assert traces(ckpt.model) == dict.fromkeys(KINDS, 1)
    assert len(ids) > 1 and first.steps and again.steps
    assert not np.allclose(first.steps[0].cross, again.steps[0].cross)


def test_off_where_no_server_asked_for_it(bundled, monkeypatch):
    monkeypatch.setattr(warm, "_background", threading.Event())  # AppTest, scripts
    monkeypatch.setattr(warm, "_prepared", set())
    ckpt = small(bundled, dff=41)
    assert warm.prepare_in_background(ckpt) is None
    assert set(traces(ckpt.model).values()) == {0}


def test_prepare_runs_each_function_once_and_then_costs_a_call(bundled):
    ckpt = small(bundled, dff=43)
    first = prepare(ckpt.model)
    assert set(first) == set(KINDS) and traces(ckpt.model) == dict.fromkeys(KINDS, 1)
    prepare(ckpt.model, kinds=("forward",))
    assert traces(ckpt.model) == dict.fromkeys(KINDS, 1)


def test_a_model_with_a_generation_config_gets_its_search_prepared(bundled, served):
    """A Hugging Face model's translation is its generation config's search (a beam loop of
    transformer.inference.search_transformers): prepared first, then decoding with those settings
    traces nothing more."""
    from transformer.inference.search_transformers import _compiled, generation_settings

    ckpt = small(bundled, dff=47)
    c = ckpt.config
    ckpt.generation = generation_settings(
        {"num_beams": 3, "no_repeat_ngram_size": 2, "bad_words_ids": [[5], [6, 7]],
         "decoder_start_token_id": c.start_id, "eos_token_id": c.end_id,
         "pad_token_id": c.pad_id, "max_length": 12}, c)
    beam = _compiled(ckpt.model, "beam")
    assert beam.tracing_count() == 0
    warm.prepare_in_background(ckpt)
    warm.wait_prepared(timeout=300)
    assert beam.tracing_count() == 1 and traces(ckpt.model) == dict.fromkeys(KINDS, 1)
    result = ckpt.generate("5 March 2021")
    assert result.beam_width == 3 and result.token_ids
    assert beam.tracing_count() == 1


def test_the_masks_pages_other_rows_are_decoded_in_the_background(bundled, served, monkeypatch):
    """The Masks page's other batch rows depend on the model alone (not on the sidebar's
    sentence): the background preparation decodes them into the cache the page reads, so the
    page's call decodes nothing, and gets what decoding them together gives."""
    from explorer import results

    ckpt = small(bundled, dff=53)
    ckpt.content_hash = "masks-rows-test"  # the results' cache key (a built model has none)
    warm.prepare_in_background(ckpt)
    warm.wait_prepared(timeout=300)
    calls = []
    decode = results.greedy_decode_batch
    monkeypatch.setattr(results, "greedy_decode_batch",
                        lambda *a, **k: calls.append(a) or decode(*a, **k))
    rows = results.batch_translations(ckpt, list(results.MASK_OTHERS), results.MASK_OTHER_STEPS)
    assert calls == []  # from the cache
    together = search_ours.greedy_decode_batch(
        ckpt.model, [ckpt.encode_source(s) for s in results.MASK_OTHERS],
        max_len=results.MASK_OTHER_STEPS, capture=False)
    assert [d.token_ids for d in rows] == [d.token_ids for d in together]
    # another batch is decoded by the page itself
    results.batch_translations(ckpt, ["1 May 1990"], results.MASK_OTHER_STEPS)
    assert len(calls) == 1


def test_a_page_run_to_its_end_lets_the_warm_ups_rest_begin(monkeypatch):
    """The warm-up's work after the first page can run (the maps pass, every compiled function:
    seconds holding the interpreter) waits for a page's run to end (app.py sets page_shown),
    so that it does not slow the home page's own run."""
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    shown = threading.Event()
    monkeypatch.setattr(warm, "page_shown", shown)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    assert shown.is_set()


def test_after_the_first_page_the_sentences_maps_and_lens_are_in_the_pages_cache(
        bundled, served, monkeypatch):
    """What the warm-up computes while the user reads the first page (after_first_page) is
    what the pages then read from the cache: the maps pass and the Interventions page's
    DecoderLens of the default sentence (3-4 s of nllb-200-distilled-600M's first visit there)
    run no model again, and equal computing them anew."""
    from explorer import results

    ckpt = small(bundled, dff=59)
    ckpt.content_hash = "after-first-page-test"  # the results' cache key
    source = "5 March 2021"
    warm.after_first_page(ckpt, source)
    assert traces(ckpt.model) == dict.fromkeys(KINDS, 1)
    calls = []
    for name in ("attention", "decoder_lens"):
        real = getattr(OpenedModel, name)
        monkeypatch.setattr(OpenedModel, name, lambda self, *a, _real=real, _n=name, **k:
                            calls.append(_n) or _real(self, *a, **k))
    lens = results.sentence_lens(ckpt, source, None)
    maps = results.attention(ckpt, source)
    assert calls == []  # both from the cache
    out_ids = results.translation(ckpt, source).token_ids
    anew = ckpt.decoder_lens(source, output_ids=out_ids,
                             max_steps=min(ckpt.step_budget(), len(out_ids) + results.LENS_STEPS))
    np.testing.assert_array_equal(lens["log_probs"], anew["log_probs"])
    assert lens["translations"] == anew["translations"] and len(lens["layers"]) == 2
    assert maps["output_ids"].tolist() == out_ids
    # another sentence is the page's own to compute
    calls.clear()
    results.sentence_lens(ckpt, "1 May 1990", None)
    assert calls == ["decoder_lens"]
