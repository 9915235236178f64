"""The step player of the decoding page: previous, next, and play through a decode's steps.

Playing shows a step, waits, and reruns the step view (the page's fragment that draws the
player) for the next one: the fragment alone, never the page around it, so a tick neither
redraws the sidebar nor reaches the decode. The next step is carried across the rerun in
NEXT_STEP and applied before the step slider is drawn again (a widget's value cannot change
once it is drawn in a run).
"""

from __future__ import annotations

import time

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

STEP = "dec_step"  # the step slider
PLAYING, NEXT_STEP = "dec_playing", "dec_play_next"
PLAY_DELAY = 0.6  # seconds each step stays on screen while playing


def apply_next_step() -> None:
    """Before the step slider: move it to the step a playing rerun asked for."""
    if NEXT_STEP in st.session_state:
        st.session_state[STEP] = st.session_state.pop(NEXT_STEP)


def move(delta: int, last: int) -> None:
    """Previous / Next buttons' callback."""
    st.session_state[STEP] = min(max(st.session_state[STEP] + delta, 0), last)


def toggle_play(last: int) -> None:
    """Play / Stop button's callback."""
    st.session_state[PLAYING] = not st.session_state.get(PLAYING, False)
    st.session_state.pop(NEXT_STEP, None)  # Stop: stay on the step shown
    if st.session_state[PLAYING] and st.session_state[STEP] >= last:
        st.session_state[STEP] = 0  # play again from the start


def is_playing(step: int, last: int) -> bool:
    """Whether the player goes on after `step` (it stops at the last one)."""
    return st.session_state.get(PLAYING, False) and step < last


def rerun_scope() -> str:
    """"fragment" while this run is a fragment's rerun (a click on Play, which the fragment
    draws, or the fragment's own st.rerun), else "app": Streamlit refuses a fragment-scoped
    rerun during a run of the whole page (a sidebar change while playing; AppTest, which always
    runs the whole script), so such a run plays on by rerunning the whole page."""
    ctx = get_script_run_ctx()
    return "fragment" if ctx is not None and ctx.fragment_ids_this_run else "app"


def advance(step: int, playing: bool) -> None:
    """At the end of the step view (a fragment): while playing, wait with the step on screen,
    then rerun the fragment alone for the next one (the whole page when this run is the whole
    page's: rerun_scope); else remember that the player stopped."""
    if playing:
        time.sleep(PLAY_DELAY)
        st.session_state[NEXT_STEP] = step + 1
        st.rerun(scope=rerun_scope())
    st.session_state[PLAYING] = playing


def buttons(columns, step: int, last: int, playing: bool) -> None:
    """Previous, Next and Play / Stop, with the app's own (Material) icons."""
    previous, following, play = columns
    previous.button("Previous", key="dec_prev", icon=":material/skip_previous:", on_click=move,
                    args=(-1, last), disabled=step == 0)
    following.button("Next", key="dec_next", icon=":material/skip_next:", on_click=move,
                     args=(1, last), disabled=step == last)
    play.button("Stop" if playing else "Play", key="dec_play", on_click=toggle_play, args=(last,),
                icon=":material/stop:" if playing else ":material/play_arrow:")
