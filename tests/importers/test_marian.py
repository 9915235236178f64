"""Marian (opus-mt) models against Hugging Face's own MarianMTModel.

tests/fixtures/marian/ is a tiny random MarianMTModel saved by transformers (save_pretrained) with
tiny SentencePiece models and vocab.json, and recorded.npz holds what transformers computed with
it (tests/fixtures/make_marian_fixture.py): logits, every attention map of every kind, greedy
output. Our converted model must give the same numbers (1e-4) and the same tokens.

test_live_against_transformers re-runs the comparison against transformers itself; it needs
torch and transformers (pip install torch==2.13.0 transformers), which the app does not.
"""

import dataclasses
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from transformer.checkpoint.format import CheckpointError
from transformer.core.kinds import KIND_NAMES as KINDS
from transformer.core.limits import NAMED_MAX_LAYERS
from transformer.importers.hf.marian import (
    FAMILY,
    REQUIRED_FILES,
    marian_config,
)
from transformer.inference.numerics import log_softmax
from transformer.inference.session import load_checkpoint
from transformer.model.weights import weight_arrays

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "marian"
TOL = 1e-4
OUR_KEYS = {"encoder": "encoder_attention", "decoder": "decoder_attention",
            "cross": "cross_attention"}


@pytest.fixture(scope="module")
def recorded():
    with np.load(FIXTURE / "recorded.npz", allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


@pytest.fixture(scope="module")
def checkpoint():
    return FAMILY.convert(FIXTURE)


def fixture_files() -> dict[str, bytes]:
    return {name: (FIXTURE / name).read_bytes() for name in REQUIRED_FILES}


def sentence_ids(recorded):
    return range(len(recorded["sentences"]))


# ------------------------------------------------------------------ the mapping
def test_config_says_what_makes_marian_marian(checkpoint):
    c = checkpoint.config
    hf = json.loads((FIXTURE / "config.json").read_text())
    assert (c.d_model, c.num_heads, c.dff) == (hf["d_model"], hf["encoder_attention_heads"],
                                               hf["encoder_ffn_dim"])
    assert (c.num_encoder_layers, c.num_decoder_layers) == (hf["encoder_layers"],
                                                            hf["decoder_layers"])
    assert c.src_vocab_size == c.tgt_vocab_size == hf["vocab_size"]
    assert (c.pad_id, c.start_id, c.end_id) == (hf["pad_token_id"], hf["decoder_start_token_id"],
                                                hf["eos_token_id"])
    assert c.start_id == c.pad_id == hf["vocab_size"] - 1 and c.end_id == 0
    assert c.positional == "sinusoidal_concat" and c.activation == "swish"
    assert c.layer_norm_epsilon == 1e-5 and c.scale_embeddings and not c.norm_first
    assert c.share_embeddings and c.tie_output and c.output_bias
    assert (c.source_start, c.source_end, c.mask_padding) == (False, True, True)
    assert c.max_len == hf["max_position_embeddings"]
    # PyTorch's epsilon changes these logits by ~3e-5 only, under the tolerance: check the layers.
    layers = checkpoint.model.encoder_layers + checkpoint.model.decoder_layers
    norms = [getattr(layer, name) for layer in layers for name in vars(layer)
             if name.endswith("layer_norm")]
    assert len(norms) == 2 * c.num_encoder_layers + 3 * c.num_decoder_layers
    assert all(norm.epsilon == 1e-5 for norm in norms)


def test_positions_equal_marians_sinusoids(checkpoint, recorded):
    """transformers never saves MarianSinusoidalPositionalEmbedding; the fixture recorded it."""
    for side in ("source_embedding", "target_embedding"):
        ours = getattr(checkpoint.model, side).sinusoids.numpy()
        np.testing.assert_allclose(ours, recorded["positions"], atol=1e-6)


def test_weights_are_the_safetensors_ones(checkpoint):
    from safetensors.numpy import load_file

    hf = load_file(str(FIXTURE / "model.safetensors"))
    ours = weight_arrays(checkpoint.model)
    np.testing.assert_array_equal(ours["source_embedding/source_token_embedding/embeddings"],
                                  hf["model.shared.weight"])
    np.testing.assert_array_equal(ours["output_bias"], hf["final_logits_bias"][0])
    assert np.abs(hf["final_logits_bias"]).max() > 0.1  # the bias is really exercised
    # Torch Linear (out, in) -> Keras kernel (in, out).
    np.testing.assert_array_equal(ours["decoder_layer_1/cross_attention/key/kernel"],
                                  hf["model.decoder.layers.1.encoder_attn.k_proj.weight"].T)
    np.testing.assert_array_equal(ours["encoder_layer_0/feedforward/intermediate/kernel"],
                                  hf["model.encoder.layers.0.fc1.weight"].T)
    np.testing.assert_array_equal(ours["decoder_layer_0/feedforward_layer_norm/gamma"],
                                  hf["model.decoder.layers.0.final_layer_norm.weight"])
    assert "target_embedding/target_token_embedding/embeddings" not in ours  # shared


def test_metadata_records_provenance(checkpoint):
    import hashlib

    source = checkpoint.metadata["source"]
    assert checkpoint.metadata["recipe"] == source["recipe"] == "marian"
    hashes = {f["name"]: f["sha256"] for f in source["files"]}
    assert set(REQUIRED_FILES) <= set(hashes)
    assert hashes["model.safetensors"] == hashlib.sha256(
        (FIXTURE / "model.safetensors").read_bytes()).hexdigest()
    assert source["source_lang"] == "en" and source["target_lang"] == "fr"


# ------------------------------------------------------------------ numbers equal transformers'
def test_tokenization_equals_transformers(checkpoint, recorded):
    for i in sentence_ids(recorded):
        assert checkpoint.encode_source(str(recorded["sentences"][i])) == \
            recorded[f"s{i}_source_ids"].tolist()
        assert checkpoint.target_tokenizer.encode(str(recorded["targets"][i]), add_end=True) == \
            recorded[f"s{i}_forced_output_ids"].tolist()
    assert 1 in recorded["s3_source_ids"]  # "Zoë ... €": pieces vocab.json lacks are <unk>


@pytest.mark.parametrize("mode", ["forced", "greedy"])
def test_model_logits_and_attention_equal_recorded(checkpoint, recorded, mode):
    """The model itself on transformers' ids: every logit and every map of every layer."""
    for i in sentence_ids(recorded):
        source = recorded[f"s{i}_source_ids"][None]
        target = recorded[f"s{i}_{mode}_target_ids"][None]
        out = checkpoint.model((source, target), return_attention=True)
        np.testing.assert_allclose(out["logits"].numpy()[0], recorded[f"s{i}_{mode}_logits"],
                                   atol=TOL, err_msg=f"sentence {i} logits")
        for kind in KINDS:
            ours = out[OUR_KEYS[kind]].numpy()[:, 0]  # (L, H, q, k)
            assert ours.shape == recorded[f"s{i}_{mode}_{kind}"].shape
            np.testing.assert_allclose(ours, recorded[f"s{i}_{mode}_{kind}"], atol=TOL,
                                       err_msg=f"sentence {i} {kind}")


def test_checkpoint_attention_equals_recorded(checkpoint, recorded):
    """What every page shows: OpenedModel.attention on the text, teacher-forced on the recorded
    target and on the model's own greedy translation. (That one runs to </s> or max_len, past
    generate's limit: its first rows are compared; the decoder is causal, so they are final.)"""
    for i in sentence_ids(recorded):
        source = str(recorded["sentences"][i])
        for mode, target in (("forced", str(recorded["targets"][i])), ("greedy", None)):
            maps = checkpoint.attention(source, target)
            expected_ids = recorded[f"s{i}_{mode}_target_ids"].tolist()
            rows = len(expected_ids)
            assert maps["source_ids"].tolist() == recorded[f"s{i}_source_ids"].tolist()
            assert maps["target_ids"].tolist()[:rows] == expected_ids
            if mode == "forced":
                assert len(maps["target_ids"]) == rows
            ours = {"encoder": maps["encoder"], "decoder": maps["decoder"][:, :, :rows, :rows],
                    "cross": maps["cross"][:, :, :rows]}
            for kind in KINDS:
                np.testing.assert_allclose(ours[kind], recorded[f"s{i}_{mode}_{kind}"], atol=TOL,
                                           err_msg=f"sentence {i} {mode} {kind}")
            output_ids = maps["output_ids"][:rows]
            log_probs = log_softmax(recorded[f"s{i}_{mode}_logits"].astype(np.float64))
            expected = log_probs[np.arange(rows), output_ids]
            np.testing.assert_allclose(maps["log_probs"][:rows], expected, atol=TOL)


def test_greedy_translation_equals_generate(checkpoint, recorded):
    steps = int(recorded["max_new_tokens"])
    ended = 0
    for i in sentence_ids(recorded):
        expected = recorded[f"s{i}_greedy_ids"].tolist()
        source = str(recorded["sentences"][i])
        for use_cache in (True, False):
            result = checkpoint.translate(source, max_len=steps, use_cache=use_cache)
            assert result.token_ids == expected, (i, use_cache)
        ended += expected[-1] == checkpoint.config.end_id
    assert ended >= 1  # one recorded translation stops on </s> before the limit


def test_zip_and_uploaded_files_convert_the_same(checkpoint):
    """A .zip (of a folder, as people zip them) and several uploaded files give the same model
    as the folder."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in REQUIRED_FILES + ("tokenizer_config.json", "generation_config.json"):
            archive.write(FIXTURE / name, f"opus-mt-tiny/{name}")
    as_zip = load_checkpoint(FAMILY.checkpoint_bytes(buffer.getvalue()))
    uploaded = load_checkpoint(FAMILY.checkpoint_bytes(
        {name: (FIXTURE / name).read_bytes() for name in REQUIRED_FILES}))
    reference = weight_arrays(checkpoint.model)
    for other in (as_zip, uploaded):
        assert other.config == checkpoint.config
        ours = weight_arrays(other.model)
        assert ours.keys() == reference.keys()
        for name in reference:
            np.testing.assert_array_equal(ours[name], reference[name])


def test_load_checkpoint_opens_the_folder_as_it_is(checkpoint, recorded, tmp_path):
    """transformer.load_checkpoint opens a Hugging Face folder (and its files, and a .zip of
    it) with no conversion step, the weights mapped on load: the same model as the export
    (python -m transformer.convert marian --out), to the last bit, and the recorded numbers."""
    import transformer

    opened = transformer.load_checkpoint(FIXTURE)
    for name, value in weight_arrays(checkpoint.model).items():
        np.testing.assert_array_equal(weight_arrays(opened.model)[name], value, err_msg=name)
    assert opened.metadata["source"]["from"] == "the folder 'marian'"
    assert len(opened.content_hash) == 64
    read = [n for n in FAMILY.folder_files if (FIXTURE / n).exists()]
    files = transformer.load_checkpoint({n: (FIXTURE / n).read_bytes() for n in read})
    assert files.content_hash == opened.content_hash  # the same files: the same cache key
    maps = opened.attention(recorded["sentence"].item() if "sentence" in recorded else "the cat")
    assert np.isfinite(maps["cross"]).all()
    exported = load_checkpoint(FAMILY.checkpoint_bytes(FIXTURE))
    for name, value in weight_arrays(exported.model).items():
        np.testing.assert_array_equal(weight_arrays(opened.model)[name], value, err_msg=name)
    with pytest.raises(CheckpointError, match="no model that opens as it is"):
        transformer.load_checkpoint({"notes.txt": b"hello"})
    with pytest.raises(CheckpointError, match="holds no config.json; a Hugging Face model"):
        transformer.load_checkpoint(tmp_path)  # an empty folder: what any model's folder lacks


def test_cli_converts_a_folder(tmp_path, checkpoint, capsys):
    from transformer.importers.cli import main

    out = tmp_path / "tiny-marian.ckpt"
    assert main(["marian", "--model-dir", str(FIXTURE), "--out", str(out)]) == 0
    assert "2 encoder and 2 decoder layers" in capsys.readouterr().out
    loaded = load_checkpoint(out)
    assert loaded.config == checkpoint.config
    converted = weight_arrays(loaded.model)
    for name, value in weight_arrays(checkpoint.model).items():
        np.testing.assert_array_equal(converted[name], value)


# ------------------------------------------------------------------ live, against transformers
def test_live_against_transformers(checkpoint):
    torch = pytest.importorskip(
        "torch", reason="the live comparison needs torch and transformers "
                        "(pip install torch==2.13.0 transformers); the recorded one always runs")
    transformers = pytest.importorskip("transformers", reason="needs transformers too")
    model = transformers.MarianMTModel.from_pretrained(FIXTURE, attn_implementation="eager")
    model.eval()
    tokenizer = transformers.MarianTokenizer(str(FIXTURE / "source.spm"),
                                             str(FIXTURE / "target.spm"),
                                             str(FIXTURE / "vocab.json"))
    pad = model.config.pad_token_id
    sentences = ["the cat and the dog are friends", "où est la gare ?", "we go to Paris by bus",
                 "a", "I would like two small green apples, please."]
    for text in sentences:
        source_ids = tokenizer(text)["input_ids"]
        assert checkpoint.encode_source(text) == source_ids, text
        generation = transformers.GenerationConfig(
            num_beams=1, do_sample=False, max_new_tokens=10, decoder_start_token_id=pad,
            eos_token_id=model.config.eos_token_id, pad_token_id=pad, bad_words_ids=[[pad]],
            forced_eos_token_id=None)
        with torch.no_grad():
            generated = model.generate(torch.tensor([source_ids]),
                                       generation_config=generation)[0].tolist()
        assert checkpoint.translate(text, max_len=10).token_ids == generated[1:], text
        with torch.no_grad():
            out = model(input_ids=torch.tensor([source_ids]),
                        decoder_input_ids=torch.tensor([generated]), output_attentions=True)
        ours = checkpoint.model((np.array([source_ids]), np.array([generated])),
                                return_attention=True)
        np.testing.assert_allclose(ours["logits"].numpy()[0], out.logits[0].numpy(), atol=TOL)
        for kind, theirs in (("encoder", out.encoder_attentions),
                             ("decoder", out.decoder_attentions),
                             ("cross", out.cross_attentions)):
            expected = torch.stack([a[0] for a in theirs]).numpy()
            np.testing.assert_allclose(ours[OUR_KEYS[kind]].numpy()[:, 0], expected, atol=TOL)


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


BART = {"model_type": "bart", "architectures": ["BartForConditionalGeneration"],
        "normalize_before": False}
T5 = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}


@pytest.mark.parametrize("changes, message", [
    (BART, r"model_type 'bart', not a Marian model \(its architectures: "
           r"\[\"BartForConditionalGeneration\"\]\); only MarianMTModel"),
    (T5, r"model_type 't5', not a Marian model.*only MarianMTModel"),
    ({"architectures": ["MarianForCausalLM"]}, r"architectures \[\"MarianForCausalLM\"\]"),
    ({"model_type": None}, r"no model_type"),
    ({"normalize_before": True}, r"normalize_before to true: pre-LayerNorm"),
    ({"add_final_layer_norm": True}, r"add_final_layer_norm"),
    ({"normalize_embedding": True}, r"normalize_embedding"),
    ({"static_position_embeddings": False}, r"static_position_embeddings.*learned positions"),
    ({"activation_function": "gelu_new"}, r"activation_function \"gelu_new\""),
    ({"decoder_attention_heads": 2}, r"encoder_attention_heads 4 but decoder_attention_heads 2"),
    ({"decoder_ffn_dim": 64}, r"encoder_ffn_dim 32 but decoder_ffn_dim 64"),
    ({"share_encoder_decoder_embeddings": False}, r"separate source and target embeddings"),
    ({"decoder_start_token_id": 0, "eos_token_id": 1}, r"decoder_start_token_id 0 but "
                                                        r"pad_token_id 188"),
    ({"layer_norm_type": "rms"}, r"field 'layer_norm_type', which this converter does not know"),
    ({"encoder_layers": NAMED_MAX_LAYERS + 1, "num_hidden_layers": None},
     rf"encoder_layers {NAMED_MAX_LAYERS + 1}; the limit is {NAMED_MAX_LAYERS}"),
])
def test_refuses_configs_it_does_not_implement(changes, message):
    with pytest.raises(CheckpointError, match=r"config\.json in the given files .*" + message):
        FAMILY.read(with_config(**changes))


def test_scale_embedding_false_is_honoured():
    assert marian_config({**json.loads((FIXTURE / "config.json").read_text()),
                          "scale_embedding": False})["scale_embeddings"] is False


def test_refuses_config_that_is_not_json():
    files = fixture_files()
    files["config.json"] = b"{not json"
    with pytest.raises(CheckpointError, match=r"config\.json in the given files is not valid JSON"):
        FAMILY.read(files)


@pytest.mark.parametrize("missing", ["vocab.json", "model.safetensors", "target.spm"])
def test_refuses_missing_file(missing, tmp_path):
    files = fixture_files()
    del files[missing]
    with pytest.raises(CheckpointError, match=rf"missing {missing}; a Marian model holds"):
        FAMILY.read(files)
    for name, data in files.items():  # the same, from a folder
        (tmp_path / name).write_bytes(data)
    with pytest.raises(CheckpointError,
                       match=rf"folder '{re.escape(tmp_path.name)}' is missing {missing}"):
        FAMILY.read(tmp_path)


def test_pickled_weights_are_never_read():
    files = fixture_files()
    del files["model.safetensors"]
    files["pytorch_model.bin"] = b"\x80\x04 a pickle"
    with pytest.raises(CheckpointError, match=r"only in pytorch_model\.bin, a pickle, which can "
                                              r"run code.*never read.*save_pretrained"):
        FAMILY.read(files)


def safetensors_with(change) -> dict[str, bytes]:
    from safetensors.numpy import load, save

    files = fixture_files()
    tensors = load(files["model.safetensors"])
    change(tensors)
    files["model.safetensors"] = save(tensors)
    return files


def test_refuses_missing_weight():
    files = safetensors_with(lambda t: t.pop("model.encoder.layers.1.fc2.weight"))
    with pytest.raises(CheckpointError, match=r"model\.safetensors in the given files has no "
                                              r"weight 'model\.encoder\.layers\.1\.fc2\.weight'"):
        FAMILY.checkpoint_bytes(files)


def test_refuses_misshaped_weight():
    def transpose(tensors):
        name = "model.decoder.layers.0.encoder_attn.q_proj.weight"
        tensors[name] = np.ascontiguousarray(tensors[name][:, :8])

    with pytest.raises(CheckpointError, match=r"'model\.decoder\.layers\.0\.encoder_attn\.q_proj"
                                              r"\.weight' in model\.safetensors in the given files "
                                              r"has shape \(16, 8\), but config\.json describes "
                                              r"\(16, 16\)"):
        FAMILY.checkpoint_bytes(safetensors_with(transpose))


def test_refuses_unexpected_weight():
    def extra(tensors):
        tensors["model.encoder.layers.2.fc1.weight"] = np.zeros((32, 16), np.float32)

    with pytest.raises(CheckpointError, match=r"weight 'model\.encoder\.layers\.2\.fc1\.weight' "
                                              r"that a MarianMTModel with this config\.json"):
        FAMILY.checkpoint_bytes(safetensors_with(extra))


def test_refuses_positions_that_are_not_sinusoids(recorded):
    def learned(tensors):
        tensors["model.encoder.embed_positions.weight"] = recorded["positions"] + 0.5

    with pytest.raises(CheckpointError, match=r"'model\.encoder\.embed_positions\.weight' .* is "
                                              r"not Marian's static sinusoidal positions"):
        FAMILY.checkpoint_bytes(safetensors_with(learned))


def test_saved_sinusoids_and_tied_copies_are_accepted(recorded):
    """Older files hold the positions and every tied copy of the embedding: all are checked."""
    from safetensors.numpy import load

    def older(tensors):
        tensors["model.encoder.embed_positions.weight"] = recorded["positions"]
        tensors["model.decoder.embed_positions.weight"] = recorded["positions"]
        for name in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                     "lm_head.weight"):
            tensors[name] = tensors["model.shared.weight"]

    files = safetensors_with(older)
    weights = FAMILY.read(files)[0].weights
    assert "lm_head.weight" in weights
    load(files["model.safetensors"])  # a valid file
    assert FAMILY.checkpoint_bytes(files)


def test_refuses_garbage_safetensors():
    files = fixture_files()
    files["model.safetensors"] = b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}"
    with pytest.raises(CheckpointError, match=r"model\.safetensors in the given files is not a "
                                              r"valid safetensors file"):
        FAMILY.read(files)


def test_refuses_vocabulary_of_another_model():
    files = fixture_files()
    vocab = json.loads(files["vocab.json"])
    vocab["▁extra"] = len(vocab)
    files["vocab.json"] = json.dumps(vocab).encode()
    with pytest.raises(CheckpointError, match=r"vocab\.json"):
        FAMILY.checkpoint_bytes(files)


def test_refuses_a_sentencepiece_model_that_is_not_one():
    files = fixture_files()
    files["target.spm"] = b"not a SentencePiece model"
    with pytest.raises(CheckpointError, match=r"A tokenizer file in the given files is invalid: "
                                              r"target\.spm: not a SentencePiece model"):
        FAMILY.checkpoint_bytes(files)


def test_refuses_a_zip_that_is_not_one():
    with pytest.raises(CheckpointError, match=r"not a ZIP archive"):
        FAMILY.read(b"this is not a zip file at all, not even close")


def test_hub_download_offline_is_a_sentence(capsys, monkeypatch):
    # No network here: the download fails, and the CLI says what to do instead (no traceback).
    from transformer.importers.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = main(["marian", "--hub", "Helsinki-NLP/opus-mt-en-fr", "--out", "never.ckpt"])
    assert code == 2
    err = capsys.readouterr().err
    assert "Could not download 'Helsinki-NLP/opus-mt-en-fr'" in err and "--model-dir" in err


# ------------------------------------------------------------------ hostile files (issue 15)
def test_an_activation_that_is_not_a_name_is_a_sentence():
    with pytest.raises(CheckpointError, match=r"gives activation_function \[\"gelu\"\]; only"):
        FAMILY.read(with_config(activation_function=["gelu"]))


def test_a_vocabulary_with_a_5000_digit_id_is_a_sentence():
    files = fixture_files()
    text = files["vocab.json"].decode()
    files["vocab.json"] = (text[:text.rindex("}")] + ', "zz": ' + "9" * 5000 + "}").encode()
    with pytest.raises(CheckpointError, match=r"vocab\.json: holds a number too long to be an id"):
        FAMILY.checkpoint_bytes(files)


def test_the_generation_config_is_read_when_the_model_opens(checkpoint):
    """OpenedModel.generation: the folder's generation_config.json (transformers' defaults with
    the model's ids here); OpenedModel.generate decodes with it, or with other settings."""
    from transformer import DEFAULT_CHECKPOINT
    from transformer.inference.generation_config import read_generation_config
    from transformer.inference.search_transformers import generate

    expected = read_generation_config((FIXTURE / "generation_config.json").read_bytes(),
                                      checkpoint.config)
    assert checkpoint.generation == expected
    assert (expected.num_beams, expected.decoder_start_token_id) == (1, checkpoint.config.start_id)
    text = "the black cat sleeps"
    ids = checkpoint.encode_source(text)
    assert checkpoint.generate(text).token_ids == generate(checkpoint.model, ids,
                                                           expected).token_ids
    beam = dataclasses.replace(expected, num_beams=3)
    searched = checkpoint.generate(text, beam)
    assert searched.beam_width == 3 and searched.steps[0].cross.shape[-1] == len(ids)
    without = {n: (FIXTURE / n).read_bytes() for n in REQUIRED_FILES}
    assert FAMILY.convert(without).generation is None
    assert load_checkpoint(DEFAULT_CHECKPOINT).generation is None  # ours: greedy translate
