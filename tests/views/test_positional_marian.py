"""views/Positional_Encodings.py through AppTest on a Marian (opus-mt) model, whose sinusoids
are laid out [sin | cos] (config.positional "sinusoidal_concat"): the page draws the model's own
layout and says so, where it drew the paper's interleaved codes and captioned them "These are the
model's own codes" beside a difference of 2 (issue 24, item 5: what a page says comes from the
model's config). The sinusoids' similarity is drawn beside its reading by offset (item 8)."""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import open_page, plotly_array, uploader

from transformer import positional_encoding

PAGE = "views/Positional_Encodings.py"
MARIAN = Path(__file__).resolve().parents[1] / "fixtures" / "marian"


@pytest.fixture(scope="module")
def marian():
    from transformer.importers.hf import marian

    return marian.FAMILY.convert(MARIAN)


def charts(at) -> dict[str, dict]:
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec)
            for c in at.get("plotly_chart")}


def test_a_marian_models_sinusoids_are_drawn_in_its_own_layout(app, marian):
    files = [(p.name, p.read_bytes(), "application/octet-stream") for p in sorted(MARIAN.iterdir())]
    uploader(app).set_value(files).run()
    assert not app.exception, app.exception
    at = open_page(app, PAGE)
    config = marian.config
    assert config.positional == "sinusoidal_concat"
    shown = charts(at)
    drawn = plotly_array(shown["pe_heatmap"]["data"][0]["z"])
    own = marian.model.source_embedding.sinusoids.numpy()
    np.testing.assert_allclose(drawn, own[:len(drawn)], atol=1e-6)
    np.testing.assert_allclose(drawn, positional_encoding(len(drawn), config.d_model,
                                                          layout="concat"), atol=1e-6)
    captions = [c.value for c in at.caption]
    assert any(c.startswith("These are the model's own codes") for c in captions)
    assert any("this model's layout: the sines of every frequency, then the cosines" in c
               for c in captions)
    assert not [w.value for w in at.warning if "differ" in w.value]
    assert any("config.positional = 'sinusoidal_concat'" in i.value for i in at.info)
    assert {"pe_similarity", "pe_offsets"} <= set(shown)
