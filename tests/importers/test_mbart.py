"""mBART (MBartForConditionalGeneration, cc25 and mBART-50) against Hugging Face's own, issue 26.

tests/fixtures/mbart/ is a tiny random mBART-50 saved by transformers with its SentencePiece
model, tokenizer.json (MBart50Tokenizer, en_XX -> fr_XX) and a beam-search generation_config.json
that forces fr_XX first; recorded.npz holds what transformers computed with it
(tests/fixtures/make_mbart_fixture.py). Ours must give the same ids, the same numbers (1e-4) and
the same tokens.

The live tests re-run it against transformers itself, and build a cc25 model (MBartTokenizer:
X </s> lang on both sides, the decoder started by the target language code) the same way
(skipped without torch and transformers).
"""

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from transformer.checkpoint.format import CheckpointError
from transformer.importers.hf import mbart
from transformer.importers.hf.mbart import mbart_config
from transformer.inference.generation_config import read_generation_config
from transformer.inference.search_transformers import generate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mbart"
TOL = 1e-4
OUR_KEYS = {"encoder": "encoder_attention", "decoder": "decoder_attention",
            "cross": "cross_attention"}
RECORDED_FILES = ("config.json", "model.safetensors", "recorded.npz", "generation_config.json")
needs_fixture = pytest.mark.skipif(
    not all((FIXTURE / n).exists() for n in RECORDED_FILES),
    reason="tests/fixtures/mbart is not written yet (python tests/fixtures/make_mbart_fixture.py)")
pytestmark = needs_fixture


@pytest.fixture(scope="module")
def recorded():
    with np.load(FIXTURE / "recorded.npz", allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


@pytest.fixture(scope="module")
def checkpoint():
    return mbart.FAMILY.convert(FIXTURE)


def fixture_files() -> dict[str, bytes]:
    return {name: (FIXTURE / name).read_bytes() for name in mbart.FAMILY.folder_files
            if (FIXTURE / name).exists()}


def settings(checkpoint, folder=FIXTURE):
    return read_generation_config((folder / "generation_config.json").read_bytes(),
                                  checkpoint.config)


# ------------------------------------------------------------------ the mapping
def test_config_says_what_makes_mbart_mbart(checkpoint, recorded):
    c = checkpoint.config
    hf = json.loads((FIXTURE / "config.json").read_text())
    assert (c.d_model, c.num_heads, c.dff) == (hf["d_model"], hf["encoder_attention_heads"],
                                               hf["encoder_ffn_dim"])
    assert (c.pad_id, c.start_id, c.end_id) == (1, 2, 2)  # mBART-50 starts with </s>
    assert c.positional == "learned" and c.max_len == hf["max_position_embeddings"]
    assert c.embedding_norm and c.norm_first and c.activation == "gelu"
    assert c.scale_embeddings and c.layer_norm_epsilon == 1e-5
    assert c.share_embeddings and c.tie_output and c.output_bias
    assert (c.source_start, c.source_end, c.target_start) == (True, True, True)
    assert checkpoint.source_tokenizer.family == "mbart50"
    assert checkpoint.source_tokenizer.language == "en_XX"
    assert checkpoint.target_tokenizer.language == "fr_XX"
    assert checkpoint.target_tokenizer.start_id == int(recorded["tgt_lang_id"])
    assert checkpoint.source_tokenizer.start_id == int(recorded["src_lang_id"])
    assert checkpoint.metadata["recipe"] == "mbart"


def test_the_generation_config_as_saved(checkpoint, recorded):
    """3 beams, fr_XX forced first, </s> at the limit (transformers' decoding of it:
    test_recorded_families.py)."""
    beam = settings(checkpoint)
    assert beam.num_beams == 3 and beam.forced_bos_token_id == int(recorded["tgt_lang_id"])
    assert beam.decoder_start_token_id == checkpoint.config.start_id


# ------------------------------------------------------------------ how it opens
def test_it_opens_from_a_folder_a_zip_and_files_as_it_is(checkpoint, recorded):
    from transformer.importers import detect_recipe, load_checkpoint
    from transformer.importers.hf import mbart as module

    files = fixture_files()
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"mbart-tiny/{name}", data)
    source = recorded["s0_source_ids"][None]
    target = recorded["s0_forced_target_ids"][None]
    expected = checkpoint.model((source, target)).numpy()
    for given in (FIXTURE, files, {"mbart-tiny.zip": packed.getvalue()}, packed.getvalue()):
        opened = module.FAMILY.convert(given)
        assert opened.metadata["recipe"] == "mbart"
        np.testing.assert_array_equal(opened.model((source, target)).numpy(), expected)
    from transformer.importers import HF_FAMILIES
    if HF_FAMILIES.get("mbart") is module:  # once the registry lists it
        assert detect_recipe(files) == "mbart"
        np.testing.assert_array_equal(load_checkpoint(FIXTURE).model((source, target)).numpy(),
                                      expected)


def test_the_sentencepiece_model_gives_the_same_ids(recorded):
    files = fixture_files()
    del files["tokenizer.json"]  # sentencepiece.bpe.model, as older folders ship
    opened = mbart.FAMILY.convert(files)
    for j, text in enumerate(recorded["tokenizer_texts"]):
        assert opened.encode_source(str(text)) == recorded[f"tok{j}_source_ids"].tolist(), j
        assert opened.encode_target(str(text)) == recorded[f"tok{j}_target_ids"].tolist(), j


def test_the_languages_follow_tokenizer_config():
    files = fixture_files()
    tokenizer_config = json.loads(files["tokenizer_config.json"])
    files["tokenizer_config.json"] = json.dumps(
        dict(tokenizer_config, src_lang="de_DE", tgt_lang="ro_RO")).encode()
    opened = mbart.FAMILY.convert(files)
    assert opened.source_tokenizer.language == "de_DE"
    assert opened.target_tokenizer.language == "ro_RO"
    de, ro = (opened.source_tokenizer.language_ids[c] for c in ("de_DE", "ro_RO"))
    assert opened.encode_source("hello")[0] == de and opened.encode_target("hello")[0] == ro
    assert opened.config.start_id == 2  # mBART-50: still </s>


# ------------------------------------------------------------------ refusals
def with_config(**changes) -> dict[str, bytes]:
    files = fixture_files()
    config = json.loads(files["config.json"])
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    files["config.json"] = json.dumps(config).encode()
    return files


@pytest.mark.parametrize("changes, message", [
    ({"architectures": ["MBartForSequenceClassification"]},
     r"only MBartForConditionalGeneration"),
    ({"normalize_before": False}, r"normalize_before to false: post-LayerNorm"),
    ({"add_final_layer_norm": False}, r"add_final_layer_norm to false"),
    ({"static_position_embeddings": True}, r"static_position_embeddings to true: sinusoidal"),
    ({"activation_function": "tanh"}, r"activation_function \"tanh\"; only gelu"),
    ({"decoder_attention_heads": 2}, r"encoder_attention_heads 4 but decoder_attention_heads 2"),
    ({"layer_norm_type": "rms"}, r"field 'layer_norm_type', which this converter does not know"),
    ({"eos_token_id": 1}, r"same id 1 for eos_token_id and pad_token_id"),
    ({"pad_token_id": 0}, r"gives <pad> the id 1, but config.json gives pad_token_id 0"),
    ({"vocab_size": 200}, r"tokenizer .* 254 pieces, but config.json gives vocab_size 200; "
                          r"they must be the same model's"),
    ({"vocab_size": 300}, r"'model.shared.weight' \(the shared token embedding\) in .* has "
                          r"shape \(254, 16\), but config.json describes \(300, 16\)"),
    ({"max_position_embeddings": 63}, r"embed_positions.weight' \(the encoder's learned "
                                      r"positions\).*\(66, 16\).*\(65, 16\)"),
    ({"model_type": "bart"}, r"model_type 'bart', not a mBART model"),
])
def test_refuses_configs_it_does_not_implement(changes, message):
    with pytest.raises(CheckpointError, match=message):
        mbart.FAMILY.convert(with_config(**changes))


def test_refuses_another_familys_tokenizer():
    files = fixture_files()
    files["tokenizer_config.json"] = json.dumps({"tokenizer_class": "T5Tokenizer"}).encode()
    with pytest.raises(CheckpointError, match=r"names a t5 tokenizer; mBART reads mbart or "
                                              r"mbart50 tokenizers"):
        mbart.FAMILY.convert(files)
    files["tokenizer_config.json"] = json.dumps(
        {"tokenizer_class": "MBart50Tokenizer", "src_lang": "xx_YY"}).encode()
    with pytest.raises(CheckpointError, match=r"tokenizer file .* invalid: .*'xx_YY' is not a "
                                              r"language code"):
        mbart.FAMILY.convert(files)


def test_refuses_missing_tokenizer_and_weights():
    files = fixture_files()
    for name in ("tokenizer.json", "sentencepiece.bpe.model"):
        del files[name]
    with pytest.raises(CheckpointError, match=r"missing tokenizer.json \(or "
                                              r"sentencepiece.bpe.model\)"):
        mbart.FAMILY.convert(files)
    with pytest.raises(CheckpointError, match=r"missing model.safetensors"):
        mbart.FAMILY.convert({n: v for n, v in fixture_files().items()
                       if n not in ("model.safetensors", "tf_model.h5")})
    with pytest.raises(CheckpointError, match=r"missing config.json"):
        mbart.FAMILY.convert({n: v for n, v in fixture_files().items() if n != "config.json"})


def test_refuses_a_weight_left_over_missing_or_misshaped():
    from safetensors.numpy import load, save

    weights = load((FIXTURE / "model.safetensors").read_bytes())
    extra = dict(weights, **{"model.encoder.extra.weight": np.ones(3, np.float32)})
    with pytest.raises(CheckpointError, match=r"'model.encoder.extra.weight' that an "
                                              r"MBartForConditionalGeneration"):
        mbart.FAMILY.convert({**fixture_files(), "model.safetensors": save(extra)})
    for gone, message in (("model.decoder.layer_norm.weight", r"the decoder's final LayerNorm"),
                          ("model.encoder.layernorm_embedding.bias",
                           r"the encoder's embedding norm")):
        lacking = {k: v for k, v in weights.items() if k != gone}
        with pytest.raises(CheckpointError, match=rf"no weight '{gone}' \({message}\)"):
            mbart.FAMILY.convert({**fixture_files(), "model.safetensors": save(lacking)})
    short = dict(weights)
    name = "model.decoder.layers.1.fc1.weight"
    short[name] = weights[name][:-1]
    with pytest.raises(CheckpointError, match=rf"'{name}' in .* has shape \(31, 16\)"):
        mbart.FAMILY.convert({**fixture_files(), "model.safetensors": save(short)})


def test_mbart_config_refuses_another_model_type():
    with pytest.raises(CheckpointError, match=r"model_type 'bart', not a mBART model"):
        mbart_config({"model_type": "bart"})


# ------------------------------------------------------------------ live
def live_modules():
    torch = pytest.importorskip(
        "torch", reason="the live comparison needs torch and transformers; the recorded one "
                        "always runs")
    transformers = pytest.importorskip("transformers", reason="needs transformers too")
    return torch, transformers


def compare_live(torch, model, tokenizer, checkpoint, beam, texts, target_text):
    """Ids, logits and every map on transformers' own teacher forcing (labels shifted by the
    model), and generate with the folder's generation config."""
    for text in texts:
        inputs = tokenizer(text, text_target=target_text, return_tensors="pt")
        source_ids = inputs["input_ids"][0].tolist()
        labels = inputs["labels"][0].tolist()
        assert checkpoint.encode_source(text) == source_ids, text
        assert checkpoint.encode_target(target_text) == labels, text
        with torch.no_grad():
            out = model(**inputs, output_attentions=True)
            generated = model.generate(inputs["input_ids"])[0].tolist()
        target = [checkpoint.config.start_id] + labels[:-1]
        ours = checkpoint.model((np.array([source_ids]), np.array([target])),
                                return_attention=True)
        np.testing.assert_allclose(ours["logits"].numpy()[0], out.logits[0].numpy(), atol=TOL)
        for kind, theirs in (("encoder", out.encoder_attentions),
                             ("decoder", out.decoder_attentions),
                             ("cross", out.cross_attentions)):
            expected = torch.stack([a[0] for a in theirs]).numpy()
            np.testing.assert_allclose(ours[OUR_KEYS[kind]].numpy()[:, 0], expected, atol=TOL)
        assert generate(checkpoint.model, source_ids, beam).token_ids == generated[1:], text


def test_live_against_transformers(checkpoint):
    torch, transformers = live_modules()
    model = transformers.MBartForConditionalGeneration.from_pretrained(
        FIXTURE, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(FIXTURE)
    compare_live(torch, model, tokenizer, checkpoint, settings(checkpoint),
                 ["the cat and the dog are friends", "a", "Ünïcödé — ok? 12,5 %",
                  "where is the big red car? where is it?"], "le chat est là")


def make_peaky(torch, model):
    """Weights ~ N(0, 0.5), biases non-zero, norms near 1: attention peaked, a dropped term
    shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.02 * torch.randn_like(p))
            else:
                p.copy_(0.5 * torch.randn_like(p) if p.dim() > 1 else 0.3 * torch.randn_like(p))
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.copy_(0.3 * torch.randn_like(model.final_logits_bias))


def test_live_cc25_starts_with_the_target_language(tmp_path):
    """An mBART cc25 model (MBartTokenizer: X </s> en_XX, X </s> ro_RO) built with transformers:
    the decoder starts with ro_RO, as transformers' shift_tokens_right wraps it to the front
    and as mbart-large-en-ro's decoder_start_token_id says."""
    torch, transformers = live_modules()
    (tmp_path / "sentencepiece.bpe.model").write_bytes(
        (FIXTURE / "sentencepiece.bpe.model").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "MBartTokenizer", "src_lang": "en_XX", "tgt_lang": "ro_RO"}))
    transformers.AutoTokenizer.from_pretrained(tmp_path).save_pretrained(tmp_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ro = tokenizer.convert_tokens_to_ids("ro_RO")
    torch.manual_seed(1)
    config = transformers.MBartConfig(
        vocab_size=len(tokenizer), d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_position_embeddings=64, scale_embedding=True, pad_token_id=1,
        bos_token_id=0, eos_token_id=2, decoder_start_token_id=ro, forced_eos_token_id=2,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    model = transformers.MBartForConditionalGeneration(config).eval()
    make_peaky(torch, model)
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=0, eos_token_id=2, pad_token_id=1, decoder_start_token_id=ro,
        forced_eos_token_id=2, num_beams=2, max_length=9)
    model.save_pretrained(tmp_path)
    model = transformers.MBartForConditionalGeneration.from_pretrained(
        tmp_path, attn_implementation="eager").eval()
    checkpoint = mbart.FAMILY.convert(tmp_path)
    assert checkpoint.source_tokenizer.family == "mbart"
    assert checkpoint.config.start_id == ro
    assert checkpoint.encode_source("hello")[-2:] == [2, tokenizer.convert_tokens_to_ids("en_XX")]
    compare_live(torch, model, tokenizer, checkpoint, settings(checkpoint, tmp_path),
                 ["the cat and the dog are friends", "a", "where is the big red car?"],
                 "the car is red")
