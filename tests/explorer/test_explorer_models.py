"""explorer.models: the bundled checkpoints and the session's uploads as model choices, the
active model with its fallback, training runs and example sentences."""

import hashlib

import pytest

from explorer import models, state
from transformer.inference.session import ASSETS, DEFAULT_CHECKPOINT


@pytest.fixture
def session():
    """Streamlit's session state in bare mode (no script run), emptied before and after."""
    import streamlit as st

    st.session_state.clear()
    state.init()
    yield st.session_state
    st.session_state.clear()


def test_bundled_checkpoints_default_first_with_readable_labels():
    bundled = models.bundled_checkpoints()
    labels = list(bundled)
    assert labels[0] == "dates (final)" and bundled[labels[0]] == DEFAULT_CHECKPOINT
    assert "dates (epoch 1 of training)" in labels
    assert set(bundled.values()) == set(ASSETS.glob("*.ckpt"))


def test_choices_list_the_bundled_models_then_this_sessions_uploads(session):
    choices = models.model_choices()
    assert list(choices)[0] == state.default_model_choice()
    assert all(choice.startswith("bundled:") for choice in choices)
    session[state.UPLOADS]["ab" * 32] = ("mine.ckpt", b"")
    choices = models.model_choices()
    assert choices["upload:" + "ab" * 32] == "mine.ckpt (uploaded, abababab)"


def test_active_checkpoint_falls_back_to_the_default(session):
    ckpt = models.active_checkpoint()
    assert ckpt.content_hash == hashlib.sha256(DEFAULT_CHECKPOINT.read_bytes()).hexdigest()
    session[state.MODEL] = "upload:" + "0" * 64  # an upload this session no longer has
    assert models.active_checkpoint() is ckpt  # the cached model, not a second copy
    assert session[state.MODEL] == state.default_model_choice()


def test_training_checkpoints_follow_the_run_of_a_bundled_choice():
    run = models.training_checkpoints("bundled:dates.epoch04.ckpt")
    assert run == {"epoch 1": "bundled:dates.epoch01.ckpt", "epoch 2": "bundled:dates.epoch02.ckpt",
                   "epoch 4": "bundled:dates.epoch04.ckpt", "epoch 8": "bundled:dates.epoch08.ckpt",
                   "final": "bundled:dates.ckpt"}
    assert models.training_checkpoints(state.default_model_choice()) == run
    assert models.training_checkpoints("upload:" + "0" * 64) == {}


def test_examples_are_held_out_dates_of_the_training_seed(session):
    from transformer.training.data import date_pairs

    ckpt = models.active_checkpoint()
    seed = ckpt.metadata.get("seed", 0)
    held_out = [s for s, _ in date_pairs(5, seed=seed, split="test")]
    assert models.held_out_dates(ckpt, 5) == held_out
    recorded = ckpt.metadata.get("examples")
    assert models.examples(ckpt) == (recorded if recorded else models.held_out_dates(ckpt, 8))
