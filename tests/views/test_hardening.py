"""Issue 9 through the UI: strange text on every page, hostile and broken uploads."""

import io
import json
import pickle
import zipfile

import numpy as np
import pytest
from conftest import ROOT, open_page, set_widget, uploader
from test_app import PAGES

from explorer import sidebar, state

STRANGE_INPUTS = {
    "empty": "",
    "spaces": "   \t  ",
    "10k characters": "Friday, March 5, 2021 " * 455,  # ~10,000 characters, far over max_len
    "accents": "Vendredi 5 mars 2021, à l'été déjà",
    "cjk": "二〇二一年三月五日 金曜日",
    "emoji": "🎉 5 march 2021 🚀👩‍👩‍👧",
    "right-to-left": "الجمعة 5 مارس 2021 שלום",
    "combining marks": "e\u0301\u0300\u0302 5 ma\u0308rch 2021",
    "control and NUL": "5\x00 march\x07 2021\x1b[31m\r\n",
    "only unknown pieces": "ⅫⅫⅫ ♞♞♞ ∰∰",
}


@pytest.mark.slow
@pytest.mark.parametrize("text", list(STRANGE_INPUTS.values()), ids=list(STRANGE_INPUTS))
def test_every_page_survives_strange_text(app, text):
    app.text_input(key=state.SOURCE).set_value(text).run()
    assert not app.exception, app.exception
    for path in PAGES:
        app.switch_page(path).run()
        assert not app.exception, (path, app.exception)
        assert app.session_state[state.SOURCE] == text  # the sentence is kept, not reset


def test_long_sentence_warns_how_many_pieces_were_cut(app):
    app.text_input(key=state.SOURCE).set_value(STRANGE_INPUTS["10k characters"]).run()
    warnings = [w.value for w in app.warning]
    assert any("pieces were cut" in w for w in warnings), warnings
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    cut = ckpt.pieces_cut(STRANGE_INPUTS["10k characters"])
    assert cut > 0 and any(f"last {cut} pieces" in w for w in warnings)


def test_strange_typed_target_on_every_page(app):
    app.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED).run()
    app.text_input(key=state.TARGET).set_value("\x00🎉" + "9" * 300).run()
    assert not app.exception, app.exception
    assert any("target is too long" in w.value for w in app.warning)
    for path in PAGES:
        app.switch_page(path).run()
        assert not app.exception, (path, app.exception)


BAD_INPUTS = [  # (widget, key, value), set one after the other on the same page
    ("text_input", state.SOURCE, ""),
    ("text_input", state.SOURCE, "Monday " * 80),  # cut to max_len
    ("text_input", state.SOURCE, "a long sentence " * 40),
    ("radio", state.TARGET_MODE, state.TARGET_TYPED),
    ("text_input", state.TARGET, ""),  # the decoder sees <s> only
    ("text_input", state.TARGET, "x" * 300),
    ("text_input", state.TARGET, "1999-12-31"),
    ("text_input", state.SOURCE, state.DEFAULT_SOURCE),
]
KIND_PICKERS = {"views/Attention_Maps.py": "attn_kind", "views/Token_View.py": "tv_kind",
                "views/Head_Arithmetic.py": "arith_kind"}
TOKEN_VIEW = "views/Token_View.py"


@pytest.mark.parametrize("path", [
    "views/Attention_Maps.py", "views/Linked_View.py", TOKEN_VIEW,
    "views/Head_Arithmetic.py", "views/Compare_Heads.py", "views/Ablation.py"])
def test_pages_survive_bad_input(app, path):
    """Empty, over-long and typed sentences on both sides: the page still draws after each."""
    at = open_page(app, path)
    if path in KIND_PICKERS:  # the decoder's own kind: its queries and keys are the target
        set_widget(at, "radio", KIND_PICKERS[path], "Decoder self-attention")
    for widget, key, value in BAD_INPUTS:
        set_widget(at, widget, key, value)
        if key == state.SOURCE and not value:  # the page asks for a sentence instead
            assert [i for i in at.main.info if i.value == sidebar.ASK_FOR_SENTENCE], path
            assert not at.get("plotly_chart"), path
        else:
            assert at.get("plotly_chart"), (path, key, value)



class TouchOnUnpickle:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        import pathlib
        return pathlib.Path.touch, (pathlib.Path(self.path),)


def _weights(ckpt: bytes) -> dict:
    """The weights of a checkpoint of either version (2: weights.safetensors, 1: weights.npz)."""
    with zipfile.ZipFile(io.BytesIO(ckpt)) as archive:
        if "weights.safetensors" in archive.namelist():
            from safetensors.numpy import load

            return dict(load(archive.read("weights.safetensors")))
        with np.load(io.BytesIO(archive.read("weights.npz")), allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}


def _npz_with_object(good, marker) -> bytes:
    """The real weights, one of them replaced by a pickled object that would touch the marker."""
    weights = _weights(good)
    weights[next(iter(weights))] = np.array([TouchOnUnpickle(marker)], dtype=object)
    buf = io.BytesIO()
    np.savez(buf, **weights)
    return buf.getvalue()


def _as_version_1(ckpt: bytes, npz: bytes) -> bytes:
    """The checkpoint as version 1 (the only one with an .npz, where a pickle could hide)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(ckpt)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename in ("weights.safetensors", "weights.npz"):
                dst.writestr("weights.npz", npz)
            elif info.filename == "format.json":
                dst.writestr(info.filename, json.dumps(
                    {"format": "attention-explorer-checkpoint", "version": 1}))
            else:
                dst.writestr(info.filename, src.read(info))
    return out.getvalue()


def _replace_member(ckpt: bytes, name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(ckpt)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, data if info.filename == name else src.read(info))
    return out.getvalue()


def _nan_weights(ckpt: bytes) -> bytes:
    from safetensors.numpy import save

    weights = _weights(ckpt)
    name = sorted(weights)[0]
    weights[name] = np.full_like(weights[name], np.nan)
    return _replace_member(ckpt, "weights.safetensors", save(weights))


def _tree_snapshot():
    skip = {".venv", ".git", "test-artifacts", ".pytest_cache", ".hypothesis", "__pycache__"}
    return {p for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)}


@pytest.mark.parametrize("make, words", [
    (lambda good, marker: pickle.dumps(TouchOnUnpickle(marker)), "not a ZIP archive"),
    (lambda good, marker: _as_version_1(good, _npz_with_object(good, marker)), "never loaded"),
    (lambda good, marker: _nan_weights(good), "NaN"),
    (lambda good, marker: good[: len(good) // 2], "truncated"),  # an interrupted upload
])
def test_hostile_or_broken_upload_is_refused_and_changes_nothing(
        app, tiny_checkpoint_bytes, tmp_path, make, words):
    marker = tmp_path / "pwned"
    before = _tree_snapshot()
    app.text_input(key=state.SOURCE).set_value("July 14, 2003").run()
    uploader(app).upload("evil.ckpt", make(tiny_checkpoint_bytes, marker))
    app.run()
    assert not app.exception, app.exception
    assert app.error and words.lower() in app.error[0].value.lower(), [e.value for e in app.error]
    assert not marker.exists(), "the upload ran code"
    # The session's model and sentence are as they were, and nothing was written to the project.
    assert app.session_state[state.MODEL] == "bundled:dates.ckpt"
    assert app.session_state[state.SOURCE] == "July 14, 2003"
    assert app.session_state[state.UPLOADS] == {}
    assert _tree_snapshot() == before


def test_a_session_keeps_a_bounded_number_of_uploads(app, tiny_checkpoint_bytes):
    from explorer.models import MAX_UPLOADS_PER_SESSION

    for i in range(MAX_UPLOADS_PER_SESSION + 2):
        # Same model, different bytes: the metadata differs, so the content hash does.
        data = _replace_member(tiny_checkpoint_bytes, "metadata.json",
                               f'{{"name": "tiny {i}"}}'.encode())
        uploader(app).clear().run()
        uploader(app).upload(f"tiny{i}.ckpt", data).run()
        assert not app.exception, app.exception
    uploads = app.session_state[state.UPLOADS]
    assert len(uploads) == MAX_UPLOADS_PER_SESSION
    assert [name for name, _ in uploads.values()][-1] == f"tiny{MAX_UPLOADS_PER_SESSION + 1}.ckpt"
    assert app.session_state[state.MODEL] == "upload:" + list(uploads)[-1]


def test_a_model_loads_while_another_session_ends_its_run():
    """Streamlit calls keras.backend.clear_session() after every run of any session; a model
    loading in another session at that moment used to get wrong weight paths and fail."""
    import threading
    import time

    import keras

    import explorer  # noqa: F401  (installs the guard, as app.py does)
    from transformer import load_checkpoint

    stop = threading.Event()

    def end_runs():  # about a thousand runs ending a second (a tighter loop only starves the
        while not stop.is_set():  # loads of the GIL: 33 s; without the guard this still fails)
            keras.backend.clear_session()
            time.sleep(0.001)

    thread = threading.Thread(target=end_runs)
    thread.start()
    try:
        for path in sorted((ROOT / "assets" / "checkpoints").glob("*.ckpt"))[:3]:
            assert load_checkpoint(path).translate("5 March 2021").text
    finally:
        stop.set()
        thread.join()



def _with_config(ckpt: bytes, **changes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(ckpt)) as src:
        config = json.loads(src.read("config.json"))
    config.update(changes)
    return _replace_member(ckpt, "config.json", json.dumps(config).encode())


LONG_PAGES = ["views/Masks.py", "views/Attention_Maps.py", "views/Decoding.py",
              "views/Ablation.py", "views/Contributions.py"]
@pytest.fixture
def long_model_app(app, tiny_checkpoint_bytes):
    """The app on an uploaded model whose config allows max_len 16,384, with a 10,000-character
    paste as the source and as the typed target."""
    data = _with_config(tiny_checkpoint_bytes, max_len=16_384)
    uploader(app).upload("long.ckpt", data).run()
    assert not app.exception, app.exception
    assert app.session_state[state.MODEL].startswith("upload:")
    paste = STRANGE_INPUTS["10k characters"]
    set_widget(app, "text_input", state.SOURCE, paste)
    set_widget(app, "radio", state.TARGET_MODE, state.TARGET_TYPED)
    set_widget(app, "text_input", state.TARGET, paste)
    return app


def test_a_long_paste_on_a_max_len_16384_model_is_cut_at_the_budget_with_a_note(long_model_app):
    """Issue 22: the sidebar names the length budget (not max_len) as what cut each side, as it
    names the step budget for a translation; the pages draw the part that fits."""
    from transformer.core import limits

    at = long_model_app
    budget = (f"at the length budget of typed text ({limits.MAX_INPUT_TOKENS} tokens; the "
              "model's max_len is 16384)")
    warnings = [w.value for w in at.warning]
    for side in ("source", "target"):
        note = [w for w in warnings if w.startswith(f"The {side} is too long for this model")]
        assert len(note) == 1 and budget in note[0] and "pieces were cut" in note[0], warnings
    for path in LONG_PAGES:
        open_page(at, path)
        assert at.get("plotly_chart"), path
        assert any(budget in w.value for w in at.warning), path  # the sidebar's note stays


@pytest.mark.slow
def test_every_page_works_on_a_long_paste_on_a_max_len_16384_model(long_model_app):
    for path in PAGES:
        open_page(long_model_app, path)
