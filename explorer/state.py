"""Every session-state key, in one place, with its default, and the accessors pages read them by.

Imports nothing else from explorer but server_env (the server's words to it): the other modules
import this one."""

import os

import streamlit as st

from transformer.core.text import clean_text
from transformer.inference.session import DEFAULT_CHECKPOINT

from .server_env import (  # the server's words to its pages (SERVED_MODELS: tests set it)
    OPEN_BY_NAME,
    SERVED_MODELS,  # noqa: F401
    served_models,
)

MODEL = "model_choice"  # "bundled:<file name>", "named:<folder or hub name>" or "upload:<sha256>"
NAMED_OPENED = "named_models_opened"  # [folder or hub name]: opened in this session's sidebar
OPEN_NAME = "open_model_name"  # the sidebar's "Open a model by name or folder" box
UPLOADS = "uploaded_checkpoints"  # {sha256: (file name, bytes)}: this session's uploads
UPLOADER = "checkpoint_uploader"  # the file_uploader widget's key (uploader_key: its round)
UPLOADER_ROUND = "uploader_round"  # how many times the uploader was cleared
UPLOADER_SEEN = "uploader_seen_files"  # file ids the uploader held after its last change
UPLOAD_MESSAGE = "upload_message"  # ("error" | "success", text) from the last upload
UPLOAD_NOTES = "upload_notes"  # [("error" | "success", text)]: this session's upload outcomes
IMPORT = "pending_import"  # explorer.uploads.Upload: uploaded files waiting for the import form
IMPORT_RECIPE = "import_recipe"  # the import form's widgets: recipe, number of heads,
IMPORT_HEADS = "import_num_heads"  # and which vocabulary is the source (0: as guessed,
IMPORT_VOCABS = "import_vocabularies"  # 1: swapped)
IMPORT_REQUESTED = "import_requested"  # True: convert the pending import in this run
IMPORT_SUBMIT = "import_submit"  # the import form's "Convert and open" button
TARGET_STARTED = "typed_target_started"  # the typed-target box got its first value
SOURCE = "source_sentence"
EXAMPLE = "example_sentence"
TARGET_MODE = "target_mode"
TARGET = "target_sentence"
SEARCH = "search_mode"  # how a model with a generation config translates (SEARCHES)

TARGET_MODEL, TARGET_TYPED = "The model's translation", "A target I type (teacher forcing)"
SEARCH_CONFIG, SEARCH_GREEDY = "As its generation config says", "Greedy"
SEARCHES = (SEARCH_CONFIG, SEARCH_GREEDY)
DEFAULT_SOURCE = "Friday, March 5, 2021"
BUNDLED, UPLOADED, NAMED = "bundled", "upload", "named"  # the origins of a model choice
# SERVED_MODELS and OPEN_BY_NAME are set by explorer.serve from its command line: the models the
# person running the server named and whether the sidebar may open one by name or folder.


def open_by_name_allowed() -> bool:
    """Whether this server lets the sidebar open a model by name or folder (explorer.serve)."""
    return os.environ.get(OPEN_BY_NAME) == "1"


def default_model_choice() -> str:
    """The model picker's first choice: the first model the server was started with (--model),
    else the bundled default checkpoint."""
    served = served_models()
    return f"{NAMED}:{served[0]}" if served else bundled_default_choice()


def bundled_default_choice() -> str:
    return f"{BUNDLED}:{DEFAULT_CHECKPOINT.name}"


# The sidebar's widgets whose values every page shares (the model, the sentence, the target and
# the search). Streamlit drops a widget's value when a run does not draw it to the end: a button
# in the sidebar that switches pages (st.switch_page ends the run where it stands) lost the
# sentence typed a moment before (issue 38). Set again as session state at the start of every
# run (init), they are the session's own values, kept whatever a run draws.
SHARED_WIDGETS = (MODEL, SOURCE, TARGET_MODE, TARGET, SEARCH)


def init() -> None:
    """Set defaults for keys this session has not set yet, and keep the sidebar's shared values
    (SHARED_WIDGETS) as the session's own."""
    for key in SHARED_WIDGETS:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    st.session_state.setdefault(MODEL, default_model_choice())
    st.session_state.setdefault(UPLOADS, {})
    st.session_state.setdefault(NAMED_OPENED, [])
    st.session_state.setdefault(SOURCE, DEFAULT_SOURCE)
    st.session_state.setdefault(TARGET_MODE, TARGET_MODEL)
    st.session_state.setdefault(TARGET, "")
    st.session_state.setdefault(SEARCH, SEARCH_CONFIG)


def uploader_key(session=None) -> str:
    """The uploader widget's key this round: a new key is a new, empty uploader, which is how
    an upload that was handled is cleared (Streamlit lets no code empty a file_uploader).
    `session`: a session state to read (AppTest's), by default this session's."""
    session = st.session_state if session is None else session
    n = session[UPLOADER_ROUND] if UPLOADER_ROUND in session else 0
    return UPLOADER if n == 0 else f"{UPLOADER}-{n}"


def clear_uploader() -> None:
    """Give the uploader a new key (an empty uploader from the next run on)."""
    st.session_state[UPLOADER_ROUND] = st.session_state.get(UPLOADER_ROUND, 0) + 1
    st.session_state.pop(UPLOADER_SEEN, None)


def model_choice() -> str:
    """The session's model choice as picked ("bundled:<file>" or "upload:<sha256>"); whether it
    still exists is explorer.models' business (active_checkpoint)."""
    return st.session_state.get(MODEL, default_model_choice())


def uploads() -> dict:
    """{sha256: (file name, bytes)}: this session's uploads, oldest first."""
    return st.session_state.get(UPLOADS, {})


def current_source() -> str:
    """The sidebar's sentence, cleaned as the tokenizers clean it (transformer.core.text), so that
    every page shows and computes the same text; the sidebar says what cleaning changed."""
    return clean_text(st.session_state.get(SOURCE, DEFAULT_SOURCE))[0]


def current_target() -> str | None:
    """The typed target in teacher-forcing mode (cleaned), else None (the model's own
    translation)."""
    if st.session_state.get(TARGET_MODE) == TARGET_TYPED:
        return clean_text(st.session_state.get(TARGET, ""))[0]
    return None


def search_settings(ckpt):
    """How `ckpt` translates in this session: None for a model without a generation config
    (the bundled ones: greedy, OpenedModel.translate), else its GenerationSettings as its
    generation_config.json gives them, or the same settings searching greedily when the
    sidebar's Search says so (transformers' generate with num_beams=1)."""
    if ckpt.generation is None:
        return None
    if st.session_state.get(SEARCH, SEARCH_CONFIG) == SEARCH_GREEDY:
        return ckpt.generation.greedy()
    return ckpt.generation
