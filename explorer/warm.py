"""Warm start: the default model, its translation of the default sentence and its maps pass,
prepared in a background thread as soon as the server runs, so that the first page a user
opens is as fast as the ones after it (the model's decode loop and forward pass are traced
once per architecture and shared: transformer.inference.decoding.shared_function).

`python -m explorer.serve` (what `make run` runs) starts it before the server accepts a
connection. It fills the same caches the pages read (explorer.models, explorer.results), so
nothing is done twice.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

logger = logging.getLogger(__name__)
_started = threading.Event()
ready = threading.Event()  # set when the warm-up finished (or gave up)
RUNTIME_WAIT_S = 120  # how long the thread waits for the server's runtime to exist
SWITCH = "EXPLORER_WARM"  # "0": no warm start (to measure a cold one: bench/cold_start.py)


def start() -> None:
    """Start the warm-up thread once per process."""
    if _started.is_set() or os.environ.get(SWITCH) == "0":
        return
    _started.set()
    threading.Thread(target=prepare, name="warm-start", daemon=True).start()


def prepare() -> None:
    """Wait for Streamlit's runtime (its caches live there), then compute what the default page
    computes for the default model and sentence. Never raises: a failure is logged, and the
    pages compute it themselves as they would without a warm start."""
    t0 = time.perf_counter()
    try:
        from streamlit.runtime import Runtime

        while not Runtime.exists() and time.perf_counter() - t0 < RUNTIME_WAIT_S:
            time.sleep(0.05)
        import importlib
        import pkgutil

        import explorer
        import figures
        from transformer.core.text import clean_text

        from . import about, models, results, state

        for package in (figures, explorer):  # what app.py and the pages import on a first run
            for module in pkgutil.iter_modules(package.__path__):
                importlib.import_module(f"{package.__name__}.{module.name}")

        ckpt = models.checkpoint_for(state.default_model_choice())
        source = clean_text(state.DEFAULT_SOURCE)[0]
        results.translation(ckpt, source)
        results.attention(ckpt, source)
        about.about_checkpoint(ckpt, models.examples(ckpt))  # the home page's text
        print(f"Warm start: {ckpt.name} and its compiled loops ready in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - a warm-up that fails only leaves the pages cold
        logger.exception("Warm start failed; the first page computes it instead")
    finally:
        ready.set()
