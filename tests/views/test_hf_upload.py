"""A Hugging Face model of a family other than Marian (BART: tests/fixtures/bart, a tiny
BartForConditionalGeneration) uploaded through the sidebar as a user uploads its folder's files:
it opens as it is (no form, no conversion), becomes the active model with nothing else lost, and
every page (app.py's SECTIONS) runs on it and shows the model's own numbers and special tokens
(issue 26: "The app test opens each fixture through the uploader and visits every page")."""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, plotly_array, uploader
from conftest import open_page as _page

from explorer import state
from explorer.pages import PAGE_FILES
from explorer.widgets import plain
from transformer.importers.hf import FAMILIES as HF_FAMILIES

BART = ROOT / "tests" / "fixtures" / "bart"
PAGES = PAGE_FILES  # every page, in the menus' order (explorer/pages.py)
SOURCE = state.DEFAULT_SOURCE


@pytest.fixture(scope="module")
def bart():
    """The model as the registry opens the folder, outside the app."""
    from transformer import load_checkpoint

    return load_checkpoint(BART)


def _uploaded(folder: Path):
    """app.py with every file of a model folder uploaded at once (the extras are not read),
    checked: no exception, no error, the upload the active model."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    files = {path.name: path.read_bytes() for path in sorted(folder.iterdir())}
    uploader(at).set_value(
        [(name, data, "application/octet-stream") for name, data in files.items()]).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.session_state[state.MODEL].startswith(f"{state.UPLOADED}:")
    return at


@pytest.fixture(scope="module")
def bart_app():
    return _uploaded(BART)


# Every family the registry reads whose tiny transformers-built folder is in tests/fixtures, and
# the fixtures of the same modules' other tokenizers and versions (NLLB-200 through m2m100's
# importer, T5 v1.1 through t5's); BART's pages are visited with bart_app above.
FAMILIES = [name for name in [family.recipe.name for family in HF_FAMILIES] + ["nllb", "t5_v11"]
            if (ROOT / "tests" / "fixtures" / name / "config.json").is_file() and name != "bart"]


@pytest.fixture(scope="module", params=FAMILIES)
def family_app(request):
    return request.param, _uploaded(ROOT / "tests" / "fixtures" / request.param)


def figure(at, key=None, index=0) -> dict:
    charts = at.get("plotly_chart")
    if key is not None:
        (found,) = [c for c in charts if c.proto.id.endswith("-" + key)]
        return json.loads(found.proto.spec)
    return json.loads(charts[index].proto.spec)


def _markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_the_bart_files_open_as_they_are_and_nothing_is_lost(bart_app, bart):
    at = bart_app
    choice = at.session_state[state.MODEL]
    assert choice.startswith(f"{state.UPLOADED}:"), choice
    assert at.session_state[state.SOURCE] == SOURCE  # the sentence stays
    assert state.IMPORT not in at.session_state  # nothing to ask: no form left
    assert not [b for b in at.button if b.key == state.IMPORT_SUBMIT]
    (name, kept), = at.session_state[state.UPLOADS].values()
    # files given one by one name no folder: the family's name for a model of it (a folder
    # opened by path is named after the folder, bart.name)
    assert name == "BART model (BART)"
    assert isinstance(kept, dict) and "model.safetensors" in kept  # the files themselves
    assert "recorded.npz" not in kept and "tokenizer_config.json" not in kept  # not read
    assert at.success[0].value.startswith(
        "Opened the files config.json, generation_config.json, merges.txt, model.safetensors, "
        "tokenizer.json and vocab.json as it is")  # the files read, not the extras beside them
    # tf_model.h5 (the same weights, for repositories without safetensors) is not read beside
    # model.safetensors
    assert at.success[0].value.endswith(
        " Also in the upload, not needed to open it: recorded.npz, tf_model.h5, "
        "tokenizer_config.json.")
    assert "as it is (BART: its weights mapped on load, no conversion)" in at.success[0].value
    assert at.selectbox(key=state.MODEL).value == choice
    help_text = uploader(at).proto.help  # the families the registry reads, not Marian alone
    assert "Hugging Face" in help_text and "BART" in help_text and "Marian" in help_text


@pytest.mark.parametrize("path", PAGES)
def test_every_page_runs_on_the_bart_model(bart_app, path):
    at = _page(bart_app, path)
    assert not at.error, [e.value for e in at.error]
    assert at.session_state[state.MODEL].startswith(f"{state.UPLOADED}:")  # still active
    assert at.text_input(key=state.SOURCE).value == SOURCE
    if path not in ("views/Home.py", "views/Model.py"):
        assert at.get("plotly_chart"), f"{path} drew no plot"


def test_home_shows_the_models_translation(bart_app, bart):
    at = _page(bart_app, "views/Home.py")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Model"] == plain("BART model")
    # the translation its generation config searches for (4 beams), as transformers' generate
    assert metrics["Translation of the sentence"] == plain(bart.generate(SOURCE).text)


def test_the_model_page_says_it_opened_as_it_is_and_the_clis_line(bart_app, bart):
    at = _page(bart_app, "views/Model.py")
    assert at.title[0].value == "Model: BART model"
    text = _markdown(at)
    assert "Opened from a BART model" in text and "Converted" not in text
    assert "translator" not in text  # BART may summarise: the files do not say
    assert [c.value for c in at.code] == [
        "python -m transformer.convert hf --model-dir MODEL_DIR --out model.ckpt"]
    files = at.dataframe[0].value
    assert set(files["file"]) == {"config.json", "generation_config.json", "merges.txt",
                                  "model.safetensors", "tokenizer.json", "vocab.json"}


def test_tokenization_shows_the_tokenizers_own_specials(bart_app, bart):
    at = _page(bart_app, "views/Tokenization.py")
    source, target = (d.value for d in at.dataframe[:2])
    tok, config = bart.source_tokenizer, bart.config
    assert list(source["id"]) == bart.encode_source(SOURCE)
    assert list(source["id"][:1]) == list(tok.prefix_ids)  # <s>
    assert list(source["id"][-1:]) == list(tok.suffix_ids)  # </s>
    assert source["kind"].iloc[0] == source["kind"].iloc[-1] == "special"
    assert (source["kind"].iloc[1:-1] == "").all()
    assert "The encoder reads `<s>` + pieces + `</s>`." in [c.value for c in at.caption]
    assert {m.label: m.value for m in at.metric}["Tokenizer"] == "Byte-level BPE"
    # The decoder starts from </s> (decoder_start_token_id), as BART's does.
    assert target["id"].iloc[0] == config.start_id == tok.end_id
    assert target["piece"].iloc[0] == "</s>"
    assert any("the decoder's start token `</s>` (id 2)" in c.value for c in at.caption)


def test_positional_encodings_are_learned_and_normalised(bart_app, bart):
    at = _page(bart_app, "views/Positional_Encodings.py")
    layer = bart.model.source_embedding
    assert bart.config.positional == "learned" and layer.embedding_norm is not None
    learned = plotly_array(figure(at, "pe_learned")["data"][0]["z"])
    np.testing.assert_allclose(learned, layer.position_codes(len(learned)).numpy(), atol=1e-6)
    assert any(s.value.startswith("The layer's output equals LayerNorm(token part + position "
                                  "part)") for s in at.success), [s.value for s in at.success]
    ids = np.asarray([bart.encode_source(SOURCE)])
    spec = figure(at, "pe_encoder_input")
    parts = [plotly_array(t["z"]) for t in spec["data"]]
    np.testing.assert_allclose(parts[0] + parts[1], layer.token_embedding(ids)[0].numpy()
                               + layer.position_codes(ids.shape[1]).numpy(), atol=1e-5)
    np.testing.assert_allclose(parts[2], layer(ids)[0].numpy(), atol=1e-5)  # after the norm
    assert spec["data"][2]["name"] == "LayerNorm(sum) = encoder input"
    assert "then the embedding LayerNorm" in _markdown(at)


def test_masks_name_the_tokens_bart_frames_with(bart_app, bart):
    at = _page(bart_app, "views/Masks.py")
    config = bart.config
    caption = next(c.value for c in at.caption if c.value.startswith("Source side:"))
    assert "with `'<s>'` (id 0) first and `'</s>'` (id 2) last" in caption
    assert f"the start token `'</s>'` (id {config.start_id}), then" in caption


def test_the_attention_maps_are_the_models_own(bart_app, bart):
    at = _page(bart_app, "views/Attention_Maps.py")
    maps = bart.attention(SOURCE, output_ids=bart.generate(SOURCE).token_ids)
    for kind_label, kind, layer, head in [("Encoder self-attention", "encoder", 0, 0),
                                          ("Cross-attention", "cross", 1, 3),
                                          ("Decoder self-attention", "decoder", 1, 2)]:
        for key, value in (("attn_kind", kind_label), ("attn_layer", layer), ("attn_head", head)):
            widget = at.radio(key=key) if key == "attn_kind" else at.selectbox(key=key)
            widget.set_value(value).run()
            assert not at.exception, at.exception
        expected = np.where(maps[f"{kind}_mask"], maps[kind][layer, head], np.nan)
        np.testing.assert_allclose(plotly_array(figure(at)["data"][0]["z"]), expected, atol=1e-6)
    ticks = figure(at)["layout"]["yaxis"]["ticktext"]
    assert ticks[0].endswith("&lt;/s&gt;")  # the decoder's inputs start with </s>


def test_the_linked_view_names_the_start_token(bart_app):
    at = _page(bart_app, "views/Linked_View.py")
    assert "**Row 0** (fed `</s>`" in _markdown(at)


def test_aggregations_and_the_token_view_merge_byte_level_pieces_into_words(bart_app):
    at = _page(bart_app, "views/Aggregations.py")
    assert any("(`</s>` first)" in c.value for c in at.caption)
    at.toggle(key="agg_merge_words").set_value(True).run()
    assert not at.exception, at.exception
    at = _page(at, "views/Token_View.py")
    at.toggle(key="tv_merge_words").set_value(True).run()
    assert not at.exception, at.exception
    (chart,) = at.get("plotly_chart")
    (queries,) = [t for t in json.loads(chart.proto.spec)["data"] if t.get("name") == "queries"]
    # "Friday, March 5, 2021": Ġ starts a word, so words are whole (no Ġ left in a label).
    assert "March" in " ".join(queries["text"]) and not any("Ġ" in t for t in queries["text"])
    for key in ("agg_merge_words", "tv_merge_words"):
        at.session_state[key] = False


def test_head_arithmetic_equals_the_models_scores(bart_app):
    at = _page(bart_app, "views/Head_Arithmetic.py")
    gaps = [float(m.value) for m in at.metric]
    assert len(gaps) == 2 and max(gaps) < 1e-4


def test_decoding_steps_through_the_models_translation(bart_app, bart):
    at = _page(bart_app, "views/Decoding.py")
    result = bart.generate(SOURCE)
    assert [c.value for c in at.code] == [result.text]
    # BART's generation config forces <s> first: step 0 says so
    assert result.tokens[0] == "<s>"
    assert any(c.value.startswith("Step 0: the model's generation config forces '<s>' here")
               for c in at.caption)


def test_head_statistics_cover_every_head(bart_app, bart):
    at = _page(bart_app, "views/Head_Statistics.py")
    config = bart.config
    table = at.dataframe[1].value
    heads = config.num_heads * (config.num_encoder_layers + 2 * config.num_decoder_layers)
    assert len(table) == heads and table["entropy"].notna().all()


def test_ablation_scores_the_models_translation(bart_app, bart):
    at = _page(bart_app, "views/Ablation.py")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Original translation"] == plain(bart.generate(SOURCE).text)
    assert metrics["Change in log-probability"] == "+0.0000"


def test_an_empty_typed_target_is_said_with_barts_own_tokens(bart_app):
    at = _page(bart_app, "views/Home.py")
    at.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED).run()
    at.text_input(key=state.TARGET).set_value("").run()
    assert not at.exception, at.exception
    notes = [i.value for i in at.sidebar.info if "target is empty" in i.value]
    # BART's decoder reads </s> then the <s> its targets begin with, and scores <s> </s>.
    assert notes == ["The target is empty: every page shows the decoder with </s> <s> alone "
                     "(2 rows), and ablation scores only <s> </s>. Type a target, or pick "
                     f"\"{state.TARGET_MODEL}\"."]
    at.radio(key=state.TARGET_MODE).set_value(state.TARGET_MODEL).run()
    assert not at.exception, at.exception


@pytest.mark.parametrize("path", PAGES)
def test_every_page_runs_on_every_family_read_here(family_app, path):
    family, at = family_app
    at = _page(at, path)
    assert not at.error, (family, [e.value for e in at.error])
    assert at.session_state[state.MODEL].startswith(f"{state.UPLOADED}:")


def test_a_model_without_absolute_positions_says_so():
    """T5 adds no position codes (a relative bias on the scores instead): the positional page
    says so and checks the encoder input as the token embedding alone."""
    folder = ROOT / "tests" / "fixtures" / "t5"
    if "t5" not in FAMILIES:
        pytest.skip("no T5 importer or fixture here")
    at = _page(_uploaded(folder), "views/Positional_Encodings.py")
    assert any("adds **no** position codes" in m.value for m in at.markdown)
    assert any(s.value.startswith("The layer's output equals token part + position part")
               for s in at.success)
    assert "This model has no position matrix, learned or fixed." in [i.value for i in at.info]
    assert not at.get("plotly_chart") or not [c for c in at.get("plotly_chart")
                                              if c.proto.id.endswith("-pe_learned")]


def test_fairseq_sinusoids_are_drawn_as_the_model_reads_them():
    """M2M100 / NLLB: fairseq's [sin | cos] layout with ω_i = base^(−i/(d/2 − 1)), read from row
    pad_id + 1 on: the page draws the model's own codes, and says where they start."""
    folder = ROOT / "tests" / "fixtures" / "m2m100"
    if "m2m100" not in FAMILIES:
        pytest.skip("no M2M100 importer or fixture here")
    from transformer import load_checkpoint

    ckpt = load_checkpoint(folder)
    at = _page(_uploaded(folder), "views/Positional_Encodings.py")
    assert ckpt.config.positional == "sinusoidal_fairseq" and ckpt.config.position_offset == 2
    shown = plotly_array(figure(at, "pe_heatmap")["data"][0]["z"])
    own = ckpt.model.source_embedding.sinusoids.numpy()
    np.testing.assert_allclose(shown, own[:len(shown)], atol=1e-6)
    assert any(c.value.startswith("These are the model's own codes") for c in at.caption)
    assert any("fairseq's layout" in c.value and "from row 2 on" in c.value for c in at.caption)
    assert not at.warning or not any("differ" in w.value for w in at.warning)


def test_the_pages_are_every_page_of_the_app():
    """PAGES (explorer/pages.py, which app.py's navigation is built from) are the scripts under
    views/, no more and no fewer."""
    scripts = sorted(f"views/{p.name}" for p in (ROOT / "views").glob("*.py"))
    assert sorted(PAGES) == scripts and len(PAGES) >= 14
