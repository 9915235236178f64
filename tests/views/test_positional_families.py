"""views/Positional_Encodings.py on each Hugging Face family's fixture (issue 26): the page shows
what the model adds for positions, no other: BART's and mBART's learned table (the rows read,
transformers' offset of 2 said), T5's relative bias (no absolute codes), Marian's and Pegasus's
[sin | cos] and M2M100's and NLLB's fairseq sinusoids, each the model's own; the paper's sinusoids
only for comparison, in an expander, where the model does not use them."""

import json

import numpy as np
import pytest
from conftest import ROOT, open_page, plotly_array, uploader

from explorer import state
from figures.positional import bias_by_offset
from transformer import positional_encoding

PAGE = "views/Positional_Encodings.py"
FIXTURES = ROOT / "tests" / "fixtures"
SOURCE = "Hello world"


def _opened(family: str):
    """app.py with the family's fixture uploaded, on the positional page."""
    from streamlit.testing.v1 import AppTest

    from transformer import load_checkpoint

    folder = FIXTURES / family
    if not (folder / "config.json").is_file():
        pytest.skip(f"no {family} fixture here")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    files = [(p.name, p.read_bytes(), "application/octet-stream") for p in sorted(folder.iterdir())]
    uploader(at).set_value(files).run()
    assert not at.exception, at.exception
    assert at.session_state[state.MODEL].startswith(f"{state.UPLOADED}:")
    at.text_input(key=state.SOURCE).set_value(SOURCE).run()
    return open_page(at, PAGE), load_checkpoint(folder)


def _charts(at) -> dict[str, dict]:
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec)
            for c in at.get("plotly_chart")}


def _headers(at) -> list[str]:
    return [h.value for h in at.header]


def _expanders(at) -> list[str]:
    return [e.label for e in at.expander]


@pytest.mark.parametrize("family", ["bart", "mbart"])
def test_a_learned_table_is_drawn_as_the_model_reads_it(family):
    at, ckpt = _opened(family)
    config = ckpt.config
    assert config.positional == "learned"
    assert "Learned position embeddings" in _headers(at)
    assert "The sinusoidal encoding" not in _headers(at)
    charts = _charts(at)
    drawn = plotly_array(charts["pe_learned"]["data"][0]["z"])
    own = ckpt.model.source_embedding.position_embedding.embeddings.numpy()
    np.testing.assert_allclose(drawn, own[:len(drawn)], atol=1e-6)
    captions = [c.value for c in at.caption]
    assert any(f"has {config.max_len + 2:,} rows" in c and "row position + 2" in c
               and "rows 0 and 1 are never read" in c for c in captions), captions
    # the sinusoids are only a comparison, folded away, and drawn only once opened (issue 40:
    # their maps were half of a 512-position page's first visit)
    assert any("for comparison: this model does not use them" in label for label in _expanders(at))
    assert not [c for c in captions if c.startswith("These are the model's own codes")]
    assert "pe_heatmap" not in charts and "pe_similarity" not in charts
    at.session_state["pe_comparison"] = True  # the user opens it
    at.run()
    assert not at.exception, at.exception
    opened = _charts(at)
    assert {"pe_heatmap", "pe_sinusoids", "pe_similarity", "pe_offsets"} <= set(opened)
    shown = plotly_array(opened["pe_heatmap"]["data"][0]["z"])
    np.testing.assert_allclose(shown, positional_encoding(len(shown), config.d_model), atol=1e-6)


@pytest.mark.parametrize("family", ["t5", "t5_v11"])
def test_t5_shows_its_relative_bias_and_no_absolute_codes(family):
    at, ckpt = _opened(family)
    assert ckpt.config.positional == "none"
    assert any("adds **no** position codes" in m.value and "relative bias" in m.value
               for m in at.markdown)
    assert "Relative position bias" in _headers(at)
    charts = _charts(at)
    assert "pe_learned" not in charts
    maps = ckpt.attention(SOURCE, details=True)  # its decoder bias: of at least the page's length
    for stack, causal in (("encoder", False), ("decoder", True)):
        lines = charts[f"pe_{stack}_bias"]["data"]
        assert len(lines) == ckpt.config.num_heads
        n = len(plotly_array(lines[0]["x"])) if causal else maps[f"{stack}_position_bias"].shape[1]
        offsets, values = bias_by_offset(maps[f"{stack}_position_bias"][:, :n, :n], causal)
        for head, line in enumerate(lines):
            np.testing.assert_array_equal(plotly_array(line["x"]), offsets)
            np.testing.assert_allclose(plotly_array(line["y"]), values[head], atol=1e-6)
        assert (offsets <= 0).all() if causal else offsets.max() > 0
    assert any("for comparison: this model does not use them" in label for label in _expanders(at))
    assert "This model has no position matrix, learned or fixed." in [i.value for i in at.info]
    # Issue 38: no empty "position code" panel in the encoder input: two panels, and why
    panels = [trace["name"] for trace in charts["pe_encoder_input"]["data"]]
    assert panels == ["token embedding", "encoder input"]
    assert any("adds no position code" in m.value for m in at.markdown)


@pytest.mark.parametrize("family, layout", [("marian", "concat"), ("pegasus", "concat"),
                                            ("m2m100", "fairseq"), ("nllb", "fairseq")])
def test_sinusoids_are_the_models_own(family, layout):
    at, ckpt = _opened(family)
    config = ckpt.config
    assert "The sinusoidal encoding" in _headers(at)
    assert "Learned position embeddings" not in _headers(at)
    assert not any("for comparison" in label for label in _expanders(at))
    drawn = plotly_array(_charts(at)["pe_heatmap"]["data"][0]["z"])
    own = ckpt.model.source_embedding.sinusoids.numpy()
    np.testing.assert_allclose(drawn, own[:len(drawn)], atol=1e-6)
    captions = [c.value for c in at.caption]
    assert any(c.startswith("These are the model's own codes") for c in captions), captions
    if layout == "fairseq":
        assert any(f"from row {config.position_offset} on" in c for c in captions)


def test_bias_by_offset_reads_each_diagonal():
    bias = np.array([[[0.0, 1.0, 2.0], [-1.0, 0.0, 1.0], [-2.0, -1.0, 0.0]]])
    offsets, values = bias_by_offset(bias)
    assert offsets.tolist() == [-2, -1, 0, 1, 2] and values.tolist() == [[-2, -1, 0, 1, 2]]
    offsets, values = bias_by_offset(bias, causal=True)
    assert offsets.tolist() == [-2, -1, 0] and values.tolist() == [[-2, -1, 0]]
