"""The sidebar every page shares: the active model, the source sentence and the target."""

import streamlit as st

from transformer.core.text import text_notes

from . import models, results, state, stepping

UPLOAD_HELP = (
    "A .ckpt written by `python -m transformer.train` or `python -m transformer.convert`; or a "
    "model trained elsewhere, converted here in memory: the Keras seq2seq example's, the "
    "'Transformer from scratch' notebook's or the TF tutorial's weights file (.weights.h5, "
    ".keras, or a TF checkpoint's .index and .data-00000-of-00001, with the 'checkpoint' file "
    "of ModelCheckpoint's folder or without) with its two vocabulary files, or a Marian (opus-mt) model's "
    "config.json, model.safetensors, source.spm, target.spm and vocab.json. Several files at "
    "once, or one .zip of them. Everything is read as data.")
EMPTY_TARGET = ("The target is empty: every page shows the decoder with its start token <s> "
                "alone (one row), and ablation scores only the end token </s>. Type a target, or "
                "pick \"{model}\".")


def render() -> None:
    state.init()
    with st.sidebar:
        st.header("Model")
        picker = st.container()  # drawn last: an import below may change the model choice
        st.file_uploader("Upload a model", accept_multiple_files=True, key=state.UPLOADER,
                         on_change=models.accept_upload, help=UPLOAD_HELP)
        models.run_requested_import()
        message = st.session_state.pop(state.UPLOAD_MESSAGE, None)
        if message:
            kind, text = message
            (st.error if kind == "error" else st.success)(text)
        models.import_form()
        choices = models.model_choices()
        picker.selectbox("Active model", list(choices), format_func=choices.get, key=state.MODEL)
        ckpt = models.active_checkpoint()

        st.header("Sentence")
        example_list = models.examples(ckpt)
        if example_list:
            st.selectbox("Examples", [""] + example_list, key=state.EXAMPLE,
                         format_func=lambda s: s or "Pick an example…", on_change=_use_example)
        st.text_input("Source sentence", key=state.SOURCE)
        _say_what_cleaning_changed(st.session_state[state.SOURCE])
        _warn_if_cut(ckpt, state.current_source(), "source")
        _warn_if_budget_reached(ckpt)
        st.radio("Target", [state.TARGET_MODEL, state.TARGET_TYPED], key=state.TARGET_MODE)
        if st.session_state[state.TARGET_MODE] == state.TARGET_TYPED:
            _start_typed_target(ckpt)
            st.text_input("Target sentence", key=state.TARGET,
                          help="Teacher forcing: the decoder reads this target instead of its "
                               "own translation.")
            _say_what_cleaning_changed(st.session_state[state.TARGET])
            target = state.current_target()
            if not ckpt.target_tokenizer.pieces(target):
                st.info(EMPTY_TARGET.format(model=state.TARGET_MODEL))
            _warn_if_cut(ckpt, target, "target")
        else:
            st.session_state[state.TARGET_STARTED] = False


def _start_typed_target(ckpt) -> None:
    """The typed-target box starts with the model's translation as its value (not a placeholder:
    no page runs on an empty target by surprise); once, so the user may empty it."""
    if st.session_state.get(state.TARGET_STARTED):
        return
    st.session_state[state.TARGET_STARTED] = True
    if not st.session_state.get(state.TARGET):
        st.session_state[state.TARGET] = results.translation(ckpt, state.current_source()).text


def _use_example() -> None:
    example = st.session_state.get(state.EXAMPLE)
    if example:
        st.session_state[state.SOURCE] = example


def _warn_if_budget_reached(ckpt) -> None:
    result = results.translation(ckpt, state.current_source())
    stepping.say_why_stopped(st, ckpt, result)


def _say_what_cleaning_changed(raw: str) -> None:
    """Text a browser can send but the tokenizers cannot read (lone surrogates, far too long)
    is cleaned at one place (transformer.core.text); say what changed."""
    for note in text_notes(raw):
        st.info(note)


def _warn_if_cut(ckpt, text: str, side: str) -> None:
    """A warning when the text has more pieces than the model reads, naming what cut them: the
    model's max_len, or the length budget of typed text when that is less (as the step budget
    is named when a translation stops at it)."""
    cut = ckpt.pieces_cut(text, side)
    if cut:
        st.warning(f"The {side} is too long for this model: its last {cut} pieces were cut at "
                   f"{ckpt.length_limit(side)}, and every page shows the part that fits.")
