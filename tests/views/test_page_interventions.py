"""views/Interventions.py through AppTest: DecoderLens draws the model's true numbers
(OpenedModel.decoder_lens computed here); its toggle turns it off."""

import json

import numpy as np
import pytest
from conftest import open_page, plotly_array, set_widget

from explorer import state

PAGE = "views/Interventions.py"


@pytest.fixture(scope="module")
def bundled():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def _chart(at, key) -> dict:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-" + key)]
    return json.loads(found.proto.spec)


def test_decoder_lens_draws_each_layers_probabilities_and_translation(app, bundled):
    at = open_page(app, PAGE)
    ids = bundled.translate(state.DEFAULT_SOURCE).token_ids
    lens = bundled.decoder_lens(state.DEFAULT_SOURCE, output_ids=ids, max_steps=len(ids) + 10)
    z = _chart(at, "inter_lens_probs")["data"][0]["z"]
    shown = plotly_array(z) if isinstance(z, dict) else np.asarray(z, float)
    np.testing.assert_allclose(shown, np.exp(lens["log_probs"]), atol=1e-5)
    (table,) = at.dataframe
    assert list(table.value["greedy translation"]) == [t["text"] for t in lens["translations"]]
    assert table.value["greedy translation"].iloc[-1] == bundled.translate(
        state.DEFAULT_SOURCE).text  # the last layer is the model itself
    assert any("the model does" in c.value for c in at.caption)
    set_widget(at, "toggle", "inter_lens_on", False)
    assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("inter_lens_probs")]


def test_a_typed_target_is_what_the_lens_scores(app, bundled):
    at = open_page(app, PAGE)
    at.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED).run()
    at.text_input(key=state.TARGET).set_value("2021-03-06").run()
    assert not at.exception, at.exception
    lens = bundled.decoder_lens(state.DEFAULT_SOURCE, "2021-03-06",
                                max_steps=len(bundled.encode_target("2021-03-06")) + 10)
    z = _chart(at, "inter_lens_probs")["data"][0]["z"]
    shown = plotly_array(z) if isinstance(z, dict) else np.asarray(z, float)
    np.testing.assert_allclose(shown, np.exp(lens["log_probs"]), atol=1e-5)
