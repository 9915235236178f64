"""Gradient attributions per step on the Decoding page (issue 27, item 3): at step t, what each
source token and each decoder input gave the chosen token's log-probability, equal to
OpenedModel.contributions computed here; off until asked for, and refused (said) for a decode
with silenced heads."""

import json

import numpy as np
import pytest
from conftest import open_page, plotly_array, set_widget

from explorer import state
from transformer import DEFAULT_CHECKPOINT, load_checkpoint

PAGE = "views/Decoding.py"


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(DEFAULT_CHECKPOINT)


def _bars(at) -> list[np.ndarray]:
    charts = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-dec_grads")]
    if not charts:
        return []
    return [plotly_array(t["y"]) if isinstance(t["y"], dict) else np.asarray(t["y"], float)
            for t in json.loads(charts[0].proto.spec)["data"]]


@pytest.mark.parametrize("label, method, steps", [
    ("Saliency", "saliency", None), ("Integrated gradients", "integrated_gradients", 4)])
def test_one_steps_gradients_are_the_models(app, ckpt, label, method, steps):
    at = open_page(app, PAGE)
    source = at.session_state[state.SOURCE]
    ids = ckpt.translate(source).token_ids
    t = 3
    set_widget(at, "select_slider", "dec_step", t)
    assert not _bars(at)  # off until asked for
    set_widget(at, "toggle", "dec_grad_on", True)
    set_widget(at, "radio", "dec_grad_method", label)
    options = {}
    if steps is not None:
        set_widget(at, "toggle", "dec_grad_steps_auto", False)
        set_widget(at, "number_input", "dec_grad_steps", steps)
        options["steps"] = steps
    assert not at.exception, at.exception
    expected = ckpt.contributions(source, method=method, output_ids=ids, **options)
    src, prefix = _bars(at)
    np.testing.assert_allclose(src, expected["source"][t], rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(prefix, expected["target"][t, :t + 1], rtol=1e-4, atol=1e-7)
    assert any(f"{expected['log_probs'][t]:.3f}" in c.value for c in at.caption)


def test_a_decode_with_silenced_heads_says_why_there_are_no_gradients(app):
    at = open_page(app, PAGE)
    set_widget(at, "multiselect", "dec_ablate", ["cross L0 H0"])
    set_widget(at, "toggle", "dec_grad_on", True)
    assert not at.exception, at.exception
    assert not _bars(at)
    assert any("every head working" in i.value for i in at.info)


def test_one_step_against_a_foil_from_its_top_k(app, ckpt):
    """Issue 41, item 1: "why this token rather than that one" at one step: the foil picked
    from the step's top-k, the bars OpenedModel.contributions(foil=...) computed here."""
    at = open_page(app, PAGE)
    source = at.session_state[state.SOURCE]
    decoded = ckpt.translate(source)
    t = 2
    set_widget(at, "select_slider", "dec_step", t)
    set_widget(at, "toggle", "dec_grad_on", True)
    step = decoded.steps[t]
    alternatives = [i for _, i, _ in step.top_k if i != step.token_id]
    labels = at.selectbox(key="dec_grad_foil").options  # "— (no contrast)", then each other
    assert len(labels) == 1 + len(alternatives)  # token of the step's top-k, with its id
    assert all(label.endswith(f"(id {i})") for label, i in zip(labels[1:], alternatives))
    set_widget(at, "selectbox", "dec_grad_foil", alternatives[0])
    assert not at.exception, at.exception
    ids = decoded.token_ids
    expected = ckpt.contributions(source, method="saliency", output_ids=ids[:t + 1],
                                  foil=[None] * t + [alternatives[0]])
    src, prefix = _bars(at)
    np.testing.assert_allclose(src, expected["source"][t], rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(prefix, expected["target"][t, :t + 1], rtol=1e-4, atol=1e-7)
    assert any(f"{expected['scores'][t]:.3f}" in c.value for c in at.caption)
    plain = ckpt.contributions(source, method="saliency", output_ids=ids)
    assert not np.allclose(src, plain["source"][t], rtol=1e-3)
