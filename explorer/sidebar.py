"""The sidebar every page shares: the source sentence first, the active model and its upload,
the target, and the link to the view (its slot, near the top)."""

import numpy as np
import streamlit as st

from transformer.core.text import text_notes
from transformer.importers.hf import FAMILIES

from . import models, player, results, screen, state, stepping
from .tokens import shown
from .widgets import plain

UPLOAD_HELP = (
    "A .ckpt written by `python -m transformer.train` or `python -m transformer.convert`; or a "
    "model trained elsewhere, converted here in memory: the Keras seq2seq example's, the "
    "'Transformer from scratch' notebook's or the TF tutorial's weights file (.weights.h5, "
    ".keras, or a TF checkpoint's .index and .data-00000-of-00001, with the 'checkpoint' file "
    "of ModelCheckpoint's folder or without) with its two vocabulary files; or a Hugging Face "
    "model's folder, opened as it is (config.json, model.safetensors and its tokenizer's files) "
    "of a family read here: " + ", ".join(family.recipe.label for family in FAMILIES) + ". Several "
    "files at once, or one .zip of them. Everything is read as data.")
EMPTY_TARGET = ("The target is empty: every page shows the decoder with {fed} alone ({rows}), "
                "and ablation scores only {scored}. Type a target, or pick \"{model}\".")
ASK_FOR_SENTENCE = ("Type a sentence in the sidebar's **Source sentence** box (or pick an "
                    "example): this page shows what the model does with it.")
# On a phone the sentence sits at the top of the page (the page list fills its sidebar)
ASK_FOR_SENTENCE_PHONE = ("Type a sentence in the **Source sentence** box above (or pick an "
                          "example): this page shows what the model does with it.")
PHONE_LABEL_CHARS = 32  # of the sentence, in the label of a phone's sentence box
UNSURE_BELOW = 0.5  # a chosen token less probable than this makes the translation "unsure"
DECODING_PAGE = "views/Decoding.py"


def render():
    """Draw the sidebar; returns the container the link to the view is drawn in (links.begin).
    Upload progress and outcomes go to the top of the main area, where the user looks."""
    state.init()
    notices = st.container()  # the main area's top: above the page
    with st.sidebar:
        sentence_box, link_box, model_box = st.container(), st.container(), st.container()
    if screen.on_a_phone():  # the page list fills a phone's sidebar: the sentence on the page
        sentence_box = st.expander(_phone_label(), icon=":material/edit:",
                                   expanded=not has_sentence())
    with model_box:
        st.header("Model")
        picker = st.container()  # drawn after the import: it may change the model choice
        upload = st.session_state.get(state.IMPORT)
        with st.expander("Upload a model", icon=":material/upload:",
                         expanded=bool(upload is not None and upload.asks)):
            st.file_uploader("Model files (several at once, or one .zip)",
                             accept_multiple_files=True, key=state.uploader_key(),
                             on_change=models.accept_upload, help=UPLOAD_HELP)
            models.import_form()
        with st.expander("Open a model by name or folder", icon=":material/folder_open:"):
            models.open_by_name()
    with notices:
        models.run_requested_import()
        models.show_upload_outcome()
    choices = models.model_choices()
    picker.selectbox("Active model", list(choices), format_func=choices.get, key=state.MODEL)
    ckpt = models.active_checkpoint()
    with sentence_box:
        _sentence(ckpt)
    with link_box:
        return st.expander("Link to this view", icon=":material/link:")


def empty_target_note(ckpt) -> str:
    """What an empty typed target leaves, from the model's own ids: the decoder fed its start
    token (BART: </s>, then the <s> its targets begin with) and the ids scored (</s>)."""
    scored = ckpt.encode_target("")
    fed = [ckpt.config.start_id] + scored[:-1]
    pieces = ckpt.target_tokenizer.ids_to_pieces
    if len(fed) == 1:
        fed_text, rows = f"its start token {pieces(fed)[0]}", "one row"
    else:
        fed_text, rows = " ".join(pieces(fed)), f"{len(fed)} rows"
    ends = " ".join(pieces(scored))
    return EMPTY_TARGET.format(fed=fed_text, rows=rows, model=state.TARGET_MODEL,
                               scored=f"the end token {ends}" if len(scored) == 1 else ends)


def ask_for_sentence() -> str:
    """What a page says when there is no sentence: where to type one, on this screen."""
    return ASK_FOR_SENTENCE_PHONE if screen.on_a_phone() else ASK_FOR_SENTENCE


def _phone_label() -> str:
    """A phone's sentence box, closed: the sentence it holds, shortened."""
    text = " ".join(state.current_source().split())
    if not text:
        return "Sentence"
    cut = text if len(text) <= PHONE_LABEL_CHARS else text[:PHONE_LABEL_CHARS - 1] + "…"
    return f"Sentence: {plain(cut)}"


def has_sentence() -> bool:
    """Whether the sidebar holds a sentence to show (pages ask for one when it is empty)."""
    return bool(state.current_source().strip())


def _sentence(ckpt) -> None:
    st.header("Sentence")
    example_list = models.examples(ckpt)
    if example_list:
        st.selectbox("Examples", [""] + example_list, key=state.EXAMPLE,
                     format_func=lambda s: s or "Pick an example…", on_change=_use_example)
    st.text_input("Source sentence", key=state.SOURCE)
    _say_what_cleaning_changed(st.session_state[state.SOURCE])
    _search(ckpt)
    result = None
    if has_sentence():
        _warn_if_cut(ckpt, state.current_source(), "source")
        result = results.translation(ckpt, state.current_source())
        stepping.say_why_stopped(st, ckpt, result)
    else:
        st.info("Type a sentence to translate.", icon=":material/edit:")
    st.radio("Target", [state.TARGET_MODEL, state.TARGET_TYPED], key=state.TARGET_MODE)
    if st.session_state[state.TARGET_MODE] == state.TARGET_TYPED:
        _start_typed_target(result)
        st.text_input("Target sentence", key=state.TARGET,
                      help="Teacher forcing: the decoder reads this target instead of its "
                           "own translation.")
        _say_what_cleaning_changed(st.session_state[state.TARGET])
        target = state.current_target()
        if not ckpt.target_tokenizer.pieces(target):
            st.info(empty_target_note(ckpt))
        _warn_if_cut(ckpt, target, "target")
    else:
        st.session_state[state.TARGET_STARTED] = False
        if result is not None:
            _say_if_unsure(result, stepping.forced_steps(state.search_settings(ckpt), result),
                           ckpt.target_tokenizer)


def _search(ckpt) -> None:
    """For a model with a generation config: how its translation is searched (as the file says,
    or greedily), and the settings in force, with what was capped or not applied."""
    if ckpt.generation is None:
        return
    method = ckpt.generation.method
    st.radio("Search", state.SEARCHES, key=state.SEARCH, horizontal=True,
             format_func=lambda s: f"{s} ({method})" if s == state.SEARCH_CONFIG else s,
             help="How the translation every page shows is decoded: as the model's "
                  "generation_config.json says (what transformers' generate and its translation "
                  "pipeline do), or greedily (the most probable token at every step, the file's "
                  "other settings kept).")
    settings = state.search_settings(ckpt)
    st.caption("In force: " + "; ".join(settings.describe()) + ".")
    for note in settings.notes:
        st.caption(note)


def weakest_step(result, forced=()) -> tuple[int, float] | None:
    """(step, probability) of the translation's least probable chosen token when it is below
    UNSURE_BELOW, else None. forced: steps whose token the generation config forced (the model
    did not choose them, so they say nothing of its doubt)."""
    chosen = [t for t in range(len(result.steps)) if t not in forced]
    if not chosen:
        return None
    probs = np.exp([result.steps[t].log_prob for t in chosen])
    i = int(np.argmin(probs))
    return (chosen[i], float(probs[i])) if probs[i] < UNSURE_BELOW else None


def _say_if_unsure(result, forced, target_tokenizer) -> None:
    """The translation shown as it is, with a word when the model was unsure of a token it
    chose (not one its generation config forced), and a button to that step of the Decoding
    page."""
    st.caption(f"Translation: **{result.text or '(empty)'}**")
    weakest = weakest_step(result, forced)
    if weakest is None:
        return
    t, p = weakest
    step = result.steps[t]
    runner_up = next(((tok, q) for tok, i, q in step.top_k if i != step.token_id), None)
    also = ""
    if runner_up is not None:
        other, q = shown(target_tokenizer, [runner_up[0]])[0], runner_up[1]
        also = (f"; {other!r} was more probable at this step ({q:.2f}), but a beam search "
                "keeps the hypotheses whose whole sequence scores best, not each step's "
                "most probable token" if q > p else f"; next best {other!r} at {q:.2f}")
    chosen = shown(target_tokenizer, [step.token])[0]
    st.warning(f"The model is unsure of this translation: at step {t} it chose {chosen!r} "
               f"with probability {p:.2f}{also}. The sentence may be unlike what it was "
               "trained on.", icon=":material/help:")
    if st.button(f"See step {t} in Step-by-step decoding", key="sidebar_unsure_step",
                 icon=":material/route:"):
        st.session_state[player.STEP] = t
        st.switch_page(DECODING_PAGE)


def _start_typed_target(result) -> None:
    """The typed-target box starts with the model's translation as its value (not a placeholder:
    no page runs on an empty target by surprise); once, so the user may empty it."""
    if st.session_state.get(state.TARGET_STARTED) or result is None:
        return
    st.session_state[state.TARGET_STARTED] = True
    if not st.session_state.get(state.TARGET):
        st.session_state[state.TARGET] = result.text


def _use_example() -> None:
    example = st.session_state.get(state.EXAMPLE)
    if example:
        st.session_state[state.SOURCE] = example


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
