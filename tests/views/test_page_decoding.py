"""views/Decoding.py through AppTest: the step view shows the decode's true numbers, stepping
and playing never re-run the model, beam search and head ablation are shown."""

import base64
import json

import numpy as np
import pytest
from conftest import open_page, uploader

from explorer import state
from figures.common import tick_text

PAGE = "views/Decoding.py"
ALL_CROSS = [f"cross L{layer} H{head}" for layer in range(2) for head in range(4)]


@pytest.fixture(scope="module")
def ckpt():
    """The bundled model, loaded here: the reference the page's numbers are compared with."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture
def page(app):
    return open_page(app, PAGE)


@pytest.fixture
def translate_calls(monkeypatch):
    """Every OpenedModel.translate call from now on (the class attribute, so the app's cached
    model counts too), each delegated to the original."""
    from transformer.inference.session import OpenedModel

    calls, original = [], OpenedModel.translate

    def counting(self, source, *args, **kwargs):
        calls.append((source, args, kwargs))
        return original(self, source, *args, **kwargs)

    monkeypatch.setattr(OpenedModel, "translate", counting)
    return calls


def run(target):
    """Run the app (AppTest or a widget just set); fail on any exception it shows."""
    at = target.run()
    assert not at.exception, at.exception
    return at


def chart(at, key):
    """The data traces of the plotly chart with this key, arrays decoded."""
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-" + key)]
    return [{name: _array(value) if name in ("x", "y", "z") else value
             for name, value in trace.items()} for trace in json.loads(found.proto.spec)["data"]]


def _array(value):
    if isinstance(value, dict) and "bdata" in value:  # Plotly's typed-array JSON
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape is not None:
            array = array.reshape([int(s) for s in str(shape).split(",")])
        return array
    return np.asarray(value)


def title(at, key) -> str:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-" + key)]
    return json.loads(found.proto.spec)["layout"]["title"]["text"]


def axis(at, key, name="xaxis") -> dict:
    """One axis of the plotly chart with this key (its ticks: positions and token labels)."""
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-" + key)]
    return json.loads(found.proto.spec)["layout"][name]


def source_labels(ckpt, source=state.DEFAULT_SOURCE):
    return tick_text(ckpt.source_tokenizer.ids_to_pieces(ckpt.encode_source(source)))


def test_page_runs_and_shows_the_translation(page, ckpt):
    reference = ckpt.translate(state.DEFAULT_SOURCE)
    assert page.title[0].value == "Step-by-step decoding"
    assert [c.value for c in page.code] == [reference.text]
    assert page.select_slider(key="dec_step").options == [
        f"{t}: {token}" for t, token in enumerate(reference.tokens)]
    for key in ("dec_top_k", "dec_self", "dec_cross", "dec_alignment"):
        assert chart(page, key)
    assert any("rgba(37, 99, 235" in m.value for m in page.markdown)  # the shaded source


def test_every_step_shows_the_decodes_own_numbers(page, ckpt):
    reference = ckpt.translate(state.DEFAULT_SOURCE)
    sources = source_labels(ckpt)
    page.selectbox(key="dec_layer").set_value(1)
    page.selectbox(key="dec_head").set_value(2)
    for t, step in enumerate(reference.steps):
        run(page.select_slider(key="dec_step").set_value(t))
        (bar,) = chart(page, "dec_cross")
        assert list(bar["x"]) == list(range(len(sources)))  # at positions, ticked with tokens
        assert axis(page, "dec_cross")["ticktext"] == sources
        np.testing.assert_allclose(bar["y"], step.cross[1, 2], atol=1e-6)
        (row,) = chart(page, "dec_self")
        np.testing.assert_allclose(row["z"], step.self[1, 2][None], atol=1e-6)
        assert len(row["x"]) == t + 1
        (top,) = chart(page, "dec_top_k")
        np.testing.assert_allclose(top["x"], [p for _, _, p in step.top_k], atol=1e-6)
        assert list(top["customdata"]) == [i for _, i, _ in step.top_k]
        assert f"Step {t}:" in " ".join(c.value for c in page.caption)
    # The alignment matrix of the head; all heads of the layer: small multiples and the
    # alignment averaged over the heads, its title saying so.
    alignment = reference.cross_attention()  # (L, H, T, N)
    (heat,) = chart(page, "dec_alignment")
    np.testing.assert_allclose(heat["z"], alignment[1, 2], atol=1e-6)
    assert list(heat["x"]) == list(range(len(sources)))
    assert list(heat["y"]) == list(range(len(reference.tokens)))
    assert axis(page, "dec_alignment")["ticktext"] == sources
    assert axis(page, "dec_alignment", "yaxis")["ticktext"] == tick_text(reference.tokens)
    assert title(page, "dec_alignment") == "Alignment, layer 1, head 2"
    run(page.toggle(key="dec_all_heads").set_value(True))
    grid = chart(page, "dec_cross")
    for head, trace in enumerate(grid):
        np.testing.assert_allclose(trace["y"], reference.steps[-1].cross[1, head], atol=1e-6)
    (heat,) = chart(page, "dec_alignment")
    np.testing.assert_allclose(heat["z"], alignment[1].mean(axis=0), atol=1e-6)
    assert title(page, "dec_alignment") == "Alignment, layer 1, mean of its 4 heads"


def test_step_buttons_and_play(page):
    last = len(page.select_slider(key="dec_step").options) - 1
    run(page.button(key="dec_next").click())
    run(page.button(key="dec_next").click())
    assert page.select_slider(key="dec_step").value == 2
    before = chart(page, "dec_top_k")
    run(page.button(key="dec_prev").click())
    assert page.select_slider(key="dec_step").value == 1
    assert chart(page, "dec_top_k") != before
    run(page.slider(key="dec_max_len").set_value(3))
    assert page.select_slider(key="dec_step").value == 1
    run(page.button(key="dec_play").click())  # plays through to the last step, then stops
    assert page.select_slider(key="dec_step").value == 2 < last
    play = page.button(key="dec_play")
    assert (play.label, play.proto.icon) == ("Play", ":material/play_arrow:")
    assert page.button(key="dec_next").proto.icon == ":material/skip_next:"


def test_play_reruns_the_step_fragment_alone_never_the_page(page, translate_calls, monkeypatch):
    from explorer import sidebar
    from testkit.fragments import click_in_fragment

    run(page.slider(key="dec_max_len").set_value(3))  # steps 0, 1, 2
    run(page.select_slider(key="dec_step").set_value(0))
    baseline, renders = len(translate_calls), []
    original = sidebar.render
    monkeypatch.setattr(sidebar, "render", lambda: renders.append(1) or original())
    click_in_fragment(page, "dec_play")  # as the browser: the button's fragment reruns alone
    assert page.select_slider(key="dec_step").value == 2  # one step per tick, to the last
    assert page.button(key="dec_play").label == "Play"  # ... where it stopped
    assert not renders  # every tick reran the step fragment alone: not app.py, not the sidebar
    assert len(translate_calls) == baseline  # nor the decode
    run(page)  # a full rerun afterwards stays on the last step, stopped
    assert page.select_slider(key="dec_step").value == 2
    assert page.button(key="dec_play").label == "Play"


def test_stepping_and_slicing_never_rerun_the_model(page, translate_calls):
    run(page)
    baseline = len(translate_calls)
    for t, layer, head in [(3, 1, 0), (0, 0, 3)]:
        page.select_slider(key="dec_step").set_value(t)
        page.selectbox(key="dec_layer").set_value(layer)
        run(page.selectbox(key="dec_head").set_value(head))
    run(page.toggle(key="dec_all_heads").set_value(True))
    run(page.button(key="dec_next").click())
    run(page.select_slider(key="dec_step").set_value(7))
    assert len(translate_calls) == baseline
    # New options decode again, once each (values no other test uses: nothing cached yet).
    run(page.slider(key="dec_max_len").set_value(9))
    assert len(translate_calls) == baseline + 1
    assert translate_calls[-1][2]["max_len"] == 9
    run(page.slider(key="dec_beam_width").set_value(5))
    assert len(translate_calls) == baseline + 2
    assert translate_calls[-1][2]["beam_width"] == 5
    run(page.select_slider(key="dec_step").set_value(0))  # (a beam of 5 cut at 9 tokens may
    assert len(translate_calls) == baseline + 2             # keep only its finished "</s>")


def test_beam_search_shows_the_beam_and_the_n_best(page, ckpt):
    reference = ckpt.translate(state.DEFAULT_SOURCE, beam_width=3)
    run(page.slider(key="dec_beam_width").set_value(3))
    run(page.select_slider(key="dec_step").set_value(2))
    beam, nbest = (d.value for d in page.dataframe)
    assert list(beam["hypothesis"]) == [" ".join(tokens) for tokens, _ in reference.beam_steps[2]]
    np.testing.assert_allclose(beam["log-prob"], [lp for _, lp in reference.beam_steps[2]],
                               atol=1e-4)
    assert len(beam) == 3
    assert list(nbest["hypothesis"]) == [" ".join(h.tokens) for h in reference.hypotheses]
    assert nbest["score"].iloc[0] == pytest.approx(reference.score, abs=1e-4)
    assert [c.value for c in page.code] == [reference.text]


def test_ablating_every_cross_head_shows_both_decodings(page, ckpt):
    run(page.multiselect(key="dec_ablate").set_value(ALL_CROSS))
    ablated = ckpt.translate(state.DEFAULT_SOURCE, head_mask={"cross": np.zeros((2, 4))})
    normal = ckpt.translate(state.DEFAULT_SOURCE)
    assert [c.value for c in page.code] == [ablated.text, normal.text]
    assert ablated.text != normal.text
    run(page.select_slider(key="dec_step").set_value(1))
    (top,) = chart(page, "dec_top_k")  # the step view shows the ablated run
    np.testing.assert_allclose(top["x"], [p for _, _, p in ablated.steps[1].top_k], atol=1e-6)
    (bar,) = chart(page, "dec_cross")
    np.testing.assert_allclose(bar["y"], ablated.steps[1].cross[0, 0], atol=1e-6)


def test_an_empty_sentence_is_asked_for_not_decoded(page):
    from explorer import sidebar

    run(page.text_input(key=state.SOURCE).set_value("  "))
    assert [i.value for i in page.main.info] == [sidebar.ASK_FOR_SENTENCE]
    assert not page.get("plotly_chart")


@pytest.mark.parametrize("source", ["9 " * 400 + "<s> $x$ *bold*"])
def test_very_long_sentences(page, source):
    run(page.text_input(key=state.SOURCE).set_value(source))
    assert page.code and chart(page, "dec_cross")
    run(page.select_slider(key="dec_step").set_value(
        len(page.select_slider(key="dec_step").options) - 1))
    run(page.toggle(key="dec_all_heads").set_value(True))


def test_choices_outside_a_smaller_uploaded_model_are_clamped(page, tiny_checkpoint_bytes):
    page.selectbox(key="dec_layer").set_value(1)
    page.selectbox(key="dec_head").set_value(3)
    page.multiselect(key="dec_ablate").set_value(["cross L1 H3", "encoder L0 H0"])
    run(page.select_slider(key="dec_step").set_value(11))
    at = run(uploader(page).upload("tiny.ckpt", tiny_checkpoint_bytes))
    assert at.session_state[state.MODEL].startswith("upload:")  # 1 layer, 2 heads, max_len 40
    assert at.selectbox(key="dec_layer").value == 0 and at.selectbox(key="dec_head").value == 1
    assert at.slider(key="dec_max_len").value == 40
    assert at.multiselect(key="dec_ablate").value == ["encoder L0 H0"]
    assert chart(at, "dec_cross") and chart(at, "dec_alignment")


def test_the_page_says_which_target_it_decodes(page):
    told = " ".join(c.value for c in page.caption)
    assert "decodes `'Friday, March 5, 2021'` on its own" in told
    assert "Type a target in the sidebar to step through it with teacher forcing" in told
    assert "dec_mode" not in [r.key for r in page.radio]  # nothing typed: nothing to force
    run(page.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED))
    run(page.text_input(key=state.TARGET).set_value("1999-12-31"))
    # Issue 38: a typed target is what the page steps through, unless the user picks otherwise
    assert page.radio(key="dec_mode").value == "The typed target, teacher-forced"
    assert "Teacher forcing on" in " ".join(c.value for c in page.caption)
    assert [c.value for c in page.code] == ["1999-12-31"]
    run(page.radio(key="dec_mode").set_value("The model's own decoding"))
    told = " ".join(c.value for c in page.caption)
    assert "Your typed target `'1999-12-31'` is not used here: pick it above" in told
    run(page.text_input(key=state.TARGET).set_value("1999-12-30"))  # the choice stays
    assert page.radio(key="dec_mode").value == "The model's own decoding"


def test_a_typed_target_is_stepped_through_with_teacher_forcing(page, ckpt, translate_calls):
    run(page.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED))
    run(page.text_input(key=state.TARGET).set_value("1999-12-31"))
    run(page.radio(key="dec_mode").set_value("The typed target, teacher-forced"))
    maps = ckpt.attention(state.DEFAULT_SOURCE, "1999-12-31")
    assert [c.value for c in page.code] == ["1999-12-31"]
    assert page.select_slider(key="dec_step").options == [
        f"{t}: {token}" for t, token in enumerate(maps["output_tokens"])]
    assert "Teacher forcing on" in " ".join(c.value for c in page.caption)
    calls = len(translate_calls)
    page.selectbox(key="dec_layer").set_value(1)
    page.selectbox(key="dec_head").set_value(2)
    for t in (1, 5):
        run(page.select_slider(key="dec_step").set_value(t))
        (bar,) = chart(page, "dec_cross")
        np.testing.assert_allclose(bar["y"], maps["cross"][1, 2, t], atol=1e-5)
        (row,) = chart(page, "dec_self")
        np.testing.assert_allclose(row["z"][0], maps["decoder"][1, 2, t, :t + 1], atol=1e-5)
        (top,) = chart(page, "dec_top_k")  # the forced token is drawn even when not in the top k
        p = float(np.exp(maps["log_probs"][t]))
        assert any(abs(x - p) < 1e-4 for x in top["x"])
        assert f"the model gives it p = {p:.3f}" in " ".join(c.value for c in page.caption)
    (heat,) = chart(page, "dec_alignment")
    np.testing.assert_allclose(heat["z"], maps["cross"][1, 2], atol=1e-5)
    assert len(translate_calls) == calls  # stepping re-runs nothing


def test_a_translation_cut_by_the_time_budget_says_so_in_the_sidebar_and_on_the_page(
        app, monkeypatch):
    """A model whose decode runs out of time (here a budget of 0 s: one step) shows the tokens
    it made and a warning naming the budget, in the sidebar and on the Decoding page."""
    from transformer import OpenedModel

    original = OpenedModel.translate  # the model's time budget spent at once: one step
    monkeypatch.setattr(OpenedModel, "translate", lambda self, *a, seconds=None, **k: original(
        self, *a, seconds=0.0 if seconds is None else seconds, **k))
    app.text_input(key=state.SOURCE).set_value("Sunday, 7 November 1999 (time budget)")
    at = run(open_page(app, PAGE))
    expected = "stopped after 1 token without an end token, at the time budget of one " \
               "translation (10 s)"  # the model's budget (an upload's), spent here at once
    assert any(expected in w.value for w in at.sidebar.warning), [w.value for w in at.warning]
    assert any(expected in w.value for w in at.main.warning), [w.value for w in at.warning]


def test_a_decode_cut_at_the_pages_max_length_says_so(page):
    """Issue 38: Max length 5 made the translation "2021" with no word that it stopped there,
    while the sidebar still showed 2021-03-05."""
    run(page.slider(key="dec_max_len").set_value(5))
    assert [c.value for c in page.code] == ["2021"]
    [note] = [i.value for i in page.info if "Max length" in i.value]
    assert "stopped after 5 tokens at the Max length set above (5 tokens), before its end " \
           "token. The sidebar's translation and the other pages are not cut by it." in note
    assert [c for c in page.sidebar.caption if c.value == "Translation: **2021-03-05**"]
    run(page.slider(key="dec_max_len").set_value(page.slider(key="dec_max_len").max))
    assert not [i for i in page.info if "Max length" in i.value]  # it ended on its own
