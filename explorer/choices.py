"""Keeping keyed choices valid when a new sentence, kind or model has fewer of something.

Streamlit refuses a widget whose session-state value is not among its options, and another model
or sentence can have fewer layers, heads or tokens than the last one. A value can also come back
with the wrong type: a selectbox whose labels changed (its format_func reads the sentence) hands
back the browser's old label, a string, for one run (Streamlit's SelectboxSerde.deserialize), and
a link or an old session may hold anything. Each function here fixes one key's value BEFORE its
widget is drawn, each in its own way, and treats a value of the wrong type as unset:

- reset_if_out_of_range: an index back to 0 (a layer, head or token of a picker);
- clamp_choice: a number into [low, high], keeping it as close as it can be (a step, a length);
- keep_offered: a list of choices cut to the ones still offered;
- forget_if_not_offered: the key dropped, so the widget starts again from its default.
"""

from __future__ import annotations

import numbers

import streamlit as st


def whole_number(value) -> int | None:
    """`value` when it is a whole number (an int or a NumPy integer, not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def reset_if_out_of_range(key: str, size: int) -> None:
    """Reset a keyed index to 0 when it is not a whole number in [0, size)."""
    value = whole_number(st.session_state.get(key, 0))
    if value is None or not 0 <= value < size:
        st.session_state[key] = 0


def clamp_choice(key: str, high: int, default: int = 0, low: int = 0) -> None:
    """Clamp a keyed number to [low, high] (`default` when unset or not a whole number):
    another model or decode may have fewer of them, and the nearest one left is kept."""
    value = whole_number(st.session_state.get(key, default))
    st.session_state[key] = min(max(default if value is None else value, low), high)


def keep_offered(key: str, options, default=()) -> None:
    """Cut a keyed list of choices (a multiselect's) to the ones still among `options`; when
    that leaves none of a non-empty list, use `default` instead."""
    value = st.session_state.get(key, [])
    chosen = list(value) if isinstance(value, (list, tuple)) else []
    kept = [x for x in chosen if _offered(x, options)]
    st.session_state[key] = kept if kept or not chosen else list(default)


def forget_if_not_offered(key: str, options) -> None:
    """Drop a keyed choice (one value or a list) when any of it is no longer among `options`:
    the widget then starts again from its default."""
    value = st.session_state.get(key)
    values = value if isinstance(value, list) else [value]
    if value is not None and any(not _offered(v, options) for v in values):
        del st.session_state[key]


def _offered(value, options) -> bool:
    """`value` is among `options` with the same type (a stale label "1" is not the option 1)."""
    return any(value == option and type(value) is type(option) for option in options)
