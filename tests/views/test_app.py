"""The app shell through AppTest: navigation (every page runs and follows the sentence), the
shared sidebar (examples, models) and uploads. Each page's own behaviour:
tests/test_page_<page>.py; bad input: tests/views/test_hardening.py."""

import json
import re

import pytest
from conftest import ROOT, uploader
from conftest import open_page as _page

from explorer import state
from explorer.pages import PAGE_FILES

PAGES = PAGE_FILES  # every page, in the menus' order (explorer/pages.py), Home first
PAGES_WITH_PLOTS = PAGES[1:]


def test_app_opens_on_the_bundled_model(shared_app):
    app = shared_app.page()
    assert app.session_state[state.MODEL] == "bundled:dates.ckpt"
    assert app.selectbox(key=state.MODEL).value == "bundled:dates.ckpt"
    assert app.text_input(key=state.SOURCE).value == state.DEFAULT_SOURCE
    # The home page shows the model's real translation of the default sentence.
    from explorer.widgets import plain

    assert any(m.value == plain("2021-03-05") for m in app.metric), [m.value for m in app.metric]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_runs_without_exception(shared_app, path):
    at = shared_app.page(path)
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
    if path == "views/Model.py":  # the model page does not depend on the sentence
        assert before == after
    else:
        assert before != after


def test_example_picker_sets_the_sentence(app):
    examples = app.selectbox(key=state.EXAMPLE).options
    assert len(examples) > 2
    app.selectbox(key=state.EXAMPLE).set_value(examples[2]).run()
    assert not app.exception, app.exception
    assert app.text_input(key=state.SOURCE).value == examples[2]


def test_bundled_epoch_checkpoints_are_listed(shared_app):
    app = shared_app.page()
    options = app.selectbox(key=state.MODEL).options  # the labels shown
    assert options[0] == "dates (final)"
    assert sum("epoch" in o for o in options) >= 2


def test_uploading_a_valid_checkpoint_switches_the_model(app, tiny_checkpoint_bytes):
    at = _page(app, "views/Model.py")
    uploader(at).upload("tiny.ckpt", tiny_checkpoint_bytes).run()
    assert not at.exception, at.exception
    assert at.session_state[state.MODEL].startswith("upload:")
    assert any("Loaded tiny.ckpt" in s.value for s in at.success)
    assert at.title[0].value == "Model: tiny-upload"
    # It stays active while moving between pages.
    for path in ("views/Tokenization.py", "views/Model.py"):
        at = _page(at, path)
    assert at.title[0].value == "Model: tiny-upload"


def test_a_handled_upload_clears_the_uploader_and_a_second_opens_too(app,
                                                                     tiny_checkpoint_bytes):
    """Issue 24: the uploader kept every file ever dropped. Once a checkpoint is opened the
    uploader is a new, empty one; a second checkpoint dropped on it opens and becomes active,
    both stay listed, and the outcome is kept as a note for the Model page."""
    from explorer import models
    from explorer.widgets import plain
    from transformer.checkpoint.format import checkpoint_bytes
    from transformer.inference.session import load_checkpoint

    first = load_checkpoint(tiny_checkpoint_bytes)
    second_bytes = checkpoint_bytes(first.model, first.source_tokenizer, first.target_tokenizer,
                                    {**first.metadata, "name": "second-upload"})
    at = _page(app, "views/Model.py")
    before = state.uploader_key(at.session_state)
    at.file_uploader(key=before).upload("tiny.ckpt", tiny_checkpoint_bytes).run()
    after = state.uploader_key(at.session_state)
    assert after != before and at.file_uploader(key=after).value in (None, [])
    at.file_uploader(key=after).upload("second.ckpt", second_bytes).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Loaded second.ckpt" in s.value for s in at.main.success)
    assert at.title[0].value == "Model: second-upload"
    assert sum("(uploaded" in o for o in at.selectbox(key=state.MODEL).options) == 2
    notes = at.session_state[state.UPLOAD_NOTES]
    assert [kind for kind, _ in notes] == ["success", "success"] and "tiny.ckpt" in notes[0][1]
    at = _page(at, "views/Model.py")  # a later run: the outcome is kept on the Model page
    [kept] = [e for e in at.expander if e.label.startswith("Uploads in this session (2)")]
    text = " ".join(m.value for m in kept.markdown)
    assert plain("Loaded tiny.ckpt") in text and plain("Loaded second.ckpt") in text
    assert models.MAX_NOTES >= 2


@pytest.mark.parametrize("payload", [b"not a checkpoint", b"PK\x03\x04truncated", b""])
def test_uploading_an_invalid_checkpoint_keeps_the_model(app, tiny_checkpoint_bytes, payload):
    at = _page(app, "views/Model.py")
    uploader(at).upload("tiny.ckpt", tiny_checkpoint_bytes).run()
    active = at.session_state[state.MODEL]
    uploader(at).clear().run()
    uploader(at).upload("broken.ckpt", payload).run()
    assert not at.exception, at.exception
    assert at.error, "no error shown"
    assert "Could not load broken.ckpt" in at.error[0].value
    assert "Traceback" not in at.error[0].value
    assert at.session_state[state.MODEL] == active
    assert at.title[0].value == "Model: tiny-upload"


# ------------------------------------------------------------------ models trained elsewhere
# The sidebar's uploader also takes the files other programs wrote (issue 13 part 5, issue 14
# part 2): several files at once or one .zip; a short form asks what the files cannot tell, the
# model is converted in memory and opened. Failures keep the model, sentence and uploads.
FIXTURES = ROOT / "tests" / "fixtures"
TUTORIAL = FIXTURES / "tutorial_dates"
TUTORIAL_FILES = ("model.weights.h5", "source_vocab.txt", "target_vocab.txt")
MARIAN = FIXTURES / "marian"
SEQ2SEQ_SIZES = dict(vocab_size=30, target_vocab=20, d_model=16, heads=2, dff=32, seq_len=6)


def _lines(tokens) -> bytes:
    return ("\n".join(tokens) + "\n").encode()


def _seq2seq_vocabularies() -> dict[str, bytes]:
    """TextVectorization.get_vocabulary() files, as tests/importers/test_convert.py writes them."""
    s = SEQ2SEQ_SIZES
    return {"eng_vocab.txt": _lines(["", "[UNK]"] + [f"w{i}" for i in range(s["vocab_size"] - 2)]),
            "spa_vocab.txt": _lines(["", "[UNK]", "[start]", "[end]"]
                                    + [f"s{i}" for i in range(s["target_vocab"] - 4)])}


def _saved_weights(tmp_path_factory, module: str, seed: int) -> bytes:
    """The Keras example (tests/originals/<module>.py), small and random, saved as its users
    save it (model.save_weights)."""
    keras = pytest.importorskip("keras")
    import importlib

    build = importlib.import_module(f"originals.{module}").build_transformer
    keras.utils.set_random_seed(seed)
    s = SEQ2SEQ_SIZES
    model = build(s["vocab_size"], s["seq_len"], s["d_model"], s["dff"], s["heads"],
                  target_vocab_size=s["target_vocab"])
    path = tmp_path_factory.mktemp(module) / "translator.weights.h5"
    model.save_weights(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def seq2seq_files(tmp_path_factory) -> dict[str, bytes]:
    return {"translator.weights.h5": _saved_weights(tmp_path_factory, "keras_seq2seq", 1),
            **_seq2seq_vocabularies()}


@pytest.fixture(scope="module")
def handwritten_files(tmp_path_factory) -> dict[str, bytes]:
    return {"translator.weights.h5": _saved_weights(tmp_path_factory, "keras_seq2seq_handwritten", 2),
            **_seq2seq_vocabularies()}


@pytest.fixture(scope="module")
def tf_checkpoint_files(tmp_path_factory) -> dict[str, bytes]:
    """The Keras example under TF 2.x with Keras 2 (tf-keras, in its own process), saved as
    ModelCheckpoint(save_weights_only=True) saves it: ckpt.index + ckpt.data-00000-of-00001."""
    import os
    import subprocess
    import sys

    pytest.importorskip("tf_keras")
    s = SEQ2SEQ_SIZES
    prefix = tmp_path_factory.mktemp("tf_keras") / "ckpt"
    script = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
              "import tf_keras\n"
              "from originals import tf_keras_seq2seq\n"
              "tf_keras.utils.set_random_seed(4)\n"
              f"model = tf_keras_seq2seq.build_transformer({s['vocab_size']}, {s['seq_len']}, "
              f"{s['d_model']}, {s['dff']}, {s['heads']}, target_vocab_size={s['target_vocab']})\n"
              f"model.save_weights({str(prefix)!r})\n")
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    names = ("ckpt.index", "ckpt.data-00000-of-00001")
    return {name: (prefix.parent / name).read_bytes() for name in names}


@pytest.fixture(scope="module")
def tutorial_files() -> dict[str, bytes]:
    return {name: (TUTORIAL / name).read_bytes() for name in TUTORIAL_FILES}


@pytest.fixture(scope="module")
def marian_files() -> dict[str, bytes]:
    """Every file of the Marian folder, as a user selects them all (the extras are not read)."""
    return {path.name: path.read_bytes() for path in sorted(MARIAN.iterdir())}


def _zipped(files: dict[str, bytes], folder: str) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(f"{folder}/{name}", data)
    return buffer.getvalue()


def _upload(at, files: dict[str, bytes]):
    uploader(at).set_value(
        [(name, data, "application/octet-stream") for name, data in files.items()]).run()
    assert not at.exception, at.exception
    return at


def _submit(at):
    at.button(key=state.IMPORT_SUBMIT).click().run()
    assert not at.exception, at.exception
    return at


def _shown_translation(at, sentence: str) -> str:
    """The Home page's translation of `sentence` (the metric's text, Markdown escapes removed)."""
    at.text_input(key=state.SOURCE).set_value(sentence).run()
    assert not at.exception, at.exception
    value = next(m.value for m in at.metric if m.label == "Translation of the sentence")
    return "" if value == "(empty)" else re.sub(r"\\(.)", r"\1", value)


def _assert_opened(at, expected, sentences):
    """The upload is the active model, kept in the session as what it opens from (checkpoint
    bytes, or a Marian model's own files) that loads like any upload, and every page shows it:
    Home's translations equal the converter's."""
    from transformer import load_checkpoint

    choice = at.session_state[state.MODEL]
    assert choice.startswith("upload:"), choice
    name, data = at.session_state[state.UPLOADS][choice.removeprefix("upload:")]
    assert load_checkpoint(data).config == expected.config
    assert at.success and ("opened it" in at.success[0].value
                           or at.success[0].value.startswith("Opened"))
    for sentence in sentences:
        # a model with a generation config (Marian's) translates as it says, as transformers'
        # generate does; any other greedily
        own = (expected.translate(sentence) if expected.generation is None
               else expected.generate(sentence))
        assert _shown_translation(at, sentence) == own.text, sentence
    return name


def test_the_uploader_takes_several_files(app):
    widget = uploader(app)
    assert widget.accept_multiple_files
    assert widget.allowed_type == []  # any name: the files are classified by explorer.uploads


def test_tf_tutorial_files_open_after_the_form(app, tutorial_files):
    from transformer.importers.tf_tutorial import convert_tf_tutorial

    recorded = json.loads((TUTORIAL / "translations.json").read_text(encoding="utf-8"))
    at = _upload(_page(app, "views/Home.py"), tutorial_files)
    assert at.session_state[state.MODEL] == "bundled:dates.ckpt"  # nothing changes before the form
    assert any("TF tutorial (from the weight names)" in c.value for c in at.caption)
    vocabularies = at.radio(key=state.IMPORT_VOCABS)
    assert vocabularies.value == 0
    assert vocabularies.format_func(0) == "source: source_vocab.txt, target: target_vocab.txt"
    assert not at.get("number_input")  # the tutorial's kernels hold the heads
    _submit(at)
    expected = convert_tf_tutorial(*(TUTORIAL / name for name in TUTORIAL_FILES))
    sentences = [r["source"] for r in recorded["translations"][:3]]
    name = _assert_opened(at, expected, sentences)
    assert name == f"{expected.name} (TF tutorial)"
    for record in recorded["translations"][:3]:  # the tutorial Translator's own output
        assert _shown_translation(at, record["source"]) == record["text"]
    # The form is gone, and the model stays active on every page.
    assert not at.get("number_input") and state.IMPORT not in at.session_state
    at = _page(at, "views/Model.py")
    assert at.title[0].value == f"Model: {expected.name}"


def test_the_model_page_says_where_a_converted_model_came_from(app, tutorial_files):
    import hashlib

    at = _submit(_upload(_page(app, "views/Model.py"), tutorial_files))
    files = at.dataframe[0].value
    assert list(files["file"]) == list(TUTORIAL_FILES)
    assert list(files["role"]) == ["weights", "source vocabulary", "target vocabulary"]
    assert list(files["sha256"]) == [hashlib.sha256(data).hexdigest()[:16]
                                     for data in tutorial_files.values()]
    assert [c.value for c in at.code] == [
        "python -m transformer.convert tf-tutorial --weights model.weights.h5 --source-vocab "
        "source_vocab.txt --target-vocab target_vocab.txt --out model.ckpt"]
    text = " ".join(m.value for m in at.markdown)
    assert "Converted from a model trained with the TF tutorial" in text
    assert "Not recorded in the files" in text  # the training data a converted model lacks


def test_keras_seq2seq_files_open(app, seq2seq_files):
    from transformer.importers.keras_seq2seq import convert_keras_seq2seq

    at = _upload(app, seq2seq_files)
    assert any("Keras seq2seq example (from the weight names)" in c.value for c in at.caption)
    # eng -> source, spa -> target, from the names (the uploader's order is alphabetical here).
    assert at.radio(key=state.IMPORT_VOCABS).format_func(0) == \
        "source: eng_vocab.txt, target: spa_vocab.txt"
    _submit(at)
    expected = convert_keras_seq2seq(seq2seq_files["translator.weights.h5"],
                                      {"eng_vocab.txt": seq2seq_files["eng_vocab.txt"]},
                                      {"spa_vocab.txt": seq2seq_files["spa_vocab.txt"]})
    _assert_opened(at, expected, ["w3 w4 w5", "w1"])


def test_a_tensorflow_checkpoint_opens_and_its_data_file_is_needed(app, tf_checkpoint_files):
    from transformer.importers.keras_seq2seq import convert_keras_seq2seq

    vocabularies = _seq2seq_vocabularies()
    at = _upload(app, {"ckpt.index": tf_checkpoint_files["ckpt.index"], **vocabularies})
    message = at.error[0].value  # read at once: the .index alone is no model
    assert "'ckpt.index' comes without its data file 'ckpt.data-00000-of-00001'" in message
    assert at.session_state[state.MODEL] == "bundled:dates.ckpt"
    uploader(at).clear().run()
    _submit(_upload(at, {**tf_checkpoint_files, **vocabularies}))
    expected = convert_keras_seq2seq(tf_checkpoint_files,
                                      {"eng_vocab.txt": vocabularies["eng_vocab.txt"]},
                                      {"spa_vocab.txt": vocabularies["spa_vocab.txt"]})
    _assert_opened(at, expected, ["w3 w4 w5"])


def test_the_from_scratch_notebooks_model_checkpoint_folder_opens(app, from_scratch_run):
    """The seed notebook trained with its own code: the folder its ModelCheckpoint wrote (the
    files ".index", ".data-00000-of-00001" and "checkpoint") uploaded with two vocabularies; the
    form asks for the heads (the hand-written attention does not tell), and Home shows the
    translations the notebook's own decode_sequence gives."""
    reference = json.loads((from_scratch_run / "reference.json").read_text())
    folder = from_scratch_run / "checkpoint"
    files = {name: (folder / name).read_bytes() for name in (".index", ".data-00000-of-00001",
                                                             "checkpoint")}
    files |= {name: (from_scratch_run / name).read_bytes() for name in ("eng_vocab.txt",
                                                                       "fra_vocab.txt")}
    at = _upload(app, files)
    assert any("from scratch" in c.value for c in at.caption), [c.value for c in at.caption]
    at.number_input(key=state.IMPORT_HEADS).set_value(reference["num_heads"])
    _submit(at)
    assert not at.error, [e.value for e in at.error]
    choice = at.session_state[state.MODEL]
    assert choice.startswith("upload:"), choice
    for sentence, theirs in list(zip(reference["held_out"], reference["translations"]))[:4]:
        assert " ".join(["[start]", _shown_translation(at, sentence), "[end]"]) == theirs
    for path in PAGES:  # every page runs on it, the model staying active
        at = _page(at, path)
        assert at.session_state[state.MODEL] == choice and not at.error, path
        if path == "views/Tokenization.py":  # what this model does with padding
            assert any("padded on the right with `[PAD]` (id 0) to the 10 ids this model is always "
                       "fed; this model applies no padding mask" in m.value for m in at.markdown)


def test_the_form_asks_for_the_heads_the_weights_do_not_hold(app, handwritten_files):
    from transformer.importers.keras_seq2seq import convert_keras_seq2seq

    at = _upload(app, handwritten_files)
    heads = at.number_input(key=state.IMPORT_HEADS)
    assert heads.value is None
    _submit(at)  # without the number of heads: a sentence, nothing changes
    assert "give the number of heads" in at.error[0].value
    assert at.session_state[state.MODEL] == "bundled:dates.ckpt"
    at.number_input(key=state.IMPORT_HEADS).set_value(2)
    _submit(at)
    expected = convert_keras_seq2seq(handwritten_files["translator.weights.h5"],
                                      {"eng_vocab.txt": handwritten_files["eng_vocab.txt"]},
                                      {"spa_vocab.txt": handwritten_files["spa_vocab.txt"]},
                                      num_heads=2)
    assert expected.config.num_heads == 2
    _assert_opened(at, expected, ["w2 w7"])


@pytest.mark.parametrize("zipped", [False, True], ids=["several files", "one zip"])
def test_marian_files_open_without_a_form(app, marian_files, zipped):
    from transformer.importers.hf import marian

    files = {"opus-mt-tiny.zip": _zipped(marian_files, "opus-mt-tiny")} if zipped else marian_files
    at = _upload(app, files)  # nothing to ask: converted at once, no form left
    assert state.IMPORT not in at.session_state
    assert not [b for b in at.button if b.key == state.IMPORT_SUBMIT]
    expected = marian.FAMILY.convert(MARIAN)
    name = _assert_opened(at, expected, ["the cat", "a black cat"])
    assert at.title[0].value == "Attention Explorer"
    # No conversion step: the session keeps the Marian files themselves, which open as they are.
    kept = dict(at.session_state[state.UPLOADS].values())[name]
    assert isinstance(kept, dict) and "model.safetensors" in kept, type(kept)


def _keep_state(at, before: dict):
    """The session kept its model, sentence and uploads, and said why in a sentence."""
    assert at.error, "no error shown"
    assert "Traceback" not in at.error[0].value
    assert "The model in use did not change." in at.error[0].value
    assert at.session_state[state.MODEL] == before["model"]
    assert at.session_state[state.SOURCE] == before["source"]
    assert list(at.session_state[state.UPLOADS]) == before["uploads"]
    return at.error[0].value


@pytest.fixture
def with_upload(app, tiny_checkpoint_bytes):
    """A session with a .ckpt upload active and its own sentence."""
    at = app
    uploader(at).upload("tiny.ckpt", tiny_checkpoint_bytes).run()
    at.text_input(key=state.SOURCE).set_value("5 july 1987").run()
    uploader(at).clear().run()
    assert not at.exception, at.exception
    before = {"model": at.session_state[state.MODEL], "source": "5 july 1987",
              "uploads": list(at.session_state[state.UPLOADS])}
    assert before["model"].startswith("upload:")
    return at, before


def test_a_mismatched_vocabulary_is_named_and_changes_nothing(with_upload, tutorial_files):
    at, before = with_upload
    _upload(at, tutorial_files)
    at.radio(key=state.IMPORT_VOCABS).set_value(1)  # swapped: the source gets 257 tokens
    message = _keep_state(_submit(at), before)
    assert "target_vocab.txt" in message and "257 tokens" in message and "367 rows" in message
    assert "source_embedding/source_token_embedding/embeddings" in message
    assert at.title[0].value == "Attention Explorer"
    assert next(m.value for m in at.metric if m.label == "Model") == "tiny-upload"


def test_a_missing_file_is_named_and_changes_nothing(with_upload, tutorial_files, marian_files):
    at, before = with_upload
    _upload(at, {name: tutorial_files[name] for name in TUTORIAL_FILES[:2]})
    message = _keep_state(at, before)
    assert "model.weights.h5 need two vocabulary files" in message and "source_vocab.txt" in message
    uploader(at).clear().run()
    _upload(at, {name: data for name, data in marian_files.items() if name != "vocab.json"})
    message = _keep_state(at, before)
    assert "is missing vocab.json" in message


def test_weights_of_no_recipe_ask_for_one_and_the_wrong_one_is_named(with_upload, tmp_path,
                                                                     tutorial_files):
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="classifier")])
    model.save_weights(tmp_path / "classifier.weights.h5")
    at, before = with_upload
    files = {"classifier.weights.h5": (tmp_path / "classifier.weights.h5").read_bytes(),
             "source_vocab.txt": tutorial_files["source_vocab.txt"],
             "target_vocab.txt": tutorial_files["target_vocab.txt"]}
    _upload(at, files)
    recipe = at.selectbox(key=state.IMPORT_RECIPE)  # the weight names show neither recipe
    assert recipe.options == ["Keras seq2seq example", "TF tutorial"]
    recipe.set_value("tf-tutorial")
    message = _keep_state(_submit(at), before)
    assert "classifier.weights.h5" in message and "TensorFlow tutorial's EncoderLayer" in message


def test_an_unexpected_converter_error_is_a_sentence(with_upload, tutorial_files, monkeypatch):
    """Whatever a converter raises (not only CheckpointError) stops at the upload boundary."""
    import transformer.importers.tf_tutorial

    def broken(*args, **kwargs):
        raise KeyError("query_dense")

    monkeypatch.setattr(transformer.importers.tf_tutorial, "convert_tf_tutorial", broken)
    at, before = with_upload
    message = _keep_state(_submit(_upload(at, tutorial_files)), before)
    assert "unexpected KeyError" in message


def test_a_ckpt_with_other_files_is_refused(app, tiny_checkpoint_bytes, tutorial_files):
    at = _upload(app, {"tiny.ckpt": tiny_checkpoint_bytes, **tutorial_files})
    assert "Upload a .ckpt alone" in at.error[0].value
    assert at.session_state[state.MODEL] == "bundled:dates.ckpt"


# ------------------------------------------------------------------ the typed target (issue 17.2)
def test_the_typed_target_starts_as_the_models_translation(app):
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    translation = load_checkpoint(DEFAULT_CHECKPOINT).translate(state.DEFAULT_SOURCE).text
    at = _page(app, "views/Attention_Maps.py")
    before = [c.proto.spec for c in at.get("plotly_chart")]
    at.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED).run()
    assert not at.exception, at.exception
    box = at.text_input(key=state.TARGET)
    assert box.value == translation  # a value, not a grey placeholder
    assert not box.placeholder
    assert state.TARGET_STARTED in at.session_state and at.session_state[state.TARGET_STARTED]
    # Teacher forcing on the model's own translation shows what the model's mode shows.
    assert [c.proto.spec for c in at.get("plotly_chart")] == before
    assert not [i for i in at.sidebar.info if "target is empty" in i.value]
    # A target the user edits stays as typed.
    box.set_value("1999-12-31").run()
    assert not at.exception, at.exception
    assert at.text_input(key=state.TARGET).value == "1999-12-31"


def test_an_emptied_target_is_said_on_the_sidebar(app):
    at = app
    at.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED).run()
    at.text_input(key=state.TARGET).set_value("").run()
    assert not at.exception, at.exception
    assert at.text_input(key=state.TARGET).value == ""  # the user's choice, not refilled
    notes = [i.value for i in at.sidebar.info if "target is empty" in i.value]
    assert len(notes) == 1 and "<s>" in notes[0] and "one row" in notes[0]
    # Back to the model's translation and to typing again: the box starts full once more.
    at.radio(key=state.TARGET_MODE).set_value(state.TARGET_MODEL).run()
    at.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED).run()
    assert not at.exception, at.exception
    assert at.text_input(key=state.TARGET).value != ""
    assert not [i for i in at.sidebar.info if "target is empty" in i.value]
