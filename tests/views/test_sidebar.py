"""The sidebar (issue 24): the sentence box first, the model next, upload in an expander, the
link near the top; every page in the navigation; an empty sentence asked for, never translated;
a word when the model is unsure of its translation, with a way to that step."""

import numpy as np
import pytest
from conftest import open_page, set_widget
from test_app import PAGES

from explorer import player, results, sidebar, state
from transformer import OpenedModel


def _sidebar_order(at) -> list[str]:
    """The sidebar's headers, widgets and expanders by label, in the order they are drawn."""
    seen = []
    for node in at.sidebar:
        label = getattr(node, "label", None) or getattr(node, "value", None)
        if node.type in ("header", "selectbox", "text_input", "expander", "file_uploader"):
            seen.append(str(label))
    return seen


def test_the_sentence_comes_first_then_the_model_and_upload_in_an_expander(shared_app):
    app = shared_app.page()
    order = _sidebar_order(app)
    assert order.index("Source sentence") < order.index("Active model"), order
    assert order.index("Link to this view") < order.index("Active model"), order
    expander = [e for e in app.sidebar.expander if e.label == "Upload a model"]
    assert expander and expander[0].get("file_uploader"), "the uploader is not in its expander"


def test_every_page_is_in_the_navigation_in_sections():
    import ast

    from explorer.pages import SECTIONS as DECLARED

    tree = ast.parse(open("app.py").read())
    sections = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    and getattr(n.targets[0], "id", None) == "SECTIONS")
    # app.py's navigation is every declared section's pages, built from explorer/pages.py
    assert isinstance(sections, ast.DictComp)
    assert ast.unparse(sections.generators[0].iter) == "PAGE_SECTIONS.items()"
    files = [page.file for pages in DECLARED.values() for page in pages]
    assert sorted(files) == sorted(PAGES)
    assert len(DECLARED) >= 4  # grouped
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call)
                and getattr(n.func, "attr", None) == "navigation")
    assert any(k.arg == "expanded" and k.value.value is True for k in call.keywords)


@pytest.mark.parametrize("path", PAGES)
def test_an_empty_sentence_is_asked_for_and_never_translated(app, monkeypatch, path):
    calls = []
    original = OpenedModel.translate
    monkeypatch.setattr(OpenedModel, "translate",
                        lambda self, source, *a, **k: calls.append(source) or original(
                            self, source, *a, **k))
    at = open_page(app, path)
    set_widget(at, "text_input", state.SOURCE, "   ")
    assert "" not in calls and "   " not in calls
    assert [i.value for i in at.sidebar.info if "Type a sentence" in i.value]
    if path == "views/Model.py":
        assert at.title[0].value.startswith("Model")
    else:
        shown = [i.value for i in at.main.info]
        assert sidebar.ASK_FOR_SENTENCE in shown, shown
        assert not at.get("plotly_chart")
    set_widget(at, "text_input", state.SOURCE, state.DEFAULT_SOURCE)  # nothing was lost
    assert at.session_state[state.MODEL] == state.default_model_choice()


def test_a_confident_translation_gets_no_word(shared_app):
    """The bundled model is sure of the default sentence: the translation, and no warning."""
    app = shared_app.page()
    assert not [w for w in app.sidebar.warning if "unsure" in w.value]
    assert [c for c in app.sidebar.caption if c.value.startswith("Translation: **")]


def test_an_unsure_translation_says_where_and_opens_that_step(app, monkeypatch):
    monkeypatch.setattr(sidebar, "UNSURE_BELOW", 1.01)  # every translation is "unsure"
    set_widget(app, "text_input", state.SOURCE, "5 March 2021")
    [warning] = [w.value for w in app.sidebar.warning if "unsure" in w.value]
    from explorer import models

    result = results.translation(models.active_checkpoint(), "5 March 2021")
    probs = np.exp([s.log_prob for s in result.steps])
    t = int(np.argmin(probs))
    assert f"at step {t} it chose {result.steps[t].token!r}" in warning
    assert f"probability {probs[t]:.2f}" in warning
    app.button(key="sidebar_unsure_step").click().run()
    assert not app.exception, app.exception
    assert app.title[0].value == "Step-by-step decoding"
    assert app.session_state[player.STEP] == t


def test_a_beam_searchs_less_probable_choice_is_explained():
    """Issue 38: under beam search the sidebar said "chose '<0xA4>' with probability 0.15;
    next best '<0xC1>' at 0.24": the "next best" was more probable than the choice. Beam search
    may choose so (the whole sequence's score decides); the warning now says that."""
    from types import SimpleNamespace

    from streamlit.testing.v1 import AppTest

    def script():
        from types import SimpleNamespace

        import numpy as np

        from explorer import sidebar
        from transformer import DEFAULT_CHECKPOINT, load_checkpoint

        tokenizer = load_checkpoint(DEFAULT_CHECKPOINT).target_tokenizer
        step = SimpleNamespace(token="1", token_id=6, log_prob=float(np.log(0.15)),
                               top_k=[("2", 7, 0.24), ("1", 6, 0.15)])  # (token, id, p)
        sure = SimpleNamespace(token="0", token_id=5, log_prob=0.0, top_k=[("0", 5, 1.0)])
        result = SimpleNamespace(text="01", steps=[sure, step])
        sidebar._say_if_unsure(result, (), tokenizer)

    del SimpleNamespace
    at = AppTest.from_function(script, default_timeout=120).run()
    assert not at.exception, at.exception
    [warning] = [w.value for w in at.warning]
    assert "at step 1 it chose '1' with probability 0.15" in warning
    assert "'2' was more probable at this step (0.24), but a beam search keeps" in warning
    assert "next best" not in warning
