"""Keeping keyed choices valid when a new sentence, kind or model has fewer of something.

Streamlit refuses a widget whose session-state value is not among its options, and another model
or sentence can have fewer layers, heads or tokens than the last one. Each function here fixes
one key's value BEFORE its widget is drawn, each in its own way:

- reset_if_out_of_range: an index back to 0 (a layer, head or token of a picker);
- clamp_choice: a number into [0, high], keeping it as close as it can be (a step, a length);
- keep_offered: a list of choices cut to the ones still offered;
- forget_if_not_offered: the key dropped, so the widget starts again from its default.
"""

from __future__ import annotations

import streamlit as st


def reset_if_out_of_range(key: str, size: int) -> None:
    """Reset a keyed index to 0 when there are no longer `size` > index of them."""
    if st.session_state.get(key, 0) >= size:
        st.session_state[key] = 0


def clamp_choice(key: str, high: int, default: int = 0) -> None:
    """Clamp a keyed number to [0, high] (`default` when unset): another model or decode may
    have fewer of them, and the nearest one left is kept."""
    st.session_state[key] = min(max(st.session_state.get(key, default), 0), high)


def keep_offered(key: str, options, default=()) -> None:
    """Cut a keyed list of choices (a multiselect's) to the ones still among `options`; when
    that leaves none of a non-empty list, use `default` instead."""
    offered, chosen = set(options), list(st.session_state.get(key, []))
    kept = [x for x in chosen if x in offered]
    st.session_state[key] = kept if kept or not chosen else list(default)


def forget_if_not_offered(key: str, options) -> None:
    """Drop a keyed choice (one value or a list) when any of it is no longer among `options`:
    the widget then starts again from its default."""
    value = st.session_state.get(key)
    values = value if isinstance(value, list) else [value]
    if value is not None and any(v not in options for v in values):
        del st.session_state[key]
