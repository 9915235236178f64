"""The models a session can pick: bundled checkpoints, the models the person running the server
named (--model, and the sidebar's "Open a model by name or folder" on a local server) and its
uploads, loaded once and cached.

Named models (a folder or a Hugging Face name) open with the budgets of the machine
(transformer.core.limits.named_budgets), an upload with every upload limit. They are held in a
process-wide cache of MAX_NAMED models, opened with a progress bar (a download's, then the
load's).

Models are cached with st.cache_resource keyed by the file's sha256 (bounded) and shared by every
session, so they are never mutated. What they compute is cached in explorer.results.

Uploads: a .ckpt is loaded as it is; other files (a weights file and two vocabularies, a Hugging
Face model's files of any family the registry reads, or one .zip of either) are read by
explorer.uploads. A Hugging Face model opens as it is (its files kept, mapped on load); the
others are completed by a short form and converted in memory; both are cached and kept like a
.ckpt upload (keyed by the files' digest plus the form's choices). Every failure is an error,
and the session keeps its model, sentence and uploads.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import OrderedDict
from pathlib import Path

import streamlit as st

from transformer import CheckpointError, OpenedModel, load_checkpoint
from transformer.inference.session import ASSETS, DEFAULT_CHECKPOINT
from transformer.training.data import date_pairs

from . import state, uploads
from .widgets import plain

logger = logging.getLogger(__name__)
MAX_MODELS = 6  # checkpoints held in memory at once, over all sessions
MAX_UPLOADS_PER_SESSION = 3  # uploaded models a session keeps (the oldest is forgotten first)
MAX_NOTES = 10  # upload outcomes a session keeps for the Model page
MAX_NAMED = 3  # named models (folders, hub names) held in memory at once, over all sessions
_named: OrderedDict[str, OpenedModel] = OrderedDict()  # {folder or hub name: opened}, oldest first
_named_lock = threading.Lock()  # one named model opens at a time


def bundled_checkpoints() -> dict[str, Path]:
    """{label: path} of the checkpoints shipped in assets/, the default first."""
    paths = sorted(ASSETS.glob("*.ckpt"), key=lambda p: (p != DEFAULT_CHECKPOINT, p.name))
    return {bundled_label(p): p for p in paths}


_EPOCH = re.compile(r"^(?P<stem>.+)\.epoch(?P<epoch>\d+)\.ckpt$")  # PATH.epochNN.ckpt (train.py)


def bundled_label(path: Path) -> str:
    match = _EPOCH.match(path.name)
    if match:
        return f"{match.group('stem')} (epoch {int(match.group('epoch'))} of training)"
    return f"{path.stem} (final)"


def training_run(file_names, name: str) -> list[tuple[int | None, str]]:
    """The checkpoints of the training run `name` belongs to: [(epoch, file name)] sorted by
    epoch, the final <stem>.ckpt last with epoch None. A run is <stem>.epochNN.ckpt files plus
    <stem>.ckpt; `name` may be any of them. [] when there are no per-epoch files."""
    names = set(file_names)
    match = _EPOCH.match(name)
    stem = match.group("stem") if match else name.removesuffix(".ckpt")
    epochs = sorted((int(m.group("epoch")), n) for n in names
                    if (m := _EPOCH.match(n)) and m.group("stem") == stem)
    if not epochs:
        return []
    final = f"{stem}.ckpt"
    return epochs + ([(None, final)] if final in names else [])


def model_choices() -> dict[str, str]:
    """{choice id: label} for the model picker: the models named (the server's --model, then
    those this session opened by name or folder), the bundled checkpoints, this session's
    uploads."""
    choices = {}
    for text in dict.fromkeys(state.served_models() + st.session_state.get(state.NAMED_OPENED,
                                                                            [])):
        choices[f"{state.NAMED}:{text}"] = named_label(text)
    choices.update({f"{state.BUNDLED}:{p.name}": label
                    for label, p in bundled_checkpoints().items()})
    for digest, (name, _) in state.uploads().items():
        choices[f"{state.UPLOADED}:{digest}"] = f"{name} (uploaded, {digest[:8]})"
    return choices


@st.cache_resource(max_entries=MAX_MODELS, show_spinner="Loading the model…")
def _load(content_hash: str, _data: bytes | dict[str, bytes]) -> OpenedModel:
    """A checkpoint file's bytes, or a Hugging Face model's files ({name: bytes}), opened."""
    return load_checkpoint(_data)


@st.cache_data(max_entries=32, show_spinner=False)
def _bundled_bytes(path: str, mtime: float) -> bytes:
    return Path(path).read_bytes()


def named_label(text: str) -> str:
    """The picker's label of a named model: a folder's name first, then its path as given (the
    picker cuts long labels at the end: "pegasus-xsum (folder /home/me/models/pegasus-xsum)"),
    or the Hugging Face name as given."""
    try:
        folder = Path(text).expanduser()
        is_folder = folder.is_dir()
    except OSError:
        is_folder = False
    if is_folder:
        return f"{folder.resolve().name or text} (folder {text})"
    return f"{text} (Hugging Face)"


def open_named(text: str, progress=None) -> OpenedModel:
    """The model a folder path or Hugging Face name gives, opened with the machine's budgets
    (load_checkpoint(text)), from the process-wide cache when it is there. progress(fraction,
    text): a download's progress. CheckpointError when it cannot be opened."""
    with _named_lock:
        if text in _named:
            _named.move_to_end(text)
            return _named[text]
        ckpt = load_checkpoint(text, progress=progress)
        _named[text] = ckpt
        while len(_named) > MAX_NAMED:
            _named.popitem(last=False)
        return ckpt


def checkpoint_for(choice: str) -> OpenedModel:
    origin, _, name = choice.partition(":")
    if origin == state.NAMED:
        return open_named(name)
    if origin == state.UPLOADED:
        filename, data = st.session_state[state.UPLOADS][name]
        return _load(name, data)
    path = ASSETS / Path(name).name
    data = _bundled_bytes(str(path), path.stat().st_mtime)
    return _load(hashlib.sha256(data).hexdigest(), data)


def active_checkpoint() -> OpenedModel:
    """The session's active model; falls back to the bundled default if its choice vanished."""
    choice = state.model_choice()
    if choice not in model_choices():
        choice = st.session_state[state.MODEL] = state.default_model_choice()
    if choice.startswith(f"{state.NAMED}:") and choice.partition(":")[2] not in _named:
        return _open_with_progress(choice)
    return checkpoint_for(choice)


def _open_with_progress(choice: str) -> OpenedModel:
    """A named model not opened yet, opened with a progress bar; when it cannot be, its error
    and the bundled default model instead."""
    text = choice.partition(":")[2]
    try:
        return _open_with_bar(text)
    except CheckpointError as err:
        st.error(f"{text} could not be opened: {err}")
        st.session_state[state.MODEL] = state.bundled_default_choice()
        return checkpoint_for(state.bundled_default_choice())


def open_by_name() -> None:
    """The sidebar's "Open a model by name or folder" box: on a server that allows it
    (state.open_by_name_allowed: started on localhost), the folder or Hugging Face name typed
    is opened with a progress bar and becomes the active model; on another server, an error
    and nothing read. A model that cannot be opened is an error; the model in use stays."""
    with st.form("open_by_name", border=False):
        st.text_input("Folder or Hugging Face name", key=state.OPEN_NAME,
                      placeholder="Helsinki-NLP/opus-mt-en-de or ~/models/bart",
                      help="A folder holding a Hugging Face model (config.json, its weights "
                           "and tokenizer files), or a name on the Hugging Face Hub: its local "
                           "cache first, else downloaded (only the files read; never a "
                           "pickle). Opened with this machine's memory as its budget.")
        submitted = st.form_submit_button("Open")
    text = str(st.session_state.get(state.OPEN_NAME) or "").strip()
    if not submitted or not text:
        return
    if not state.open_by_name_allowed():
        st.error("This server does not open models by name or folder: it was started for "
                 "others (only a server started on localhost, as `make run` does, or with "
                 "--open-by-name, opens them). Upload the model's files instead. " + KEEP)
        return
    choice = f"{state.NAMED}:{text}"
    try:
        _open_with_bar(text)
    except CheckpointError as err:
        st.error(f"{err} {KEEP}")
        return
    opened = st.session_state[state.NAMED_OPENED]
    if text not in opened:
        opened.append(text)
    st.session_state[state.MODEL] = choice


def _open_with_bar(text: str) -> OpenedModel:
    """open_named with a progress bar (a download's) and a spinner while the model is built."""
    bar = st.progress(0.0, text=f"Looking for {text}…")
    try:
        with st.spinner(f"Opening {text} (reading its weights, building the model)…"):
            return open_named(text, progress=lambda fraction, said: bar.progress(
                min(1.0, max(0.0, fraction)), text=said))
    finally:
        bar.empty()


# ------------------------------------------------------------------ uploads
KEEP = "The model in use did not change."


def _message(kind: str, text: str) -> None:
    """An upload's outcome: shown once where the user looks (show_upload_outcome) and kept in
    the session's notes (upload_notes, on the Model page)."""
    st.session_state[state.UPLOAD_MESSAGE] = (kind, text)
    notes = st.session_state.setdefault(state.UPLOAD_NOTES, [])
    notes.append((kind, text))
    del notes[:-MAX_NOTES]


def show_upload_outcome() -> None:
    """The last upload's outcome, once, at the top of the main area and as a toast."""
    message = st.session_state.pop(state.UPLOAD_MESSAGE, None)
    if message:
        kind, text = message
        (st.error if kind == "error" else st.success)(text)
        st.toast(text if len(text) < 200 else text[:197] + "…",
                 icon=":material/error:" if kind == "error" else ":material/check_circle:")


def upload_notes() -> list[tuple[str, str]]:
    """[("error" | "success", text)]: this session's upload outcomes, oldest first."""
    return list(st.session_state.get(state.UPLOAD_NOTES, []))


def _unexpected(what: str, err: Exception) -> str:
    """The sentence for an exception that is no CheckpointError (logged with its traceback)."""
    logger.error("%s failed", what, exc_info=err)
    return (f"Could not open {what}: the reader stopped with an unexpected "
            f"{type(err).__name__}, so the files are probably not what the recipe expects.")


def _keep(key: str, name: str, data: bytes | dict[str, bytes]) -> None:
    """Add an upload to the session's list (newest last, at most MAX_UPLOADS_PER_SESSION) and
    make it the active model."""
    kept = st.session_state[state.UPLOADS]
    kept.pop(key, None)
    kept[key] = (name, data)
    while len(kept) > MAX_UPLOADS_PER_SESSION:
        kept.pop(next(iter(kept)))
    st.session_state[state.MODEL] = f"{state.UPLOADED}:{key}"


def accept_upload() -> None:
    """file_uploader callback: a .ckpt is loaded now (on success it becomes active, else the
    model stays); other files are read (unzipped, recipe detected) and wait for the import form
    (a Hugging Face model's files, which tell everything, are opened in this run). The uploader is then
    cleared, except when the files it holds were refused: more may be dropped beside them (a
    model's weights and vocabularies may come in several drops)."""
    files = st.session_state.get(state.uploader_key()) or []
    files = files if isinstance(files, list) else [files]
    files = _changed(files)
    for key in (state.IMPORT, state.IMPORT_REQUESTED, state.IMPORT_RECIPE, state.IMPORT_HEADS,
                state.IMPORT_VOCABS):
        st.session_state.pop(key, None)
    if not files:
        return
    checkpoints = [f for f in files if f.name.lower().endswith(".ckpt")]
    if checkpoints and len(files) > 1:
        _message("error", f"Upload a .ckpt alone: {checkpoints[0].name} came with "
                          f"{len(files) - 1} other file(s). {KEEP}")
        return
    if checkpoints:
        _accept_checkpoint(checkpoints[0])
        state.clear_uploader()
        return
    names = ", ".join(f.name for f in files)
    try:
        upload = uploads.read_upload({f.name: f.getvalue() for f in files})
    except CheckpointError as err:
        _message("error", f"Could not open {names}: {err} {KEEP}")
        return
    except Exception as err:  # noqa: BLE001 - the upload boundary: an error, never a traceback
        _message("error", f"{_unexpected(names, err)} {KEEP}")
        return
    st.session_state[state.IMPORT] = upload
    state.clear_uploader()  # the files are read: the form and the import use `upload`
    if not upload.asks:
        st.session_state[state.IMPORT_REQUESTED] = True


def _changed(files: list) -> list:
    """The files this change of the uploader is about. The uploader keeps what it was given
    before (it takes several files), so a second checkpoint dropped on it arrives beside the
    first: a change that adds a .ckpt is about the added files alone; one that adds other
    files is about all it holds (a model's weights and vocabularies may come in several
    drops); one that only removes files adds nothing."""
    seen = st.session_state.get(state.UPLOADER_SEEN, set())
    st.session_state[state.UPLOADER_SEEN] = {f.file_id for f in files}
    added = [f for f in files if f.file_id not in seen]
    if not added:
        return []
    if any(f.name.lower().endswith(".ckpt") for f in added):
        return added
    return files


def _accept_checkpoint(uploaded) -> None:
    data = uploaded.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    try:
        ckpt = _load(digest, data)
    except CheckpointError as err:
        _message("error", f"Could not load {uploaded.name}: {err} {KEEP}")
        return
    except Exception as err:  # noqa: BLE001 - the upload boundary
        _message("error", f"{_unexpected(uploaded.name, err)} {KEEP}")
        return
    _keep(digest, uploaded.name, data)
    _message("success", f"Loaded {uploaded.name} ({ckpt.name}).")


def import_choices(upload: uploads.Upload) -> uploads.Choices:
    """The import form's answers (its defaults where it was not shown)."""
    recipe = upload.recipe or st.session_state.get(state.IMPORT_RECIPE) or uploads.WEIGHT_RECIPES[0]
    if uploads.opens_as_is(recipe):
        return uploads.Choices(recipe)
    source, target = upload.vocabularies
    if st.session_state.get(state.IMPORT_VOCABS, 0) == 1:
        source, target = target, source
    heads = st.session_state.get(state.IMPORT_HEADS)
    return uploads.Choices(recipe, int(heads) if heads else None, source, target)


def import_form() -> None:
    """The short form for what the uploaded files cannot tell: which recipe (when the weight
    names show none), the number of heads (when the weights do not hold it), which vocabulary
    is the source."""
    upload = st.session_state.get(state.IMPORT)
    if upload is None or not upload.asks:
        return
    with st.form("import_form"):
        st.markdown(f"**Open {plain(upload.label)} as a model**")
        if upload.recipe:
            form = uploads.FORM_LABELS.get(upload.form) if upload.form != "keras-mha" else None
            st.caption(f"Recipe: {uploads.RECIPE_LABELS[upload.recipe]} (from the weight names)"
                       + (f": {form}." if form else "."))
        else:
            st.selectbox("Recipe", uploads.WEIGHT_RECIPES, key=state.IMPORT_RECIPE,
                          format_func=uploads.RECIPE_LABELS.get,
                          help="The weight names show neither recipe: pick the code that "
                               "trained the model.")
        if upload.needs_heads:
            st.number_input("Number of heads", min_value=1, max_value=256, step=1, value=None,
                            key=state.IMPORT_HEADS,
                            help="The weights do not hold it (the hand-written attention "
                                 "splits d_model into heads): give num_heads of the model.")
        source, target = upload.vocabularies
        st.radio("Vocabularies", [0, 1], key=state.IMPORT_VOCABS,
                 format_func=lambda i: (f"source: {source}, target: {target}" if i == 0
                                        else f"source: {target}, target: {source}"),
                 help="Which vocabulary file the encoder reads and which the decoder writes.")
        if upload.ignored:
            st.caption(f"Also in the upload, not needed to open it: "
                       f"{', '.join(upload.ignored)}.")
        st.form_submit_button("Convert and open", on_click=_request_import, type="primary",
                              key=state.IMPORT_SUBMIT)


def _request_import() -> None:
    st.session_state[state.IMPORT_REQUESTED] = True


def run_requested_import() -> None:
    """Convert the pending import if the form (or a Hugging Face upload) asked for it, with a progress
    indicator: on success the model is cached like any upload, kept in the session's list as
    checkpoint bytes and made active; on failure an error, and nothing else changes. Call
    before the model picker is drawn (it sets the model choice)."""
    if not st.session_state.pop(state.IMPORT_REQUESTED, False):
        return
    upload = st.session_state.get(state.IMPORT)
    if upload is None:
        return
    choices = import_choices(upload)
    recipe = uploads.RECIPE_LABELS.get(choices.recipe, choices.recipe)
    key = uploads.import_key(upload, choices)
    with st.status(f"Opening {upload.label} ({recipe})…", expanded=True) as status:
        try:
            status.write(f"Reading {len(upload.files)} files "
                         f"({sum(map(len, upload.files.values())) / 2**20:.1f} MB).")
            uploads.check_choices(upload, choices)
            kept = st.session_state[state.UPLOADS].get(key)  # the same files and answers
            if uploads.opens_as_is(choices.recipe):  # mapped on load, no conversion
                status.write("Mapping model.safetensors onto the model and checking it…")
                data = kept[1] if kept else dict(upload.files)
            else:
                status.write(f"Converting with the {recipe} recipe…")
                data = kept[1] if kept else uploads.convert(upload, choices)
                status.write("Checking: loading the converted checkpoint as any upload is "
                             "loaded…")
            ckpt = _load(key, data)
        except CheckpointError as err:
            status.update(label=f"Could not open {upload.label}.", state="error")
            _message("error", f"Could not open {upload.label} as a {recipe} model: {err} {KEEP}")
            return
        except Exception as err:  # noqa: BLE001 - the upload boundary: an error, never a traceback
            status.update(label=f"Could not open {upload.label}.", state="error")
            _message("error", f"{_unexpected(upload.label, err)} {KEEP}")
            return
        status.update(label=f"Opened {ckpt.name} ({recipe}).", state="complete", expanded=False)
    _keep(key, f"{ckpt.name} ({recipe})", data)
    st.session_state.pop(state.IMPORT, None)
    if uploads.opens_as_is(choices.recipe):
        unread = (f" Also in the upload, not needed to open it: {', '.join(upload.ignored)}."
                  if upload.ignored else "")
        _message("success", f"Opened {upload.label} as it is ({recipe}: its weights mapped on "
                            f"load, no conversion): {ckpt.name}.{unread}")
    else:
        _message("success", f"Converted {upload.label} with the {recipe} recipe and opened it "
                            f"({ckpt.name}).")


def examples(ckpt: OpenedModel) -> list[str]:
    """Example sources: recorded by training, or drawn from the dates task's held-out days."""
    recorded = ckpt.metadata.get("examples")
    if isinstance(recorded, list) and all(isinstance(x, str) for x in recorded):
        return recorded
    if ckpt.metadata.get("task") == "dates":
        return held_out_dates(ckpt, 8)
    return []


def held_out_dates(ckpt: OpenedModel, n: int) -> list[str]:
    """The first n sources of the dates task's held-out split, drawn with the training seed."""
    seed = ckpt.metadata.get("seed", 0)
    return [s for s, _ in date_pairs(int(n), seed=seed if isinstance(seed, int) else 0,
                                     split="test")]


def training_checkpoints(choice: str) -> dict[str, str]:
    """{"epoch 1": choice id, ..., "final": choice id}: the bundled training run that the model
    choice `choice` belongs to, in training order; {} for an upload or a run without epochs."""
    origin, _, name = choice.partition(":")
    if origin != state.BUNDLED:
        return {}
    names = [path.name for path in bundled_checkpoints().values()]
    return {("final" if epoch is None else f"epoch {epoch}"): f"{state.BUNDLED}:{file_name}"
            for epoch, file_name in training_run(names, name)}
