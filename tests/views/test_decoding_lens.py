"""The logit lens on the Decoding page (issue 27, item 5): at every step, what each decoder
layer's output predicts (through the final norm and the output projection), beside the token
the step chose; its last layer is the model's own distribution."""

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


def _lens(at) -> dict:
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-dec_lens")]
    return json.loads(chart.proto.spec)["data"][0]


def test_each_layer_predicts_and_the_last_is_the_models_own(app, ckpt):
    at = open_page(app, PAGE)
    source = at.session_state[state.SOURCE]
    result = ckpt.translate(source)
    t = 2
    set_widget(at, "select_slider", "dec_step", t)
    assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("-dec_lens")]  # off
    set_widget(at, "toggle", "dec_lens_on", True)
    trace = _lens(at)
    z = plotly_array(trace["z"]) if isinstance(trace["z"], dict) else np.array(trace["z"], float)
    layers = ckpt.config.num_decoder_layers
    assert z.shape == (layers, 5 + 1) and trace["y"] == [f"layer {i + 1}" for i in range(layers)]
    # the last layer's row: the step's own top-k and the chosen token's probability
    step = result.steps[t]
    np.testing.assert_allclose(z[-1, :5], [p for _, _, p in step.top_k[:5]], atol=1e-5)
    np.testing.assert_allclose(z[-1, -1], np.exp(step.log_prob), atol=1e-5)
    assert trace["text"][-1][0].startswith(step.top_k[0][0].replace("▁", "␣"))
    # every layer's row as the API gives it
    lens = ckpt.layer_predictions(source, output_ids=result.token_ids)
    np.testing.assert_allclose(z[:, :5], lens["top_probs"][:, t], atol=1e-6)
    np.testing.assert_allclose(z[:, -1], lens["chosen_probs"][:, t], atol=1e-6)
    assert [row[-1].endswith(f"rank {r + 1}") for row, r in
            zip(trace["text"], lens["chosen_rank"][:, t])] == [True] * layers
    assert any("logit lens" in c.value for c in at.caption)
    set_widget(at, "toggle", "dec_lens_on", False)
