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


def test_knockout_blocks_the_picked_edges_and_shows_what_follows(app, bundled):
    """Issue 41, item 5: nothing is blocked until source tokens are picked; then the step's
    probabilities and the continued translation are OpenedModel.knockout's, computed here."""
    at = open_page(app, PAGE)
    assert any("Pick the source tokens" in i.value for i in at.info)
    ids = bundled.translate(state.DEFAULT_SOURCE).token_ids
    n = len(bundled.encode_source(state.DEFAULT_SOURCE))
    set_widget(at, "select_slider", "inter_ko_step", 1)
    set_widget(at, "multiselect", "inter_ko_sources", list(range(n)))
    assert not at.exception, at.exception
    expected = bundled.knockout(state.DEFAULT_SOURCE, output_ids=ids, step=1, layers=[0, 1],
                                heads=range(bundled.config.num_heads),
                                source_positions=range(n))
    values = [m.value for m in at.metric]
    assert f"{np.exp(expected['log_prob']):.3f}" in values
    assert f"{np.exp(expected['log_prob_knocked']):.3f}" in values
    after = [t for t in at.dataframe if t.value.columns.tolist() == ["token", "id", "p"]][1]
    assert after.value["id"].tolist() == [i for _, i, _ in expected["top_knocked"]]
    assert any(expected["translation_knocked"]["text"] in m.value for m in at.markdown)
    set_widget(at, "multiselect", "inter_ko_heads", [0])  # fewer edges: another answer
    assert not at.exception, at.exception
