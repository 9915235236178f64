"""BART (BartForConditionalGeneration) against Hugging Face's own, issue 26.

tests/fixtures/bart/ is a tiny random BART saved by transformers with its byte-level BPE and a
beam-search generation_config.json; recorded.npz holds what transformers computed with it
(tests/fixtures/make_bart_fixture.py): the tokenizer's ids, logits and every attention map on
a forced target and on the greedy output, greedy and beam `generate` with the model's generation
config. Ours must give the same ids, the same numbers (1e-4) and the same tokens.

test_live_against_transformers re-runs it against transformers itself (skipped without torch).
"""

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from transformer.checkpoint.format import CheckpointError
from transformer.importers import RECIPES, detect_recipe, load_checkpoint
from transformer.importers.hf import bart
from transformer.importers.hf.bart import bart_config
from transformer.inference.generation_config import read_generation_config
from transformer.inference.search_transformers import generate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bart"
TOL = 1e-4
OUR_KEYS = {"encoder": "encoder_attention", "decoder": "decoder_attention",
            "cross": "cross_attention"}


@pytest.fixture(scope="module")
def recorded():
    with np.load(FIXTURE / "recorded.npz", allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


@pytest.fixture(scope="module")
def checkpoint():
    return bart.FAMILY.convert(FIXTURE)


def fixture_files() -> dict[str, bytes]:
    return {name: (FIXTURE / name).read_bytes() for name in bart.FAMILY.folder_files
            if (FIXTURE / name).exists()}


def settings(checkpoint):
    return read_generation_config((FIXTURE / "generation_config.json").read_bytes(),
                                  checkpoint.config)


# ------------------------------------------------------------------ the mapping
def test_config_says_what_makes_bart_bart(checkpoint):
    c = checkpoint.config
    hf = json.loads((FIXTURE / "config.json").read_text())
    assert (c.d_model, c.num_heads, c.dff) == (hf["d_model"], hf["encoder_attention_heads"],
                                               hf["encoder_ffn_dim"])
    assert (c.pad_id, c.start_id, c.end_id) == (1, 2, 2)  # the decoder starts with </s>
    assert c.positional == "learned" and c.max_len == hf["max_position_embeddings"]
    assert c.embedding_norm and not c.norm_first and c.activation == "gelu"
    assert c.share_embeddings and c.tie_output and c.output_bias and not c.scale_embeddings
    assert (c.source_start, c.source_end, c.target_start) == (True, True, True)
    assert RECIPES["bart"].name == checkpoint.metadata["recipe"] == "bart"


def test_the_generation_config_as_saved(checkpoint):
    """4 beams, length penalty 2, no repeated 3-grams, <s> forced first and </s> at the limit
    (transformers' decoding of it: test_recorded_families.py)."""
    beam = settings(checkpoint)
    assert beam.num_beams == 4 and beam.forced_bos_token_id == 0


# ------------------------------------------------------------------ how it opens
def test_it_opens_from_a_folder_a_zip_and_files_as_it_is(checkpoint, recorded):
    files = fixture_files()
    assert detect_recipe(files) == "bart"
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"bart-tiny/{name}", data)
    source = recorded["s0_source_ids"][None]
    target = recorded["s0_forced_target_ids"][None]
    expected = checkpoint.model((source, target)).numpy()
    for given in (FIXTURE, files, {"bart-tiny.zip": packed.getvalue()}):
        opened = load_checkpoint(given)
        assert opened.metadata["recipe"] == "bart"
        np.testing.assert_array_equal(opened.model((source, target)).numpy(), expected)


def test_the_pair_of_tokenizer_files_gives_the_same_ids(checkpoint, recorded):
    files = fixture_files()
    del files["tokenizer.json"]  # vocab.json + merges.txt, as older BART folders ship
    opened = bart.FAMILY.convert(files)
    for j, text in enumerate(recorded["tokenizer_texts"]):
        assert opened.encode_source(str(text)) == recorded[f"tok{j}_source_ids"].tolist(), j


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
    ({"architectures": ["BartForSequenceClassification"]}, r"only BartForConditionalGeneration"),
    ({"normalize_before": True}, r"normalize_before to true: pre-LayerNorm"),
    ({"add_final_layer_norm": True}, r"add_final_layer_norm"),
    ({"activation_function": "tanh"}, r"activation_function \"tanh\"; only gelu"),
    ({"decoder_attention_heads": 2}, r"encoder_attention_heads 4 but decoder_attention_heads 2"),
    ({"layer_norm_type": "rms"}, r"field 'layer_norm_type', which this converter does not know"),
    ({"eos_token_id": 1}, r"same id 1 for eos_token_id and pad_token_id"),
    ({"vocab_size": 300}, r"tokenizer .* \d+ pieces, but config.json gives vocab_size 300"),
])
def test_refuses_configs_it_does_not_implement(changes, message):
    with pytest.raises(CheckpointError, match=message):
        bart.FAMILY.convert(with_config(**changes))


def test_refuses_a_family_it_does_not_read():
    with pytest.raises(CheckpointError, match=r"model_type 'reformer'.*families read here are "
                                              r"bart, m2m_100, marian, mbart, mt5, pegasus, t5\."):
        load_checkpoint(with_config(model_type="reformer"))  # nllb-moe is not read: not named
    with pytest.raises(CheckpointError, match=r"model_type \"\['bart'\]\""):  # not a name
        load_checkpoint(with_config(model_type=["bart"]))


def test_refuses_missing_tokenizer_and_weights():
    files = fixture_files()
    for name in ("tokenizer.json", "vocab.json"):
        del files[name]
    with pytest.raises(CheckpointError, match=r"missing tokenizer.json \(or vocab.json and "
                                              r"merges.txt\)"):
        bart.FAMILY.convert(files)
    with pytest.raises(CheckpointError, match=r"missing model.safetensors"):
        bart.FAMILY.convert({n: v for n, v in fixture_files().items()
                      if n not in ("model.safetensors", "tf_model.h5")})


def test_refuses_a_weight_left_over_or_misshaped():
    from safetensors.numpy import load, save

    weights = load((FIXTURE / "model.safetensors").read_bytes())
    extra = dict(weights, **{"model.encoder.extra.weight": np.ones(3, np.float32)})
    with pytest.raises(CheckpointError, match=r"'model.encoder.extra.weight' that a "
                                              r"BartForConditionalGeneration"):
        bart.FAMILY.convert({**fixture_files(), "model.safetensors": save(extra)})
    short = dict(weights)
    short["model.encoder.embed_positions.weight"] = weights[
        "model.encoder.embed_positions.weight"][:-1]
    with pytest.raises(CheckpointError, match=r"embed_positions.weight' \(the encoder's learned "
                                              r"positions\).*\(65, 16\)"):
        bart.FAMILY.convert({**fixture_files(), "model.safetensors": save(short)})


def test_bart_config_refuses_another_model_type():
    with pytest.raises(CheckpointError, match=r"model_type 'mbart', not a BART model"):
        bart_config({"model_type": "mbart"})


# ------------------------------------------------------------------ live
def test_live_against_transformers(checkpoint):
    torch = pytest.importorskip(
        "torch", reason="the live comparison needs torch and transformers; the recorded one "
                        "always runs")
    transformers = pytest.importorskip("transformers", reason="needs transformers too")
    model = transformers.BartForConditionalGeneration.from_pretrained(
        FIXTURE, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(FIXTURE)
    beam = settings(checkpoint)
    for text in ["the cat and the dog are friends", "a", "Ünïcödé — ok? 12,5 %",
                 "where is the big red car? where is it?"]:
        source_ids = tokenizer(text)["input_ids"]
        assert checkpoint.encode_source(text) == source_ids, text
        with torch.no_grad():
            generated = model.generate(torch.tensor([source_ids]))[0].tolist()
            out = model(input_ids=torch.tensor([source_ids]),
                        decoder_input_ids=torch.tensor([generated]), output_attentions=True)
        assert generate(checkpoint.model, source_ids, beam).token_ids == generated[1:], text
        ours = checkpoint.model((np.array([source_ids]), np.array([generated])),
                                return_attention=True)
        np.testing.assert_allclose(ours["logits"].numpy()[0], out.logits[0].numpy(), atol=TOL)
        for kind, theirs in (("encoder", out.encoder_attentions),
                             ("decoder", out.decoder_attentions),
                             ("cross", out.cross_attentions)):
            expected = torch.stack([a[0] for a in theirs]).numpy()
            np.testing.assert_allclose(ours[OUR_KEYS[kind]].numpy()[:, 0], expected, atol=TOL)
