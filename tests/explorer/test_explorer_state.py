"""explorer.state: the session keys' defaults and accessors, and that state imports no other
explorer module (models, results and the sidebar import it, never the other way round)."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT

from explorer import state


@pytest.fixture
def session():
    """Streamlit's session state in bare mode (no script run), emptied before and after."""
    import streamlit as st

    st.session_state.clear()
    yield st.session_state
    st.session_state.clear()


def test_state_imports_no_other_explorer_module():
    code = ("import sys, explorer.state; "
            "print(sorted(m for m in sys.modules if m.startswith('explorer.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    # explorer.runtime and explorer.quiet: the package's own first import (TensorFlow's quiet
    # import); explorer.server_env: the names of what the server tells its pages (no imports;
    # explorer.serve, which sets them, is not pulled in)
    assert out.stdout.strip().splitlines()[-1] == \
        "['explorer.quiet', 'explorer.runtime', 'explorer.server_env', 'explorer.state']"


@pytest.mark.parametrize("served", [False, True], ids=["imported", "served"])
def test_the_served_process_leaves_tensorflow_to_its_warm_up(served):
    """Importing explorer brings TensorFlow in (quietly, Keras made safe from Streamlit's
    clear_session), except in `python -m explorer.serve`'s process, where the warm-up thread
    does it while the server starts (issue 38, item 13: the server answers at once)."""
    argv = "['python', '-m', 'explorer.serve']" if served else "sys.orig_argv"
    code = (f"import sys; sys.orig_argv = {argv}; import explorer; "
            "print('tensorflow' in sys.modules, 'keras' in sys.modules); "
            "explorer.load_tensorflow(); import keras; "
            "print(keras.backend.clear_session.__name__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == ("False False" if served else "True True")
    assert lines[-1] == "<lambda>"  # Streamlit's clear_session does nothing to our models


def test_init_sets_defaults_and_keeps_what_the_session_chose(session):
    session[state.SOURCE] = "1 May 1999"
    state.init()
    assert session[state.SOURCE] == "1 May 1999"
    assert session[state.MODEL] == state.default_model_choice() == "bundled:dates.ckpt"
    assert session[state.TARGET_MODE] == state.TARGET_MODEL
    assert session[state.UPLOADS] == {} and session[state.TARGET] == ""


def test_accessors_read_the_sidebar(session):
    assert state.current_source() == state.DEFAULT_SOURCE  # nothing set yet
    assert state.model_choice() == state.default_model_choice()
    state.init()
    session[state.TARGET] = "1999-12-31"
    assert state.current_target() is None  # the model's own translation
    session[state.TARGET_MODE] = state.TARGET_TYPED
    assert state.current_target() == "1999-12-31"
    session[state.SOURCE], session[state.MODEL] = "5 March 2021", "upload:abc"
    assert (state.current_source(), state.model_choice()) == ("5 March 2021", "upload:abc")
