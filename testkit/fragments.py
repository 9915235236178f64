"""Fragment reruns through AppTest, as the browser asks for them.

AppTest (Streamlit 1.67) always reruns the whole script. A browser does not: when a widget drawn
inside an `st.fragment` changes, it sends the widget states with that fragment's id, and the
server reruns the fragment alone. These helpers do the same through AppTest's runner: they read
which fragment drew each widget (each delta carries its fragment id) and rerun it alone.
The tree such a rerun leaves holds what the fragment drew (also into outside containers such
as the sidebar), nothing else.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager

from streamlit.runtime.scriptrunner import ScriptRunnerEvent
from streamlit.testing.v1.local_script_runner import LocalScriptRunner

_RUNS: list = []  # (runner, {event: perf_counter()}) of every run, newest last


def _init(self, *args, _original=LocalScriptRunner.__init__, **kwargs):
    _original(self, *args, **kwargs)
    times: dict = {}
    _RUNS.append((self, times))
    del _RUNS[:-4]

    def stamp(sender, event, **_):
        times.setdefault(event, time.perf_counter())

    self.on_event.connect(stamp, weak=False)


LocalScriptRunner.__init__ = _init  # records runners and their event times; behaves the same


def script_seconds() -> float:
    """Seconds the last run's script (or fragment) took, from its start to its end."""
    _, times = _RUNS[-1]
    end = min(t for e, t in times.items() if e.name.endswith("STOPPED_WITH_SUCCESS")
              or e.name.startswith("SCRIPT_STOPPED"))
    return end - times[ScriptRunnerEvent.SCRIPT_STARTED]


def widget_fragments() -> dict[str, str]:
    """{widget id: id of the fragment that drew it} of the last run."""
    runner, _ = _RUNS[-1]
    found = {}
    for msg in runner.forward_msgs():
        if not msg.HasField("delta") or not msg.delta.fragment_id:
            continue
        element = msg.delta.new_element
        which = element.WhichOneof("type")
        widget_id = getattr(getattr(element, which), "id", "") if which else ""
        if widget_id:
            found[widget_id] = msg.delta.fragment_id
    return found


@contextmanager
def _only_fragment(fragment_id: str, first_only: bool = False):
    """Runs rerun the fragment alone: every run, or (first_only) the first, the browser's
    request, while the reruns the script itself asks for (st.rerun) keep the scope they name."""
    original, runs = LocalScriptRunner._run_script, []

    def run_script(self, rerun_data):
        runs.append(rerun_data)
        if first_only and len(runs) > 1:
            return original(self, rerun_data)
        return original(self, dataclasses.replace(rerun_data, fragment_id_queue=[fragment_id]))

    LocalScriptRunner._run_script = run_script
    try:
        yield
    finally:
        LocalScriptRunner._run_script = original


def fragment_of(at, kind: str, key: str) -> str | None:
    """The id of the fragment that drew the keyed widget in the last full run, or None when
    it was drawn outside every fragment."""
    return widget_fragments().get(getattr(at, kind)(key=key).id)


def click_in_fragment(at, key: str):
    """Click a keyed button drawn inside a fragment and rerun that fragment alone, as the
    browser does; the reruns the script then asks for (st.rerun) run as they ask: the fragment
    alone (scope "fragment") or the whole script (scope "app"). Returns the AppTest."""
    fragment_id = fragment_of(at, "button", key)
    assert fragment_id, f"{key} is not drawn inside a fragment"
    at.button(key=key).click()
    with _only_fragment(fragment_id, first_only=True):
        at._run(at._tree.get_widget_states())
    assert not at.exception, at.exception
    return at


def set_in_fragment(at, kind: str, key: str, value):
    """Set a keyed widget drawn inside a fragment and rerun that fragment alone (what the
    browser does). Fails when the widget is outside every fragment. Returns the AppTest, whose
    tree now holds only what the fragment drew."""
    fragment_id = fragment_of(at, kind, key)
    assert fragment_id, f"{key} is not drawn inside a fragment"
    getattr(at, kind)(key=key).set_value(value)
    with _only_fragment(fragment_id):
        at._run(at._tree.get_widget_states())
    assert not at.exception, at.exception
    return at
