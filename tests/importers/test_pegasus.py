"""Pegasus (PegasusForConditionalGeneration) against Hugging Face's own, issue 26.

tests/fixtures/pegasus/ is a tiny random Pegasus saved by transformers with its SentencePiece
model, tokenizer.json (PegasusTokenizer) and a beam-search generation_config.json; recorded.npz
holds what transformers computed with it (tests/fixtures/make_pegasus_fixture.py). Ours must give
the same ids, the same numbers (1e-4) and the same tokens.

test_live_against_transformers re-runs it against transformers itself (skipped without torch).
"""

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from transformer.checkpoint.format import CheckpointError
from transformer.importers.hf import pegasus
from transformer.importers.hf.pegasus import pegasus_config
from transformer.inference.generation_config import read_generation_config
from transformer.inference.search_transformers import generate
from transformer.model.layers import positional_encoding

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pegasus"
TOL = 1e-4
OUR_KEYS = {"encoder": "encoder_attention", "decoder": "decoder_attention",
            "cross": "cross_attention"}
RECORDED_FILES = ("config.json", "model.safetensors", "recorded.npz", "generation_config.json")
pytestmark = pytest.mark.skipif(
    not all((FIXTURE / n).exists() for n in RECORDED_FILES),
    reason="tests/fixtures/pegasus is not written yet (python "
           "tests/fixtures/make_pegasus_fixture.py)")


@pytest.fixture(scope="module")
def recorded():
    with np.load(FIXTURE / "recorded.npz", allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


@pytest.fixture(scope="module")
def checkpoint():
    return pegasus.FAMILY.convert(FIXTURE)


def fixture_files() -> dict[str, bytes]:
    return {name: (FIXTURE / name).read_bytes() for name in pegasus.FAMILY.folder_files
            if (FIXTURE / name).exists()}


def settings(checkpoint):
    return read_generation_config((FIXTURE / "generation_config.json").read_bytes(),
                                  checkpoint.config)


def weights():
    from safetensors.numpy import load

    return load((FIXTURE / "model.safetensors").read_bytes())


def with_weights(arrays) -> dict[str, bytes]:
    from safetensors.numpy import save

    return {**fixture_files(), "model.safetensors": save(arrays)}


# ------------------------------------------------------------------ the mapping
def test_config_says_what_makes_pegasus_pegasus(checkpoint):
    c = checkpoint.config
    hf = json.loads((FIXTURE / "config.json").read_text())
    assert (c.d_model, c.num_heads, c.dff) == (hf["d_model"], hf["encoder_attention_heads"],
                                               hf["encoder_ffn_dim"])
    assert (c.pad_id, c.start_id, c.end_id) == (0, 0, 1)  # the decoder starts with <pad>
    assert c.positional == "sinusoidal_concat" and c.position_offset == 0
    assert c.max_len == hf["max_position_embeddings"]
    assert not c.embedding_norm and c.norm_first and c.activation == "relu"
    assert c.scale_embeddings and c.layer_norm_epsilon == 1e-5
    assert c.share_embeddings and c.tie_output and c.output_bias
    assert (c.source_start, c.source_end, c.target_start) == (False, True, False)
    assert checkpoint.source_tokenizer.family == "pegasus"
    assert checkpoint.metadata["recipe"] == "pegasus"


def test_positions_equal_transformers_table(checkpoint, recorded):
    """PegasusSinusoidalPositionalEmbedding's table: [sin | cos], position p at row p; the one
    transformers saves in model.safetensors too."""
    ours = checkpoint.model.source_embedding.sinusoids.numpy()
    table = recorded["positions"]
    np.testing.assert_allclose(ours[:len(table)], table[:len(ours)], atol=1e-6)
    saved = weights()["model.encoder.embed_positions.weight"]
    np.testing.assert_allclose(ours, saved, atol=1e-6)
    odd = positional_encoding(5, 7, layout="concat")  # an odd width: one more sine column
    torch = pytest.importorskip("torch")
    pegasus = pytest.importorskip("transformers.models.pegasus.modeling_pegasus")
    embedding = pegasus.PegasusSinusoidalPositionalEmbedding(5, 7)
    np.testing.assert_allclose(odd, embedding.create_weight().numpy(), atol=1e-6)
    del torch


def test_the_generation_config_as_saved(checkpoint):
    """4 beams, length penalty 0.8, </s> at the limit; the decoder starts with <pad>
    (transformers' decoding of it: test_recorded_families.py)."""
    beam = settings(checkpoint)
    assert beam.num_beams == 4 and beam.decoder_start_token_id == 0


# ------------------------------------------------------------------ how it opens
def test_it_opens_from_a_folder_a_zip_and_files_as_it_is(checkpoint, recorded):
    from transformer.importers import HF_FAMILIES, detect_recipe, load_checkpoint
    from transformer.importers.hf import pegasus as module

    files = fixture_files()
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"pegasus-tiny/{name}", data)
    source = recorded["s0_source_ids"][None]
    target = recorded["s0_forced_target_ids"][None]
    expected = checkpoint.model((source, target)).numpy()
    for given in (FIXTURE, files, {"pegasus-tiny.zip": packed.getvalue()}, packed.getvalue()):
        opened = module.FAMILY.convert(given)
        assert opened.metadata["recipe"] == "pegasus"
        np.testing.assert_array_equal(opened.model((source, target)).numpy(), expected)
    if HF_FAMILIES.get("pegasus") is module:  # once the registry lists it
        assert detect_recipe(files) == "pegasus"
        np.testing.assert_array_equal(load_checkpoint(FIXTURE).model((source, target)).numpy(),
                                      expected)


def test_the_sentencepiece_model_gives_the_same_ids(recorded):
    files = fixture_files()
    del files["tokenizer.json"]  # spiece.model alone, as older folders ship
    opened = pegasus.FAMILY.convert(files)
    for j, text in enumerate(recorded["tokenizer_texts"]):
        assert opened.encode_source(str(text)) == recorded[f"tok{j}_source_ids"].tolist(), j


def test_a_save_without_the_sinusoids_or_with_more_opens_the_same(checkpoint, recorded):
    source = recorded["s0_source_ids"][None]
    target = recorded["s0_forced_target_ids"][None]
    arrays = {k: v for k, v in weights().items() if "embed_positions" not in k}
    opened = pegasus.FAMILY.convert(with_weights(arrays))
    np.testing.assert_array_equal(opened.model((source, target)).numpy(),
                                  checkpoint.model((source, target)).numpy())
    longer = positional_encoding(80, 16, layout="concat")  # a longer table, cut to max_len
    arrays.update({f"model.{s}.embed_positions.weight": longer for s in ("encoder", "decoder")})
    opened = pegasus.FAMILY.convert(with_weights(arrays))
    np.testing.assert_array_equal(opened.model((source, target)).numpy(),
                                  checkpoint.model((source, target)).numpy())


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
    ({"architectures": ["PegasusForCausalLM"]}, r"only PegasusForConditionalGeneration"),
    ({"normalize_before": False}, r"normalize_before to false: post-LayerNorm"),
    ({"normalize_embedding": True}, r"normalize_embedding to true: a LayerNorm on the "
                                    r"embeddings"),
    ({"static_position_embeddings": False}, r"static_position_embeddings to false: learned"),
    ({"activation_function": "tanh"}, r"activation_function \"tanh\"; only relu"),
    ({"decoder_attention_heads": 2}, r"encoder_attention_heads 4 but decoder_attention_heads 2"),
    ({"layer_norm_type": "rms"}, r"field 'layer_norm_type', which this converter does not know"),
    ({"eos_token_id": 0}, r"same id 0 for eos_token_id and pad_token_id"),
    ({"pad_token_id": 2, "decoder_start_token_id": 2},
     r"gives <pad> the id 0, but config.json gives pad_token_id 2"),
    ({"vocab_size": 200}, r"tokenizer .* 303 pieces, but config.json gives vocab_size 200; "
                          r"they must be the same model's"),
    ({"vocab_size": 400}, r"'model.shared.weight' \(the shared token embedding\) in .* has "
                          r"shape \(303, 16\), but config.json describes \(400, 16\)"),
    ({"max_position_embeddings": 65}, r"'model.encoder.embed_positions.weight' in .* holds 64 "
                                      r"positions, but config.json gives "
                                      r"max_position_embeddings 65"),
    ({"model_type": "bart"}, r"model_type 'bart', not a Pegasus model"),
])
def test_refuses_configs_it_does_not_implement(changes, message):
    with pytest.raises(CheckpointError, match=message):
        pegasus.FAMILY.convert(with_config(**changes))


def test_refuses_another_familys_tokenizer():
    files = fixture_files()
    files["tokenizer_config.json"] = json.dumps({"tokenizer_class": "T5Tokenizer"}).encode()
    with pytest.raises(CheckpointError, match=r"names a t5 tokenizer; Pegasus reads pegasus"):
        pegasus.FAMILY.convert(files)


def test_refuses_missing_tokenizer_and_weights():
    files = fixture_files()
    for name in ("tokenizer.json", "spiece.model"):
        del files[name]
    with pytest.raises(CheckpointError, match=r"missing tokenizer.json \(or spiece.model\)"):
        pegasus.FAMILY.convert(files)
    for gone in ("model.safetensors", "config.json"):
        with pytest.raises(CheckpointError, match=rf"missing {gone}"):
            pegasus.FAMILY.convert({n: v for n, v in fixture_files().items()
                             if n not in (gone, "tf_model.h5")})


def test_refuses_a_weight_left_over_missing_misshaped_or_trained_positions():
    arrays = weights()
    extra = dict(arrays, **{"model.encoder.layernorm_embedding.weight": np.ones(16, np.float32)})
    with pytest.raises(CheckpointError, match=r"'model.encoder.layernorm_embedding.weight' "
                                              r"that a PegasusForConditionalGeneration"):
        pegasus.FAMILY.convert(with_weights(extra))
    for gone, message in (("model.decoder.layer_norm.weight", r"the decoder's final LayerNorm"),
                          ("model.shared.weight", None)):
        lacking = {k: v for k, v in arrays.items() if k != gone}
        if message is None:
            with pytest.raises(CheckpointError, match=r"no weight 'model.shared.weight'"):
                pegasus.FAMILY.convert(with_weights(lacking))
        else:
            with pytest.raises(CheckpointError, match=rf"no weight '{gone}' \({message}\)"):
                pegasus.FAMILY.convert(with_weights(lacking))
    trained = dict(arrays)
    name = "model.decoder.embed_positions.weight"
    trained[name] = arrays[name] + 0.01
    with pytest.raises(CheckpointError, match=rf"'{name}' in .* is not Pegasus's sinusoids"):
        pegasus.FAMILY.convert(with_weights(trained))
    wide = dict(arrays)
    name = "model.encoder.embed_positions.weight"
    wide[name] = np.ones((64, 17), np.float32)
    with pytest.raises(CheckpointError, match=rf"'{name}' \(the encoder's sinusoids\) in .* "
                                              r"has shape \(64, 17\)"):
        pegasus.FAMILY.convert(with_weights(wide))
    short = dict(arrays)
    name = "model.decoder.layers.0.encoder_attn.v_proj.bias"
    short[name] = arrays[name][:-1]
    with pytest.raises(CheckpointError, match=rf"'{name}' in .* has shape \(15,\)"):
        pegasus.FAMILY.convert(with_weights(short))


def test_pegasus_config_refuses_another_model_type():
    with pytest.raises(CheckpointError, match=r"model_type 'mbart', not a Pegasus model"):
        pegasus_config({"model_type": "mbart"})


# ------------------------------------------------------------------ live
def test_live_against_transformers(checkpoint):
    torch = pytest.importorskip(
        "torch", reason="the live comparison needs torch and transformers; the recorded one "
                        "always runs")
    transformers = pytest.importorskip("transformers", reason="needs transformers too")
    model = transformers.PegasusForConditionalGeneration.from_pretrained(
        FIXTURE, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(FIXTURE)
    beam = settings(checkpoint)
    for text in ["the cat and the dog are friends", "a", "Ünïcödé — ok? 12,5 %",
                 "where is the big red car? where is it?"]:
        inputs = tokenizer(text, text_target="the cat is here", return_tensors="pt")
        source_ids, labels = inputs["input_ids"][0].tolist(), inputs["labels"][0].tolist()
        assert checkpoint.encode_source(text) == source_ids, text
        assert checkpoint.encode_target("the cat is here") == labels
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
