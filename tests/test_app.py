"""The app shell through AppTest: navigation (every page runs and follows the sentence), the
shared sidebar (examples, models) and uploads. Each page's own behaviour:
tests/test_page_<page>.py; bad input: tests/test_hardening.py."""

import pytest

from explorer import state
from conftest import open_page as _page

PAGES = ["pages/0_Home.py", "pages/1_Model.py", "pages/2_Tokenization.py",
         "pages/3_Positional_Encodings.py", "pages/4_Masks.py", "pages/5_Attention_Maps.py",
         "pages/6_Linked_View.py", "pages/7_Aggregations.py", "pages/8_Token_View.py",
         "pages/9_Head_Arithmetic.py", "pages/10_Decoding.py", "pages/11_Compare_Heads.py",
         "pages/12_Head_Statistics.py", "pages/13_Ablation.py"]
PAGES_WITH_PLOTS = PAGES[1:]


def test_app_opens_on_the_bundled_model(app):
    assert app.session_state[state.MODEL] == "bundled:dates.ckpt"
    assert app.selectbox(key=state.MODEL).value == "bundled:dates.ckpt"
    assert app.text_input(key=state.SOURCE).value == state.DEFAULT_SOURCE
    # The home page shows the model's real translation of the default sentence.
    from explorer.widgets import plain

    assert any(m.value == plain("2021-03-05") for m in app.metric), [m.value for m in app.metric]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_runs_without_exception(app, path):
    at = _page(app, path)
    if path in PAGES_WITH_PLOTS:
        assert at.get("plotly_chart"), f"{path} drew no plot"
    # The shared sidebar is on every page.
    assert at.text_input(key=state.SOURCE).value == state.DEFAULT_SOURCE


@pytest.mark.parametrize("path", PAGES)
def test_every_page_follows_the_sentence(app, path):
    at = _page(app, path)
    before = [c.proto.spec for c in at.get("plotly_chart")] + [m.value for m in at.metric]
    at.text_input(key=state.SOURCE).set_value("5th of March 1999").run()
    assert not at.exception, at.exception
    after = [c.proto.spec for c in at.get("plotly_chart")] + [m.value for m in at.metric]
    if path == "pages/1_Model.py":  # the model page does not depend on the sentence
        assert before == after
    else:
        assert before != after


def test_example_picker_sets_the_sentence(app):
    examples = app.selectbox(key=state.EXAMPLE).options
    assert len(examples) > 2
    app.selectbox(key=state.EXAMPLE).set_value(examples[2]).run()
    assert not app.exception, app.exception
    assert app.text_input(key=state.SOURCE).value == examples[2]


def test_bundled_epoch_checkpoints_are_listed(app):
    options = app.selectbox(key=state.MODEL).options  # the labels shown
    assert options[0] == "dates (final)"
    assert sum("epoch" in o for o in options) >= 2


def test_uploading_a_valid_checkpoint_switches_the_model(app, tiny_checkpoint_bytes):
    at = _page(app, "pages/1_Model.py")
    at.file_uploader(key=state.UPLOADER).upload("tiny.ckpt", tiny_checkpoint_bytes).run()
    assert not at.exception, at.exception
    assert at.session_state[state.MODEL].startswith("upload:")
    assert any("Loaded tiny.ckpt" in s.value for s in at.success)
    assert at.title[0].value == "Model: tiny-upload"
    # It stays active while moving between pages.
    for path in ("pages/2_Tokenization.py", "pages/1_Model.py"):
        at = _page(at, path)
    assert at.title[0].value == "Model: tiny-upload"


@pytest.mark.parametrize("payload", [b"not a checkpoint", b"PK\x03\x04truncated", b""])
def test_uploading_an_invalid_checkpoint_keeps_the_model(app, tiny_checkpoint_bytes, payload):
    at = _page(app, "pages/1_Model.py")
    at.file_uploader(key=state.UPLOADER).upload("tiny.ckpt", tiny_checkpoint_bytes).run()
    active = at.session_state[state.MODEL]
    at.file_uploader(key=state.UPLOADER).clear().run()
    at.file_uploader(key=state.UPLOADER).upload("broken.ckpt", payload).run()
    assert not at.exception, at.exception
    assert at.error, "no error shown"
    assert "Could not load broken.ckpt" in at.error[0].value
    assert "Traceback" not in at.error[0].value
    assert at.session_state[state.MODEL] == active
    assert at.title[0].value == "Model: tiny-upload"
