"""explorer.choices: each way a keyed choice is kept valid before its widget is drawn."""

import pytest

from explorer.choices import clamp_choice, forget_if_not_offered, keep_offered, reset_if_out_of_range


@pytest.fixture
def session():
    """Streamlit's session state in bare mode (no script run), emptied before and after."""
    import streamlit as st

    st.session_state.clear()
    yield st.session_state
    st.session_state.clear()


def test_reset_if_out_of_range_goes_back_to_zero(session):
    session["layer"] = 3
    reset_if_out_of_range("layer", 4)
    assert session["layer"] == 3
    reset_if_out_of_range("layer", 3)  # a model with 3 layers: 0..2
    assert session["layer"] == 0
    reset_if_out_of_range("unset", 1)
    assert "unset" not in session


def test_clamp_choice_keeps_the_nearest_value(session):
    session["step"] = 9
    clamp_choice("step", 4)
    assert session["step"] == 4  # the last step, not the first
    session["step"] = -2
    clamp_choice("step", 4)
    assert session["step"] == 0
    clamp_choice("length", 40, default=40)
    assert session["length"] == 40
    clamp_choice("length", 12, default=40)
    assert session["length"] == 12


def test_keep_offered_cuts_a_list_to_the_options(session):
    session["heads"] = ["cross L1 H3", "encoder L0 H0"]
    keep_offered("heads", ["encoder L0 H0", "cross L0 H0"])
    assert session["heads"] == ["encoder L0 H0"]
    session["heads"] = [2, 3]
    keep_offered("heads", range(2), default=range(2))  # none left: the default
    assert session["heads"] == [0, 1]
    session["heads"] = []
    keep_offered("heads", range(2), default=range(2))  # chosen empty on purpose: kept empty
    assert session["heads"] == []
    keep_offered("unset", ["a"])
    assert session["unset"] == []


def test_forget_if_not_offered_drops_the_key(session):
    session["one"], session["many"] = "epoch 8", ["cross L0 H0", "cross L1 H1"]
    forget_if_not_offered("one", ["epoch 1", "epoch 8"])
    forget_if_not_offered("many", ["cross L0 H0", "cross L1 H1"])
    assert session["one"] == "epoch 8" and len(session["many"]) == 2
    forget_if_not_offered("one", ["epoch 1", "final"])
    forget_if_not_offered("many", ["cross L0 H0"])  # one of them is gone: back to the default
    assert "one" not in session and "many" not in session
    forget_if_not_offered("unset", [])
    assert "unset" not in session
