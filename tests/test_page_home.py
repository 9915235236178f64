"""pages/0_Home.py through AppTest: the active model and its translation of the sidebar's
sentence, following the sentence."""

import pytest

from conftest import open_page, set_widget
from explorer import state
from explorer.widgets import plain

HOME = "pages/0_Home.py"


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
