"""T5 v1.0 (relu, tied output scaled by d_model^-0.5) and v1.1 / flan-T5 (gated gelu_new, untied)
against Hugging Face's own T5ForConditionalGeneration, issue 26.

tests/fixtures/t5/ and t5_v11/ are tiny random T5s saved by transformers with their SentencePiece
tokenizer and a beam-search generation_config.json; recorded.npz holds what transformers computed
(tests/fixtures/make_t5_fixture.py). Ours must give the same ids, the same numbers (1e-4): logits,
every map (the relative position bias included) and the same generated tokens.

As Google's checkpoints (32,128 rows for 32,100 pieces and extra ids), the fixtures' embedding is
padded beyond the tokenizer's 320 entries to 384 rows: the logits cover every row, and the ids
between are unused ids, named and decoded as transformers decodes them.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from transformer.checkpoint.format import CheckpointError, save_checkpoint
from transformer.importers import detect_recipe, load_checkpoint
from transformer.importers.hf import t5
from transformer.importers.hf.t5 import t5_config
from transformer.inference.generation_config import read_generation_config
from transformer.inference.search_transformers import generate
from transformer.inference.session import load_checkpoint as load_ckpt
from transformer.model.relative import relative_position_buckets
from transformer.tokenizers import tokenizer_from_spec
from transformer.tokenizers.base import TokenizerError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VERSIONS = ("t5", "t5_v11")
TOL = 1e-4
OUR_KEYS = {"encoder": "encoder_attention", "decoder": "decoder_attention",
            "cross": "cross_attention"}


@pytest.fixture(scope="module", params=VERSIONS)
def version(request):
    folder = FIXTURES / request.param
    with np.load(folder / "recorded.npz", allow_pickle=False) as npz:
        recorded = {name: npz[name] for name in npz.files}
    return folder, t5.FAMILY.convert(folder), recorded


def fixture_files(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in t5.FAMILY.folder_files
            if (folder / name).exists()}


def test_config_says_what_makes_t5_t5(version):
    folder, checkpoint, _ = version
    c, hf = checkpoint.config, json.loads((folder / "config.json").read_text())
    assert (c.d_model, c.num_heads, c.head_dim, c.dff) == (hf["d_model"], hf["num_heads"],
                                                          hf["d_kv"], hf["d_ff"])
    assert c.positional == "none" and c.relative_attention
    assert (c.relative_buckets, c.relative_max_distance) == (
        hf["relative_attention_num_buckets"], hf["relative_attention_max_distance"])
    assert c.norm == "rms" and c.norm_first and not c.use_bias and not c.attention_scale
    assert (c.pad_id, c.start_id, c.end_id) == (0, 0, 1)
    assert (c.source_start, c.source_end, c.target_start) == (False, True, False)
    if hf["tie_word_embeddings"]:  # v1.0
        assert c.tie_output and c.output_scale == hf["d_model"] ** -0.5
        assert c.feedforward == "dense" and c.activation == "relu"
    else:  # v1.1, flan-T5
        assert not c.tie_output and c.output_scale == 1.0
        assert c.feedforward == "gated" and c.activation == "gelu_tanh"


def test_it_opens_through_the_registry(version):
    folder, checkpoint, recorded = version
    files = fixture_files(folder)
    assert detect_recipe(files) == "t5"
    source = recorded["s0_source_ids"][None]
    target = recorded["s0_forced_target_ids"][None]
    opened = load_checkpoint(files)
    np.testing.assert_array_equal(opened.model((source, target)).numpy(),
                                  checkpoint.model((source, target)).numpy())
    del files["tokenizer.json"]  # spiece.model alone, as older T5 folders ship
    assert t5.FAMILY.convert(files).encode_source(str(recorded["sentences"][2])) == \
        recorded["s2_source_ids"].tolist()


def with_config(folder, **changes) -> dict[str, bytes]:
    files = fixture_files(folder)
    config = json.loads(files["config.json"])
    config.update(changes)
    files["config.json"] = json.dumps(config).encode()
    return files


@pytest.mark.parametrize("changes, message", [
    ({"feed_forward_proj": "gated-tanh"}, r"feed_forward_proj \"gated-tanh\"; only relu"),
    ({"is_gated_act": True}, r"is_gated_act True but feed_forward_proj 'relu'"),
    ({"architectures": ["T5EncoderModel"]}, r"only T5ForConditionalGeneration"),
    ({"num_heads": 2}, r"shape \(16, 16\), but config.json describes \(8, 16\)"),
    ({"use_moe": True}, r"field 'use_moe', which this converter does not know"),
    ({"vocab_size": 300}, r"320 pieces, but config.json gives vocab_size 300; they must be "
                          r"the same model's"),
])
def test_refuses_what_it_does_not_implement(changes, message):
    with pytest.raises(CheckpointError, match=message):
        t5.FAMILY.convert(with_config(FIXTURES / "t5", **changes))


def test_the_padded_rows_are_unused_ids_decoded_as_transformers_decodes_them(version):
    folder, checkpoint, recorded = version
    vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
    assert vocab == 384 and checkpoint.config.src_vocab_size == checkpoint.config.tgt_vocab_size
    for tok in (checkpoint.source_tokenizer, checkpoint.target_tokenizer):
        assert (tok.own_vocab_size, tok.vocab_size) == (320, vocab)
        assert tok.id_to_piece(319) == "<extra_id_0>" and tok.id_to_piece(320) == "[unused 320]"
        assert tok.ids_to_pieces([383]) == ["[unused 383]"]
        with pytest.raises(ValueError, match="out of range"):
            tok.id_to_piece(vocab)
        assert tok.decode(recorded["unused_ids"]) == str(recorded["unused_decoded"])
        assert [tok.decode([i]) for i in range(320, vocab)] == recorded["unused_each"].tolist()
    assert str(recorded["unused_decoded"]) == "the black cat sleeps"  # transformers skips them
    for j, text in enumerate(recorded["tokenizer_texts"]):  # no text gives an unused id
        assert max(checkpoint.encode_source(str(text)), default=0) < 320, j


def test_a_padded_model_round_trips_through_our_checkpoint(tmp_path):
    checkpoint = t5.FAMILY.convert(FIXTURES / "t5_v11")
    path = save_checkpoint(tmp_path / "t5.ckpt", checkpoint.model, checkpoint.source_tokenizer,
                           checkpoint.target_tokenizer, checkpoint.metadata)
    loaded = load_ckpt(path)
    assert loaded.config == checkpoint.config
    for side in ("source_tokenizer", "target_tokenizer"):
        ours, theirs = getattr(loaded, side), getattr(checkpoint, side)
        assert ours.spec() == theirs.spec() and ours.spec()["padded_vocab_size"] == 384
        assert (ours.own_vocab_size, ours.vocab_size) == (320, 384)
        assert ours.id_to_piece(350) == "[unused 350]"
    source, target = np.array([[5, 6, 1]]), np.array([[0, 383, 320]])  # unused ids fed back
    np.testing.assert_array_equal(loaded.model((source, target)).numpy(),
                                  checkpoint.model((source, target)).numpy())


def test_a_spec_without_padding_means_none_and_a_bad_padded_size_is_refused():
    tok = t5.FAMILY.convert(FIXTURES / "t5").source_tokenizer
    spec = dict(tok.spec())
    del spec["padded_vocab_size"]
    plain = tokenizer_from_spec(spec, tok.model_bytes)
    assert plain.vocab_size == plain.own_vocab_size == 320 and "padded_vocab_size" not in \
        plain.spec()
    for bad, message in ((319, "fewer than the tokenizer's 320 entries"),
                         (10**7, "more than the 262,144"), ("384", "expected an int")):
        with pytest.raises(TokenizerError, match=message):
            tokenizer_from_spec(dict(spec, padded_vocab_size=bad), tok.model_bytes)
        with pytest.raises(TokenizerError, match=message):
            plain.pad_vocabulary(bad)


def test_refuses_a_weight_left_over():
    from safetensors.numpy import load, save

    weights = load((FIXTURES / "t5_v11" / "model.safetensors").read_bytes())
    weights["encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"] = \
        np.ones((8, 4), np.float32)  # a second bias table: not T5's
    with pytest.raises(CheckpointError, match=r"block.1.layer.0.SelfAttention.relative_attention"
                                              r"_bias.weight' that a T5ForConditional"):
        t5.FAMILY.convert({**fixture_files(FIXTURES / "t5_v11"), "model.safetensors": save(weights)})


def test_live_against_transformers(version):
    torch = pytest.importorskip("torch", reason="the live comparison needs torch")
    transformers = pytest.importorskip("transformers", reason="needs transformers too")
    folder, checkpoint, _ = version
    model = transformers.T5ForConditionalGeneration.from_pretrained(
        folder, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    beam = read_generation_config((folder / "generation_config.json").read_bytes(),
                                  checkpoint.config)
    unused = list(range(len(tokenizer), model.config.vocab_size))
    assert unused and checkpoint.source_tokenizer.vocab_size == model.config.vocab_size
    for ids in ([unused[0]], unused[-3:], [12, unused[5], 30, unused[-1], 1]):
        assert checkpoint.target_tokenizer.decode(ids) == tokenizer.decode(
            ids, skip_special_tokens=True), ids
    for text in ["translate English to German: the house is small", "a", "Zoë 東京 🙂 ok",
                 "summarize: " + "the black cat sleeps " * 12]:
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


def test_relative_buckets_equal_transformers_for_t5s_own_settings():
    """t5-small's 32 buckets and distance 128 over every distance of 512 positions, both
    directions, against transformers' own function (float32 truncation decides the edges)."""
    pytest.importorskip("torch", reason="needs torch")
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    import torch

    bucket = transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket
    distances = np.arange(-511, 512)
    for bidirectional in (True, False):
        for buckets, max_distance in ((32, 128), (8, 16), (64, 256)):
            theirs = bucket(torch.tensor(distances), bidirectional, buckets, max_distance).numpy()
            ours = relative_position_buckets(distances, bidirectional, buckets, max_distance)
            np.testing.assert_array_equal(ours, theirs)


def test_a_config_written_by_transformers_5_24_opens_with_its_arithmetic():
    """transformers 5.24 writes scale_decoder_outputs in every T5 config and forces
    tie_word_embeddings to true (lm_head tied to the shared embedding): a v1.1 model saved by it
    says scale_decoder_outputs false and holds no lm_head.weight. Our logits equal those
    transformers 5.24 computed (tests/fixtures/make_t5_524_fixture.py)."""
    folder = FIXTURES / "t5_v11_524"
    config = json.loads((folder / "config.json").read_text())
    assert config["scale_decoder_outputs"] is False and config["tie_word_embeddings"] is True
    ckpt = load_checkpoint(folder)
    assert ckpt.config.tie_output and ckpt.config.output_scale == 1.0
    recorded = np.load(folder / "recorded.npz")
    out = ckpt.model((recorded["source_ids"], recorded["decoder_ids"]), return_attention=True)
    np.testing.assert_allclose(np.asarray(out["logits"]), recorded["logits"], rtol=0, atol=1e-4)
    # a v1.0 model as 5.24 writes it scales, as the hub's v1.0 configs did without the field
    assert t5_config({**config, "scale_decoder_outputs": True})["output_scale"] == \
        config["d_model"] ** -0.5


def test_flan_t5_as_transformers_5_24_writes_it_keeps_its_own_output_head():
    """transformers 5.24 writes tie_word_embeddings true for flan-t5 (v1.1), with
    scale_decoder_outputs false, and keeps its lm_head.weight, which differs from the shared
    embedding: it is not tied (modeling_utils.tie_weights leaves a head the file gives). The
    v1.1 fixture with its config rewritten so computes the logits recorded from it."""
    folder = FIXTURES / "t5_v11"
    config = json.loads((folder / "config.json").read_text())
    assert config["tie_word_embeddings"] is False
    files = fixture_files(folder)
    files["config.json"] = json.dumps({**config, "tie_word_embeddings": True,
                                       "scale_decoder_outputs": False}).encode()
    ckpt = t5.FAMILY.convert(files)
    assert not ckpt.config.tie_output and ckpt.config.output_scale == 1.0
    recorded = np.load(folder / "recorded.npz")
    source, target = recorded["s0_source_ids"][None], recorded["s0_forced_target_ids"][None]
    out = ckpt.model((source, target), return_attention=True)
    np.testing.assert_allclose(out["logits"].numpy()[0], recorded["s0_forced_logits"], atol=TOL)
