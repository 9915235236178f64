"""views/Model.py through AppTest: the held-out exact match of every date format (issue 24),
from the checkpoint's own training report, and nothing where a checkpoint has none."""

import json

import pytest
from conftest import open_page, uploader

MODEL = "views/Model.py"


def _per_format_tables(at) -> list:
    """The page's tables with an "exact match" column (AppTest's dataframes carry no key)."""
    return [d.value for d in at.dataframe if "exact match" in d.value.columns]


@pytest.mark.slow
def test_the_bundled_model_shows_every_format_with_an_example_and_its_exact_match(shared_app):
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint
    from transformer.training.data import DATE_FORMATS

    rows = load_checkpoint(DEFAULT_CHECKPOINT).metadata["held_out"]["per_format"]
    at = shared_app.page(MODEL)
    assert not at.exception, at.exception
    [table] = _per_format_tables(at)
    assert list(table.columns) == ["format", "example", "exact match", "examples"]
    assert list(table["format"]) == list(DATE_FORMATS)
    assert list(table["example"]) == [r["example"] for r in rows] and all(table["example"])
    assert list(table["exact match"]) == [r["exact_match"] for r in rows]
    assert (table["exact match"] >= 0.99).all()
    assert "Held-out exact match per format" in [h.value for h in at.subheader]


@pytest.mark.slow
def test_a_checkpoint_without_a_per_format_report_shows_no_table(app, tiny_checkpoint_bytes):
    import io
    import zipfile


    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(tiny_checkpoint_bytes)) as source, \
            zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            content = source.read(item)
            if item.filename == "metadata.json":
                content = json.dumps({"name": "odd-report", "held_out": {
                    "exact_match": 0.5, "per_format": [{"format": 1}, "iso"]}}).encode()
            target.writestr(item.filename, content)
    at = open_page(app, MODEL)
    uploader(at).upload("odd.ckpt", out.getvalue()).run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Model: odd-report"
    assert not _per_format_tables(at)
    assert "Held-out exact match per format" not in [h.value for h in at.subheader]
