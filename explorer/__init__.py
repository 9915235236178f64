"""Streamlit glue for Attention Explorer: session state, cached model access, the shared sidebar.

Pages import from here and from `figures`; the model logic lives in `transformer`."""

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
