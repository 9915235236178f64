"""The translation a Hugging Face model shows is the one transformers' generate gives with the
model's generation_config.json (issue 26, item 3): the sidebar says which settings are in force
and lets the user switch to greedy, the Decoding page steps through that very search (its beam
and transformers' scores), and ablation re-decodes with the same settings.

BART's tiny fixture (tests/fixtures/bart) searches with 4 beams, length penalty 2, no repeated
3-gram and a forced <s>; its recorded.npz holds transformers' generate output with that config
(beam) and with num_beams=1 (greedy)."""

import numpy as np
import pytest
from conftest import ROOT, open_page, set_widget, uploader

from explorer import links, state, tokens
from transformer import load_checkpoint
from transformer.core.kinds import head_masks

BART = ROOT / "tests" / "fixtures" / "bart"
DECODING, ABLATION = "views/Decoding.py", "views/Ablation.py"


@pytest.fixture(scope="module")
def recorded():
    return np.load(BART / "recorded.npz")


@pytest.fixture(scope="module")
def bart():
    return load_checkpoint(BART)


@pytest.fixture(scope="module")
def app(recorded):
    """app.py with the BART folder uploaded and the sentence of recorded's first case."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    files = [(p.name, p.read_bytes(), "application/octet-stream") for p in sorted(BART.iterdir())]
    uploader(at).set_value(files).run()
    assert not at.exception, at.exception
    at.sidebar.text_input(key=state.SOURCE).set_value(str(recorded["sentences"][0])).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at


def _translation(at) -> str:
    (caption,) = [c.value for c in at.sidebar.caption if c.value.startswith("Translation: ")]
    return caption.removeprefix("Translation: **").removesuffix("**")


def _text(bart, ids) -> str:
    return bart.target_tokenizer.decode([int(i) for i in ids])


def test_the_sidebar_translation_is_transformers_beam_search_and_says_so(app, bart, recorded):
    at = app
    assert at.session_state[state.SEARCH] == state.SEARCH_CONFIG
    search = at.sidebar.radio(key=state.SEARCH)
    assert search.options == [f"{state.SEARCH_CONFIG} (beam search of width 4)",
                              state.SEARCH_GREEDY]
    in_force = [c.value for c in at.sidebar.caption if c.value.startswith("In force: ")]
    assert in_force == ["In force: beam search of width 4; at most 11 new tokens; length penalty "
                        "2; early stopping True; no repeated 3-gram; first token forced to id 0; "
                        "</s> forced at the length limit."]
    beam = recorded["s0_beam_ids"]
    assert _translation(at) == (_text(bart, beam) or "(empty)")
    assert list(beam) != list(recorded["s0_greedy_ids"])  # the two searches differ here
    # <s> is forced at step 0 (the model gives it p ~ 0): not a doubt of the model's
    assert beam[0] == 0 and bart.generate(str(recorded["sentences"][0])).steps[0].log_prob < -2
    assert not [w.value for w in at.sidebar.warning if "at step 0 " in w.value]


def test_the_pages_show_the_searched_translation_and_its_beam(app, bart, recorded):
    at = open_page(app, DECODING)
    radio = at.radio(key="dec_search")
    assert radio.value == "As the sidebar's translation"
    beam = [int(i) for i in recorded["s0_beam_ids"]]
    # the steps stepped through are the searched tokens, forced <s> first
    step = at.select_slider(key="dec_step")
    pieces = tokens.shown(bart.target_tokenizer, bart.target_tokenizer.ids_to_pieces(beam))
    assert list(step.options) == [f"{i}: {piece}" for i, piece in enumerate(pieces)]
    assert not any("Ġ" in option for option in step.options)  # byte-level pieces shown as text
    assert any(c.value.startswith("Step 0: the model's generation config forces '<s>' here")
               for c in at.caption)
    beam_now, table = (d.value for d in at.dataframe)  # the beam after the step, the n-best
    assert table.iloc[0, -1] == pytest.approx(float(recorded["s0_beam_score"]), abs=1e-4)
    assert any("as transformers scores a finished hypothesis" in m.value for m in at.markdown)
    # this app's own options are a choice away
    set_widget(at, "radio", "dec_search", "With the options here")
    assert at.slider(key="dec_beam_width").value == 1


def test_ablation_searches_as_the_translation_did(app, bart, recorded):
    at = open_page(app, ABLATION)
    label = "decoder L0 H1"
    at.multiselect(key="abl_heads").set_value([label]).run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    source = str(recorded["sentences"][0])
    assert metrics["Original translation"] == (_text(bart, recorded["s0_beam_ids"]) or "(empty)")
    silenced = bart.generate(source, bart.generation,
                             head_mask=head_masks(bart.config, [("decoder", 0, 1)]))
    assert silenced.beam_width == 4
    assert metrics["With 1 head(s) silenced"] == (silenced.text or "(empty)")
    assert any("decoded as the sidebar's translation (beam search of width 4)" in m.value
               for m in at.markdown)
    at.multiselect(key="abl_heads").set_value([]).run()


def test_greedy_is_a_switch_away_and_in_the_link(app, bart, recorded):
    at = open_page(app, "views/Home.py")
    set_widget(at, "radio", state.SEARCH, state.SEARCH_GREEDY)
    assert _translation(at) == (_text(bart, recorded["s0_greedy_ids"]) or "(empty)")
    in_force = [c.value for c in at.sidebar.caption if c.value.startswith("In force: ")]
    assert in_force[0].startswith("In force: greedy search; at most 11 new tokens; no repeated")
    assert at.query_params.get(links.SEARCH) == links.GREEDY
    set_widget(at, "radio", state.SEARCH, state.SEARCH_CONFIG)
    assert _translation(at) == (_text(bart, recorded["s0_beam_ids"]) or "(empty)")
    assert links.SEARCH not in at.query_params


def test_a_bundled_model_has_no_search_to_pick(app):
    at = app
    set_widget(at, "selectbox", state.MODEL, state.default_model_choice())
    assert not [r for r in at.sidebar.radio if r.key == state.SEARCH]
    assert not [c for c in at.sidebar.caption if c.value.startswith("In force: ")]


def test_a_link_reopens_the_greedy_search_and_names_a_bad_one():
    from streamlit.testing.v1 import AppTest

    for value, search, noted in (("greedy", state.SEARCH_GREEDY, False),
                                 ("beam", state.SEARCH_CONFIG, True)):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params[links.SEARCH] = value
        at.run()
        assert not at.exception, at.exception
        assert at.session_state[state.SEARCH] == search
        notes = [i.value for i in at.sidebar.info if "could not be reopened" in i.value]
        assert bool(notes) == noted
        if noted:
            assert "search='beam' is not a search this link can set" in notes[0]
