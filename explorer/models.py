"""Loading checkpoints and computing results, cached across reruns and sessions.

Models are cached with st.cache_resource keyed by the file's sha256 (bounded), results with
st.cache_data keyed by (model hash, inputs): changing a layer or head re-slices cached arrays and
never re-runs the model. Cached models are shared by every session and never mutated.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import streamlit as st

from transformer import Checkpoint, CheckpointError, load_checkpoint
from transformer.checkpoint import ASSETS, DEFAULT_CHECKPOINT

from . import state

MAX_MODELS = 6  # checkpoints held in memory at once, over all sessions
MAX_UPLOADS_PER_SESSION = 3  # uploaded files a session keeps (the oldest is forgotten first)
MAX_RESULTS = 256


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


def default_model_choice() -> str:
    return "bundled:" + DEFAULT_CHECKPOINT.name


def model_choices() -> dict[str, str]:
    """{choice id: label} for the model picker: bundled checkpoints, then this session's uploads."""
    choices = {"bundled:" + p.name: label for label, p in bundled_checkpoints().items()}
    for digest, (name, _) in st.session_state.get(state.UPLOADS, {}).items():
        choices["upload:" + digest] = f"{name} (uploaded, {digest[:8]})"
    return choices


@st.cache_resource(max_entries=MAX_MODELS, show_spinner="Loading the model…")
def _load(content_hash: str, _data: bytes) -> Checkpoint:
    return load_checkpoint(_data)


@st.cache_data(max_entries=32, show_spinner=False)
def _bundled_bytes(path: str, mtime: float) -> bytes:
    return Path(path).read_bytes()


def checkpoint_for(choice: str) -> Checkpoint:
    kind, _, name = choice.partition(":")
    if kind == "upload":
        filename, data = st.session_state[state.UPLOADS][name]
        return _load(name, data)
    path = ASSETS / Path(name).name
    data = _bundled_bytes(str(path), path.stat().st_mtime)
    return _load(hashlib.sha256(data).hexdigest(), data)


def active_checkpoint() -> Checkpoint:
    """The session's active model; falls back to the bundled default if its choice vanished."""
    choice = st.session_state.get(state.MODEL, default_model_choice())
    if choice not in model_choices():
        choice = st.session_state[state.MODEL] = default_model_choice()
    return checkpoint_for(choice)


def accept_upload() -> None:
    """file_uploader callback: load the upload; on success make it active, else keep the model."""
    uploaded = st.session_state.get(state.UPLOADER)
    if uploaded is None:
        return
    data = uploaded.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    try:
        ckpt = _load(digest, data)
    except CheckpointError as err:
        st.session_state[state.UPLOAD_MESSAGE] = (
            "error", f"Could not load {uploaded.name}: {err} The model in use did not change.")
        return
    uploads = st.session_state[state.UPLOADS]
    uploads.pop(digest, None)
    uploads[digest] = (uploaded.name, data)  # newest last
    while len(uploads) > MAX_UPLOADS_PER_SESSION:
        uploads.pop(next(iter(uploads)))
    st.session_state[state.MODEL] = "upload:" + digest
    st.session_state[state.UPLOAD_MESSAGE] = ("success", f"Loaded {uploaded.name} ({ckpt.name}).")


def examples(ckpt: Checkpoint) -> list[str]:
    """Example sources: recorded by training, or drawn from the dates task's held-out days."""
    recorded = ckpt.metadata.get("examples")
    if isinstance(recorded, list) and all(isinstance(x, str) for x in recorded):
        return recorded
    if ckpt.metadata.get("task") == "dates":
        from transformer.data import date_pairs

        seed = ckpt.metadata.get("seed", 0)
        return [s for s, _ in date_pairs(8, seed=seed if isinstance(seed, int) else 0, split="test")]
    return []


@st.cache_data(max_entries=MAX_RESULTS, show_spinner="Running the model…")
def attention_maps(model_hash: str, source: str, target: str | None, _ckpt: Checkpoint,
                   details: bool = False) -> dict:
    """Checkpoint.attention, cached by (model hash, source, target, details)."""
    return _ckpt.attention(source, target, details=details)


@st.cache_data(max_entries=MAX_RESULTS, show_spinner="Translating…")
def translation(model_hash: str, source: str, _ckpt: Checkpoint):
    """Checkpoint.translate (greedy, every step's attention), cached by (model hash, source)."""
    return _ckpt.translate(source)


def current_attention(details: bool = False) -> dict:
    """Attention maps for the sidebar's model, source and target (see Checkpoint.attention)."""
    ckpt = active_checkpoint()
    return attention_maps(ckpt.content_hash, current_source(), current_target(), ckpt, details)


def current_source() -> str:
    return st.session_state.get(state.SOURCE, state.DEFAULT_SOURCE)


def current_target() -> str | None:
    """The typed target in teacher-forcing mode, else None (the model's own translation)."""
    if st.session_state.get(state.TARGET_MODE) == state.TARGET_TYPED:
        return st.session_state.get(state.TARGET, "")
    return None
