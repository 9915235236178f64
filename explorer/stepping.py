"""What the decoding page steps through, and the sentences that say so: the model's own decode
of the sidebar's sentence, or a typed target teacher-forced (transformer.inference.teacher_forcing)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from figures import decoding as figs
from figures.common import probability_text

from .tokens import shown
from .widgets import quoted

MODE = "dec_mode"
OWN, FORCED = "The model's own decoding", "The typed target, teacher-forced"


def forced_mode(typed: str | None) -> bool:
    """Whether to step through the typed target: a choice only when the sidebar has one, and
    then the target by default (the sidebar's "A target I type" is what every page feeds the
    decoder: issue 38 found this page decoding on its own with only a grey caption saying so)."""
    if typed is None:
        st.session_state.pop(MODE, None)
        return False
    st.session_state.setdefault(MODE, FORCED)
    return st.radio("Step through", [OWN, FORCED], key=MODE, horizontal=True,
                    help="Teacher forcing feeds the decoder your target instead of its own "
                         "choices: each step shows how probable the model finds your token.") \
        == FORCED


def what_is_decoded(source: str, typed: str | None, forced: bool) -> str:
    """One sentence: which target the page shows, and how to get the other one."""
    if forced:
        return (f"Teacher forcing on {quoted(source)}: at every step the decoder is fed your "
                f"target {quoted(typed)} up to that point (the sidebar's target), and the page "
                "shows how probable the model finds your next token and what it would have "
                "picked itself.")
    told = (f"The model decodes {quoted(source)} on its own: it picks every token itself "
            "(greedy, or beam search in the options).")
    if typed is None:
        return told + " Type a target in the sidebar to step through it with teacher forcing."
    return told + f" Your typed target {quoted(typed)} is not used here: pick it above."


def show_text(column, title: str, run, other=None, tok=None) -> None:
    """A decode's text and its tokens as chips (as the pages show `tok`'s pieces, when given:
    explorer.tokens.shown); tokens that differ from `other` in orange."""
    column.markdown(f"**{title}**")
    column.code(run.text or "(empty)", language=None)
    marked = figs.differing_positions(run.tokens, other.tokens) if other else ()
    chips = run.tokens if tok is None else shown(tok, run.tokens)
    column.markdown(figs.tokens_html(chips, marked), unsafe_allow_html=True)


def say_why_stopped(container, ckpt, run, where: str = "sidebar") -> None:
    """A warning when a translation stopped without its end token at a budget (steps, time or
    the model's max_len), naming it; nothing when it ended or stopped where the user chose."""
    why = ckpt.stopped_by_budget(run)
    if why:
        n = len(run.token_ids)
        container.warning(f"The model's translation stopped after {n} token{'s' * (n != 1)} "
                          f"without an end token, at {why}: every page shows "
                          f"{'those tokens' if n != 1 else 'that token'}.")
    if run.stopped_by == "stopped":  # a named model's translation the user stopped: kept
        from . import results

        container.button("Translate to the end", key=f"translate_to_the_end_{where}",
                         on_click=results.translate_to_the_end,
                         help="Decode the whole translation, as long as the model's generation "
                              "config allows (its progress shows; Stop ends it again).")


def forced_steps(settings, run) -> set[int]:
    """The steps of a search whose token the generation config forced, not the model (its
    forced_bos_token_id at step 0, forced_eos_token_id at the last step max_length allows);
    none without settings (None: greedy decoding, which forces nothing)."""
    if settings is None:
        return set()
    steps = set()
    if settings.forced_bos_token_id is not None and run.token_ids:
        steps.add(0)
    last = settings.max_new_tokens - 1
    if (settings.forced_eos_token_id and len(run.token_ids) == settings.max_new_tokens
            and run.token_ids[last] in settings.forced_eos_token_id):
        steps.add(last)
    return steps


def step_caption(t: int, step, forced: bool, by_config: bool = False) -> str:
    """What happened at step t: the token chosen (or forced) and its probability.
    by_config: the generation config forced this step's token (forced_steps)."""
    p = float(np.exp(step.log_prob))
    if by_config:
        return (f"Step {t}: the model's generation config forces {step.token!r} here (orange, "
                f"id {step.token_id}); the model itself gives it p = {probability_text(p)}.")
    if not forced:
        return (f"Step {t}: from the prefix (grey) the decoder chose {step.token!r} (orange, id "
                f"{step.token_id}, p = {probability_text(p)}).")
    best, _, best_p = step.top_k[0]
    own = ("its own first choice too" if best == step.token
           else f"the model would have picked {best!r} (p = {probability_text(best_p)})")
    return (f"Step {t}: after the prefix (grey) your target gives {step.token!r} (orange, id "
            f"{step.token_id}); the model gives it p = {probability_text(p)}: {own}.")
