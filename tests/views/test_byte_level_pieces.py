"""BART's byte-level BPE pieces as the pages show them (issue 26): "Ġw" reads "▁w" (drawn "␣w"),
"Ã©" reads "é", and a character split into bytes across pieces reads whole once the pieces are
merged into words ("日本"); the Tokenization page keeps the vocabulary's own piece beside it."""

import json

import pytest
from conftest import ROOT, uploader
from conftest import open_page as _page

from explorer import state

BART = ROOT / "tests" / "fixtures" / "bart"
SENTENCE = "Hello world, café 日本"


@pytest.fixture(scope="module")
def bart_app():
    """app.py with the BART fixture uploaded and SENTENCE in the sidebar."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    files = {path.name: path.read_bytes() for path in sorted(BART.iterdir())}
    uploader(at).set_value(
        [(name, data, "application/octet-stream") for name, data in files.items()]).run()
    assert not at.exception, at.exception
    assert at.session_state[state.MODEL].startswith(f"{state.UPLOADED}:")
    at.text_input(key=state.SOURCE).set_value(SENTENCE).run()
    assert not at.exception, at.exception
    return at


def _chart(at, key: str) -> dict:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-" + key)]
    return json.loads(found.proto.spec)


def test_the_attention_maps_label_pieces_readably(bart_app):
    at = _page(bart_app, "views/Attention_Maps.py")
    at.radio(key="attn_kind").set_value("Encoder self-attention").run()
    assert not at.exception, at.exception
    spec = _chart(at, "attn_heatmap")
    ticks = spec["layout"]["xaxis"]["ticktext"]
    assert "␣w" in ticks and "é" in ticks, ticks  # "Ġw" and "Ã©" as the text they stand for
    assert not any("Ġ" in t or "Ã" in t for t in ticks), ticks
    assert "&lt;0xE6&gt;" in ticks  # 日's first byte: a piece of its own in this tiny vocabulary
    assert "␣ starts a word" in spec["layout"]["title"]["subtitle"]["text"]


def test_the_tokenization_table_shows_the_piece_and_the_vocabularys_entry(bart_app):
    at = _page(bart_app, "views/Tokenization.py")
    table = next(d.value for d in at.dataframe if "vocabulary piece" in d.value)  # the source's
    rows = dict(zip(table["vocabulary piece"], table["piece"]))
    assert rows["Ġw"] == "▁w" and rows["Ã©"] == "é"


def test_merged_words_decode_characters_split_across_pieces(bart_app):
    at = _page(bart_app, "views/Token_View.py")
    at.radio(key="tv_kind").set_value("Encoder self-attention").run()
    at.toggle(key="tv_merge_words").set_value(True).run()
    assert not at.exception, at.exception
    (keys,) = [t for t in _chart(at, "tv_chart")["data"] if t.get("name") == "keys"]
    assert {"Hello", "world,", "café", "日本"} <= set(keys["text"]), keys["text"]
    at.session_state["tv_merge_words"] = False
