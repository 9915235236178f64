"""transformer.inference.search_transformers: decoding as transformers decodes, from generation_config.json.

- recorded (CI, no torch): tests/fixtures/marian/generation.npz holds transformers' generate on
  the tiny Marian fixture for a grid of settings (tests/fixtures/make_marian_generation.py):
  num_beams 1..5 x length_penalty 0, 0.6, 1, 2, -1 x early_stopping True/False/"never",
  no_repeat_ngram_size 1/2/3, bad_words_ids, forced BOS/EOS, min_length, min/max_new_tokens,
  small and large max_length, two eos ids, suppressed ids, another decoder start, opus-mt's own
  config, several returned sequences; generate must give the same ids (every returned
  sequence) and sequence scores (1e-4);
- live (where transformers is installed; CI has no torch, so these skip): the same grid
  against transformers itself, and the recording against it;
- every step's attention rows and log-probability, for every hypothesis, equal one
  teacher-forced pass over that hypothesis (the beam's bookkeeping on the device);
- read_generation_config on hostile and odd files: a sentence or a documented cap, fast, nothing
  allocated by a number.
"""

from __future__ import annotations

import importlib.util
import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from transformer import CheckpointError
from transformer.core import limits
from transformer.importers.hf.marian import FAMILY as MARIAN
from transformer.inference import compiled
from transformer.inference.decoded import BeamDecoding, Decoding
from transformer.inference.generation_config import MAX_BAD_WORDS, MAX_NUM_BEAMS
from transformer.inference.numerics import log_softmax
from transformer.inference.search_ours import greedy_decode
from transformer.inference.search_transformers import (
    GeneratedBeam,
    GenerationSettings,
    generate,
    generation_settings,
    read_generation_config,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_spec = importlib.util.spec_from_file_location("make_marian_generation",
                                               FIXTURES / "make_marian_generation.py")
recipe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recipe)

SCORE_ATOL, SCORE_RTOL = 1e-4, 1e-5  # transformers' scores are float32 sums


@pytest.fixture(scope="module")
def marian():
    return MARIAN.convert(recipe.FOLDER)


@pytest.fixture(scope="module")
def recorded():
    with np.load(recipe.OUT) as data:
        return {name: data[name] for name in data.files}


def settings_for(checkpoint, case) -> GenerationSettings:
    """The fixture's generation_config.json with the case's settings on top, as transformers
    merges generate's keyword arguments into the model's generation config."""
    return generation_settings({**recipe.base_config(), **case}, checkpoint.config)


def ours(checkpoint, case, sentence):
    """(sequences, scores or None) as make_marian_generation records transformers'."""
    settings = settings_for(checkpoint, case)
    result = generate(checkpoint.model, checkpoint.encode_source(sentence), settings,
                      tokenizer=checkpoint.target_tokenizer)
    if settings.num_beams == 1:
        assert type(result) is Decoding
        return [result.token_ids], None
    assert isinstance(result, BeamDecoding) and isinstance(result, GeneratedBeam)
    count = settings.num_return_sequences
    return ([h.token_ids for h in result.hypotheses[:count]], result.sequence_scores[:count])


def assert_same(case, sentence, got, want):
    (got_ids, got_scores), (want_ids, want_scores) = got, want
    assert got_ids == want_ids, f"{case} on {sentence!r}"
    if want_scores is not None:
        np.testing.assert_allclose(got_scores, want_scores, atol=SCORE_ATOL, rtol=SCORE_RTOL,
                                   err_msg=f"{case} on {sentence!r}")


def recorded_case(recorded, i, j):
    ids = recorded[f"ids_{i}_{j}"]
    scores = recorded[f"scores_{i}_{j}"]
    return ([[int(x) for x in row if x >= 0] for row in ids],
            [float(s) for s in scores] if scores.size else None)


# ============================================================================= recorded (CI)
def test_recording_is_of_this_grid(recorded):
    assert json.loads(str(recorded["cases"])) == recipe.GRID
    assert json.loads(str(recorded["sentences"])) == recipe.SENTENCES


@pytest.mark.parametrize("i", range(len(recipe.GRID)),
                         ids=[json.dumps(c, separators=(",", ":")) for c in recipe.GRID])
def test_equals_recorded_transformers(marian, recorded, i):
    case = recipe.GRID[i]
    for j, sentence in enumerate(recipe.SENTENCES):
        assert_same(case, sentence, ours(marian, case, sentence), recorded_case(recorded, i, j))


# ============================================================================= live
@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return recipe.load_transformers()


@pytest.mark.parametrize("i", range(len(recipe.GRID)),
                         ids=[json.dumps(c, separators=(",", ":")) for c in recipe.GRID])
def test_equals_live_transformers(marian, hf, recorded, i):
    """transformers itself, now: our ids and scores equal its, and so does the recording."""
    model, tokenizer = hf
    case = recipe.GRID[i]
    for j, sentence in enumerate(recipe.SENTENCES):
        assert tokenizer(sentence).input_ids == marian.encode_source(sentence)
        live = recipe.transformers_generate(model, tokenizer, case, sentence)
        assert_same(case, sentence, ours(marian, case, sentence), live)
        assert_same(case, sentence, recorded_case(recorded, i, j), live)


def test_live_default_generation_config(marian, hf):
    """No setting given: the model's generation_config.json alone (greedy, 20 new tokens)."""
    model, tokenizer = hf
    settings = read_generation_config((recipe.FOLDER / "generation_config.json").read_bytes(),
                                      marian.config)
    assert (settings.num_beams, settings.max_length) == (1, 21)
    for sentence in recipe.SENTENCES:
        result = generate(marian.model, marian.encode_source(sentence), settings)
        assert [result.token_ids] == recipe.transformers_generate(model, tokenizer, {},
                                                                  sentence)[0]


# ============================================================================= the pipeline
@pytest.fixture(scope="module")
def opus(tmp_path_factory):
    """The fixture with opus-mt's generation_config.json, opened as a user opens its folder."""
    from transformer import load_checkpoint

    folder = recipe.opus_folder(tmp_path_factory.mktemp("opus"))
    return folder, load_checkpoint(folder)


def _pipeline_equal(checkpoint, rows):
    for row in rows:
        result = checkpoint.generate(row["sentence"])  # no settings: the model's own file
        assert result.token_ids == row["ids"], row["sentence"]
        assert result.text == row["text"], row["sentence"]


def test_default_translation_equals_recorded_pipeline(opus):
    """With opus-mt's generation config the default translation (OpenedModel.generate, what the
    app's sidebar shows) is the translation pipeline's: its ids and its text."""
    folder, checkpoint = opus
    assert checkpoint.generation.num_beams == 4 and checkpoint.generation.notes == ()
    rows = json.loads(recipe.PIPELINE_OUT.read_text())
    assert [row["sentence"] for row in rows] == recipe.PIPELINE_SENTENCES
    assert len({tuple(row["ids"]) for row in rows}) > 5  # the sentences give different outputs
    _pipeline_equal(checkpoint, rows)


def test_default_translation_equals_live_pipeline(opus, hf):
    folder, checkpoint = opus
    _pipeline_equal(checkpoint, recipe.pipeline_translations(folder, recipe.PIPELINE_SENTENCES))


# ============================================================================= steps
def teacher_forced(checkpoint, source_ids, output_ids, start_id):
    """One pass over [start] + output_ids[:-1]: log-probabilities (T, V), self (L, H, T, T),
    cross (L, H, T, N)."""
    model = checkpoint.model
    enc = model.encode(np.array([source_ids], np.int32))
    prefix = np.array([[start_id] + list(output_ids[:-1])], np.int32)
    dec = model.decode(prefix, enc["memory"], enc["mask"])
    return (log_softmax(dec["logits"].numpy()[0]), dec["self_attention"].numpy()[:, 0],
            dec["cross_attention"].numpy()[:, 0])


@pytest.mark.parametrize("case", [{"num_beams": 1, "no_repeat_ngram_size": 2},
                                  {"num_beams": 4, "length_penalty": 0.6},
                                  {"num_beams": 3, "no_repeat_ngram_size": 2, "min_length": 9,
                                   "num_return_sequences": 3, "decoder_start_token_id": 5}])
def test_every_step_holds_its_own_hypothesis_attention(marian, case):
    """Each hypothesis's steps (the best and every other finished one): token, log-probability,
    top-k, self- and cross-attention rows equal one teacher-forced pass over that hypothesis,
    so the rows followed the beam through every reordering."""
    settings = settings_for(marian, case)
    for sentence in recipe.SENTENCES[:3]:
        source = marian.encode_source(sentence)
        result = generate(marian.model, source, settings, tokenizer=marian.target_tokenizer)
        hypotheses = result.hypotheses if settings.num_beams > 1 else [result]
        assert len(hypotheses) == (settings.num_beams if settings.num_beams > 1 else 1)
        for hypothesis in hypotheses:
            ids = hypothesis.token_ids
            log_probs, self_maps, cross_maps = teacher_forced(
                marian, source, ids, settings.decoder_start_token_id)
            assert [s.token_id for s in hypothesis.steps] == ids
            assert hypothesis.tokens == marian.target_tokenizer.ids_to_pieces(ids)
            for t, step in enumerate(hypothesis.steps):
                np.testing.assert_allclose(step.log_prob, log_probs[t, ids[t]], atol=1e-4)
                np.testing.assert_allclose(step.self, self_maps[:, :, t, : t + 1], atol=1e-5)
                np.testing.assert_allclose(step.cross, cross_maps[:, :, t], atol=1e-5)
                assert step.top_k[0][1] == int(np.argmax(log_probs[t]))
        if settings.num_beams > 1:
            assert result.token_ids == result.hypotheses[0].token_ids
            assert result.score == result.sequence_scores[0]
            assert result.sequence_scores == sorted(result.sequence_scores, reverse=True)
            assert result.beam_steps and all(len(alive) <= settings.num_beams
                                              for alive in result.beam_steps)


def test_greedy_equals_greedy_decode_where_no_ban_differs(marian):
    """With no processor, generate's greedy search is search_ours.greedy_decode (which also bans
    pad and start: the fixture's greedy outputs hold neither), attention included."""
    settings = settings_for(marian, {"num_beams": 1, "max_length": 30})
    for sentence in recipe.SENTENCES:
        source = marian.encode_source(sentence)
        ours_ = generate(marian.model, source, settings)
        theirs = greedy_decode(marian.model, source, max_len=29)
        assert ours_.token_ids == theirs.token_ids
        assert ours_.stopped_by == theirs.stopped_by
        for a, b in zip(ours_.steps, theirs.steps):
            np.testing.assert_allclose(a.self, b.self, atol=1e-6)
            np.testing.assert_allclose(a.cross, b.cross, atol=1e-6)
            assert a.top_k == b.top_k


def test_head_mask_is_applied(marian):
    mask = {"cross": np.zeros((2, 4), np.float32)}
    settings = settings_for(marian, {"num_beams": 1, "max_length": 12})
    source = marian.encode_source(recipe.SENTENCES[1])
    silenced = generate(marian.model, source, settings, head_mask=mask)
    expected = greedy_decode(marian.model, source, max_len=11, head_mask=mask)
    assert silenced.token_ids == expected.token_ids
    for a, b in zip(silenced.steps, expected.steps):
        np.testing.assert_allclose(a.log_prob, b.log_prob, atol=1e-6)
    unmasked = generate(marian.model, source, settings)
    assert [s.log_prob for s in unmasked.steps] != [s.log_prob for s in silenced.steps]


def test_stopped_by(marian):
    source = marian.encode_source("we go to school by bus")  # ends with </s> (0) after 3 ids
    assert generate(marian.model, source, settings_for(marian, {})).stopped_by == "end"
    source = marian.encode_source("the black cat sleeps")  # never ends
    for beams in (1, 4):
        result = generate(marian.model, source, settings_for(marian, {"num_beams": beams}))
        assert result.stopped_by == "length" and len(result.token_ids) == 20
        timed = generate(marian.model, source, settings_for(marian, {"num_beams": beams}),
                         seconds=0.0)
        assert timed.stopped_by == "time"
        # greedy starts no step once the budget is spent; beam search ends the step under way
        # as transformers' MaxTimeCriteria does (its best candidates finished)
        assert len(timed.token_ids) == (1 if beams == 1 else 2)


def test_one_trace_per_kind(marian):
    """Other settings, sources and lengths reuse the compiled loops (the settings are inputs)."""
    source = marian.encode_source(recipe.SENTENCES[0])
    for kind, beams in (("greedy", 1), ("beam", 3)):
        generate(marian.model, source, settings_for(marian, {"num_beams": beams}))
        loop = compiled.shared_function(marian.model, f"generate_{kind}", None, None)
        before = loop.tracing_count()
        for case in ({"no_repeat_ngram_size": 2, "max_length": 9},
                     {"bad_words_ids": [[81], [93, 93]], "forced_bos_token_id": 7},
                     {"eos_token_id": [0, 93], "length_penalty": 2.0, "early_stopping": True}):
            generate(marian.model, marian.encode_source(recipe.SENTENCES[4]),
                     settings_for(marian, {**case, "num_beams": beams + 1 if beams > 1 else 1}))
        assert loop.tracing_count() == before


# ============================================================================= the settings
def test_no_file_gives_transformers_defaults(marian):
    for data in (None, b""):
        settings = read_generation_config(data, marian.config)
        assert settings == GenerationSettings(
            max_length=21, decoder_start_token_id=188, eos_token_id=(0,), pad_token_id=188)
        assert settings.notes == () and settings.ignored == ()


def test_opus_mt_config(marian):
    data = json.dumps({
        "bad_words_ids": [[188]], "bos_token_id": 0, "decoder_start_token_id": 188,
        "eos_token_id": 0, "forced_eos_token_id": 0, "max_length": 512, "num_beams": 4,
        "pad_token_id": 188, "renormalize_logits": True, "transformers_version": "4.38.0",
        "_from_model_config": True}).encode()
    settings = read_generation_config(data, marian.config)
    assert settings.num_beams == 4 and settings.bad_words_ids == ((188,),)
    assert settings.forced_eos_token_id == (0,) and settings.renormalize_logits
    assert settings.max_length == limits.step_budget(marian.config, 4) + 1  # 512 capped
    assert settings.notes == ("max_length 512 is capped to 64 new tokens (the step budget of one "
                              "translation with this model).",)
    assert settings.ignored == ()
    assert settings.greedy().num_beams == 1 and settings.greedy().forced_eos_token_id == (0,)
    assert settings.describe()[:2] == ["beam search of width 4", "at most 64 new tokens"]


def test_lengths_as_transformers_counts_them(marian):
    config = marian.config
    assert generation_settings({"max_length": 10}, config).max_new_tokens == 9
    assert generation_settings({"max_new_tokens": 10, "max_length": 3}, config).max_length == 11
    assert generation_settings({"min_new_tokens": 4, "min_length": 2}, config).min_length == 5
    assert generation_settings({"no_repeat_ngram_size": 50, "max_length": 10},
                               config).no_repeat_ngram_size == 0  # no 50-gram fits: no ban
    capped = generation_settings({"min_length": 100, "max_length": 10}, config)
    assert capped.min_length == 10 and "beyond the maximum" in capped.notes[0]


def test_notes_and_ignored_keys(marian):
    settings = generation_settings({"do_sample": True, "num_beams": 3, "top_k": 10,
                                    "repetition_penalty": 1.2, "my_key": 1, "other": [1],
                                    "num_return_sequences": 9}, marian.config)
    assert settings.ignored == ("my_key", "other")
    notes = " ".join(settings.notes)
    assert "Sampling (do_sample) is not supported: the beam search" in notes
    assert "repetition_penalty (1.2) is not applied" in notes
    assert "num_return_sequences 9 is capped to num_beams (3)" in notes
    assert "Unknown keys are ignored: 'my_key', 'other'." in notes
    assert settings.num_return_sequences == 3
    odd = generation_settings({"early_stopping": None, "pad_token_id": 10**6,
                               "eos_token_id": []}, marian.config)
    assert odd.early_stopping is False and odd.eos_token_id == (0,) and odd.pad_token_id == 188
    assert "pad_token_id 1,000,000 is not an id of the target vocabulary" in odd.notes[0]


HOSTILE = {
    "not JSON": (b"{\"num_beams\": 4", "is not valid JSON"),
    "not UTF-8": (b"{\"num_beams\": \xff}", "is not valid JSON"),
    "a list": (b"[1, 2, 3]", "must hold a JSON object of settings, not a list"),
    "text": (b"\"beam\"", "must hold a JSON object of settings, not text"),
    "24 digits": (b"{\"max_length\": 123456789012345678901234}", "more than 20 digits"),
    "deep nesting": (b"{\"x\": " + b"[" * 5000 + b"]" * 5000 + b"}", "not valid JSON"),
    "nested 40": (b"{\"x\": " + b"[" * 40 + b"]" * 40 + b"}", "nested more than 32"),
    "num_beams text": (b"{\"num_beams\": \"4\"}", "num_beams must be a whole number, not '4'"),
    "num_beams bool": (b"{\"num_beams\": true}", "num_beams must be a whole number, not true"),
    "num_beams float": (b"{\"num_beams\": 4.5}", "num_beams must be a whole number"),
    "num_beams 0": (b"{\"num_beams\": 0}", "num_beams must be at least 1, not 0"),
    "negative max_length": (b"{\"max_length\": -5}", "max_length must be at least 2, not -5"),
    "max_length 1": (b"{\"max_length\": 1}", "max_length must be at least 2"),
    "max_length inf": (b"{\"max_length\": 1e999}", "max_length must be a whole number"),
    "max_new_tokens 0": (b"{\"max_new_tokens\": 0}", "max_new_tokens must be at least 1"),
    "negative min_length": (b"{\"min_length\": -1}", "min_length must be at least 0"),
    "length_penalty NaN": (b"{\"length_penalty\": NaN}", "length_penalty must be a finite"),
    "length_penalty inf": (b"{\"length_penalty\": Infinity}", "must be a finite number"),
    "length_penalty huge": (b"{\"length_penalty\": 1e300}", "length_penalty 1e+300 is beyond"),
    "length_penalty text": (b"{\"length_penalty\": \"1.0\"}", "length_penalty must be a number"),
    "early_stopping": (b"{\"early_stopping\": \"sometimes\"}",
                       "early_stopping must be true, false or \"never\", not 'sometimes'"),
    "early_stopping 1": (b"{\"early_stopping\": [1]}", "early_stopping must be true"),
    "bad words flat": (b"{\"bad_words_ids\": [1, 2]}", "bad_words_ids must be a list of lists"),
    "bad words object": (b"{\"bad_words_ids\": {\"a\": 1}}", "must be a list of lists of ids"),
    "bad word text": (b"{\"bad_words_ids\": [[1, \"a\"]]}", "ids of the target vocabulary"),
    "bad word empty": (b"{\"bad_words_ids\": [[]]}", "must hold 1 to 64 ids, not 0"),
    "bad word id": (b"{\"bad_words_ids\": [[189]]}", "(0 to 188), not 189"),
    "eos list id": (b"{\"eos_token_id\": [0, 999999]}", "eos_token_id must be ids of the"),
    "eos nested": (b"{\"eos_token_id\": [[0]]}", "eos_token_id must be ids"),
    "negative forced bos": (b"{\"forced_bos_token_id\": -1}", "forced_bos_token_id must be an id"),
    "start beyond": (b"{\"decoder_start_token_id\": 10000}", "decoder_start_token_id must be"),
    "do_sample text": (b"{\"do_sample\": \"yes\"}", "do_sample must be true or false"),
    "ngram negative": (b"{\"no_repeat_ngram_size\": -2}", "no_repeat_ngram_size must be at"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_file_is_refused_in_a_sentence(marian, name):
    data, words = HOSTILE[name]
    started = time.perf_counter()
    with pytest.raises(CheckpointError) as caught:
        read_generation_config(data, marian.config)
    message = str(caught.value)
    assert words in message, message
    assert "\n" not in message and "Traceback" not in message and len(message) < 300
    assert message.startswith("'generation_config.json'")
    assert time.perf_counter() - started < 0.5


def test_fifty_megabytes_refused_before_parsing(marian):
    data = b"{\"x\": \"" + b"a" * (50 * 2**20) + b"\"}"
    started = time.perf_counter()
    with pytest.raises(CheckpointError, match="bytes; a generation config is at most 1,048,576"):
        read_generation_config(data, marian.config)
    assert time.perf_counter() - started < 0.05


def test_many_bad_words_refused(marian):
    data = json.dumps({"bad_words_ids": [[1]] * (MAX_BAD_WORDS + 1)}).encode()
    with pytest.raises(CheckpointError, match="lists 1,025 sequences; at most 1,024"):
        read_generation_config(data, marian.config)
    data = json.dumps({"bad_words_ids": [[1] * 65]}).encode()
    with pytest.raises(CheckpointError, match="must hold 1 to 64 ids, not 65"):
        read_generation_config(data, marian.config)


def test_huge_numbers_are_capped_without_allocating(marian):
    """num_beams 10**6, max_length 10**9 and friends: capped (and said), read in well under a
    megabyte, and a generate with them decodes within the step budget."""
    data = json.dumps({"num_beams": 10**6, "max_length": 10**9, "min_length": 10**18,
                       "no_repeat_ngram_size": 10**18, "num_return_sequences": 10**18,
                       "max_new_tokens": 10**19}).encode()
    tracemalloc.start()
    started = time.perf_counter()
    settings = read_generation_config(data, marian.config)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 0.1 and peak < 2**20
    assert settings.num_beams == MAX_NUM_BEAMS
    budget = limits.step_budget(marian.config, MAX_NUM_BEAMS)
    assert settings.max_length == budget + 1 and settings.min_length == budget + 1
    assert settings.no_repeat_ngram_size == 0 and settings.num_return_sequences == MAX_NUM_BEAMS
    notes = " ".join(settings.notes)
    assert "num_beams 1,000,000 is capped to 16" in notes
    assert "max_new_tokens 10,000,000,000,000,000,000 is capped to 64 new tokens" in notes
    result = generate(marian.model, marian.encode_source("she is happy"), settings, seconds=5)
    assert len(result.token_ids) <= budget and result.beam_width == MAX_NUM_BEAMS


def test_settings_are_frozen(marian):
    settings = read_generation_config(b"{\"num_beams\": 2}", marian.config)
    with pytest.raises(AttributeError):
        settings.num_beams = 3


def test_an_end_list_of_the_whole_vocabulary_keeps_every_candidate(marian):
    """eos_token_id listing every id makes transformers' beam search ask top-k for (1 + #eos) x
    beams candidates out of beams x vocab (its top-k fails: issue 37): every candidate is kept,
    with a note, and the search runs."""
    vocab = marian.config.tgt_vocab_size
    settings = settings_for(marian, {"num_beams": 4, "eos_token_id": list(range(vocab)),
                                     "max_length": 6})
    assert any("every candidate is kept" in note for note in settings.notes)
    result = generate(marian.model, marian.encode_source("I like cats."), settings,
                      tokenizer=marian.target_tokenizer)
    assert len(result.token_ids) == 1 and result.stopped_by == "end"  # every id ends it
    assert np.isfinite(result.sequence_scores).all()


@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_step_with_no_token_left_ends_the_search_without_nan(marian, num_beams):
    """Every id banned (suppress_tokens; renormalize_logits made the scores NaN, issue 37): the
    search stops before that step with stopped_by "banned", and the model says why; banned
    from the third step on (bad words of every id but two, which end the allowed ones), it
    stops after two tokens."""
    vocab = marian.config.tgt_vocab_size
    settings = settings_for(marian, {"num_beams": num_beams, "suppress_tokens": list(range(vocab)),
                                     "renormalize_logits": True, "max_length": 8})
    assert any("ban every id" in note for note in settings.notes)
    result = generate(marian.model, marian.encode_source("I like cats."), settings,
                      tokenizer=marian.target_tokenizer)
    assert result.token_ids == [] and result.stopped_by == "banned"
    assert "banned every token" in marian.stopped_by_budget(result)
    if num_beams > 1:
        assert not np.isnan(result.sequence_scores).any()
    # two ids allowed, none repeated (no_repeat_ngram_size 1): two steps, then none is left
    allowed = [5, 6]
    settings = settings_for(marian, {
        "num_beams": num_beams, "renormalize_logits": True, "max_length": 8,
        "suppress_tokens": [i for i in range(vocab) if i not in allowed],
        "no_repeat_ngram_size": 1, "eos_token_id": [vocab - 1]})
    result = generate(marian.model, marian.encode_source("I like cats."), settings,
                      tokenizer=marian.target_tokenizer)
    assert sorted(result.token_ids) == allowed and result.stopped_by == "banned"
    assert all(np.isfinite(step.log_prob) for step in result.steps)
    if num_beams > 1:
        assert np.isfinite(result.sequence_scores).all()


@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_forced_token_that_is_suppressed_leaves_no_token(marian, num_beams):
    """suppress_tokens runs after the forced BOS and EOS (transformers' order): where it bans
    the forced id, that step has no token left, so the search stops before it ("banned")
    instead of emitting the forced token."""
    source = marian.encode_source("I like cats.")
    bos = settings_for(marian, {"num_beams": num_beams, "forced_bos_token_id": 93,
                                "suppress_tokens": [93], "max_length": 8})
    result = generate(marian.model, source, bos, tokenizer=marian.target_tokenizer)
    assert result.token_ids == [] and result.stopped_by == "banned"
    eos = settings_for(marian, {"num_beams": num_beams, "forced_eos_token_id": 0,
                                "suppress_tokens": [0], "max_length": 6})
    result = generate(marian.model, source, eos, tokenizer=marian.target_tokenizer)
    assert len(result.token_ids) == 4 and 0 not in result.token_ids  # 5 forced: none left
    assert result.stopped_by == "banned"
