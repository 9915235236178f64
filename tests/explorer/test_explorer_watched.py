"""A named model's translation shows its progress and the user can stop it (issue 36): the
decode runs in a worker with a compiled.Watch while the page's run draws a progress bar; when
the run is stopped (Streamlit raises in it at the bar's next update), the decode ends at its next
step, what it made is kept and shown, said stopped, until "Translate to the end"."""

import dataclasses

import pytest

from explorer import results
from testkit.variants import random_variant
from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.core import limits

SOURCE = "Friday, March 5, 2021"


class Stopped(Exception):
    """What Streamlit raises in a script run the user stopped (StopException)."""


class Bar:
    """st.progress's bar: its updates recorded; the run is stopped at the `stop_at`-th."""

    def __init__(self, stop_at):
        self.stop_at, self.updates = stop_at, []

    def progress(self, fraction, text=""):
        self.updates.append((fraction, text))
        if len(self.updates) >= self.stop_at:
            raise Stopped

    def empty(self):
        pass


@pytest.fixture
def named(monkeypatch):
    """A random model that never ends, opened as a named model, a long decode: 2,000 steps."""
    base = load_checkpoint(DEFAULT_CHECKPOINT)
    ckpt = random_variant(base, seed=11, max_len=2048)
    ckpt = dataclasses.replace(ckpt, budgets=limits.named_budgets(), content_hash="endless")
    results._STOPPED.clear()
    yield ckpt
    results._STOPPED.clear()


def test_a_stopped_translation_is_kept_and_said_stopped(named, monkeypatch):
    bar = Bar(stop_at=3)
    monkeypatch.setattr(results.st, "progress", lambda *a, **k: bar)
    with pytest.raises(Stopped):
        results._watched(("decode", "endless", SOURCE), named, 2000,
                         lambda seconds: named.translate(SOURCE, max_len=2000, stop_at_end=False,
                                                         seconds=seconds))
    kept = results._STOPPED[("decode", "endless", SOURCE)]
    assert kept.stopped_by == "stopped" and 0 < len(kept.token_ids) < 2000
    assert "of at most 2000 tokens" in bar.updates[-1][1]
    assert named.stopped_by_budget(kept) == "the Stop you pressed"
    results.translate_to_the_end()
    assert not results._STOPPED


def test_an_upload_decodes_in_the_run_with_its_time_budget(named):
    upload = dataclasses.replace(named, budgets=limits.UPLOAD)
    seen = []
    result = results._watched(("decode",), upload, 10, lambda seconds: seen.append(seconds) or 1)
    assert result == 1 and seen == [None]  # no worker, no watch: the upload's 10 s apply
