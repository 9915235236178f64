"""views/Model.py through AppTest: what the model does and where it came from, the
checkpoint's own configuration, parameter counts, tokenizers and training record, and its
metadata warnings. (Uploading another model, and the provenance of a converted one:
tests/views/test_app.py.)"""

import json

import pandas as pd
import pytest
from conftest import open_page, uploader

MODEL = "views/Model.py"


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def test_model_page_shows_the_checkpoints_own_numbers(shared_app, ckpt):
    from transformer.model.summary import parameter_counts

    at = shared_app.page(MODEL)
    config, held_out = ckpt.config, ckpt.metadata["held_out"]
    assert at.title[0].value == f"Model: {ckpt.name}"
    shown = {m.label: m.value for m in at.metric}
    assert shown == {
        "Parameters": f"{ckpt.model.count_params():,}",
        "Layers (encoder + decoder)": f"{config.num_encoder_layers} + {config.num_decoder_layers}",
        "Held-out exact match": f"{held_out['exact_match']:.2%}",
        "Held-out token accuracy": f"{held_out['token_accuracy']:.2%}"}
    config_table, counts, tokenizers = (d.value for d in at.dataframe
                                        if "exact match" not in d.value.columns)  # per format
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


def test_model_page_says_what_the_model_does_and_where_it_came_from(shared_app, ckpt):
    at = shared_app.page(MODEL)
    text = " ".join(m.value for m in at.markdown)
    assert "turns dates written by people into ISO dates" in text
    assert "72,000 generated date pairs of the dates task" in text  # the training data
    formats = len(ckpt.metadata["held_out"]["per_format"])
    assert formats == 36 and f"in {formats} formats" in text  # counted, not written in
    assert "One date in English" in text  # the inputs it expects
    assert "Trained by this project" in text
    assert [c.value for c in at.code] == [ckpt.metadata["command"]]  # the training command
    assert not at.warning  # the bundled metadata is clean


def _with_metadata(data: bytes, metadata: dict) -> bytes:
    """The checkpoint file with its metadata.json replaced."""
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            content = json.dumps(metadata).encode() if item.filename == "metadata.json" \
                else source.read(item)
            target.writestr(item.filename, content)
    return out.getvalue()


def test_model_page_shows_the_metadata_warnings(app, tiny_checkpoint_bytes):

    data = _with_metadata(tiny_checkpoint_bytes, {"name": "odd-metadata", "seed": -5,
                                                  "held_out": "perfect"})
    at = open_page(app, MODEL)
    uploader(at).upload("odd.ckpt", data).run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Model: odd-metadata"
    warnings = [w.value for w in at.main.warning]  # (the sidebar may say it is unsure)
    assert len(warnings) == 2, warnings
    assert all(w.startswith("Metadata field") for w in warnings)
    assert any("'seed' was dropped" in w for w in warnings)
    assert any("'held_out' was dropped" in w for w in warnings)
    text = " ".join(m.value for m in at.markdown)
    assert "does not say what it was trained to do" in text
    assert "does not record how it was made" in text
