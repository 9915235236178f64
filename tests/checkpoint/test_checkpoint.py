"""Checkpoints: exact round trips, every refusal as a plain sentence, and never any code run.

A checkpoint is a ZIP of JSON, SentencePiece model bytes and float32 weights: written as version 2
(weights.safetensors), read as version 2 or 1 (an .npz of float32 arrays). The malformed archives
here are made from version 1 files (the .npz's every level); tests/checkpoint/test_checkpoint_safetensors.py
takes version 2's weights apart. These tests
save tiny real models (trained tokenizers, random weights), load them back and compare every logit
and attention map; then they take valid archives apart and put them back together wrong, one
defect at a time, and check that each is refused with a CheckpointError whose message is a
sentence a user can read. The last section feeds load_checkpoint files that *would* run code (a
Keras Lambda, a Keras-style config naming a function, pickles) and checks that a marker file the
code would create never appears.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import pathlib
import pickle
import struct
import tracemalloc
import warnings
import zipfile
from dataclasses import replace

import fuzz_cases
import keras
import numpy as np
import pytest
from fuzz_cases import Entry, entry, npy_raw, write_zip, zeros_deflated

from transformer import (
    CheckpointError,
    OpenedModel,
    Transformer,
    TransformerConfig,
    load_checkpoint,
    save_checkpoint,
)
from transformer.checkpoint import format as checkpoint_module
from transformer.checkpoint.format import MEMBERS, MEMBERS_V1, checkpoint_bytes
from transformer.checkpoint.metadata import clean_metadata
from transformer.core import limits
from transformer.core.kinds import KIND_NAMES
from transformer.model.weights import weight_arrays
from transformer.tokenizers.bpemb import BPEmbTokenizer
from transformer.training.data import date_pairs

PAIRS = date_pairs(48, seed=7)
SOURCES = [s for s, _ in PAIRS[:5]]
TARGETS = [t for _, t in PAIRS[:5]]


# ============================================================================= helpers
def tiny_config(source, target, **overrides) -> TransformerConfig:
    values = dict(src_vocab_size=source.vocab_size, tgt_vocab_size=target.vocab_size, d_model=16,
                  num_heads=2, dff=32, num_encoder_layers=1, num_decoder_layers=1, max_len=32,
                  pad_id=target.pad_id, start_id=target.start_id, end_id=target.end_id)
    values.update(overrides)
    return TransformerConfig(**values)


def randomized_model(config: TransformerConfig, seed: int) -> Transformer:
    """A built model whose every weight is drawn here, so no fresh initialisation can match it."""
    model = Transformer(config).build_weights()
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(0.0, 0.4, tuple(w.shape)).astype(np.float32))
    return model


def batch(tokenizer, texts, max_len, **kwargs) -> np.ndarray:
    ids = [tokenizer.encode(t, max_len=max_len, **kwargs) for t in texts]
    out = np.full((len(ids), max(map(len, ids))), tokenizer.pad_id, np.int32)
    for i, row in enumerate(ids):
        out[i, :len(row)] = row
    return out


def logits_of(model, source_tokenizer, target_tokenizer) -> np.ndarray:
    """Logits of a padded batch (sources of different lengths, teacher-forced targets)."""
    c = model.config
    src = batch(source_tokenizer, SOURCES, c.max_len, add_start=True, add_end=True)
    tgt = batch(target_tokenizer, TARGETS, c.max_len, add_start=True)
    return model((src, tgt)).numpy()


def members_of(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def make_archive(members, compression=zipfile.ZIP_DEFLATED) -> bytes:
    """members: dict or list of (name, bytes) pairs (a list may repeat a name)."""
    items = members.items() if isinstance(members, dict) else members
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names
        with zipfile.ZipFile(out, "w", compression=compression) as archive:
            for name, content in items:
                archive.writestr(name, content)
    return out.getvalue()


def rebuilt(data: bytes, drop=(), add=None, replace=None,
            compression=zipfile.ZIP_DEFLATED) -> bytes:
    members = {k: v for k, v in members_of(data).items() if k not in drop}
    members.update(replace or {})
    members.update(add or {})
    return make_archive(members, compression)


def with_json(data: bytes, member: str, change) -> bytes:
    """change(parsed) returns the new value (or mutates it and returns None)."""
    value = json.loads(members_of(data)[member])
    new = change(value)
    return rebuilt(data, replace={member: json.dumps(value if new is None else new).encode()})


def with_config(data: bytes, **changes) -> bytes:
    return with_json(data, "config.json", lambda c: c.update(changes))


def npz_bytes(arrays: dict, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=allow_pickle, **arrays)
    return buf.getvalue()


def weights_of(data: bytes) -> dict[str, np.ndarray]:
    """The weights of a checkpoint of either version, read by NumPy or safetensors itself."""
    members = members_of(data)
    if "weights.safetensors" in members:
        from safetensors.numpy import load

        return load(members["weights.safetensors"])
    with np.load(io.BytesIO(members_of(data)["weights.npz"]), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def with_weights(data: bytes, change) -> bytes:
    weights = weights_of(data)
    change(weights)
    return rebuilt(data, replace={"weights.npz": npz_bytes(weights)})


def declare_size(data: bytes, name: str, size: int) -> bytes:
    """Rewrite the uncompressed size that the central directory declares for one member."""
    buf = bytearray(data)
    eocd = buf.rfind(b"PK\x05\x06")
    count, _, offset = struct.unpack_from("<HII", buf, eocd + 10)
    for _ in range(count):
        assert buf[offset:offset + 4] == b"PK\x01\x02"
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", buf, offset + 28)
        if buf[offset + 46:offset + 46 + name_len].decode() == name:
            struct.pack_into("<I", buf, offset + 24, size)
            return bytes(buf)
        offset += 46 + name_len + extra_len + comment_len
    raise AssertionError(f"{name} not in archive")


def assert_sentence(message: str) -> None:
    """A message for a person: one line, a capitalised sentence, no traceback or repr noise."""
    assert isinstance(message, str) and 15 < len(message) < 600, message
    assert message[0].isupper() or message[0] == "'", message  # may open with a file's name
    assert "\n" not in message, message
    for noise in ("Traceback", 'File "', "<class", "object at 0x", "Error:"):
        assert noise not in message, message


def assert_refused(source, *fragments) -> str:
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(source)
    message = str(info.value)
    assert_sentence(message)
    for fragment in fragments:
        assert fragment.lower() in message.lower(), (fragment, message)
    return message


# ============================================================================= fixtures
@pytest.fixture(scope="module")
def tokenizers():
    source = BPEmbTokenizer.train([s for s, _ in PAIRS], 48)  # the dates task has 29 formats (issue 24)
    target = BPEmbTokenizer.train([t for _, t in PAIRS], 40)
    joint = BPEmbTokenizer.train([x for pair in PAIRS for x in pair], 64)
    return source, target, joint


VARIANTS = {
    "post_ln_sinusoidal": dict(),
    "shared_embeddings_tied_output": dict(share_embeddings=True, tie_output=True),
    "pre_ln_learned_positions": dict(norm_first=True, positional="learned", num_heads=4,
                                     num_encoder_layers=2, num_decoder_layers=2),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def saved(request, tokenizers, tmp_path_factory):
    """(original OpenedModel, path of its saved file, that file loaded) for each model variant."""
    source, target, joint = tokenizers
    options = VARIANTS[request.param]
    if options.get("share_embeddings"):
        source = target = joint  # one matrix needs one vocabulary
    config = tiny_config(source, target, **options)
    model = randomized_model(config, seed=len(request.param))
    metadata = {"task": "dates", "note": "ünïcödé — kept", "held_out": {"exact_match": 0.5},
                "history": {"loss": [2.5, 1.25]}}
    path = save_checkpoint(tmp_path_factory.mktemp(request.param) / "sub" / "tiny.ckpt",
                           model, source, target, metadata)
    return OpenedModel(config, model, source, target, metadata), path, load_checkpoint(path)


@pytest.fixture(scope="module")
def valid_model(tokenizers):
    """(model, source tokenizer, target tokenizer, its checkpoint's bytes): small and valid, of
    version 1 (weights.npz), which every old file is and which is still read."""
    source, target, _ = tokenizers
    model = randomized_model(tiny_config(source, target), seed=1)
    return model, source, target, checkpoint_bytes(model, source, target, {"task": "dates"},
                                                   version=1)


@pytest.fixture(scope="module")
def valid(valid_model) -> bytes:
    """A small valid checkpoint's bytes, the base every malformed archive below is made from."""
    return valid_model[3]


# ============================================================================= round trips
def test_save_then_load_gives_identical_logits_and_weights(saved):
    original, _, loaded = saved
    assert loaded.config == original.config
    expected = logits_of(original.model, original.source_tokenizer, original.target_tokenizer)
    got = logits_of(loaded.model, loaded.source_tokenizer, loaded.target_tokenizer)
    assert np.abs(expected).max() > 0.1  # the comparison below is not between near-zero arrays
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    before, after = weight_arrays(original.model), weight_arrays(loaded.model)
    assert sorted(before) == sorted(after)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    # The comparison can fail: a freshly initialised model of the same config differs.
    fresh = Transformer(original.config).build_weights()
    assert not np.allclose(logits_of(fresh, loaded.source_tokenizer, loaded.target_tokenizer),
                           expected, atol=1e-3)


def test_save_then_load_gives_identical_attention_and_translation(saved):
    original, _, loaded = saved
    for source in SOURCES[:2]:
        a, b = original.attention(source), loaded.attention(source)
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], np.ndarray):
                assert a[key].dtype == b[key].dtype, key
                np.testing.assert_allclose(b[key], a[key], rtol=0, atol=1e-6, err_msg=key)
            else:
                assert b[key] == a[key], key
        forced = TARGETS[0]
        a, b = original.attention(source, target=forced), loaded.attention(source, target=forced)
        for kind in KIND_NAMES:
            np.testing.assert_allclose(b[kind], a[kind], rtol=0, atol=1e-6, err_msg=kind)
        da, db = original.translate(source), loaded.translate(source)
        assert (db.token_ids, db.tokens, db.text) == (da.token_ids, da.tokens, da.text)
        np.testing.assert_allclose(db.cross_attention(), da.cross_attention(), rtol=0, atol=1e-6)


def test_tokenizers_and_metadata_round_trip(saved):
    original, _, loaded = saved
    for side in ("source_tokenizer", "target_tokenizer"):
        before, after = getattr(original, side), getattr(loaded, side)
        assert after.spec() == before.spec()
        assert after.model_bytes == before.model_bytes
        for text in SOURCES + TARGETS:
            assert after.encode(text, add_start=True, add_end=True) == \
                before.encode(text, add_start=True, add_end=True)
    assert loaded.metadata == original.metadata
    assert loaded.metadata["note"] == "ünïcödé — kept"
    assert loaded.name == "dates"


def test_shared_embeddings_and_tied_output_stay_shared(saved):
    original, path, loaded = saved
    keys = set(weights_of(path.read_bytes()))
    embeddings = sorted(k for k in keys if "token_embedding" in k)
    if original.config.share_embeddings:
        assert loaded.model.source_token_embedding is loaded.model.target_token_embedding
        assert len(embeddings) == 1, embeddings  # stored once, not twice
    else:
        assert len(embeddings) == 2, embeddings
    assert any("output_projection" in k for k in keys) == (not original.config.tie_output)
    assert any("position_embedding" in k for k in keys) == \
        (original.config.positional == "learned")
    assert any(k.startswith("decoder_norm") for k in keys) == original.config.norm_first


def test_load_from_path_bytes_and_binary_file_objects(valid_model, tmp_path):
    model, source_tokenizer, target_tokenizer, data = valid_model
    path = tmp_path / "tiny.ckpt"
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    expected = logits_of(model, source_tokenizer, target_tokenizer)
    with open(path, "rb") as handle:
        from_handle = load_checkpoint(handle)
    sources = {"str path": str(path), "Path": path, "bytes": data, "bytearray": bytearray(data),
               "memoryview": memoryview(data), "BytesIO": io.BytesIO(data)}
    loaded = {label: load_checkpoint(source) for label, source in sources.items()}
    loaded["open(path, 'rb')"] = from_handle
    for label, checkpoint in loaded.items():
        assert checkpoint.content_hash == digest, label
        got = logits_of(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6, err_msg=label)


def test_content_hash_follows_the_bytes(valid):
    first = hashlib.sha256(valid).hexdigest()  # what loading `valid` gives (tested above)
    changed = with_json(valid, "metadata.json", lambda m: m.update(name="renamed"))
    second = load_checkpoint(changed).content_hash
    assert second == hashlib.sha256(changed).hexdigest()
    assert second != first


def test_saving_is_reproducible_and_atomic(saved):
    original, path, _ = saved
    again = checkpoint_bytes(original.model, original.source_tokenizer, original.target_tokenizer,
                             original.metadata)
    assert again == path.read_bytes()  # same model, same bytes: the content hash is stable
    assert path.parent.name == "sub"  # save_checkpoint made the missing folder
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.ckpt"]  # no .tmp left over
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist() == list(MEMBERS)
        assert json.loads(archive.read("format.json")) == {
            "format": "attention-explorer-checkpoint", "version": 2}
        # the weights are stored, the small members deflated
        methods = {i.filename: i.compress_type for i in archive.infolist()}
        assert methods.pop("weights.safetensors") == zipfile.ZIP_STORED
        assert set(methods.values()) == {zipfile.ZIP_DEFLATED}


def test_saving_refuses_tokenizers_that_do_not_match(tokenizers, tmp_path):
    source, target, _ = tokenizers
    model = Transformer(tiny_config(source, target)).build_weights()
    with pytest.raises(CheckpointError, match="tokenizers do not match"):
        save_checkpoint(tmp_path / "x.ckpt", model, target, source)  # swapped
    assert not list(tmp_path.iterdir())


# ============================================================================= refusals
def test_not_a_zip_archive(tmp_path):
    rng = np.random.default_rng(0)
    assert_refused(rng.bytes(4096), "not a ZIP archive")
    text = tmp_path / "notes.ckpt"
    text.write_text("these are my notes, not a checkpoint\n" * 50)
    assert_refused(text, "not a ZIP archive")


def test_empty_file(tmp_path):
    empty = tmp_path / "empty.ckpt"
    empty.write_bytes(b"")
    assert_refused(empty, "empty")
    assert_refused(b"", "empty")
    assert_refused(io.BytesIO(b""), "empty")


def test_no_such_file_and_unreadable_sources(tmp_path):
    assert_refused(tmp_path / "missing.ckpt", "No file at", "missing.ckpt", "(the checkpoint)")
    # a folder is not a checkpoint file; load_checkpoint opens a folder as a Hugging Face model
    with pytest.raises(CheckpointError, match=r"\(the checkpoint\) is a folder; give a model's file"):
        checkpoint_module.read_checkpoint(tmp_path)
    assert_refused(tmp_path, "folder", "holds no config.json")
    assert_refused(12345, "Cannot read the checkpoint from a int")
    assert_refused(io.StringIO("text"), "binary mode")


def test_truncated_file(valid, tmp_path):
    half = tmp_path / "half.ckpt"
    half.write_bytes(valid[:len(valid) // 2])
    assert_refused(half, "truncated")
    assert_refused(valid[:-30], "truncated")  # the central directory's end cut off


def test_damaged_member_fails_its_checksum(valid):
    stored = rebuilt(valid, compression=zipfile.ZIP_STORED)
    load_checkpoint(stored)  # stored (uncompressed) members are fine as such
    position = stored.index(b'"task"')  # inside metadata.json's bytes
    damaged = stored[:position] + b'"tusk"' + stored[position + 6:]
    assert_refused(damaged, "'metadata.json'", "damaged")


def test_member_smaller_than_declared_reads_as_damaged(valid):
    # A central directory that under-states a member's size must not yield a silently cut member.
    assert_refused(declare_size(valid, "weights.npz", 1000), "'weights.npz'", "damaged")


def test_corrupt_deflate_stream_is_refused(valid):
    with zipfile.ZipFile(io.BytesIO(valid)) as archive:
        info = archive.getinfo("weights.npz")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    damaged = bytearray(valid)
    for i in range(start + 10, start + 200):
        damaged[i] ^= 0xFF
    assert_refused(bytes(damaged), "'weights.npz'", "damaged")


@pytest.mark.parametrize("name", MEMBERS_V1)
def test_missing_member(valid, name):
    assert_refused(rebuilt(valid, drop=[name]), "missing", repr(name))


@pytest.mark.parametrize("extra", ["notes.txt", "model.weights.h5", "../../escape.py",
                                   "weights/weights.npz"])
def test_unexpected_extra_member(valid, extra):
    assert_refused(rebuilt(valid, add={extra: b"print('hi')"}), "unexpected file", repr(extra))


def test_same_member_twice(valid):
    members = list(members_of(valid).items()) + [("config.json", b"{}")]
    assert_refused(make_archive(members), "same file twice")


@pytest.mark.parametrize("member", ["format.json", "config.json", "metadata.json",
                                    "source_tokenizer.json", "target_tokenizer.json"])
def test_json_member_that_is_not_json(valid, member):
    assert_refused(rebuilt(valid, replace={member: b"{not json"}), repr(member), "not valid JSON")
    assert_refused(rebuilt(valid, replace={member: b"\xff\xfe\x00binary"}), "not valid JSON")


def test_deeply_nested_json_is_refused_not_a_recursion_crash(valid):
    deep = b"[" * 200_000 + b"]" * 200_000
    assert_refused(rebuilt(valid, replace={"metadata.json": deep}), "'metadata.json'",
                   "not valid JSON")


@pytest.mark.parametrize("fmt", [
    {"format": "keras", "version": 1},
    {"format": "attention-explorer-checkpoint", "version": 3},
    {"format": "attention-explorer-checkpoint", "version": "1"},
    {"format": "attention-explorer-checkpoint", "version": True},
    {"format": "attention-explorer-checkpoint"},
    {"format": "attention-explorer-checkpoint", "version": 1, "loader": "pickle"},
    ["attention-explorer-checkpoint", 1],
])
def test_format_json_wrong(valid, fmt):
    bad = rebuilt(valid, replace={"format.json": json.dumps(fmt).encode()})
    assert_refused(bad, "not an Attention Explorer checkpoint", "version 1")


@pytest.mark.parametrize("metadata", [[1, 2, 3], "a string", 42, None])
def test_metadata_not_an_object(valid, metadata):
    bad = rebuilt(valid, replace={"metadata.json": json.dumps(metadata).encode()})
    assert_refused(bad, "metadata.json", "JSON object")


@pytest.mark.parametrize("changes, fragments", [
    ({"activaton": "gelu"}, ["unknown config field", "'activaton'"]),
    ({"d_model": "16"}, ["d_model", "int", "str"]),
    ({"num_heads": 2.0}, ["num_heads", "int", "float"]),
    ({"num_heads": True}, ["num_heads", "int", "bool"]),
    ({"tie_output": "yes"}, ["tie_output", "bool"]),
    ({"num_heads": 3, "head_dim": None}, ["d_model (16) must be divisible by num_heads (3)"]),
    ({"dff": -32}, ["dff must be positive"]),
    ({"dropout_rate": 1.5}, ["dropout_rate"]),
    ({"positional": "rotary"}, ["positional must be one of"]),
], ids=["unknown_field", "d_model_str", "num_heads_float", "num_heads_bool", "tie_output_str",
        "not_divisible", "negative_dff", "dropout_range", "positional_kind"])
def test_config_unknown_mistyped_or_invalid(valid, changes, fragments):
    assert_refused(with_config(valid, **changes), "model settings are invalid", *fragments)


def test_config_not_an_object(valid):
    bad = rebuilt(valid, replace={"config.json": b"[16, 2]"})
    assert_refused(bad, "model settings are invalid", "JSON object")


def test_weight_shapes_that_do_not_match_the_config(valid):
    # The config says d_model 32, every stored weight is 16 wide.
    vocab = json.loads(members_of(valid)["config.json"])["src_vocab_size"]
    assert_refused(with_config(valid, d_model=32), "source_token_embedding", "has shape",
                   f"({vocab}, 16) in the checkpoint but ({vocab}, 32) in the model its config")


def test_config_with_more_layers_than_weights(valid):
    assert_refused(with_config(valid, num_encoder_layers=2), "no value for the weight",
                   "encoder_layer_1")


def test_missing_weight(valid):
    name = "decoder_layer_0/cross_attention/value/kernel"
    assert name in weights_of(valid)
    assert_refused(with_weights(valid, lambda w: w.pop(name)), "no value for the weight", name)


def test_extra_weight(valid):
    def add(weights):
        weights["encoder_layer_7/backdoor/kernel"] = np.zeros((16, 16), np.float32)
    assert_refused(with_weights(valid, add), "encoder_layer_7/backdoor/kernel",
                   "this model does not have")


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32])
def test_weight_that_is_not_float32(valid, dtype):
    name = "output_projection/bias"

    def cast(weights):
        weights[name] = weights[name].astype(dtype)
    message = assert_refused(with_weights(valid, cast), name, "expected float32")
    assert str(np.dtype(dtype)) in message


def test_weights_member_not_an_npz(valid):
    assert_refused(rebuilt(valid, replace={"weights.npz": b"PK\x03\x04 not really"}),
                   "not a NumPy .npz archive")


def test_weights_member_that_is_a_single_npy_array(valid):
    buf = io.BytesIO()
    np.save(buf, np.zeros(16, np.float32))
    assert_refused(rebuilt(valid, replace={"weights.npz": buf.getvalue()}), "weights")


@pytest.mark.parametrize("field, delta", [("src_vocab_size", 1), ("tgt_vocab_size", -1)])
def test_vocabulary_size_does_not_match_the_tokenizer(valid, field, delta):
    config = json.loads(members_of(valid)["config.json"])
    bad = with_config(valid, **{field: config[field] + delta})
    assert_refused(bad, "tokenizers do not match the model", field)


def test_special_ids_do_not_match_the_tokenizer(valid):
    config = json.loads(members_of(valid)["config.json"])
    bad = with_config(valid, start_id=config["end_id"] + 1)
    assert_refused(bad, "tokenizers do not match the model", "start_id")


@pytest.mark.parametrize("side", ["source", "target"])
def test_tokenizer_model_bytes_garbage(valid, side):
    garbage = np.random.default_rng(3).bytes(2000)
    bad = rebuilt(valid, replace={f"{side}_tokenizer.model": garbage})
    assert_refused(bad, f"{side} tokenizer is invalid", "SentencePiece")
    assert_refused(rebuilt(valid, replace={f"{side}_tokenizer.model": b""}),
                   f"{side} tokenizer is invalid")


def test_tokenizer_spec_that_contradicts_its_model(valid):
    bad = with_json(valid, "target_tokenizer.json", lambda s: s.update(vocab_size=99))
    assert_refused(bad, "target tokenizer is invalid", "vocab_size")
    bad = with_json(valid, "source_tokenizer.json", lambda s: s.update(module="os"))
    assert_refused(bad, "source tokenizer is invalid", "unknown field")
    bad = rebuilt(valid, replace={"source_tokenizer.json": b"[]"})
    assert_refused(bad, "source tokenizer is invalid")


# ----------------------------------------------------------------------------- sizes
def test_file_larger_than_the_limit(valid, tmp_path, monkeypatch):
    path = tmp_path / "big.ckpt"
    path.write_bytes(valid)
    load_checkpoint(path)  # fits under the real limit
    monkeypatch.setattr(checkpoint_module, "MAX_FILE_BYTES", len(valid) - 1)
    for source in (path, str(path), valid, io.BytesIO(valid)):
        assert_refused(source, "limit")
    with open(path, "rb") as handle:
        assert_refused(handle, "limit")


def test_member_declaring_more_than_the_member_limit(valid, monkeypatch):
    # Random bytes do not compress: only the declared size can trigger this refusal.
    noise = np.random.default_rng(5).bytes(3 * 2**20)
    bad = rebuilt(valid, replace={"weights.npz": noise})
    assert_refused(bad, "not a NumPy .npz archive")  # under the real limit it is read, and refused
    monkeypatch.setattr(checkpoint_module, "MAX_MEMBER_BYTES", 2 * 2**20)
    assert_refused(bad, "'weights.npz'", "3.0 MB", "decompression bomb")


def test_member_declaring_gigabytes_is_refused_before_reading(valid):
    # Declared sizes as a bomb would declare them, without building gigabytes: 1.5 GB trips the
    # 1 GB per-member limit, 3 GB the 2 GB total.
    assert_refused(declare_size(valid, "weights.npz", 3 * 2**29), "'weights.npz'", "1536.0 MB",
                   "decompression bomb")
    assert_refused(declare_size(valid, "weights.npz", 3 * 2**30), "unpacks to 3072 MB",
                   "limit is 2048 MB")


def test_highly_compressed_member_is_refused_by_the_ratio_rule(valid, monkeypatch):
    zeros = bytes(50 * 2**20)  # 50 MB of zeros deflates to about 50 KB: a ratio near 1000
    bomb = rebuilt(valid, replace={"weights.npz": zeros})
    assert len(bomb) < len(valid) + 200_000
    assert 50 * 2**20 < checkpoint_module.MAX_MEMBER_BYTES  # the size limit alone would allow it
    assert_refused(bomb, "'weights.npz'", "50.0 MB", "decompression bomb")
    # It is the ratio rule that refused it: lifted, the member is read (and found to be no .npz).
    monkeypatch.setattr(limits, "MAX_COMPRESSION_RATIO", 10**6)  # where the rule reads it
    assert_refused(bomb, "not a NumPy .npz archive")


def test_oversized_json_member(valid):
    huge = b"{" + b" " * (2 * 2**20) + b"}"  # valid JSON, 2 MB: over the 1 MB JSON limit
    assert_refused(rebuilt(valid, replace={"metadata.json": huge}), "'metadata.json'",
                   "decompression bomb")


@pytest.mark.parametrize("field, value, words", [
    ("max_len", 10**15, ("max_len",)),
    ("dff", 10**9, ("weights", "do not belong together")),
    ("num_encoder_layers", 3000, ("num_encoder_layers",)),
    ("d_model", 4096, ("weights",)),
])
def test_config_declaring_a_huge_model_is_refused(valid, field, value, words):
    # Refused from the file's own numbers, before anything of that size is allocated.
    assert_refused(with_config(valid, **{field: value}), *words)


# ============================================================================= no code runs
class Payload:
    """Unpickling this creates the marker file (pickle stores pathlib.Path.touch by name)."""

    def __init__(self, marker):
        self.marker = pathlib.Path(marker)

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


def test_pickle_payload_is_real(tmp_path):
    """The payload used below does run when unpickled (so its marker's absence means something)."""
    marker = tmp_path / "proof"
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()


def test_keras_file_with_a_lambda_layer_is_refused_and_runs_nothing(tmp_path, monkeypatch):
    build, keras_dir, ours = (tmp_path / d for d in ("build", "keras", "ours"))
    for d in (build, keras_dir, ours):
        d.mkdir()
    # The Lambda's code creates MARKER in the current folder. Written with eval so that Keras
    # serializes a plain lambda (its bytecode) with nothing from this test module in it.
    function = eval("lambda x: (__import__('pathlib').Path('MARKER').touch(), x)[1]")
    monkeypatch.chdir(build)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Lambda(function)(inputs))
    evil = tmp_path / "model.keras"
    model.save(evil)
    evil_ckpt = tmp_path / "model.ckpt"
    evil_ckpt.write_bytes(evil.read_bytes())

    # The file really is dangerous: Keras with safe_mode=False runs the Lambda while loading.
    monkeypatch.chdir(keras_dir)
    keras.saving.load_model(evil, safe_mode=False)
    assert (keras_dir / "MARKER").exists()

    monkeypatch.chdir(ours)
    for source in (evil, evil_ckpt, evil.read_bytes()):
        assert_refused(source, "unexpected file")
    assert not (ours / "MARKER").exists()
    assert list(ours.iterdir()) == []


KERAS_STYLE_CONFIGS = {
    "module_class_name": lambda m, c: {"module": "os", "class_name": "system",
                                       "config": {"command": f"touch {m}"},
                                       "registered_name": "os>system"},
    "dunder_class": lambda m, c: {**c, "__class__": "os.system", "command": f"touch {m}"},
    "registered_name": lambda m, c: {**c, "registered_name": "builtins>exec",
                                     "config": {"source": f"open({str(m)!r}, 'w')"}},
    "keras_lambda": lambda m, c: {**c, "class_name": "Lambda", "module": "keras.layers",
                                  "config": {"function": {"class_name": "__lambda__",
                                                          "config": {"code": "..."}}}},
}


@pytest.mark.parametrize("kind", list(KERAS_STYLE_CONFIGS))
def test_config_naming_code_is_refused_as_unknown_field(valid, tmp_path, monkeypatch, kind):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    config = json.loads(members_of(valid)["config.json"])
    evil = KERAS_STYLE_CONFIGS[kind](marker, config)
    bad = rebuilt(valid, replace={"config.json": json.dumps(evil).encode()})
    assert_refused(bad, "unknown config field")
    assert not marker.exists()
    assert list(tmp_path.iterdir()) == []


def test_metadata_naming_code_is_only_data(valid, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    evil = {"module": "os", "class_name": "system", "config": {"command": f"touch {marker}"},
            "__class__": "os.system", "registered_name": "os>system"}
    checkpoint = load_checkpoint(
        rebuilt(valid, replace={"metadata.json": json.dumps(evil).encode()}))
    assert checkpoint.metadata == evil  # read back as plain strings, never resolved
    assert not marker.exists()


@pytest.mark.parametrize("where", ["replacing_a_weight", "extra_entry"])
def test_weights_npz_with_a_pickled_object_array_is_refused(valid, tmp_path, where):
    marker = tmp_path / "MARKER"
    proof = tmp_path / "proof"
    weights = weights_of(valid)
    name = "output_projection/bias" if where == "replacing_a_weight" else "zz_payload"

    # The same construction with another marker really runs when NumPy may unpickle.
    demo = npz_bytes({**weights, name: np.array([Payload(proof)], dtype=object)},
                     allow_pickle=True)
    with np.load(io.BytesIO(demo), allow_pickle=True) as npz:
        npz[name]
    assert proof.exists()

    evil = npz_bytes({**weights, name: np.array([Payload(marker)], dtype=object)},
                     allow_pickle=True)
    assert_refused(rebuilt(valid, replace={"weights.npz": evil}), name)
    assert not marker.exists()


def test_weights_member_that_is_a_pickle_is_refused(valid, tmp_path):
    marker = tmp_path / "MARKER"
    bad = rebuilt(valid, replace={"weights.npz": pickle.dumps(Payload(marker))})
    assert_refused(bad, "not a NumPy .npz archive")
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_pickle_renamed_to_ckpt_is_refused(tmp_path, protocol):
    marker = tmp_path / "MARKER"
    path = tmp_path / "model.ckpt"
    path.write_bytes(pickle.dumps({"model": Payload(marker)}, protocol=protocol))
    assert_refused(path, "not a ZIP archive")
    assert_refused(path.read_bytes(), "not a ZIP archive")
    with open(path, "rb") as handle:
        assert_refused(handle, "not a ZIP archive")
    assert not marker.exists()


def test_pickle_prepended_to_a_valid_archive_never_runs(valid, tmp_path):
    # ZIP readers accept data before the archive; whatever load_checkpoint makes of such a
    # polyglot file, it must not unpickle the front of it.
    marker = tmp_path / "MARKER"
    polyglot = pickle.dumps(Payload(marker)) + valid
    try:
        checkpoint = load_checkpoint(polyglot)
    except CheckpointError as err:
        assert_sentence(str(err))
    else:
        assert checkpoint.content_hash == hashlib.sha256(polyglot).hexdigest()
    assert not marker.exists()


# ============================================================================= issue 15: bounded reading
# Files written byte by byte (tests/fuzz_cases.py's ZIP writer sets every header field), each
# loaded in this process; tests/checkpoint/test_fuzz.py loads many more in child processes under limits.


def entries_of(data: bytes, method: int = 8) -> list[Entry]:
    return [entry(name, content, method) for name, content in members_of(data).items()]


def npz_entries(data: bytes) -> list[Entry]:
    with zipfile.ZipFile(io.BytesIO(members_of(data)["weights.npz"])) as npz:
        return [entry(name, npz.read(name), 0, version=45) for name in npz.namelist()]


def with_npz_entries(data: bytes, entries: list[Entry]) -> bytes:
    return rebuilt(data, replace={"weights.npz": write_zip(entries)})


def test_limits_are_stated_once_and_importable_from_checkpoint():
    for name in ("MAX_FILE_BYTES", "MAX_MEMBER_BYTES", "MAX_TOTAL_BYTES", "MAX_JSON_BYTES",
                 "MAX_COMPRESSION_RATIO", "MAX_LAYERS", "MAX_POSITIONS"):
        assert getattr(checkpoint_module, name) == getattr(limits, name), name
    assert limits.load_budget(0) == limits.LOAD_BUDGET_FLOOR
    assert limits.load_budget(10 * 2**20) == limits.LOAD_BUDGET_FLOOR + 30 * 2**20
    assert limits.load_budget(10**12) == limits.MAX_TOTAL_BYTES
    assert limits.MIN_POSITIONS <= limits.PROBE_LENGTH <= limits.MAX_POSITIONS
    assert limits.MAX_DECODE_STEPS > 0


# ----------------------------------------------------------------------------- archive level
def test_member_whose_header_lies_about_its_size_is_never_unpacked_past_it(valid):
    entries = entries_of(valid)
    declared = entries[-1].size  # weights.npz: its true size, ~60 KB
    entries[-1].payload = zeros_deflated(64)  # but 64 MB of zeros follow
    bomb = write_zip(entries)
    tracemalloc.start()
    try:
        assert_refused(bomb, "'weights.npz'", f"more than the {declared:,} bytes",
                       "decompression bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak  # zipfile's read(limit + 1) made 64 MB here


@pytest.mark.parametrize("method, version", [(zipfile.ZIP_BZIP2, "4.6"), (zipfile.ZIP_LZMA, "6.3")])
def test_bzip2_and_lzma_members_are_refused_before_unpacking(valid, method, version):
    bad = rebuilt(valid, compression=method)
    assert_refused(bad, "needs ZIP version", version, "stored or deflated")
    entries = entries_of(valid)
    entries[0].method, entries[0].version = method, 20  # the method alone, version claims 2.0
    assert_refused(write_zip(entries), "format.json", "only stored and deflated")


def test_unsupported_version_needed_to_extract(valid):
    entries = entries_of(valid)
    entries[1].version = 99
    assert_refused(write_zip(entries), "version 9.9", "'config.json'")


def test_member_name_that_is_not_utf8(valid):
    entries = entries_of(valid)
    entries[3].name = entries[3].local_name = b"source\xff\xfe.json"
    entries[3].flags = 0x800
    assert_refused(write_zip(entries), "not valid UTF-8")


def test_zip64_records_and_absurd_offsets_are_refused(valid):
    (_, data, _), = fuzz_cases.generate(0, only="zip64_absurd_offsets", base=valid)
    assert_refused(data, "zip64")
    entries = entries_of(valid)
    entries[-1].size = entries[-1].csize = 0xFFFFFFFF
    entries[-1].extra = struct.pack("<HHQQ", 1, 16, 2**62, 2**61)
    assert_refused(write_zip(entries), "zip64", "weights.npz")
    entries = entries_of(valid)
    assert_refused(write_zip(entries, end_patch=dict(cd_offset=2**31)), "damaged",
                   "ZIP directory")


def test_member_count_and_directory_size_are_capped(valid, monkeypatch):
    many = dict(members_of(valid), **{f"x{i}.json": b"{}" for i in range(limits.MAX_MEMBERS)})
    assert_refused(make_archive(many), f"at most {limits.MAX_MEMBERS}")
    big = fuzz_cases.huge_directory(valid, 60_000, 60_001)  # 60,001 entries, within zip's count
    assert_refused(big, "60,001 files")
    monkeypatch.setattr(limits, "MAX_MEMBERS", 10**6)
    assert_refused(big, "ZIP directory of", f"at most {limits.MAX_DIRECTORY_BYTES:,}")


def test_overlapping_members_are_refused(valid):
    entries = entries_of(valid, method=0)
    entries[0].csize = entries[0].local_csize = len(entries[0].payload) + 40  # runs into the next
    entries[0].size = entries[0].local_size = entries[0].csize
    assert_refused(write_zip(entries), "overlapping files", "decompression bomb")


def test_encrypted_member_checksum_and_declared_sizes(valid):
    entries = entries_of(valid)
    entries[1].flags = 1
    assert_refused(write_zip(entries), "encrypted", "'config.json'")
    entries = entries_of(valid)
    entries[1].crc ^= 1
    assert_refused(write_zip(entries), "'config.json'", "checksum")
    entries = entries_of(valid)
    entries[-1].size = entries[-1].local_size = entries[-1].size + 10
    assert_refused(write_zip(entries), "'weights.npz'", "truncated")
    entries = entries_of(valid)
    entries[-1].local_size = 5
    assert_refused(write_zip(entries), "local header of 'weights.npz'")


def test_data_before_the_archive_is_refused(valid):
    assert_refused(b"#!/bin/sh\n" + valid, "not where its end record says")


def test_stored_members_and_data_descriptors_load(valid, valid_model):
    model, source_tokenizer, target_tokenizer, _ = valid_model
    expected = logits_of(model, source_tokenizer, target_tokenizer)
    stored = write_zip(entries_of(valid, method=0))
    described = write_zip([entry(n, c, flags=0x8, local_size=0, local_csize=0)
                           for n, c in members_of(valid).items()])
    for data in (stored, described):
        ckpt = load_checkpoint(data)
        got = logits_of(ckpt.model, ckpt.source_tokenizer, ckpt.target_tokenizer)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_load_budget_caps_what_a_small_file_may_unpack(valid, monkeypatch):
    load_checkpoint(valid)
    monkeypatch.setattr(limits, "LOAD_BUDGET_FLOOR", 0)
    monkeypatch.setattr(limits, "LOAD_BUDGET_PER_FILE_BYTE", 1)  # members unpack to > the file
    assert_refused(valid, "may unpack to", "decompression bomb")


# ----------------------------------------------------------------------------- NPZ level
def test_unknown_weight_is_refused_from_the_directory_before_its_data(valid):
    entries = npz_entries(valid)
    # Its data is a lying deflate bomb: reading it would say "unpacks to more than ...".
    entries.append(Entry(b"zz_unknown.npy", zeros_deflated(16), 8, 0, 1000, version=45))
    message = assert_refused(with_npz_entries(valid, entries), "'zz_unknown'",
                             "this model does not have")
    assert "unpacks" not in message


@pytest.mark.parametrize("name, content, words", [
    ("folder/", b"", ["folder", "only .npy arrays"]),
    ("notes.txt", b"hello", ["'notes.txt'", "not a NumPy .npy"]),
    ("output_projection/bias.npy", b"PK\x03\x04 nested archive" + bytes(200),
     ["'output_projection/bias'", "not a valid NumPy .npy"]),
    ("output_projection/bias.npy", np.random.default_rng(2).bytes(500),
     ["'output_projection/bias'", "not a valid NumPy .npy"]),
], ids=["directory", "not_npy", "nested_zip", "random_bytes"])
def test_npz_member_that_is_not_an_npy_array(valid, name, content, words):
    entries = [e for e in npz_entries(valid) if e.name != name.encode()]
    entries.append(entry(name, content, 0, version=45))
    assert_refused(with_npz_entries(valid, entries), *words)


BIAS = "output_projection/bias"


@pytest.mark.parametrize("header, data, version, words", [
    ({"descr": ">f4", "fortran_order": False, "shape": None}, None, (1, 0), [">f4", "float32"]),
    ({"descr": "<f4", "fortran_order": False, "shape": None}, None, (3, 0), ["version 3.0"]),
    ({"descr": "<f4", "fortran_order": False, "shape": (-1,)}, b"", (1, 0), ["invalid .npy"]),
    ({"descr": "<f4", "fortran_order": 1, "shape": None}, None, (1, 0), ["not a valid"]),
    ({"descr": "<f4", "fortran_order": False, "shape": (2**40,)}, None, (1, 0),
     ["has shape (1099511627776,)", "in the model its config"]),
    ({"descr": "<f4", "fortran_order": False, "shape": None}, b"\x00" * 4, (1, 0),
     ["bytes of data", "float32 values"]),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': __import__('os')}", b"",
     (1, 0), ["not a valid"]),
], ids=["big_endian", "version_3", "negative_dim", "order_not_bool", "huge_shape", "short_data",
        "code_in_header"])
def test_npy_header_checked_before_its_data(valid, header, data, version, words):
    weights = weights_of(valid)
    if isinstance(header, dict) and header["shape"] is None:
        header["shape"] = weights[BIAS].shape
    if data is None:
        data = weights[BIAS].astype("<f4").tobytes()
    entries = [e for e in npz_entries(valid) if e.name != f"{BIAS}.npy".encode()]
    entries.append(entry(f"{BIAS}.npy", npy_raw(header, data, version), 0, version=45))
    assert_refused(with_npz_entries(valid, entries), *words)


def test_compressed_and_fortran_order_npz_load_the_same_weights(valid, valid_model):
    model = valid_model[0]
    weights = weights_of(valid)
    name = "encoder_layer_0/feedforward/intermediate/kernel"
    buf = io.BytesIO()
    np.savez_compressed(buf, **{**weights, name: np.asfortranarray(weights[name])})
    ckpt = load_checkpoint(rebuilt(valid, replace={"weights.npz": buf.getvalue()}))
    before, after = weight_arrays(model), weight_arrays(ckpt.model)
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)


def test_deflated_weight_declaring_gigabytes_is_refused_without_allocating(valid):
    entries = []
    with zipfile.ZipFile(io.BytesIO(members_of(valid)["weights.npz"])) as npz:
        for name in npz.namelist():
            entries.append(entry(name, npz.read(name), 8, version=45))
    entries[0].size = entries[0].local_size = 3 * 2**29
    tracemalloc.start()
    try:
        assert_refused(with_npz_entries(valid, entries), "1536.0 MB", "decompression bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak


# ----------------------------------------------------------------------------- JSON level
@pytest.mark.parametrize("member", ["format.json", "config.json", "metadata.json",
                                    "source_tokenizer.json", "target_tokenizer.json"])
def test_5000_digit_integer_in_any_json_member(valid, member):
    text = members_of(valid)[member].decode()
    text = text[:text.rindex("}")] + ', "zz": ' + "9" * 5000 + "}"
    message = assert_refused(rebuilt(valid, replace={member: text.encode()}), repr(member),
                             "20 digits")
    assert "model settings are invalid" not in message  # said once, not wrapped twice


def test_json_nesting_depth_is_capped(valid):
    def nested(depth):
        return json.dumps({"deep": json.loads("[" * (depth - 1) + "]" * (depth - 1))}).encode()
    load_checkpoint(rebuilt(valid, replace={"metadata.json": nested(limits.MAX_JSON_DEPTH)}))
    assert_refused(rebuilt(valid, replace={"metadata.json": nested(limits.MAX_JSON_DEPTH + 1)}),
                   "'metadata.json'", f"more than {limits.MAX_JSON_DEPTH} levels")


def test_lone_surrogates_in_settings_never_leave_the_loader(valid):
    bad = with_json(valid, "config.json", lambda c: c.update(positional="\ud800"))
    message = assert_refused(bad, "positional")
    message.encode("utf-8")  # printable anywhere: the surrogate was replaced


# ----------------------------------------------------------------------------- metadata schema
GOOD_METADATA = {
    "name": "dates", "task": "dates", "seed": 3, "epochs": 2, "command": "python -m x",
    "held_out": {"exact_match": 0.5, "token_accuracy": 1, "num_examples": 10},
    "history": {"loss": [2.0, 1.0]}, "examples": ["5 march 2021"], "lr_scale": 0.4,
    "source": {"model": "Helsinki-NLP/opus-mt-en-de"}, "recipe": "convert", "unknown": [1, {}],
}


def test_good_metadata_is_kept_exactly():
    cleaned, warnings = clean_metadata(json.loads(json.dumps(GOOD_METADATA)))
    assert cleaned == GOOD_METADATA and warnings == []


@pytest.mark.parametrize("field, value", [
    ("held_out", [1, 2]), ("held_out", {"exact_match": "all"}), ("held_out", {"exact_match": 2}),
    ("held_out", {"num_examples": -1}), ("seed", -1), ("seed", 2**64), ("seed", 1.5),
    ("seed", "zero"), ("seed", True), ("name", ["a"]), ("task", {"t": 1}), ("command", 42),
    ("history", [1, 2]), ("history", {"loss": "falling"}), ("history", {"loss": [1, "x"]}),
    ("examples", [1, 2]), ("examples", "one"), ("examples", ["x" * 5000]),
    ("examples", ["x"] * 1000), ("epochs", -2), ("lr_scale", -0.1), ("batch_size", 0),
    ("epoch_metrics", {"loss": "x"}), ("source", 7), ("recipe", [1]),
])
def test_wrong_known_field_is_dropped_with_a_warning(field, value):
    cleaned, warnings = clean_metadata({**GOOD_METADATA, field: value})
    assert field not in cleaned
    assert {k: v for k, v in GOOD_METADATA.items() if k != field} == cleaned
    assert len(warnings) == 1 and repr(field) in warnings[0] and "dropped" in warnings[0]
    assert_sentence(warnings[0])


def test_surrogates_and_non_finite_numbers_are_repaired_with_a_warning():
    cleaned, warnings = clean_metadata({"name": "a\ud800b", "\udfff": {"x": "\ud83d"},
                                        "history": {"loss": [1.0, float("nan"), float("inf")]}})
    assert cleaned["name"] == "a\ufffdb"
    assert cleaned["\ufffd"] == {"x": "\ufffd"}
    assert cleaned["history"] == {"loss": [1.0, None, None]}
    json.dumps(cleaned, ensure_ascii=False).encode("utf-8")  # Streamlit can send it
    assert len(warnings) == 3 and all("\ufffd" in w or "NaN" in w for w in warnings)


def test_bad_metadata_loads_with_warnings_on_the_checkpoint(valid):
    metadata = {"name": "x\ud800", "seed": -1, "held_out": [1], "history": {"loss": "x"},
                "task": "dates"}
    ckpt = load_checkpoint(rebuilt(valid, replace={
        "metadata.json": json.dumps(metadata).encode()}))
    assert ckpt.metadata == {"name": "x\ufffd", "task": "dates"}
    assert ckpt.name == "x\ufffd"
    assert len(ckpt.metadata_warnings) == 4
    assert any("'seed'" in w for w in ckpt.metadata_warnings)
    assert load_checkpoint(valid).metadata_warnings == []


# ----------------------------------------------------------------------------- config at load
def test_config_too_small_to_run_or_with_too_many_heads(valid):
    for max_len in (1, 2, limits.MIN_POSITIONS - 1):
        assert_refused(with_config(valid, max_len=max_len), "max_len")
    ckpt = load_checkpoint(with_config(valid, max_len=limits.MIN_POSITIONS))
    assert ckpt.translate(SOURCES[0]).token_ids  # the smallest max_len runs
    ckpt.attention(SOURCES[0], details=True)
    assert_refused(with_config(valid, num_heads=limits.MAX_HEADS * 2, d_model=16),
                   "num_heads")


def test_weights_that_overflow_on_real_tokens_are_refused_at_load(valid, monkeypatch):
    def overflow(weights):  # finite, but x sqrt(d_model) overflows: only for this token
        weights["source_embedding/source_token_embedding/embeddings"][-1] = 3e38
    # The weights' bound (transformer.model.bounds) refuses it before anything is built ...
    assert_refused(with_weights(valid, overflow), "overflow float32", "source embedding",
                   "'source_embedding/source_token_embedding/embeddings'")
    # ... and the probe, the fast first check kept behind it, still would. (The old probe ran
    # <s> </s> only, which never reads the last row.)
    monkeypatch.setattr("transformer.model.bounds.check_weight_bounds", lambda *args: {})
    assert_refused(with_weights(valid, overflow), "NaN or infinite", "probe")


def test_probe_is_sentence_length_and_reaches_every_token(valid_model, monkeypatch):
    model = valid_model[0]
    seen = {}
    encode, decode = type(model).encode, type(model).decode

    def spy_encode(self, source_ids, *args, **kwargs):
        seen["source"] = np.asarray(source_ids)
        seen["encoded"] = out = encode(self, source_ids, *args, **kwargs)
        return out

    def spy_decode(self, target_ids, *args, **kwargs):
        seen["target"] = np.asarray(target_ids)
        seen["decoded"] = out = decode(self, target_ids, *args, **kwargs)
        return out

    monkeypatch.setattr(type(model), "encode", spy_encode)
    monkeypatch.setattr(type(model), "decode", spy_decode)
    checkpoint_module._check_finite(model)
    n = min(model.config.max_len, limits.PROBE_LENGTH)
    assert seen["source"].shape == seen["target"].shape == (limits.PROBE_ROWS, n)
    assert seen["source"][0].max() == model.config.src_vocab_size - 1  # the vocabulary's last
    assert seen["target"][0].max() == model.config.tgt_vocab_size - 1
    # every layer's output at every position is checked; the logits of the last position alone
    c = model.config
    assert seen["encoded"]["hidden_states"].shape[:3] == (c.num_encoder_layers + 1,
                                                          limits.PROBE_ROWS, n)
    assert seen["decoded"]["hidden_states"].shape[:3] == (c.num_decoder_layers + 1,
                                                          limits.PROBE_ROWS, n)
    assert seen["decoded"]["logits"].shape == (limits.PROBE_ROWS, 1, model.config.tgt_vocab_size)
    probed = np.asarray(seen["decoded"]["logits"])[:, 0]
    whole = model((seen["source"], seen["target"]))  # the last position's, as the full pass's
    np.testing.assert_allclose(probed, np.asarray(whole)[:, -1], rtol=1e-5, atol=1e-5)


def test_a_model_that_never_ends_stops_at_the_step_budget(monkeypatch):
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    done = ckpt.translate("Friday, March 5, 2021")
    assert done.stopped_by == "end" and ckpt.stopped_by_budget(done) is None
    # a budget shorter than the answer
    monkeypatch.setattr(ckpt, "budgets", replace(ckpt.budgets, decode_steps=3))
    cut = ckpt.translate("Friday, March 5, 2021")
    assert len(cut.token_ids) == 3 and cut.token_ids == done.token_ids[:3]
    assert cut.stopped_by == "length"
    assert ckpt.stopped_by_budget(cut) == "the step budget of one translation (3 tokens)"
    chosen = ckpt.translate("Friday, March 5, 2021", max_len=2)  # the user's own max_len
    assert chosen.stopped_by == "length" and ckpt.stopped_by_budget(chosen) is None


@pytest.mark.parametrize("beam_width", [1, 3])
def test_a_translation_stops_at_the_time_budget(monkeypatch, beam_width):
    """No step starts once the time budget is spent (the first always runs): with a budget of
    0 s the translation is its first token, and the page is told why."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    done = ckpt.translate("Friday, March 5, 2021", beam_width=beam_width)
    monkeypatch.setattr(ckpt, "budgets", replace(ckpt.budgets, decode_seconds=0.0))
    cut = ckpt.translate("Friday, March 5, 2021", beam_width=beam_width)
    assert cut.stopped_by == "time" and len(cut.token_ids) == 1
    if beam_width == 1:
        assert cut.token_ids == done.token_ids[:1]
    else:  # the best of the one-token hypotheses it has (finished ones first)
        assert len(cut.beam_steps) == 1 and all(len(h.token_ids) == 1 for h in cut.hypotheses)
    assert ckpt.stopped_by_budget(cut) == "the time budget of one translation (0 s)"
    unbounded = ckpt.translate("Friday, March 5, 2021", beam_width=beam_width, seconds=math.inf)
    assert unbounded.token_ids == done.token_ids and unbounded.stopped_by == "end"


# ============================================================================= typed text and maps
LONG_TEXT = ("Friday, March 5, 2021 or 2021-03-05; " * 271)[:10_000]  # a long paste


@pytest.fixture(scope="module")
def long_max_len(valid) -> bytes:
    """The valid checkpoint with a config that declares max_len 16,384, the most allowed (its
    positions are sinusoids: no table is stored)."""
    return with_config(valid, max_len=limits.MAX_POSITIONS)


def test_token_budget_bounds_the_maps_of_one_request_for_any_layers_and_heads():
    def config(**sizes):
        values = dict(src_vocab_size=16, tgt_vocab_size=16, d_model=256, num_heads=8, dff=32,
                      num_encoder_layers=6, num_decoder_layers=6, max_len=limits.MAX_POSITIONS)
        values.update(sizes)
        return TransformerConfig(**values)

    small = config(num_heads=2, num_encoder_layers=1, num_decoder_layers=1)
    assert limits.token_budget(small) == limits.MAX_INPUT_TOKENS == 512
    assert limits.token_budget(config(max_len=64)) == 64
    paper_base = config()  # 6 + 6 layers of 8 heads (and Marian's opus-mt models)
    budget = limits.token_budget(paper_base)
    assert 256 <= budget < limits.MAX_INPUT_TOKENS
    for c in (small, paper_base):
        for width in (1, 4, 8):
            n = limits.step_budget(c, width)
            assert limits.maps_copies(width) * limits.maps_bytes(c, n) <= limits.MAX_MAPS_BYTES
    assert limits.step_budget(paper_base, 8) < limits.step_budget(paper_base) == budget
    # (L_enc + 2 L_dec) H T^2 floats: 1 + 2 layers of 2 heads at T = 10,000 is 2.2 GB
    assert limits.maps_bytes(small, 10_000) == 4 * 3 * 2 * 10_000**2
    widest = config(num_heads=limits.MAX_HEADS, num_encoder_layers=limits.MAX_LAYERS,
                    num_decoder_layers=limits.MAX_LAYERS)
    assert limits.token_budget(widest) >= limits.MIN_POSITIONS  # <s>, a piece, </s> still fit


def test_typed_text_is_cut_to_the_length_budget_whatever_max_len_says(long_max_len):
    """A 10,000-character source and typed target on a checkpoint that allows max_len 16,384:
    every map is budget x budget, the cut is the tokenizer's (the first pieces kept, </s> last)
    and the sidebar's note names the budget."""
    from transformer.inference.ablation import output_ids_for
    from transformer.inference.teacher_forcing import teacher_forced

    ckpt = load_checkpoint(long_max_len)
    c, budget = ckpt.config, limits.token_budget(ckpt.config)
    assert c.max_len == 16_384 and budget == limits.MAX_INPUT_TOKENS
    assert ckpt.source_len == ckpt.target_len == budget
    pieces = ckpt.target_tokenizer.pieces(LONG_TEXT)
    assert len(pieces) > 4 * budget and len(ckpt.source_tokenizer.pieces(LONG_TEXT)) > 4 * budget
    maps = ckpt.attention(LONG_TEXT, LONG_TEXT, details=True)
    assert maps["encoder"].shape == (c.num_encoder_layers, c.num_heads, budget, budget)
    assert maps["decoder"].shape == maps["cross"].shape == (c.num_decoder_layers, c.num_heads,
                                                            budget, budget)
    assert maps["decoder_scores"].shape[-2:] == maps["encoder_scores"].shape[-2:] == (budget,
                                                                                       budget)
    typed = ckpt.encode_target(LONG_TEXT)
    assert list(maps["output_ids"]) == typed and len(typed) == budget
    assert typed == ckpt.target_tokenizer.encode(LONG_TEXT)[:budget - 1] + [c.end_id]
    assert list(maps["source_ids"]) == ckpt.encode_source(LONG_TEXT)
    assert ckpt.pieces_cut(LONG_TEXT, "target") == len(pieces) + 1 - budget
    assert ckpt.pieces_cut(LONG_TEXT, "source") > 0
    for side in ("source", "target"):
        assert ckpt.length_limit(side) == ("the length budget of typed text (512 tokens; the "
                                           "model's max_len is 16384)")
    assert teacher_forced(ckpt, LONG_TEXT, LONG_TEXT).token_ids == typed
    assert output_ids_for(ckpt, LONG_TEXT) == typed
    # A translation stops at the step budget, even when asked for the model's max_len.
    endless = ckpt.translate(LONG_TEXT, max_len=c.max_len, stop_at_end=False)
    assert len(endless.token_ids) == limits.step_budget(c) == limits.MAX_DECODE_STEPS
    assert endless.stopped_by == "length"
    assert ckpt.stopped_by_budget(endless) == "the step budget of one translation (512 tokens)"


def test_the_model_s_max_len_cuts_below_the_budget_and_is_named(valid):
    ckpt = load_checkpoint(valid)  # max_len 32
    assert ckpt.source_len == ckpt.target_len == 32 == limits.token_budget(ckpt.config)
    assert len(ckpt.encode_target(LONG_TEXT)) == 32
    assert ckpt.length_limit("target") == "the model's max_len (32 tokens)"
    fixed = load_checkpoint(with_config(valid, pad_source_to=20))
    assert fixed.source_len == 20 and len(fixed.encode_source(LONG_TEXT)) == 20
    assert fixed.length_limit("source") == "the source length the model is fed (20 tokens)"


def test_a_model_s_layers_and_heads_lower_the_budget_and_the_note_says_why(valid, monkeypatch):
    ckpt = load_checkpoint(with_config(valid, max_len=limits.MAX_POSITIONS))
    monkeypatch.setattr(ckpt, "budgets", replace(ckpt.budgets, maps_bytes=40 * (
        limits.maps_copies() * limits.maps_bytes(ckpt.config, 1)) * 40))  # maps of 40 x 40 ids
    assert ckpt.target_len == ckpt.source_len == 40 == ckpt.step_budget()
    assert len(ckpt.attention(LONG_TEXT, LONG_TEXT)["decoder"][0, 0]) == 40
    assert ckpt.length_limit("target").startswith(
        "the length budget of typed text for a model of this size (40 tokens: the attention maps")
    endless = ckpt.translate("5 march 2021", stop_at_end=False)
    assert len(endless.token_ids) == 40
    assert ckpt.stopped_by_budget(endless).startswith(
        "the step budget of one translation for a model of this size (40 tokens")
    beam = ckpt.translate("5 march 2021", beam_width=8)  # eight hypotheses: a shorter budget
    assert beam.beam_width == 8 and len(beam.beam_steps) <= ckpt.step_budget(8) < 40


def test_a_model_fed_a_fixed_source_length_past_the_maps_budget_is_refused(valid, monkeypatch):
    data = with_config(valid, max_len=limits.MAX_POSITIONS, pad_source_to=limits.MAX_POSITIONS)
    assert_refused(data, "padded to 16,384 ids", "pad_source_to", "MB; the limit is 256 MB")
    assert load_checkpoint(with_config(valid, max_len=4096, pad_source_to=1024)).source_len == 512


MEMORY_OF_ONE_REQUEST = """
import json, pathlib, re, sys
from transformer import load_checkpoint
from transformer.inference.teacher_forcing import teacher_forced
from transformer.tokenizers.bpemb import BPEmbTokenizer

def status(name):
    text = pathlib.Path("/proc/self/status").read_text()
    return int(re.search(name + r":\\s+(\\d+) kB", text).group(1)) * 1024

ckpt = load_checkpoint(sys.argv[1])
text = sys.argv[2]
ckpt.attention("5 march 2021", "2021-03-05", details=True)  # TensorFlow's first pass
teacher_forced(ckpt, "5 march 2021", "2021-03-05")
pathlib.Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from now
before = status("VmRSS")
maps = ckpt.attention(text, text, details=True)
forced = teacher_forced(ckpt, text, text)
own = ckpt.attention(text, details=True)
print(json.dumps({"grew": status("VmHWM") - before, "T": maps["decoder"].shape[-1]}))
"""


def test_one_request_with_a_long_paste_on_a_max_len_16384_model_stays_bounded(long_max_len,
                                                                              tmp_path):
    """Peak RSS growth (in a fresh process) of the attention of a 10,000-character source and
    typed target with details, its teacher-forced steps and the maps of the model's own
    translation, on a checkpoint that allows max_len 16,384: under 300 MB, where one set of
    the uncut maps alone would take more than 1 GB (and a pass with details holds five)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    path = tmp_path / "long.ckpt"
    path.write_bytes(long_max_len)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-c", MEMORY_OF_ONE_REQUEST, str(path), LONG_TEXT],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["T"] == limits.MAX_INPUT_TOKENS
    ckpt = load_checkpoint(long_max_len)
    uncut = len(ckpt.target_tokenizer.pieces(LONG_TEXT)) + 1
    assert limits.maps_bytes(ckpt.config, uncut) > 2**30  # one uncut pass's maps (details: 5x)
    assert out["grew"] < 300 * 2**20, out["grew"] / 2**20
