"""pages/1_Model.py through AppTest: the checkpoint's own configuration, parameter counts,
tokenizers and training record. (Uploading another model: tests/test_app.py.)"""

import json

import pandas as pd
import pytest

from conftest import open_page

MODEL = "pages/1_Model.py"


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def test_model_page_shows_the_checkpoints_own_numbers(app, ckpt):
    from transformer.summary import parameter_counts

    at = open_page(app, MODEL)
    config, held_out = ckpt.config, ckpt.metadata["held_out"]
    assert at.title[0].value == f"Model: {ckpt.name}"
    shown = {m.label: m.value for m in at.metric}
    assert shown == {
        "Parameters": f"{ckpt.model.count_params():,}",
        "Layers (encoder + decoder)": f"{config.num_encoder_layers} + {config.num_decoder_layers}",
        "Held-out exact match": f"{held_out['exact_match']:.2%}",
        "Held-out token accuracy": f"{held_out['token_accuracy']:.2%}"}
    config_table, counts, tokenizers = (d.value for d in at.dataframe)
    assert dict(zip(config_table.index, config_table["value"])) == {
        name: str(value) for name, value in config.to_dict().items()}
    pd.testing.assert_frame_equal(counts.reset_index(drop=True),
                                  pd.DataFrame(parameter_counts(ckpt.model)))
    assert f"Total {counts['parameters'].sum():,}" in at.caption[0].value
    spec = ckpt.source_tokenizer.spec()
    assert list(tokenizers.index) == list(spec)
    assert {k: v for k, v in tokenizers["source"].items() if spec[k] is not None} == {
        k: str(v) for k, v in spec.items() if v is not None}
    charts = {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec)
              for c in at.get("plotly_chart")}
    assert set(charts) == {"model_architecture", "model_history"}
    assert [t["name"] for t in charts["model_history"]["data"]] == [
        name for name, values in ckpt.metadata["history"].items() if isinstance(values, list)]
    assert [c.value for c in at.code] == [ckpt.metadata["command"]]
