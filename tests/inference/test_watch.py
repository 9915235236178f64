"""A long translation of a named model shows its progress and can be stopped (issue 36): a
compiled.Watch given where a decode takes its time budget has the compiled loop report each step
and end at the next one once stopped; the decode says stopped_by "stopped". Greedy and beam
search, ours and transformers' (search_transformers.py)."""

import numpy as np
import pytest

from testkit.variants import random_variant
from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.inference.compiled import Watch
from transformer.inference.generation_config import read_generation_config

SOURCE = "Friday, March 5, 2021"


class StopAt(Watch):
    """Stopped once step `at` started (as a person pressing Stop while it runs)."""

    def __init__(self, at):
        super().__init__()
        self.at, self.seen = at, []

    @property
    def stopped(self):
        self.seen.append(self.steps)
        return self.steps >= self.at


@pytest.fixture(scope="module")
def endless():
    """A random model that never emits its end token: every decode runs to its length."""
    return random_variant(load_checkpoint(DEFAULT_CHECKPOINT), seed=11)


@pytest.mark.parametrize("beam_width", [1, 3])
def test_ours_reports_each_step_and_stops_at_the_next(endless, beam_width):
    full = endless.translate(SOURCE, beam_width=beam_width, stop_at_end=False)
    watch = StopAt(4)
    try:
        cut = endless.translate(SOURCE, beam_width=beam_width, stop_at_end=False, seconds=watch)
    finally:
        watch.close()
    assert len(full.token_ids) > 6
    assert cut.stopped_by == "stopped" and len(cut.token_ids) == 4
    assert watch.seen[:5] == [0, 1, 2, 3, 4]  # the steps done as each next one may start
    if beam_width == 1:
        assert cut.token_ids == full.token_ids[:4]
    assert endless.stopped_by_budget(cut) == "the Stop you pressed"


@pytest.mark.parametrize("num_beams", [1, 2])
def test_transformers_search_reports_each_step_and_stops(endless, num_beams):
    settings = read_generation_config(
        f'{{"num_beams": {num_beams}, "max_length": 20}}'.encode(), endless.config)
    full = endless.generate(SOURCE, settings)
    watch = StopAt(3)
    try:
        cut = endless.generate(SOURCE, settings, seconds=watch)
    finally:
        watch.close()
    assert cut.stopped_by == "stopped" and len(cut.token_ids) < len(full.token_ids)
    assert max(watch.seen) >= 3


def test_an_unstopped_watch_changes_nothing(endless):
    watch = Watch()
    try:
        watched = endless.translate(SOURCE, stop_at_end=False, seconds=watch)
    finally:
        watch.close()
    plain = endless.translate(SOURCE, stop_at_end=False)
    assert watched.token_ids == plain.token_ids and watched.stopped_by == plain.stopped_by
    assert watch.steps == len(plain.token_ids)
    np.testing.assert_allclose([s.log_prob for s in watched.steps],
                               [s.log_prob for s in plain.steps], rtol=0, atol=1e-6)
