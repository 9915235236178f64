"""Streamlit glue for Attention Explorer; pages import from here and from `figures`, the model
logic lives in `transformer`.

state     session-state keys, defaults and accessors (the sentence, the target, the model choice)
models    the models to pick from: bundled checkpoints and uploads, loaded once and cached
results   what a checkpoint computes for the pages, cached by its content hash
choices   keeping keyed choices valid when a sentence, kind or model has fewer of something
heads     head labels ("cross L1 H2") a model or its maps offer, and one head's map
widgets   widgets several pages share (the kind picker, exports, token toggles)
player    the decoding page's step player; sidebar: the shared sidebar; export: CSV and NPZ
tokens    which piece of the text each token id stands for
"""

import transformer  # noqa: F401  (first: its TensorFlow settings apply before Keras loads it)

# isort: split
import keras
from streamlit.runtime.pages_manager import PagesManager

# Streamlit calls keras.backend.clear_session() after every script run of every session. That
# resets Keras' global state for all threads at once, so a model another session is building at
# that moment gets wrong weight paths and fails to load. Our models are cached across runs on
# purpose: there is nothing to clear. (keras.utils.clear_session stays available.)
keras.backend.clear_session = lambda *args, **kwargs: None

if PagesManager.uses_pages_directory:
    # Streamlit treats an app with a pages/ folder as an old-style multipage app until the first
    # st.navigation call. So on a fresh server, a deep link (/Masks) would run that page alone,
    # without app.py's sidebar. Switch to st.navigation mode and rerun: app.py now runs and
    # routes to the requested page.
    import streamlit as st

    PagesManager.uses_pages_directory = False
    st.rerun()
