"""views/Home.py through AppTest: the active model and its translation of the sidebar's
sentence, following the sentence."""

import pytest
from conftest import open_page, set_widget

from explorer import state
from explorer.widgets import plain

HOME = "views/Home.py"


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def test_home_shows_the_models_translation_of_the_sentence(app, ckpt):
    at = open_page(app, HOME)
    assert at.title[0].value == "Attention Explorer"
    shown = metrics(at)
    assert shown["Model"] == ckpt.name
    assert shown["Translation of the sentence"] == plain(ckpt.translate(state.DEFAULT_SOURCE).text)
    sentence = "5th of March 1999"
    set_widget(at, "text_input", state.SOURCE, sentence)
    expected = ckpt.translate(sentence).text
    assert expected != ckpt.translate(state.DEFAULT_SOURCE).text
    assert metrics(at)["Translation of the sentence"] == plain(expected)
    assert f"Source: {sentence!r}" in [c.value for c in at.caption]


def test_home_says_what_the_model_does_and_expects(shared_app, ckpt):
    at = shared_app.page(HOME)
    text = " ".join(m.value for m in at.markdown)
    assert "turns dates written by people into ISO dates" in text
    assert "One date in English with its day, month and year" in text
    from explorer import models

    examples = models.examples(ckpt)[:4]
    assert examples and all(repr(e) in text for e in examples)  # the inputs it expects
    assert not at.warning  # the default sentence is a date as trained


@pytest.mark.parametrize("sentence, says", [
    ("hello there", "no digit"),
    ("42 bananas", "no month name and no date in digits")])
def test_home_warns_when_the_sentence_is_far_from_the_training_data(app, sentence, says):
    at = open_page(app, HOME)
    set_widget(at, "text_input", state.SOURCE, sentence)
    warnings = [w.value for w in at.main.warning]  # (the sidebar may say the model is unsure)
    assert len(warnings) == 1 and says in warnings[0] and "may be nonsense" in warnings[0]
    set_widget(at, "text_input", state.SOURCE, "5 july 1987")
    assert not at.warning
