"""Checkpoints of version 2: weights.safetensors, stored, read as views of the file's bytes.

Round trips are exact (and equal to what safetensors' own reader gives); version 1 files still
open and `python -m transformer.convert upgrade` rewrites one as version 2 with everything kept;
then weights.safetensors is taken apart (its 8-byte header length, its JSON header, dtypes,
shapes, offsets, names, values, the ZIP member around it), one defect at a time, and each file is
refused with a CheckpointError sentence naming the problem, quickly and without allocating.
"""

from __future__ import annotations

import io
import json
import struct
import time
import tracemalloc
import zipfile
from pathlib import Path

import fuzz_cases
import numpy as np
import pytest
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save
from test_checkpoint import (
    PAIRS,
    assert_refused,
    declare_size,
    members_of,
    randomized_model,
    tiny_config,
)

from transformer import CheckpointError, load_checkpoint
from transformer.checkpoint import format as checkpoint_module
from transformer.checkpoint.format import (
    FORMAT_VERSION,
    MEMBERS,
    CheckpointData,
    checkpoint_bytes,
    data_bytes,
    read_checkpoint,
)
from transformer.importers import cli
from transformer.model.weights import weight_arrays, weight_shapes
from transformer.tokenizers.bpemb import BPEmbTokenizer

ST = "weights.safetensors"
BIAS = "output_projection/bias"
KERNEL = "encoder_layer_0/feedforward/intermediate/kernel"


# ============================================================================= helpers
def archive(members: dict[str, bytes], weights_method: int = zipfile.ZIP_STORED) -> bytes:
    """A checkpoint ZIP: the weights member stored (unless told), the others deflated."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, content in members.items():
            z.writestr(name, content,
                       compress_type=weights_method if name.startswith("weights.") else None)
    return out.getvalue()


def split(raw: bytes) -> tuple[dict, bytes]:
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def join(header, body: bytes, length: int | None = None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + body


def with_raw(data: bytes, raw: bytes, **kwargs) -> bytes:
    return archive({**members_of(data), ST: raw}, **kwargs)


def with_header(data: bytes, change, body_change=None) -> bytes:
    """change(header) mutates the parsed header (or returns a new one, or bytes)."""
    header, body = split(members_of(data)[ST])
    new = change(header)
    header = header if new is None else new
    return with_raw(data, join(header, body if body_change is None else body_change(body)))


def with_tensors(data: bytes, change) -> bytes:
    """Rewritten by the library's writer after change(tensors) ({name: array})."""
    tensors = dict(st_load(members_of(data)[ST]))
    change(tensors)
    return with_raw(data, st_save(tensors))


@pytest.fixture(scope="module")
def tokenizers():
    source = BPEmbTokenizer.train([s for s, _ in PAIRS], 48)  # the dates task has 29 formats (issue 24)
    target = BPEmbTokenizer.train([t for _, t in PAIRS], 40)
    return source, target


@pytest.fixture(scope="module")
def model_and_bytes(tokenizers):
    source, target = tokenizers
    model = randomized_model(tiny_config(source, target), seed=3)
    return model, checkpoint_bytes(model, source, target, {"task": "dates", "note": "kept"})


@pytest.fixture(scope="module")
def v2(model_and_bytes) -> bytes:
    return model_and_bytes[1]


# ============================================================================= round trips
def test_v2_round_trip_gives_the_model_s_weights_exactly(model_and_bytes):
    model, data = model_and_bytes
    read = read_checkpoint(data)
    assert read.format_version == FORMAT_VERSION == 2
    expected = weight_arrays(model)
    assert set(read.weights) == set(expected)
    oracle = st_load(members_of(data)[ST])  # safetensors' own reader
    for name, array in expected.items():
        assert read.weights[name].dtype == np.float32
        np.testing.assert_array_equal(read.weights[name], array, err_msg=name)
        np.testing.assert_array_equal(oracle[name], array, err_msg=name)
        assert not read.weights[name].flags.owndata  # a view of the file's bytes, not a copy
        assert read.weights[name].flags.aligned
    ckpt = load_checkpoint(data)
    for name, array in weight_arrays(ckpt.model).items():
        np.testing.assert_array_equal(array, expected[name], err_msg=name)


def test_the_weights_member_is_stored_and_aligned_the_rest_deflated(v2):
    with zipfile.ZipFile(io.BytesIO(v2)) as z:
        assert z.namelist() == list(MEMBERS)
        info = z.getinfo(ST)
        assert info.compress_type == zipfile.ZIP_STORED and info.file_size == info.compress_size
        assert {i.compress_type for i in z.infolist() if i.filename != ST} == {zipfile.ZIP_DEFLATED}
        assert json.loads(z.read("format.json"))["version"] == 2
    name_len, extra_len = struct.unpack_from("<HH", v2, info.header_offset + 26)
    data_at = info.header_offset + 30 + name_len + extra_len
    header_len = struct.unpack_from("<Q", v2, data_at)[0]
    assert data_at % 64 == 0 and (8 + header_len) % 8 == 0  # every float32 aligned in the file


def test_a_deflated_weights_member_opens_the_same(v2):
    again = read_checkpoint(with_raw(v2, members_of(v2)[ST], weights_method=zipfile.ZIP_DEFLATED))
    first = read_checkpoint(v2)
    for name, array in first.weights.items():
        np.testing.assert_array_equal(again.weights[name], array)


def test_version_1_files_still_open(model_and_bytes, tokenizers):
    model, _ = model_and_bytes
    v1 = checkpoint_bytes(model, *tokenizers, {"task": "dates"}, version=1)
    assert "weights.npz" in members_of(v1) and ST not in members_of(v1)
    read = read_checkpoint(v1)
    assert read.format_version == 1
    for name, array in weight_arrays(model).items():
        np.testing.assert_array_equal(read.weights[name], array)


@pytest.mark.parametrize("path", sorted(checkpoint_module.ASSETS.glob("*.ckpt")),
                         ids=lambda p: p.name)
def test_the_bundled_checkpoints_are_version_2_and_open(path):
    assert read_checkpoint(path).format_version == 2  # as train.py writes them (issue 24)


def test_upgrade_rewrites_version_1_as_2_with_everything_kept(tmp_path, capsys):
    # the bundled model as it was before issue 24's retraining: a version 1 file
    source = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "dates.ckpt"
    out = tmp_path / "dates.v2.ckpt"
    assert cli.main(["upgrade", str(source), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "upgraded" in said and "version 1" in said and "version 2" in said, said
    old, new = read_checkpoint(source), read_checkpoint(out)
    assert (old.format_version, new.format_version) == (1, 2)
    assert new.config == old.config
    assert new.metadata == old.metadata and new.metadata
    for side in ("source_tokenizer", "target_tokenizer"):
        a, b = getattr(old, side), getattr(new, side)
        assert (a.spec(), a.model_bytes) == (b.spec(), b.model_bytes)
    assert set(new.weights) == set(old.weights)
    for name, array in old.weights.items():
        np.testing.assert_array_equal(new.weights[name], array, err_msg=name)
    with zipfile.ZipFile(out) as z:
        assert z.getinfo(ST).compress_type == zipfile.ZIP_STORED
        for member in ("metadata.json", "source_tokenizer.model", "target_tokenizer.model"):
            with zipfile.ZipFile(source) as original:
                assert z.read(member) == original.read(member), member
    # the same file upgraded again is the same bytes; a version 2 file is said to be one already
    again = tmp_path / "again.ckpt"
    assert cli.main(["upgrade", str(out), "--out", str(again)]) == 0
    assert "already version 2" in capsys.readouterr().out
    assert again.read_bytes() == out.read_bytes()


def test_upgrade_of_a_bad_file_says_why_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a zip at all, just bytes")
    assert cli.main(["upgrade", str(bad), "--out", str(tmp_path / "out.ckpt")]) == 2
    assert "not a ZIP archive" in capsys.readouterr().err
    assert not (tmp_path / "out.ckpt").exists()


def test_reading_a_large_v2_file_allocates_no_copy_of_its_weights(tokenizers):
    """tracemalloc sees NumPy's and Python's allocations: reading ~60 MB of weights (the file's
    bytes already in memory) allocates a small fixed amount; version 1 unpacks them again."""
    source, target = tokenizers
    config = tiny_config(source, target, d_model=512, dff=2048, num_heads=8,
                         num_encoder_layers=2, num_decoder_layers=2)
    rng = np.random.default_rng(0)
    weights = {name: rng.standard_normal(shape, np.float32)
               for name, shape in weight_shapes(config).items()}
    data = CheckpointData(config, weights, source, target, {"name": "big"})
    w = sum(a.nbytes for a in weights.values())
    assert w > 50 * 2**20
    peaks = {}
    for version in (1, 2):
        file = data_bytes(data, version)
        tracemalloc.start()
        try:
            started = time.perf_counter()
            read = read_checkpoint(file)
            seconds = time.perf_counter() - started
            _, peaks[version] = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        np.testing.assert_array_equal(read.weights[KERNEL], weights[KERNEL])
        del read, file
        print(f"version {version}: {seconds:.2f} s, peak {peaks[version] / 2**20:.1f} MB "
              f"(W = {w / 2**20:.1f} MB)")
    assert peaks[2] < 0.05 * w + 4 * 2**20, peaks
    assert peaks[1] > w  # the .npz is unpacked into a buffer of its own


# ============================================================================= hostile files
def overlap(header):
    a, b = header["encoder_layer_0/self_attention/query/bias"], \
        header["encoder_layer_0/self_attention/key/bias"]
    b["data_offsets"] = list(a["data_offsets"])


def as_dtype(dtype: str, itemsize: int):
    """BIAS declared as `dtype`, its data that many bytes per value (appended at the end)."""
    def change(header):
        n = header[BIAS]["shape"][0]
        end = max(t["data_offsets"][1] for k, t in header.items() if k != "__metadata__")
        header[BIAS] = {"dtype": dtype, "shape": [n], "data_offsets": [end, end + n * itemsize]}
    return change  # the dtype is checked before the offsets: the data need not be there


def long_number(header) -> bytes:
    header[BIAS]["data_offsets"] = [0, "BIG"]
    return json.dumps(header).replace('"BIG"', "9" * 5000).encode()


def deep_metadata(depth: int):
    def change(header) -> bytes:
        return (json.dumps(header)[:-1] + ', "__metadata__": ' + "[" * depth + "]" * depth
                + "}").encode()
    return change


HEADER_CASES = {  # name: (make(v2 bytes) -> bytes, words the refusal names)
    "header_length_past_member": (
        lambda d: with_raw(d, (lambda raw: struct.pack("<Q", len(raw)) + raw[8:])(
            members_of(d)[ST])), ["declares a header of", "more than the"]),
    "header_length_2_63": (
        lambda d: with_raw(d, struct.pack("<Q", 2**63) + members_of(d)[ST][8:]),
        ["declares a header of 9,223,372,036,854,775,808 bytes", "at most"]),
    "member_shorter_than_8_bytes": (lambda d: with_raw(d, b"\x01\x02"), ["too short"]),
    "header_not_json": (
        lambda d: with_raw(d, join(b"{not json" + b" " * 7, split(members_of(d)[ST])[1])),
        ["header of 'weights.safetensors'", "not valid JSON"]),
    "header_not_utf8": (
        lambda d: with_raw(d, join(b'{"\xff\xfe": 1}', split(members_of(d)[ST])[1])),
        ["not valid JSON"]),
    "header_a_list": (lambda d: with_header(d, lambda h: [1, 2]), ["not a JSON object"]),
    "header_nested_40_deep": (lambda d: with_header(d, deep_metadata(40)),
                              ["nested more than 32 levels"]),
    "header_nested_200k_deep": (lambda d: with_header(d, deep_metadata(200_000)),
                                ["not valid JSON"]),
    "header_number_5000_digits": (lambda d: with_header(d, long_number),
                                  ["more than 20 digits"]),
    "dtype_f64": (lambda d: with_header(d, as_dtype("F64", 8)), [BIAS, "dtype F64", "F32"]),
    "dtype_i64": (lambda d: with_header(d, as_dtype("I64", 8)), [BIAS, "dtype I64"]),
    "dtype_bf16": (lambda d: with_header(d, as_dtype("BF16", 2)), [BIAS, "dtype BF16"]),
    "dtype_f16_written_by_the_library": (
        lambda d: with_tensors(d, lambda t: t.update({BIAS: t[BIAS].astype(np.float16)})),
        [BIAS, "dtype F16"]),
    "shape_disagrees_with_offsets": (
        lambda d: with_header(d, lambda h: h[BIAS].update(shape=[h[BIAS]["shape"][0] + 1])),
        [BIAS, "bytes of data"]),
    "shape_not_the_config_s": (
        lambda d: with_tensors(d, lambda t: t.update({KERNEL: np.ascontiguousarray(t[KERNEL].T)})),
        [KERNEL, "in the model its config describes"]),
    "shape_negative": (lambda d: with_header(d, lambda h: h[BIAS].update(shape=[-4])),
                       [BIAS, "invalid shape"]),
    "shape_bool": (lambda d: with_header(d, lambda h: h[BIAS].update(shape=[True])),
                   [BIAS, "invalid shape"]),
    "shape_huge": (lambda d: with_header(d, lambda h: h[BIAS].update(shape=[2**62, 2**62])),
                   [BIAS, "invalid shape", "each dimension a whole number"]),
    "offsets_overlapping": (lambda d: with_header(d, overlap), ["invalid offsets", "overlap"]),
    "offsets_past_the_end": (
        lambda d: with_header(d, lambda h: h[BIAS].update(
            data_offsets=[h[BIAS]["data_offsets"][0] + 10**9, h[BIAS]["data_offsets"][1] + 10**9])),
        [BIAS, "invalid data_offsets"]),
    "offsets_reversed": (
        lambda d: with_header(d, lambda h: h[BIAS].update(
            data_offsets=h[BIAS]["data_offsets"][::-1])), [BIAS, "invalid data_offsets"]),
    "offsets_negative": (
        lambda d: with_header(d, lambda h: h[BIAS].update(data_offsets=[-4, 60])),
        [BIAS, "invalid data_offsets"]),
    "trailing_bytes_no_weight_describes": (
        lambda d: with_header(d, lambda h: None, lambda body: body + bytes(64)),
        ["64 bytes of data that no weight describes"]),
    "entry_with_another_field": (
        lambda d: with_header(d, lambda h: h[BIAS].update(loader="pickle")),
        [BIAS, "other than dtype, shape and data_offsets"]),
    "weight_twice": (
        lambda d: with_header(d, lambda h: json.dumps(h)[:-1].encode()
                              + b', "' + BIAS.encode() + b'": '
                              + json.dumps(h[BIAS]).encode() + b"}"),
        [BIAS, "twice"]),
    "unknown_weight": (
        lambda d: with_tensors(d, lambda t: t.update(
            {"encoder_layer_9/backdoor/kernel": np.zeros((4, 4), np.float32)})),
        ["encoder_layer_9/backdoor/kernel", "this model does not have"]),
    "unknown_weight_declaring_gigabytes": (
        lambda d: with_header(d, lambda h: h.update(
            {"zz_unknown": {"dtype": "F32", "shape": [2**28, 4],
                            "data_offsets": [0, 2**32]}})),
        ["zz_unknown", "invalid data_offsets"]),
    "missing_weight": (lambda d: with_tensors(d, lambda t: t.pop(BIAS)),
                       ["no value for the weight", BIAS]),
    "nan": (lambda d: with_tensors(d, lambda t: t.update({KERNEL: np.where(
        np.arange(t[KERNEL].size).reshape(t[KERNEL].shape) == 7, np.nan, t[KERNEL])
        .astype(np.float32)})), [KERNEL, "NaN or infinite"]),
    "inf": (lambda d: with_tensors(d, lambda t: t.update({BIAS: np.full_like(t[BIAS], -np.inf)})),
            [BIAS, "NaN or infinite"]),
    "metadata_huge_string": (
        lambda d: with_header(d, lambda h: h.update(__metadata__={"x": "a" * 2**21})),
        ["declares a header of", "at most"]),
    "metadata_not_text": (
        lambda d: with_header(d, lambda h: h.update(__metadata__={"x": [1, 2]})),
        ["__metadata__"]),
}


@pytest.mark.parametrize("case", list(HEADER_CASES))
def test_hostile_safetensors_is_refused_with_a_sentence_fast_and_small(v2, case):
    make, words = HEADER_CASES[case]
    bad = make(v2)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        assert_refused(bad, *words)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seconds < 3, seconds  # a tiny model: the refusal comes before anything is built
    assert peak < len(bad) + 8 * 2**20, peak


def test_safetensors_own_reader_refuses_the_offset_cases_too(v2):
    """Our rules are the format's: the library refuses these as well (it would only after
    copying every tensor)."""
    from safetensors import SafetensorError

    for case in ("offsets_overlapping", "trailing_bytes_no_weight_describes",
                 "header_length_past_member"):
        raw = members_of(HEADER_CASES[case][0](v2))[ST]
        with pytest.raises(SafetensorError):
            st_load(raw)


def test_a_small_huge_metadata_string_is_only_ignored(v2):
    read = read_checkpoint(with_header(v2, lambda h: h.update(__metadata__={"x": "a" * 50_000})))
    assert set(read.weights) == set(read_checkpoint(v2).weights)


def test_deflated_weights_declaring_gigabytes_is_refused_before_unpacking(v2):
    bad = declare_size(with_raw(v2, members_of(v2)[ST], weights_method=zipfile.ZIP_DEFLATED),
                       ST, 3 * 2**29)
    tracemalloc.start()
    try:
        assert_refused(bad, ST, "decompression bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20


def test_deflated_weights_unpacking_past_their_declared_size_stop_there(v2):
    entries = [fuzz_cases.entry(n, c, 0 if n == ST else 8) for n, c in members_of(v2).items()]
    bomb = next(e for e in entries if e.name == ST.encode())
    bomb.method, bomb.payload = 8, fuzz_cases.zeros_deflated(64)
    tracemalloc.start()
    try:
        assert_refused(fuzz_cases.write_zip(entries), ST, "more than", "declares")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20


@pytest.mark.parametrize("change, words", [
    (lambda m: m.update({"weights.npz": b"PK"}), ["unexpected file 'weights.npz'"]),
    (lambda m: m.update({"notes.txt": b"hi"}), ["unexpected file 'notes.txt'"]),
    (lambda m: m.pop(ST), ["missing its weights", ST]),
    (lambda m: m.pop("config.json"), ["missing 'config.json'"]),
    (lambda m: m.update({"format.json": json.dumps(
        {"format": "attention-explorer-checkpoint", "version": 1}).encode()}),
     ["says version 1", "'weights.npz'", ST]),
], ids=["npz_too", "extra", "no_weights", "no_config", "format_says_1"])
def test_extra_missing_or_mislabelled_members(v2, change, words):
    members = members_of(v2)
    change(members)
    assert_refused(archive(members), *words)


def test_fuzz_cases_of_version_2_are_refused_or_work_in_process():
    """The crafted version 2 cases tests/fuzz_cases.py adds (make fuzz loads them in children
    under memory limits): each refused with a sentence here, or, named *_valid, loaded."""
    base = fuzz_cases.BASE.read_bytes()
    cases = [(n, make) for n, make in fuzz_cases.CRAFTED if n.startswith("st_")]
    assert len(cases) >= 10
    for name, make in cases:
        data = make(base)
        try:
            ckpt = load_checkpoint(data)
        except CheckpointError as err:
            assert not name.endswith("_valid"), (name, str(err))
            assert fuzz_cases.is_sentence(str(err)), (name, str(err))
        else:  # a huge weight within the load-time bound may load: then it computes finite numbers
            assert name.endswith("_valid") or name.startswith("st_huge_"), name
            assert ckpt.translate("March 5, 2021").text
            maps = ckpt.attention("March 5, 2021")
            assert all(np.isfinite(maps[kind]).all() for kind in ("encoder", "decoder", "cross"))
