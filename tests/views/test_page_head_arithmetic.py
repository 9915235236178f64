"""views/Head_Arithmetic.py through AppTest: q, K, the scores, the mask and the softmax redone
from the model's own numbers match its attention row, for every widget. Bad input:
tests/views/test_hardening.py."""

import base64
import json

import numpy as np
from conftest import open_page

ARITHMETIC = "views/Head_Arithmetic.py"


def _run(at):
    at.run()
    assert not at.exception, at.exception
    return at


def _specs(at):
    return [c.proto.spec for c in at.get("plotly_chart")]


def _array(value):
    """A Plotly JSON array: a list, or a typed array {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict):
        shape = [int(n) for n in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), value["dtype"]).reshape(shape)
    return np.asarray(value, dtype=float)


def _differences(at):
    return [float(m.value) for m in at.metric]


def test_arithmetic_matches_the_model_and_follows_every_widget(app):
    at = open_page(app, ARITHMETIC)
    # q, K, steps, V, context; f(x) and its norms (weight × value norm, issue 27)
    assert len(at.get("plotly_chart")) == 7 and at.get("download_button")
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
