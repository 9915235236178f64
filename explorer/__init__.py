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
screen    the one call that puts a figure on the page (fitted to a phone there)
runtime   TensorFlow and Keras imported quietly, once, safe from Streamlit's clear_session
warm      the served app's start: the default model prepared while the server starts
"""

from .runtime import load_tensorflow, served_process

if not served_process():  # the served app imports TensorFlow in its warm-up thread instead
    load_tensorflow()
