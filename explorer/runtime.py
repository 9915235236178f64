"""TensorFlow and Keras, imported once per process, quietly, and made safe for Streamlit.

load_tensorflow() imports `transformer` (its TensorFlow settings apply before Keras loads) and
Keras inside explorer.quiet.native_stderr_quiet (no native start-up lines on the terminal), and
stops Streamlit from clearing Keras' global state: Streamlit calls keras.backend.clear_session()
after every script run of every session, which resets Keras' names for all threads at once, so
a model another session is building at that moment gets wrong weight paths and fails to load.
Our models are cached across runs on purpose: there is nothing to clear
(keras.utils.clear_session stays available).

Importing explorer calls it, except in the served app's process (`python -m explorer.serve`),
where the warm-up thread calls it while the server starts (explorer.warm): the server answers
at once instead of after TensorFlow's import (2.5 s), and app.py shows the start's progress
until the first page can be drawn (issue 38, item 13).
"""

from __future__ import annotations

import os
import sys
import threading

from .quiet import native_stderr_quiet

_lock = threading.Lock()
_loaded = threading.Event()


def served_process() -> bool:
    """Whether this process is the served app's (`python -m explorer.serve ...`)."""
    argv = getattr(sys, "orig_argv", [])
    return any(argv[i:i + 2] == ["-m", "explorer.serve"] for i in range(len(argv)))


def load_tensorflow() -> None:
    """Import TensorFlow and Keras quietly and keep Streamlit off Keras' global state; once per
    process (threads wait for the first call)."""
    if _loaded.is_set():
        return
    with _lock:
        if _loaded.is_set():
            return
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # its INFO and WARNING lines
        with native_stderr_quiet():  # its native start-up lines
            import transformer  # noqa: F401  (first: its TensorFlow settings apply first)

            # isort: split
            import keras
            import tensorflow as tf

            tf.config.list_physical_devices()  # CUDA's probe, and its complaint, happen here
        keras.backend.clear_session = lambda *args, **kwargs: None
        _loaded.set()
