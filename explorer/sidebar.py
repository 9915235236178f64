"""The sidebar every page shares: the active model, the source sentence and the target."""

import streamlit as st

from . import models, results, state


def render() -> None:
    state.init()
    choices = models.model_choices()
    with st.sidebar:
        st.header("Model")
        st.selectbox("Active model", list(choices), format_func=choices.get, key=state.MODEL)
        st.file_uploader(
            "Upload a checkpoint (.ckpt)", type=["ckpt"], key=state.UPLOADER,
            on_change=models.accept_upload,
            help="A file written by `python -m transformer.train`. It is read as data only.")
        message = st.session_state.pop(state.UPLOAD_MESSAGE, None)
        if message:
            kind, text = message
            (st.error if kind == "error" else st.success)(text)
        ckpt = models.active_checkpoint()

        st.header("Sentence")
        example_list = models.examples(ckpt)
        if example_list:
            st.selectbox("Examples", [""] + example_list, key=state.EXAMPLE,
                         format_func=lambda s: s or "Pick an example…", on_change=_use_example)
        st.text_input("Source sentence", key=state.SOURCE)
        _warn_if_cut(ckpt, state.current_source(), "source")
        st.radio("Target", [state.TARGET_MODEL, state.TARGET_TYPED], key=state.TARGET_MODE)
        if st.session_state[state.TARGET_MODE] == state.TARGET_TYPED:
            st.text_input("Target sentence", key=state.TARGET,
                          placeholder=results.translation(ckpt, state.current_source()).text)
            _warn_if_cut(ckpt, st.session_state[state.TARGET], "target")


def _use_example() -> None:
    example = st.session_state.get(state.EXAMPLE)
    if example:
        st.session_state[state.SOURCE] = example


def _warn_if_cut(ckpt, text: str, side: str) -> None:
    cut = ckpt.pieces_cut(text, side)
    if cut:
        st.warning(f"The {side} is too long for this model (max_len {ckpt.config.max_len}): its "
                   f"last {cut} pieces were cut, and every page shows the part that fits.")
