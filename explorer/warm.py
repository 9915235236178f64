"""Warm start: the default model, its translation of the default sentence, its maps pass and
its DecoderLens, prepared in a background thread as soon as the server runs, so that the first
page a user opens is as fast as the ones after it (the model's decode loop and forward pass
are traced once per architecture and shared: transformer.inference.compiled.shared_function).

`python -m explorer.serve` (what `make run` runs) starts it before the server accepts a
connection. It fills the same caches the pages read (explorer.models, explorer.results), so
nothing is done twice.

Any model a session opens (an upload, another bundled checkpoint) gets the same in the served
app: `prepare_in_background` traces and runs once, on one token, every compiled function the
pages call for its architecture (transformer.inference.prepare), while the user reads the
first page, so that Attention maps, the arithmetic of one head or ablation do not each pay
their own trace (2-3 s apiece for an opus-mt-sized model) on their first visit.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

logger = logging.getLogger(__name__)
_started = threading.Event()
_background = threading.Event()  # set: opened models are prepared in the background
_prepared: set[str] = set()  # the architectures (config JSON) prepared or being prepared
_prepared_lock = threading.Lock()
_threads: list[threading.Thread] = []  # the preparations started (benchmarks wait for them)
ready = threading.Event()  # set when the warm-up finished (or gave up)
page_ready = threading.Event()  # set when the first page can be drawn (or the warm-up gave up)
stage = ["Starting", 0.0]  # what the warm-up does now, and the share of the first page's work done
# TensorFlow's import holds the interpreter for about 2.5 s, during which the server sends the
# browser the page's code slowly (the first page was drawn 3.6 s after the command instead of
# 1.4 s): for the bundled model, which opens in about a second, the warm-up starts it once the
# first page is drawn (first_page_drawn), or after FIRST_PAGE_WAIT_S when no browser came (a
# server started for others). A model named at start (`--model`) is what the user waits for
# (seconds to open, translate and trace): there the import starts at once, while the browser
# starts, and the first page is drawn a little later (issue 40, goal 6).
first_page_drawn = threading.Event()
FIRST_PAGE_WAIT_S = 2.0
# Once the first page can run (page_ready), the rest of the warm-up (the maps pass, the other
# compiled functions: seconds of tracing that hold the interpreter) waits until a page has run
# to its end (app.py sets page_shown), at most PAGE_SHOWN_WAIT_S: started at once, it slowed the
# home page's own run by 1.5-2 s (bench/app_named.py).
page_shown = threading.Event()
PAGE_SHOWN_WAIT_S = 10.0
RUNTIME_WAIT_S = 120  # how long the thread waits for the server's runtime to exist
SWITCH = "EXPLORER_WARM"  # "0": no warm start (to measure a cold one: bench/cold_start.py)


def start() -> None:
    """Start the warm-up thread once per process."""
    if _started.is_set() or os.environ.get(SWITCH) == "0":
        return
    _started.set()
    _background.set()
    threading.Thread(target=prepare, name="warm-start", daemon=True).start()


def prepare() -> None:
    """Wait for Streamlit's runtime (its caches live there), then compute what the default page
    computes for the default model and sentence. Never raises: a failure is logged, and the
    pages compute it themselves as they would without a warm start."""
    t0 = time.perf_counter()
    try:
        from .server_env import served_models

        if not served_models():  # the bundled model
            first_page_drawn.wait(FIRST_PAGE_WAIT_S)
        _stage("Loading TensorFlow", 0.05)
        from .runtime import load_tensorflow

        load_tensorflow()  # the served app's import of it (explorer.runtime): the server is up
        from streamlit.runtime import Runtime

        while not Runtime.exists() and time.perf_counter() - t0 < RUNTIME_WAIT_S:
            time.sleep(0.05)
        _stage("Loading the pages' code", 0.45)
        import importlib
        import pkgutil

        import explorer
        import figures
        from transformer.core.text import clean_text

        from . import about, models, results, state

        for package in (figures, explorer):  # what app.py and the pages import on a first run
            for module in pkgutil.iter_modules(package.__path__):
                importlib.import_module(f"{package.__name__}.{module.name}")

        _stage("Opening the model", 0.55)
        ckpt = models.checkpoint_for(state.default_model_choice())
        source = clean_text(state.DEFAULT_SOURCE)[0]
        _stage(f"Translating {state.DEFAULT_SOURCE!r} with {ckpt.name}", 0.75)
        results.translation(ckpt, source)
        about.about_checkpoint(ckpt, models.examples(ckpt))  # the home page's text
        _stage("Ready", 1.0)
        with _prepared_lock:  # prepared below: the page's prepare_in_background leaves it
            _prepared.add(ckpt.config.to_json())
        page_ready.set()  # Home draws the translation and the text, no maps: it may run now
        page_shown.wait(PAGE_SHOWN_WAIT_S)
        after_first_page(ckpt, source)
        print(f"Warm start: {ckpt.name} and its compiled loops ready in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - a warm-up that fails only leaves the pages cold
        logger.exception("Warm start failed; the first page computes it instead")
    finally:
        page_ready.set()
        ready.set()


def after_first_page(ckpt, source: str) -> None:
    """What the warm-up computes while the user reads the first page, into the caches the pages
    read: the default sentence's maps pass (the maps pages'), every other compiled function the
    pages call (_prepare_model), then the sentence's DecoderLens (the Interventions page's:
    3-4 s of nllb-200-distilled-600M's first visit there, a 256k-word output projection per
    encoder layer and step)."""
    from . import results

    results.attention(ckpt, source)
    _prepare_model(ckpt)
    try:  # a lens that fails (its numbers not finite) is the page's to compute and say
        results.sentence_lens(ckpt, source, None)
    except Exception:  # noqa: BLE001 - the warm-up only leaves that page's first visit slower
        logger.exception("The warm start's DecoderLens of %r failed", source)


def _stage(text: str, fraction: float) -> None:
    stage[:] = [text, fraction]


def starting() -> bool:
    """Whether the served app's warm-up has not yet made what the first page needs: a page run
    now would wait for TensorFlow's import and the model (app.py shows the start's progress)."""
    return _started.is_set() and not page_ready.is_set()


def enable_background() -> None:
    """Prepare opened models in the background (start() does it for the served app; the
    benchmarks, which run pages in AppTest, call it to measure what a served app does)."""
    _background.set()


def prepare_in_background(ckpt) -> threading.Thread | None:
    """Prepare the compiled functions of ckpt's architecture in a background thread, once per
    architecture and process (the functions are shared by every model of one config); the
    thread, or None when there is nothing to do or background preparation is off."""
    if not _background.is_set():
        return None
    key = ckpt.config.to_json()
    with _prepared_lock:
        if key in _prepared:
            return None
        _prepared.add(key)
    thread = threading.Thread(target=_prepare_model, args=(ckpt,), name="prepare-model",
                              daemon=True)
    thread.start()
    _threads.append(thread)
    return thread


def wait_prepared(timeout: float | None = None) -> None:
    """Wait for every preparation started so far (the benchmarks: pages measured as a user who
    read the first page meets them)."""
    for thread in list(_threads):
        thread.join(timeout)


def _prepare_model(ckpt) -> None:
    """The Masks page's other batch rows for ckpt (the same whatever the sentence: 1.1 s of
    opus-mt-en-de's first visit there), then transformer.inference.prepare on ckpt's model.
    Never raises: a failure is logged and the pages compute what they need themselves."""
    from transformer.inference.prepare import prepare

    from . import results

    try:  # its callers marked the architecture prepared (prepare, prepare_in_background)
        results.batch_translations(ckpt, list(results.MASK_OTHERS), results.MASK_OTHER_STEPS)
        seconds = prepare(ckpt.model, generation=ckpt.generation)
        logger.info("Prepared %s's compiled functions in %.1f s", ckpt.name, sum(seconds.values()))
    except Exception:  # noqa: BLE001 - an unprepared model only leaves its pages' first visits slower
        logger.exception("Preparing %s's compiled functions failed", ckpt.name)
