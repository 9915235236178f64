"""Models the person running the server names (issue 36): `python -m explorer.serve --model
NAME_OR_DIR` puts them first in the picker, the first active; the sidebar's "Open a model by
name or folder" opens a folder or a Hugging Face name on a server started on localhost, and on a
server started for others refuses with a sentence and reads nothing."""

from pathlib import Path

import pytest

from explorer import models, serve, state

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def run_app(monkeypatch, served=(), allowed=True):
    import json

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(state.SERVED_MODELS, json.dumps([str(p) for p in served]))
    monkeypatch.setenv(state.OPEN_BY_NAME, "1" if allowed else "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    return at


def open_by_name(at, text):
    at.text_input(key=state.OPEN_NAME).set_value(text)
    at.sidebar.button[[b.label for b in at.sidebar.button].index("Open")].click().run()
    assert not at.exception, at.exception
    return at


def test_serve_takes_its_own_arguments_and_leaves_streamlits():
    named, allowed, rest = serve.parse(["--model", "org/a", "--server.port", "8501",
                                        "--model=/m/b", "--server.address", "localhost"])
    assert named == ["org/a", "/m/b"] and allowed
    assert rest == ["--server.port", "8501", "--server.address", "localhost"]
    # Streamlit's default address is every interface: a server for others
    assert serve.parse(["--server.port", "1"])[1] is False
    assert serve.parse(["--server.address", "0.0.0.0"])[1] is False
    assert serve.parse(["--server.address", "0.0.0.0", "--open-by-name"])[1] is True
    assert serve.parse(["--server.address", "127.0.0.1", "--no-open-by-name"])[1] is False
    with pytest.raises(SystemExit, match="--model needs"):
        serve.parse(["--model"])


def test_the_first_model_named_at_start_is_active(monkeypatch):
    bart = FIXTURES / "bart"
    at = run_app(monkeypatch, served=[bart, FIXTURES / "t5"])
    assert at.session_state[state.MODEL] == f"{state.NAMED}:{bart}"
    options = at.selectbox(key=state.MODEL).options
    assert options[0] == f"bart (folder {bart})"  # the folder's name first: long paths are cut
    assert f"t5 (folder {FIXTURES / 't5'})" in options
    assert models.active_checkpoint.__module__  # the picker and the model agree
    assert models.open_named(str(bart)).budgets.named


def test_a_folder_typed_in_the_sidebar_opens_and_becomes_active(monkeypatch):
    at = run_app(monkeypatch)
    before = at.session_state[state.MODEL]
    folder = str(FIXTURES / "marian")
    open_by_name(at, folder)
    assert at.session_state[state.MODEL] == f"{state.NAMED}:{folder}"
    assert f"marian (folder {folder})" in at.selectbox(key=state.MODEL).options
    assert before != at.session_state[state.MODEL]
    # what cannot be opened is a sentence, and the model in use stays
    open_by_name(at, "no such/model at all")
    errors = [e.value for e in at.sidebar.error]
    assert any("neither a folder here nor a Hugging Face model name" in e for e in errors), errors
    assert at.session_state[state.MODEL] == f"{state.NAMED}:{folder}"


def test_a_server_for_others_refuses_a_typed_name_and_reads_nothing(monkeypatch):
    opened = []
    monkeypatch.setattr(models, "load_checkpoint",
                        lambda *a, **k: opened.append(a) or pytest.fail("a model was read"))
    at = run_app(monkeypatch, allowed=False)
    before = at.session_state[state.MODEL]
    open_by_name(at, str(FIXTURES / "bart"))
    errors = [e.value for e in at.sidebar.error]
    assert any("does not open models by name or folder" in e for e in errors), errors
    assert opened == [] and at.session_state[state.MODEL] == before
