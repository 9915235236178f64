"""views/Positional_Encodings.py through AppTest: the sinusoids are the model's own codes and
follow the settings; the encoder input is the model's token embedding plus position code."""

import json

import numpy as np
import pytest
from conftest import open_page, plotly_array, set_widget

from transformer import positional_encoding

PAGE = "views/Positional_Encodings.py"


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def chart(at, key) -> dict:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-" + key)]
    return json.loads(found.proto.spec)


def test_sinusoids_are_the_models_and_follow_the_settings(app, ckpt):
    config = ckpt.config
    at = open_page(app, PAGE)
    shown = plotly_array(chart(at, "pe_heatmap")["data"][0]["z"])
    np.testing.assert_allclose(shown, positional_encoding(config.max_len, config.d_model),
                               atol=1e-6)
    np.testing.assert_allclose(shown, ckpt.model.source_embedding.sinusoids.numpy(), atol=1e-6)
    assert any(c.value.startswith("These are the model's own codes") for c in at.caption)

    set_widget(at, "number_input", "pe_d_model", 16)
    set_widget(at, "number_input", "pe_length", 10)
    shown = plotly_array(chart(at, "pe_heatmap")["data"][0]["z"])
    np.testing.assert_allclose(shown, positional_encoding(10, 16), atol=1e-6)
    assert not any(c.value.startswith("These are the model's own codes") for c in at.caption)
    assert all(d < 16 for d in at.multiselect(key="pe_dims").value)

    at.button(key="pe_reset").click().run()
    assert not at.exception, at.exception
    assert at.number_input(key="pe_d_model").value == config.d_model
    assert at.number_input(key="pe_length").value == config.max_len


def test_encoder_input_is_token_embedding_plus_position(shared_app, ckpt):
    from explorer import state

    at = shared_app.page(PAGE)
    layer = ckpt.model.source_embedding
    ids = np.asarray([ckpt.encode_source(state.DEFAULT_SOURCE)])
    total = layer(ids)[0].numpy()
    parts = [plotly_array(t["z"]) for t in chart(at, "pe_encoder_input")["data"]]
    assert len(parts) == 3
    np.testing.assert_allclose(parts[1], layer.position_codes(ids.shape[1]).numpy(), atol=1e-6)
    np.testing.assert_allclose(parts[2], total, atol=1e-5)
    np.testing.assert_allclose(parts[0] + parts[1], total, atol=1e-4)
    assert any("equals token part + position part" in s.value for s in at.success)
