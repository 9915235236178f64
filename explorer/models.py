"""The models a session can pick: bundled checkpoints and its uploads, loaded once and cached.

Models are cached with st.cache_resource keyed by the file's sha256 (bounded) and shared by every
session, so they are never mutated. What they compute is cached in explorer.results.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import streamlit as st

from transformer import Checkpoint, CheckpointError, load_checkpoint
from transformer.checkpoint import ASSETS, DEFAULT_CHECKPOINT
from transformer.data import date_pairs

from . import state

MAX_MODELS = 6  # checkpoints held in memory at once, over all sessions
MAX_UPLOADS_PER_SESSION = 3  # uploaded files a session keeps (the oldest is forgotten first)


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
    """{choice id: label} for the model picker: bundled checkpoints, then this session's uploads."""
    choices = {f"{state.BUNDLED}:{p.name}": label for label, p in bundled_checkpoints().items()}
    for digest, (name, _) in state.uploads().items():
        choices[f"{state.UPLOADED}:{digest}"] = f"{name} (uploaded, {digest[:8]})"
    return choices


@st.cache_resource(max_entries=MAX_MODELS, show_spinner="Loading the model…")
def _load(content_hash: str, _data: bytes) -> Checkpoint:
    return load_checkpoint(_data)


@st.cache_data(max_entries=32, show_spinner=False)
def _bundled_bytes(path: str, mtime: float) -> bytes:
    return Path(path).read_bytes()


def checkpoint_for(choice: str) -> Checkpoint:
    origin, _, name = choice.partition(":")
    if origin == state.UPLOADED:
        filename, data = st.session_state[state.UPLOADS][name]
        return _load(name, data)
    path = ASSETS / Path(name).name
    data = _bundled_bytes(str(path), path.stat().st_mtime)
    return _load(hashlib.sha256(data).hexdigest(), data)


def active_checkpoint() -> Checkpoint:
    """The session's active model; falls back to the bundled default if its choice vanished."""
    choice = state.model_choice()
    if choice not in model_choices():
        choice = st.session_state[state.MODEL] = state.default_model_choice()
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
    st.session_state[state.MODEL] = f"{state.UPLOADED}:{digest}"
    st.session_state[state.UPLOAD_MESSAGE] = ("success", f"Loaded {uploaded.name} ({ckpt.name}).")


def examples(ckpt: Checkpoint) -> list[str]:
    """Example sources: recorded by training, or drawn from the dates task's held-out days."""
    recorded = ckpt.metadata.get("examples")
    if isinstance(recorded, list) and all(isinstance(x, str) for x in recorded):
        return recorded
    if ckpt.metadata.get("task") == "dates":
        return held_out_dates(ckpt, 8)
    return []


def held_out_dates(ckpt: Checkpoint, n: int) -> list[str]:
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
