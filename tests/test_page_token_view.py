"""The token view and the arithmetic-of-one-head pages through AppTest."""

import base64
import json

import numpy as np
import pytest

from explorer import state

TOKEN_VIEW, ARITHMETIC = "pages/8_Token_View.py", "pages/9_Head_Arithmetic.py"


def _run(at):
    at.run()
    assert not at.exception, at.exception
    return at


def _page(app, path):
    app.switch_page(path)
    return _run(app)


def _specs(at):
    return [c.proto.spec for c in at.get("plotly_chart")]


def _column(at, name):
    """The token texts of the token view's "queries" or "keys" column."""
    (chart,) = at.get("plotly_chart")
    (trace,) = [t for t in json.loads(chart.proto.spec)["data"] if t.get("name") == name]
    return trace["text"]


def _array(value):
    """A Plotly JSON array: a list, or a typed array {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict):
        shape = [int(n) for n in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), value["dtype"]).reshape(shape)
    return np.asarray(value, dtype=float)


def _differences(at):
    return [float(m.value) for m in at.metric]


def test_token_view_draws_and_every_widget_changes_it(app):
    at = _page(app, TOKEN_VIEW)
    assert len(_column(at, "queries")) == 13  # <s> friday , march ▁ 5 , ▁ 2 0 2 1 </s>
    assert at.get("download_button"), "no export"
    changes = [
        lambda: at.radio(key="tv_kind").set_value("Cross-attention"),
        lambda: at.selectbox(key="tv_layer").set_value(1),
        lambda: at.multiselect(key="tv_heads").set_value([0]),
        lambda: at.selectbox(key="tv_query").set_value(2),
        lambda: at.slider(key="tv_min_weight").set_value(0.3),
        lambda: at.toggle(key="tv_hide_special").set_value(True),
        lambda: at.toggle(key="tv_merge_words").set_value(True),
        lambda: at.text_input(key=state.SOURCE).set_value("5th of March 1999"),
    ]
    for change in changes:
        before = _specs(at)
        change()
        _run(at)
        assert _specs(at) and _specs(at) != before
    assert "&lt;s&gt;" not in _column(at, "keys")
    at.multiselect(key="tv_heads").set_value([])
    _run(at)
    assert not at.get("plotly_chart") and at.info


def test_token_view_toggles_reduce_the_tokens_shown(app):
    at = _page(app, TOKEN_VIEW)
    pieces = _column(at, "keys")
    at.toggle(key="tv_hide_special").set_value(True)
    without_special = _column(_run(at), "keys")
    assert len(without_special) == len(pieces) - 2
    assert "&lt;s&gt;" not in without_special and "&lt;/s&gt;" not in without_special
    at.toggle(key="tv_merge_words").set_value(True)
    words = _column(_run(at), "keys")
    assert len(words) < len(without_special)
    assert "2021" in words and "march" in words  # "2" "0" "2" "1" merged
    at.toggle(key="tv_hide_special").set_value(False)
    assert len(_column(_run(at), "keys")) == len(words) + 2


@pytest.mark.parametrize("path", [TOKEN_VIEW, ARITHMETIC])
def test_pages_survive_bad_input(app, path):
    at = _page(app, path)
    for text in ("", "a long sentence " * 40):
        at.text_input(key=state.SOURCE).set_value(text)
        _run(at)
    if path == TOKEN_VIEW:  # the empty sentence is only special tokens
        at.text_input(key=state.SOURCE).set_value("")
        at.toggle(key="tv_hide_special").set_value(True)
        _run(at)
        assert at.info and not at.get("plotly_chart")
    at.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED)
    _run(at)
    at.text_input(key=state.TARGET).set_value("")  # the decoder sees <s> only
    _run(at)
    kind = "tv_kind" if path == TOKEN_VIEW else "arith_kind"
    at.radio(key=kind).set_value("Decoder self-attention")
    _run(at)
    at.text_input(key=state.TARGET).set_value("1999-12-31")
    _run(at)
    at.text_input(key=state.SOURCE).set_value("Friday, March 5, 2021")
    _run(at)
    assert at.get("plotly_chart")


def test_arithmetic_matches_the_model_and_follows_every_widget(app):
    at = _page(app, ARITHMETIC)
    assert len(at.get("plotly_chart")) == 5 and at.get("download_button")
    assert all(d < 1e-5 for d in _differences(at)), _differences(at)
    assert at.success
    every, per_query = range(5), (0, 2, 4)  # q, steps, context; K and V are the same for all
    changes = [
        (lambda: at.radio(key="arith_kind").set_value("Cross-attention"), every),
        (lambda: at.selectbox(key="arith_layer").set_value(1), every),
        (lambda: at.selectbox(key="arith_head").set_value(3), every),
        (lambda: at.selectbox(key="arith_query").set_value(4), per_query),
        (lambda: at.radio(key="arith_kind").set_value("Decoder self-attention"), every),
    ]
    for change, changed in changes:
        before = _specs(at)
        change()
        _run(at)
        after = _specs(at)
        assert all(before[i] != after[i] for i in changed), "some figure did not change"
        assert all(d < 1e-5 for d in _differences(at)), _differences(at)
    # Decoder query 4 may not attend to later tokens: the mask row and weights show it.
    steps = json.loads(at.get("plotly_chart")[2].proto.spec)["data"]
    (blocked,) = [t for t in steps if t.get("name") == "blocked"]
    blocked = _array(blocked["z"])[0]
    assert np.isnan(blocked[:5]).all() and (blocked[5:] == 1).all() and len(blocked) > 5
