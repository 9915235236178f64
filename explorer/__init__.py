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

import os

from .quiet import native_stderr_quiet

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's INFO and WARNING lines
with native_stderr_quiet():  # its native start-up lines
    import transformer  # noqa: F401  (first: its TensorFlow settings apply before Keras loads it)

    # isort: split
    import keras

# Streamlit calls keras.backend.clear_session() after every script run of every session. That
# resets Keras' global state for all threads at once, so a model another session is building at
# that moment gets wrong weight paths and fails to load. Our models are cached across runs on
# purpose: there is nothing to clear. (keras.utils.clear_session stays available.)
keras.backend.clear_session = lambda *args, **kwargs: None
