"""Every session-state key, in one place, with its default."""

import streamlit as st

MODEL = "model_choice"  # "bundled:<file name>" or "upload:<sha256>"
UPLOADS = "uploaded_checkpoints"  # {sha256: (file name, bytes)}: this session's uploads
UPLOADER = "checkpoint_uploader"  # the file_uploader widget
UPLOAD_MESSAGE = "upload_message"  # ("error" | "success", text) from the last upload
SOURCE = "source_sentence"
EXAMPLE = "example_sentence"
TARGET_MODE = "target_mode"
TARGET = "target_sentence"

TARGET_MODEL, TARGET_TYPED = "The model's translation", "A target I type (teacher forcing)"
DEFAULT_SOURCE = "Friday, March 5, 2021"


def init() -> None:
    """Set defaults for keys this session has not set yet."""
    from .models import default_model_choice  # late: models imports this module

    st.session_state.setdefault(MODEL, default_model_choice())
    st.session_state.setdefault(UPLOADS, {})
    st.session_state.setdefault(SOURCE, DEFAULT_SOURCE)
    st.session_state.setdefault(TARGET_MODE, TARGET_MODEL)
    st.session_state.setdefault(TARGET, "")
