"""views/Tokenization.py through AppTest, issue 24 item 5: every special-token caption and the
length check come from the model's own tokenizers and config, not from our own <s> ... </s>.

A Marian (opus-mt) model (tests/fixtures/marian, uploaded as a user uploads its files) has no
<s>: its source is pieces + </s>, and its decoder starts from the pad id. The issue saw "The model
reads at most 512 tokens: the pieces after 16 are cut" for "Friday, March 5, 2021" on such a model,
with the sentence's last piece gone from the chart: the page counted the pieces it reads as the
source's ids less two (<s> and </s>), one too few for a model with only </s>. The pieces read are
now the tokenizer's pieces less OpenedModel.pieces_cut, which frames the source as the config says
(source_start, source_end). The Keras example's word-level model shows its own "[UNK]",
"[start]" and fixed-length padding the same way."""

import json
from pathlib import Path

import pytest
from conftest import open_page, set_widget, uploader

from explorer import state

PAGE = "views/Tokenization.py"
MARIAN = Path(__file__).resolve().parents[1] / "fixtures" / "marian"
LONG = ", ".join(["Friday, March 5, 2021"] * 8)  # ~130 pieces: more than the fixture's 64


@pytest.fixture(scope="module")
def marian():
    from transformer.importers.hf import marian

    return marian.FAMILY.convert(MARIAN)


@pytest.fixture
def marian_app(app):
    """The app with the Marian folder's files uploaded (the model opens at once)."""
    files = [(p.name, p.read_bytes(), "application/octet-stream") for p in sorted(MARIAN.iterdir())]
    uploader(app).set_value(files).run()
    assert not app.exception, app.exception
    assert app.session_state[state.MODEL].startswith(f"{state.UPLOADED}:")
    return app


def captions(at) -> list[str]:
    return [c.value for c in at.caption]


def id_tables(at) -> list:
    """The pieces-and-ids tables shown: the source's, then the target's."""
    tables = [d.value for d in at.dataframe if list(d.value.columns[:2]) == ["piece", "id"]]
    assert len(tables) == 2, [list(d.value.columns) for d in at.dataframe]
    return tables


def spans_text(at) -> str:
    """The characters the piece-boundaries chart draws (the part of the text the model reads)."""
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-tok_spans")]
    (row,) = json.loads(chart.proto.spec)["data"][0]["text"]
    return "".join(" " if ch == "␣" else ch for ch in row)


def test_a_marian_source_is_pieces_then_end_and_nothing_is_cut(marian_app, marian):
    at = open_page(marian_app, PAGE)
    assert not [w.value for w in at.warning if "are cut" in w.value]
    assert spans_text(at) == state.DEFAULT_SOURCE  # every piece drawn, the last one too
    source = id_tables(at)[0]
    ids = marian.encode_source(state.DEFAULT_SOURCE)
    assert list(source["id"]) == ids and ids[-1] == marian.config.end_id
    assert list(source["piece"])[-1] == "</s>" and "<s>" not in list(source["piece"])
    assert list(source["kind"]).count("special") == 1
    assert "The encoder reads pieces + `</s>` (no start token on this side)." in captions(at)


def test_a_marian_decoder_starts_from_its_pad_token(marian_app, marian):
    at = open_page(marian_app, PAGE)
    pad = marian.config.pad_id
    assert marian.config.start_id == pad
    (caption,) = [c for c in captions(at) if c.startswith("The model's own translation")]
    assert caption.endswith(f"after the decoder's start token `<pad>` (id {pad}, the padding "
                            "token: this model has no start token of its own).")
    assert not [c for c in captions(at) if "`<s>`" in c]
    target = id_tables(at)[1]
    assert (target["piece"][0], target["id"][0], target["kind"][0]) == ("<pad>", pad, "special")
    # Its own translation is what the model wrote: its round trip is never said to be cut.
    assert not [c for c in captions(at) if "were cut" in c]


def test_a_marian_typed_target_reads_pad_then_pieces_then_end(marian_app, marian):
    set_widget(marian_app, "radio", state.TARGET_MODE, state.TARGET_TYPED)
    set_widget(marian_app, "text_input", state.TARGET, "le chat")
    at = open_page(marian_app, PAGE)
    target = id_tables(at)[1]
    tok = marian.target_tokenizer
    assert list(target["id"]) == [marian.config.start_id] + marian.encode_target("le chat")
    assert list(target["piece"]) == ["<pad>", *tok.pieces("le chat"), "</s>"]


def test_a_long_marian_source_is_cut_at_its_real_limit(marian_app, marian):
    set_widget(marian_app, "text_input", state.SOURCE, LONG)
    at = open_page(marian_app, PAGE)
    limit, tok = marian.source_len, marian.source_tokenizer
    cut = len(tok.pieces(LONG)) + 1 - limit
    assert cut > 0 and marian.pieces_cut(LONG) == cut
    warnings = [w.value for w in at.warning if "are cut" in w.value]
    assert warnings == [f"The model reads at most {limit} source tokens (pieces + `</s>`): the "
                        f"pieces after {limit - 1} are cut."]
    kept_end = tok.piece_spans(LONG)[limit - 2][1]  # the end of the last piece read
    assert spans_text(at) == tok.preprocess(LONG)[:kept_end]
    source = id_tables(at)[0]
    assert len(source) == limit and list(source["piece"])[-1] == "</s>"


def test_our_own_model_names_its_own_specials(shared_app):
    at = shared_app.page(PAGE)
    assert "The encoder reads `<s>` + pieces + `</s>`." in captions(at)
    (caption,) = [c for c in captions(at) if c.startswith("The model's own translation")]
    assert caption.endswith("after the decoder's start token `<s>` (id 2).")
    assert not [w.value for w in at.warning if "are cut" in w.value]


def test_the_tokenizer_is_described_as_what_it_is(shared_app):
    at = shared_app.page(PAGE)
    (metric,) = [m for m in at.metric if m.label == "Tokenizer"]
    assert metric.value == "SentencePiece"  # not its kind's code name, "trained"
    assert metric.proto.help == ("A SentencePiece BPE model trained on this model's training "
                                 "data (read through BPEmb).")
    infos = [i.value for i in at.info]
    assert ("Before splitting, the source tokenizer lowercases the text (BPEmb's preprocessing, "
            "an option recorded when this SentencePiece model was trained on the model's "
            "training data).") in infos


def test_a_keras_example_model_names_its_own_unknown_and_padding(app, tmp_path):
    """The Keras example's word-level model: a source of bare words padded to a fixed length,
    its unknown word "[UNK]", its start "[start]"."""
    from test_page_masks import keras_example_checkpoint

    from transformer.checkpoint.format import checkpoint_bytes

    ckpt = keras_example_checkpoint(tmp_path)
    data = checkpoint_bytes(ckpt.model, ckpt.source_tokenizer, ckpt.target_tokenizer,
                            ckpt.metadata)
    uploader(app).upload("keras.ckpt", data).run()
    at = open_page(app, PAGE)
    config = ckpt.config
    assert (f"The encoder reads pieces, padded with `[PAD]` to {config.pad_source_to} ids (no "
            "start or end token on this side).") in captions(at)
    (caption,) = [c for c in captions(at) if c.startswith("The model's own translation")]
    assert caption.endswith(f"after the decoder's start token `[start]` (id {config.start_id}).")
    unknown = [w.value for w in at.warning if "not in the vocabulary" in w.value]
    assert unknown and all("become `[UNK]` (id 1)" in w for w in unknown), unknown
    assert ("Before splitting, the source tokenizer lowercases ASCII letters and removes "
            "punctuation (Keras TextVectorization's standardize='lower_and_strip_punctuation').") in [
        i.value for i in at.info]
