"""Hostile uploads in the other formats the uploader accepts (issue 15), for tests/fuzz_cases.py.

Each is a mutation of a valid file of its format:
  h5_      a Keras .weights.h5: the TF tutorial's dates model (tests/fixtures/tutorial_dates)
  keras_   a .keras archive holding the same weights (config.json and metadata.json beside them)
  tf_      a TensorFlow checkpoint (.index + .data-00000-of-00001) of the same weights, written
           here field by field so that every field can lie
  marian_  a Marian model (tests/fixtures/marian): model.safetensors, config.json, vocab.json,
           source.spm and target.spm, as files or as one .zip
  bart_, t5_, t5v11_, mbart_, pegasus_, m2m100_, nllb_  the Hugging Face families of issue 26
           (HF_FORMATS: tests/fixtures/<family>): config.json, generation_config.json,
           tokenizer.json / vocab.json + merges.txt / SentencePiece, model.safetensors, opened as
           the app opens them (load_hf_upload); a family without its fixture or importer is
           skipped, its reason printed (HF_SKIPPED); issue 37's classes for each family
           (_hf_issue37_cases): normalization rules, added tokens, long pieces and long texts,
           vocabularies and merges at the limits, another family's files, generation configs
           at their limits

A case file holds the files of one upload as the browser sends them (in a stored ZIP that only
load_upload reads); load_upload takes them through the uploader's own path (explorer.uploads):
the Keras recipes' files converted, every Hugging Face family's (Marian's included) opened as
they are, mapped on load, as the app opens them (no conversion).
Crafted cases (CRAFTED, named by format prefix) cover the known dangers; GENERATORS make seeded
random ones ("<format>-s<seed>-<i>"). Importing this module registers both with fuzz_cases
(OTHER_CRAFTED, OTHER_FORMAT_GENERATORS), which imports it last.
"""

from __future__ import annotations

import functools
import io
import json
import re
import struct
import zipfile
from typing import Callable

import fuzz_cases
import numpy as np
from fuzz_cases import (
    BASE,
    ROOT,
    Entry,
    _member_mutation,
    bomb_megabytes,
    entry,
    members_of,
    odd_json_field,
    pack,
    write_zip,
    zeros_deflated,
)

UPLOAD_LOADER = "fuzz_formats:load_upload"
TUTORIAL = ROOT / "tests" / "fixtures" / "tutorial_dates"
MARIAN = ROOT / "tests" / "fixtures" / "marian"
TYPED_HEADS = 2  # the import form's "number of heads", when it asks (the weights do not say)
LOAD_SECONDS = 60.0  # a conversion builds the model three times (see load_upload)


def upload_file(files: dict[str, bytes]) -> bytes:
    """The case file of one upload: the uploaded files by name, in a stored ZIP (with a fixed
    date, so that a seed gives the same bytes whenever it runs)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as container:
        for name, data in files.items():
            container.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def upload_files(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as container:
        return {info.filename: container.read(info) for info in container.infolist()}


def load_upload(path):
    """What the sidebar does with uploaded files (explorer.models: accept_upload, then
    run_requested_import): read_upload (unzip, detect the recipe), the import form's answers
    (explorer.models.import_choices with its defaults; TYPED_HEADS when it asks for heads; a
    Hugging Face family, Marian included, asks nothing: Choices(recipe)), check_choices, then
    either the files opened as they are (a family that opens_as_is: transformer.load_checkpoint
    of {file name: bytes}, mapped on load, as explorer.models._load opens them) or convert's
    checkpoint bytes (the Keras recipes) loaded as the app loads them."""
    from explorer import uploads
    from transformer import load_checkpoint

    upload = uploads.read_upload(upload_files(path))
    recipe = upload.recipe or uploads.WEIGHT_RECIPES[0]
    if uploads.opens_as_is(recipe):
        choices = uploads.Choices(recipe)
        uploads.check_choices(upload, choices)
        return load_checkpoint(dict(upload.files))
    source, target = upload.vocabularies
    choices = uploads.Choices(recipe, TYPED_HEADS if upload.needs_heads else None, source, target)
    uploads.check_choices(upload, choices)
    return load_checkpoint(uploads.convert(upload, choices))


CRAFTED: list[tuple[str, Callable[[], bytes]]] = []  # (name, make() -> the case file)


def crafted(function):
    CRAFTED.append((function.__name__, function))
    return function


def _flip(rng, data: bytes, count: int, start: int = 0, stop: int | None = None) -> bytes:
    out = bytearray(data)
    stop = len(out) if stop is None else min(stop, len(out))
    for at in rng.integers(start, max(start + 1, stop), count):
        if at < len(out):
            out[at] = int(rng.integers(256))
    return bytes(out)


def _byte_mutation(rng, data: bytes) -> bytes:
    """Flips anywhere or near the start (headers), a truncation, a splice or inserted bytes."""
    how = int(rng.integers(5))
    if how == 0:
        return _flip(rng, data, int(rng.integers(1, 16)))
    if how == 1:
        return _flip(rng, data, int(rng.integers(1, 8)), 0, 4096)
    return _member_mutation(rng, data)


# ---------------------------------------------------------------- Keras .weights.h5
@functools.cache
def tutorial_h5() -> bytes:
    """The tutorial fixture's weights without its optimizer's state (which the reader skips):
    608 KB, 385 KB of them the model's weights."""
    import h5py

    out = io.BytesIO()
    with h5py.File(TUTORIAL / "model.weights.h5", "r") as source, h5py.File(out, "w") as h5:
        for key in source:
            if key != "optimizer":
                source.copy(source[key], h5, key)
    return out.getvalue()


@functools.cache
def _vocabularies() -> tuple:
    return tuple((n, (TUTORIAL / n).read_bytes()) for n in ("source_vocab.txt",
                                                            "target_vocab.txt"))


def vocabularies() -> dict[str, bytes]:
    return dict(_vocabularies())


def h5_arrays(data: bytes) -> dict[str, np.ndarray]:
    import h5py

    arrays = {}
    with h5py.File(io.BytesIO(data), "r") as h5:
        h5.visititems(lambda name, item: arrays.__setitem__(name, item[()])
                      if isinstance(item, h5py.Dataset) else None)
    return arrays


def h5_edit(change: Callable, base: bytes | None = None, libver=None) -> bytes:
    """The weights file after change(h5py.File) (opened for writing, in memory)."""
    import h5py

    buffer = io.BytesIO(tutorial_h5() if base is None else base)
    with h5py.File(buffer, "r+", libver=libver) as h5:
        change(h5)
    return buffer.getvalue()


def h5_upload(h5: bytes, name: str = "model.weights.h5") -> bytes:
    return upload_file({name: h5, **vocabularies()})


QUERY = "encoder/enc_layers/encoder_layer/self_attention/mha/query_dense/vars/0"  # (32, 2, 32)
FINAL = "final_layer/vars/0"  # (32, 257)


def h5_replace(name: str, **dataset) -> Callable:
    def change(h5):
        del h5[name]
        h5.create_dataset(name, **dataset)
    return change


@crafted
def h5_valid():
    return h5_upload(tutorial_h5())


@crafted
def h5_with_optimizer_valid():
    return h5_upload((TUTORIAL / "model.weights.h5").read_bytes())


_QUERY_SHAPE = (32, 2, 32)
for _label, _value in {
    "string": lambda: np.array([b"__import__('os')"] * 4, dtype=object),
    "int32": lambda: np.ones(_QUERY_SHAPE, np.int32),
    "bool": lambda: np.ones(_QUERY_SHAPE, bool),
    "complex": lambda: np.ones(_QUERY_SHAPE, np.complex64),
    "compound": lambda: np.zeros(_QUERY_SHAPE, [("a", "<f4"), ("b", "<f4")]),
    "float128": lambda: np.ones(_QUERY_SHAPE, np.longdouble),
    "float64_valid": lambda: np.full(_QUERY_SHAPE, 0.01, np.float64),
    "float16_valid": lambda: np.full(_QUERY_SHAPE, 0.01, np.float16),
}.items():
    CRAFTED.append((f"h5_dtype_{_label}", lambda v=_value: h5_upload(h5_edit(
        h5_replace(QUERY, data=v())))))


@crafted
def h5_dtype_vlen():
    import h5py

    def change(h5):
        del h5[QUERY]
        dataset = h5.create_dataset(QUERY, (4,), dtype=h5py.vlen_dtype(np.float32))
        for i in range(4):
            dataset[i] = np.ones(i + 1, np.float32)
    return h5_upload(h5_edit(change))


@crafted
def h5_dtype_big_endian_valid():
    return h5_upload(h5_edit(h5_replace(QUERY, data=np.full(_QUERY_SHAPE, 0.01, ">f4"))))


@crafted
def h5_sparse_huge():
    """A chunked dataset declaring 2**40 floats with no chunk written (the fill value): 4 TB."""
    return h5_upload(h5_edit(lambda h5: h5.create_dataset(
        "encoder/extra/vars/0", (2**20, 2**20), np.float32, chunks=(64, 64))))


@crafted
def h5_sparse_900mb():
    """Declares 900 MB of floats (under the 1 GB array limit) and holds none: the file is tiny."""
    return h5_upload(h5_edit(lambda h5: h5.create_dataset(
        "encoder/extra/vars/0", (225 * 2**10, 2**10), np.float32, chunks=(1024, 1024))))


@crafted
def h5_sparse_fill_nan():
    """A real weight's shape, its chunks never written, its fill value NaN."""
    return h5_upload(h5_edit(h5_replace(QUERY, shape=_QUERY_SHAPE, dtype=np.float32,
                                        chunks=_QUERY_SHAPE, fillvalue=np.nan)))


@crafted
def h5_gzip_bomb():
    """FUZZ_BOMB_MB of zeros in gzip chunks (~1,000 to 1 packed), under the final layer's name."""
    rows = bomb_megabytes() * 2**20 // (4 * 2**10)

    def change(h5):
        dataset = h5.create_dataset("encoder/bomb/vars/0", (rows, 2**10), np.float32,
                                    chunks=(256, 2**10), compression="gzip", compression_opts=9,
                                    fillvalue=1.0)
        block = np.zeros((256, 2**10), np.float32)
        for start in range(0, rows, 256):
            dataset[start:start + 256] = block
    return h5_upload(h5_edit(change))


@crafted
def h5_unknown_filter():
    """A chunk filtered by a filter HDF5 does not have (32015, Zstandard): HDF5 would look for
    a plugin library to load."""
    def change(h5):
        del h5[QUERY]
        dataset = h5.create_dataset(QUERY, _QUERY_SHAPE, np.float32, chunks=_QUERY_SHAPE,
                                    compression=32015, allow_unknown_filter=True)
        dataset.id.write_direct_chunk((0, 0, 0), b"\x28\xb5\x2f\xfd" + bytes(60))
    return h5_upload(h5_edit(change))


@crafted
def h5_external_link_passwd():
    import h5py

    def change(h5):
        del h5[QUERY]
        h5[QUERY] = h5py.ExternalLink("/etc/passwd", "/")
    return h5_upload(h5_edit(change))


@crafted
def h5_external_link_self():
    """A link into the uploaded file's own name (which may exist in the server's folder)."""
    import h5py

    def change(h5):
        del h5[QUERY]
        h5[QUERY] = h5py.ExternalLink("model.weights.h5", "/" + QUERY)
    return h5_upload(h5_edit(change))


@crafted
def h5_soft_link():
    import h5py

    def change(h5):
        del h5[QUERY]
        h5[QUERY] = h5py.SoftLink("/" + QUERY.replace("query", "key"))
    return h5_upload(h5_edit(change))


@crafted
def h5_soft_link_loop():
    import h5py

    def change(h5):
        del h5[QUERY]
        h5[QUERY] = h5py.SoftLink("/" + QUERY)
    return h5_upload(h5_edit(change))


@crafted
def h5_hard_link_cycle():
    """A group that holds itself: a walk that follows hard links never ends."""
    def change(h5):
        group = h5["encoder/enc_layers/encoder_layer"]
        group["again"] = group
    return h5_upload(h5_edit(change))


@crafted
def h5_external_storage_passwd():
    """A dataset whose data lives in /etc/passwd (HDF5 "external storage")."""
    return h5_upload(h5_edit(h5_replace(QUERY, shape=(64,), dtype=np.uint8,
                                        external=[("/etc/passwd", 0, 64)])))


@crafted
def h5_external_storage_float():
    return h5_upload(h5_edit(h5_replace(QUERY, shape=_QUERY_SHAPE, dtype=np.float32,
                                        external=[("/etc/passwd", 0, 4 * 2048)])))


@crafted
def h5_virtual_dataset():
    import h5py

    def change(h5):
        del h5[QUERY]
        layout = h5py.VirtualLayout(shape=_QUERY_SHAPE, dtype=np.float32)
        layout[:] = h5py.VirtualSource("/etc/passwd.h5", "data", shape=_QUERY_SHAPE)
        h5.create_virtual_dataset(QUERY, layout, fillvalue=0.5)
    return h5_upload(h5_edit(change))


@crafted
def h5_nan():
    def change(h5):
        h5[QUERY][0, 0, 0] = np.nan
    return h5_upload(h5_edit(change))


@crafted
def h5_inf():
    def change(h5):
        h5[FINAL][1, 1] = np.inf
    return h5_upload(h5_edit(change))


@crafted
def h5_overflow():
    """Finite weights that overflow float32 on real tokens."""
    def change(h5):
        h5["encoder/pos_embedding/embedding/vars/0"][...] = 3e38
    return h5_upload(h5_edit(change))


@crafted
def h5_float64_overflows_float32():
    """Finite float64 weights that become inf as float32."""
    return h5_upload(h5_edit(h5_replace(QUERY, data=np.full(_QUERY_SHAPE, 1e300))))


@crafted
def h5_missing_weight():
    def change(h5):
        del h5[QUERY]
    return h5_upload(h5_edit(change))


@crafted
def h5_extra_weight():
    return h5_upload(h5_edit(lambda h5: h5.create_dataset(
        "encoder/enc_layers/encoder_layer/backdoor/vars/0", data=np.ones((4, 4), np.float32))))


@crafted
def h5_renamed_weight():
    def change(h5):
        h5.move(QUERY, QUERY.replace("vars/0", "vars/7"))
    return h5_upload(h5_edit(change))


@crafted
def h5_renamed_group():
    def change(h5):
        h5.move("encoder/enc_layers/encoder_layer_1", "encoder/enc_layers/encoder_layer_9")
    return h5_upload(h5_edit(change))


@crafted
def h5_scalar_kernel():
    return h5_upload(h5_edit(h5_replace(QUERY, data=np.float32(0.5))))


@crafted
def h5_scalar_embedding():
    return h5_upload(h5_edit(h5_replace("decoder/pos_embedding/embedding/vars/0",
                                        data=np.float32(0.5))))


@crafted
def h5_empty_kernel():
    return h5_upload(h5_edit(h5_replace(QUERY, data=np.zeros((32, 2, 0), np.float32))))


@crafted
def h5_empty_embedding():
    return h5_upload(h5_edit(h5_replace("encoder/pos_embedding/embedding/vars/0",
                                        data=np.zeros((0, 32), np.float32))))


@crafted
def h5_kernel_4d():
    return h5_upload(h5_edit(h5_replace(QUERY, data=np.zeros((32, 2, 32, 1), np.float32))))


@crafted
def h5_transposed_final():
    def change(h5):
        value = h5[FINAL][()]
        del h5[FINAL]
        h5[FINAL] = value.T.copy()
    return h5_upload(h5_edit(change))


@crafted
def h5_huge_attribute():
    """A 16 MB attribute (never read: only arrays are)."""
    return h5_upload(h5_edit(lambda h5: h5.create_group("blobs").attrs.create(
        "blob", np.zeros(2**22, np.float32)), libver="latest"))


@crafted
def h5_attribute_names_code():
    def change(h5):
        h5.attrs["keras_version"] = "__import__('os').system('touch PWNED')"
        h5[QUERY].attrs["class_name"] = "Lambda"
    return h5_upload(h5_edit(change))


@crafted
def h5_deep_nesting():
    """A weight 3,000 groups deep (a walk that recurses per level overflows Python's stack)."""
    def change(h5):
        h5.create_dataset("/".join(["g"] * 3000) + "/vars/0", data=np.ones(2, np.float32))
    return h5_upload(h5_edit(change))


@crafted
def h5_many_datasets():
    def change(h5):
        group = h5.create_group("encoder/many")
        for i in range(9000):
            group.create_dataset(f"d{i}/vars/0", data=np.float32(i))
    return h5_upload(h5_edit(change))


@crafted
def h5_many_groups():
    """20,000 empty groups: a walk pays for each."""
    def change(h5):
        group = h5.create_group("encoder/many")
        for i in range(20_000):
            group.create_group(str(i))
    return h5_upload(h5_edit(change))


@crafted
def h5_truncated():
    data = tutorial_h5()
    return h5_upload(data[:len(data) // 2])


@crafted
def h5_superblock_flipped():
    data = bytearray(tutorial_h5())
    data[8:40] = bytes(range(200, 232))
    return h5_upload(bytes(data))


@crafted
def h5_only_magic():
    return h5_upload(b"\x89HDF\r\n\x1a\n")


@crafted
def h5_named_h5_but_zip():
    return h5_upload(members_of(BASE.read_bytes())["weights.npz"])


@crafted
def h5_two_weight_files():
    return upload_file({"a.weights.h5": tutorial_h5(), "b.weights.h5": tutorial_h5(),
                        **vocabularies()})


@crafted
def h5_vocabulary_not_utf8():
    files = {"model.weights.h5": tutorial_h5(), **vocabularies()}
    files["source_vocab.txt"] = files["source_vocab.txt"].replace(b"[UNK]", b"[\xff\xfe]")
    return upload_file(files)


@crafted
def h5_vocabulary_duplicates():
    files = {"model.weights.h5": tutorial_h5(), **vocabularies()}
    lines = files["target_vocab.txt"].split(b"\n")
    files["target_vocab.txt"] = b"\n".join(lines[:10] + lines[:10] + lines[20:])
    return upload_file(files)


@crafted
def h5_vocabulary_empty():
    return upload_file({"model.weights.h5": tutorial_h5(), "source_vocab.txt": b"",
                        "target_vocab.txt": vocabularies()["target_vocab.txt"]})


@crafted
def h5_vocabulary_huge_line():
    files = {"model.weights.h5": tutorial_h5(), **vocabularies()}
    files["source_vocab.txt"] = files["source_vocab.txt"].replace(b"[UNK]", b"x" * 2**20, 1)
    return upload_file(files)


@crafted
def h5_vocabulary_lone_surrogate():
    files = {"model.weights.h5": tutorial_h5(), **vocabularies()}
    files["source_vocab.txt"] = files["source_vocab.txt"].replace(b"\n,\n", b"\n\xed\xa0\x80\n")
    return upload_file(files)


HUGE_VALUES = (1e30, 1e20, 3e19, -3e19, 1e38)


def _random_huge(rng: np.random.Generator, value: np.ndarray) -> np.ndarray:
    """A copy of `value` with one row (of a matrix, an unprobed one or any) or one entry set
    to a finite but huge value."""
    value = np.array(value, np.float32)
    huge = HUGE_VALUES[int(rng.integers(len(HUGE_VALUES)))]
    if value.ndim == 2 and rng.integers(2):
        rows = value.shape[0]
        value[fuzz_cases.unprobed_id(rows) if rng.integers(2) else int(rng.integers(rows))] = huge
    elif value.size:
        value.reshape(-1)[int(rng.integers(value.size))] = huge
    return value


def random_h5(rng: np.random.Generator, index: int) -> bytes:
    """One random .weights.h5 case: bytes damaged, or one weight rewritten."""
    if rng.integers(2):
        return h5_upload(_byte_mutation(rng, tutorial_h5()))
    names = sorted(h5_arrays(tutorial_h5()))
    name = names[int(rng.integers(len(names)))]
    value = h5_arrays(tutorial_h5())[name]
    how = int(rng.integers(8))
    if how == 0:  # odd values
        flat = value.reshape(-1).copy()
        flat[rng.integers(0, flat.size, int(rng.integers(1, 8)))] = \
            [np.nan, np.inf, -np.inf, 3e38, 1e20][int(rng.integers(5))]
        value = flat.reshape(value.shape)
    elif how == 7:  # a finite but huge row or entry (issue 25)
        value = _random_huge(rng, value)
    elif how == 1:  # another dtype
        value = value.astype([np.float16, np.float64, np.int8, np.int64, np.uint16,
                              np.complex64, bool][int(rng.integers(7))])
    elif how == 2:  # another shape
        shape = list(value.shape) or [1]
        at = int(rng.integers(len(shape)))
        shape[at] = max(0, shape[at] + int(rng.integers(-2, 3)))
        value = np.resize(value, shape)
    elif how == 3:
        value = value.reshape(-1)
    elif how == 4:
        value = value.reshape(value.shape + (1,))
    elif how == 5:  # gone
        return h5_upload(h5_edit(lambda h5: h5.__delitem__(name)))
    else:  # moved elsewhere
        other = names[int(rng.integers(len(names)))] + "_" + str(int(rng.integers(3)))
        return h5_upload(h5_edit(lambda h5: h5.move(name, other)))
    return h5_upload(h5_edit(h5_replace(name, data=value)))


# ---------------------------------------------------------------- Keras .keras
KERAS_CONFIG = {"module": None, "class_name": "Transformer", "registered_name": "Transformer",
                "config": {"num_layers": 2, "d_model": 32, "num_heads": 2, "dff": 64},
                "build_config": {"input_shape": [[None, None], [None, None]]}}
KERAS_METADATA = {"keras_version": "3.15.1", "date_saved": "2026-05-09@07:35:25"}
LAMBDA_CONFIG = {  # what a Keras deserializer would run: a marshalled lambda, os.system by name
    "module": "keras.layers", "class_name": "Lambda", "registered_name": None,
    "config": {"name": "lambda", "function": {
        "class_name": "__lambda__", "config": {
            "code": ("4wEAAAAAAAAAAAAAAAEAAAADAAAAQwAAAHMMAAAAdABkAYMBAQBkAFMAKQJO"
                     "eg50b3VjaCBQV05FRCkB2gJvc6kB2gF4qQByBAAAAPoIPHN0ZGluPtoIPGxh"
                     "bWJkYT4BAAAAcwAAAAA="),
            "defaults": None, "closure": None}},
        "arguments": {"command": "touch PWNED"}},
    "layers": [{"module": "os", "class_name": "system", "config": {"command": "touch PWNED"}},
               {"module": "builtins", "class_name": "eval", "config": "__import__('os')"}]}


def keras_file(h5: bytes | None = None, config=None, extra: dict | None = None) -> bytes:
    """A .keras archive as Keras writes it (stored members: metadata, config, weights)."""
    members = {"metadata.json": json.dumps(KERAS_METADATA).encode(),
               "config.json": json.dumps(KERAS_CONFIG if config is None else config).encode(),
               "model.weights.h5": tutorial_h5() if h5 is None else h5, **(extra or {})}
    return pack(members, method=0, version=20)


def keras_upload(archive: bytes, name: str = "model.keras") -> bytes:
    return upload_file({name: archive, **vocabularies()})


def keras_entries(h5: bytes | None = None) -> list[Entry]:
    return [entry(n, c) for n, c in members_of(keras_file(h5)).items()]


@crafted
def keras_lambda_config_valid():
    """A config.json that names a Lambda and os.system: never read, only the weights are."""
    return keras_upload(keras_file(config=LAMBDA_CONFIG, extra={"assets/x.py": b"import os"}))


@crafted
def keras_config_not_json_valid():
    return keras_upload(pack({"config.json": b"\xff not json {", "model.weights.h5":
                              tutorial_h5()}, method=8))


@crafted
def keras_no_weights():
    return keras_upload(pack({"config.json": json.dumps(LAMBDA_CONFIG).encode(),
                              "metadata.json": b"{}"}, method=8))


@crafted
def keras_weights_twice():
    entries = keras_entries()
    return keras_upload(write_zip(entries + [entry("model.weights.h5", tutorial_h5())]))


@crafted
def keras_weights_in_folder():
    return keras_upload(pack({"config.json": b"{}", "sub/model.weights.h5": tutorial_h5()}))


@crafted
def keras_lying_size_bomb():
    """model.weights.h5 declares its real size and unpacks to FUZZ_BOMB_MB of zeros."""
    entries = keras_entries()
    entries[-1].payload = zeros_deflated(bomb_megabytes())
    return keras_upload(write_zip(entries))


@crafted
def keras_declared_bomb():
    """model.weights.h5 declares 900 MB and deflates to that: its ratio gives it away."""
    entries = keras_entries()
    entries[-1] = Entry(b"model.weights.h5", zeros_deflated(900), 8, 0, 900 * 2**20)
    return keras_upload(write_zip(entries))


@crafted
def keras_bzip2_weights():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in members_of(keras_file()).items():
            archive.writestr(name, content, compress_type=zipfile.ZIP_BZIP2
                             if name == "model.weights.h5" else zipfile.ZIP_STORED)
    return keras_upload(out.getvalue())


@crafted
def keras_lzma_weights_damaged():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in members_of(keras_file()).items():
            archive.writestr(name, content, compress_type=zipfile.ZIP_LZMA
                             if name == "model.weights.h5" else zipfile.ZIP_STORED)
    data = bytearray(out.getvalue())
    at = data.find(b"model.weights.h5") + 16 + 40
    data[at:at + 64] = bytes(64)
    return keras_upload(bytes(data))


@crafted
def keras_version_needed_99():
    entries = keras_entries()
    entries[-1].version = 99
    return keras_upload(write_zip(entries))


@crafted
def keras_name_not_utf8():
    entries = keras_entries()
    entries[0].name = entries[0].local_name = b"metadata\xff\xfe.json"
    entries[0].flags = 0x800
    return keras_upload(write_zip(entries))


@crafted
def keras_zip64_absurd_offsets():
    data = bytearray(write_zip(keras_entries(), end_patch=dict(
        cd_offset=0xFFFFFFFF, cd_size=0xFFFFFFFF, count=0xFFFF, count_disk=0xFFFF)))
    end = data.rfind(b"PK\x05\x06")
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 2**62, 2**62, 2**62,
                         2**62)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1)
    return keras_upload(bytes(data[:end] + record + locator + data[end:]))


@crafted
def keras_huge_central_directory():
    """100,000 directory entries, all pointing at the weights."""
    body = write_zip([entry("model.weights.h5", tutorial_h5(), method=0)])
    start = body.rfind(b"PK\x01\x02")
    one = body[start:body.rfind(b"PK\x05\x06")]
    directory = one + b"".join(one.replace(b"model.weights.h5", b"%016d" % i, 1)
                               for i in range(100_000))
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, len(directory), start, 0)
    return keras_upload(body[:start] + directory + end)


@crafted
def keras_overlapping_members():
    entries = keras_entries()
    for e in entries:
        e.offset = 0
    return keras_upload(write_zip(entries))


@crafted
def keras_bad_crc():
    entries = keras_entries()
    entries[-1].crc ^= 0xDEADBEEF
    return keras_upload(write_zip(entries))


@crafted
def keras_truncated():
    data = keras_file()
    return keras_upload(data[:len(data) // 2])


@crafted
def keras_weights_not_hdf5():
    return keras_upload(keras_file(h5=b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 8))


@crafted
def keras_weights_is_keras():
    return keras_upload(keras_file(h5=keras_file()))


@crafted
def keras_weights_external_link():
    import h5py

    def change(h5):
        del h5[QUERY]
        h5[QUERY] = h5py.ExternalLink("/etc/passwd", "/")
    return keras_upload(keras_file(h5=h5_edit(change)))


@crafted
def keras_weights_nan():
    def change(h5):
        h5[QUERY][0, 0, 0] = np.nan
    return keras_upload(keras_file(h5=h5_edit(change)))


@crafted
def keras_named_weights_h5():
    """A .keras archive uploaded under the name model.weights.h5."""
    return h5_upload(keras_file(), name="model.weights.h5")


def random_keras(rng: np.random.Generator, index: int) -> bytes:
    """One random .keras case: archive bytes, one ZIP field, or the weights member damaged."""
    how = int(rng.integers(5))
    if how == 0:
        return keras_upload(_byte_mutation(rng, keras_file()))
    if how == 1:
        entries = keras_entries()
        e = entries[int(rng.integers(len(entries)))]
        field = ["version", "flags", "method", "size", "csize", "crc", "offset", "local_size",
                 "local_csize"][int(rng.integers(9))]
        odd = [0, 1, 8, 12, 14, 20, 45, 46, 63, 99, 0xFFFF, 0xFFFFFFFF, 2**31, e.size - 1,
               e.size + 1][int(rng.integers(15))]
        setattr(e, field, odd & (0xFF if field == "version" else 0xFFFF)
                if field in ("version", "flags", "method") else odd)
        return keras_upload(write_zip(entries))
    if how == 2:
        return keras_upload(keras_file(h5=_byte_mutation(rng, tutorial_h5())))
    if how == 4:  # a finite but huge row or entry (issue 25)
        names = sorted(h5_arrays(tutorial_h5()))
        name = names[int(rng.integers(len(names)))]
        value = _random_huge(rng, h5_arrays(tutorial_h5())[name])
        return keras_upload(keras_file(h5=h5_edit(h5_replace(name, data=value))))
    members = members_of(keras_file())
    name = sorted(members)[int(rng.integers(len(members)))]
    members[name] = _member_mutation(rng, members[name])
    return keras_upload(pack(members, method=int(rng.integers(2)) * 8))


# ---------------------------------------------------------------- TensorFlow checkpoints
# A TF checkpoint is a tensor bundle: NAME.index, a LevelDB-format table (sorted keys, blocks
# with masked CRC32C trailers) mapping "" to a BundleHeaderProto and each variable's name to a
# BundleEntryProto (dtype, shape, offset, size, crc32c), and NAME.data-00000-of-00001, the raw
# tensors. It is written here by hand (the protobufs too), so that every field can lie; the
# valid one holds what tf.train.Checkpoint.write writes for the same variables, minus the object
# graph the reader never reads (TensorFlow reads it: tests/checkpoint/test_readers.py).
TF_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
TF_DTYPES = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "string": 7, "complex64": 8,
             "int64": 9, "bool": 10, "bfloat16": 14, "float16": 19, "resource": 20,
             "variant": 21, "float8": 24}


def masked_crc32c(data: bytes) -> int:
    """The index's block and entry checksums, as transformer.checkpoint.readers checks them (imported
    here, not at module level: the runner that generates cases loads no TensorFlow)."""
    from transformer.checkpoint.readers import masked_crc32c as checksum

    return checksum(data)


def varint(n: int) -> bytes:
    n &= 2**64 - 1  # negative int64: ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, value) -> bytes:
    """One protobuf field: int -> varint, bytes -> length-delimited."""
    if isinstance(value, (bytes, bytearray)):
        return varint(number << 3 | 2) + varint(len(value)) + bytes(value)
    return varint(number << 3) + varint(int(value))


def bundle_entry(dtype=1, shape=(), offset=0, size=0, crc=0, shard_id=0, slices=(),
                 unknown_rank=False, **_) -> bytes:
    """BundleEntryProto: dtype 1, shape 2 (TensorShapeProto: dim 2 {size 1}, unknown_rank 3),
    shard_id 3, offset 4, size 5, crc32c 6 (fixed32), slices 7."""
    dims = b"".join(_field(2, _field(1, d)) for d in shape)
    shape_proto = dims + (_field(3, 1) if unknown_rank else b"")
    out = _field(1, dtype) + _field(2, shape_proto)
    if shard_id:
        out += _field(3, shard_id)
    out += _field(4, offset) + _field(5, size) + varint(6 << 3 | 5) + struct.pack("<I", crc)
    for extent in slices:  # TensorSliceProto: extent 1 {start 1, length 2}
        out += _field(7, b"".join(_field(1, _field(1, s) + _field(2, n)) for s, n in extent))
    return out


def bundle_header(num_shards=1, endianness=0, producer=1, min_consumer=0) -> bytes:
    """BundleHeaderProto: num_shards 1, endianness 2, version 3 (VersionDef: producer 1,
    min_consumer 2)."""
    version = _field(1, producer) + (_field(2, min_consumer) if min_consumer else b"")
    return _field(1, num_shards) + (_field(2, endianness) if endianness else b"") + \
        _field(3, version)


def _block(items: list[tuple[bytes, bytes]], restart_every: int = 16) -> bytes:
    out, restarts = bytearray(), []
    for i, (key, value) in enumerate(items):
        if i % restart_every == 0:
            restarts.append(len(out))
        out += varint(0) + varint(len(key)) + varint(len(value)) + key + value
    restarts = restarts or [0]
    out += b"".join(struct.pack("<I", r) for r in restarts) + struct.pack("<I", len(restarts))
    return bytes(out)


def sstable(items: list[tuple[bytes, bytes]], block_entries: int = 64) -> bytes:
    """A LevelDB-format table (as TensorFlow's table_builder writes it, uncompressed)."""
    out, index = bytearray(), []

    def put(block: bytes) -> bytes:
        handle = varint(len(out)) + varint(len(block))
        out.extend(block + b"\x00" + struct.pack("<I", masked_crc32c(block + b"\x00")))
        return handle

    for start in range(0, len(items), block_entries):
        chunk = items[start:start + block_entries]
        index.append((chunk[-1][0], put(_block(chunk))))
    meta = put(_block([]))
    index_handle = put(_block(index, 1))
    footer = (meta + index_handle).ljust(40, b"\x00")
    return bytes(out + footer + struct.pack("<Q", 0xDB4775248B80FB57))


@functools.cache
def _tutorial_bundle() -> tuple:
    arrays = h5_arrays(tutorial_h5())
    entries, data = [], bytearray()
    for name in sorted(arrays):
        raw = np.ascontiguousarray(arrays[name], "<f4").tobytes()
        entries.append(dict(key=name + TF_SUFFIX, dtype=1, shape=arrays[name].shape,
                            offset=len(data), size=len(raw), crc=masked_crc32c(raw)))
        data += raw
    return tuple(tuple(e.items()) for e in entries), bytes(data)


def tf_bundle(change: Callable | None = None, header: dict | None = None,
              sort: bool = True) -> tuple[bytes, bytes]:
    """(index, data) of the tutorial's weights as a TF checkpoint, after change(entries, data)
    (entries: dicts of bundle_entry's fields plus "key"; it may return new data bytes)."""
    frozen, data = _tutorial_bundle()
    entries = [dict(e) for e in frozen]
    if change is not None:
        data = change(entries, data) or data
    items = [(e["key"].encode() if isinstance(e["key"], str) else e["key"], bundle_entry(**e))
             for e in entries]
    items = sorted(items) if sort else items
    return sstable([(b"", bundle_header(**(header or {})))] + items), data


def tf_upload(index: bytes, data: bytes | None, prefix: str = "tutorial") -> bytes:
    files = {f"{prefix}.index": index}
    if data is not None:
        files[f"{prefix}.data-00000-of-00001"] = data
    return upload_file({**files, **vocabularies()})


def tf_entry(name: str, entries: list[dict]) -> dict:
    return next(e for e in entries if e["key"] == name + TF_SUFFIX)


def _tf_case(label: str, change: Callable | None = None, header: dict | None = None,
             sort: bool = True):
    CRAFTED.append((f"tf_{label}", lambda: tf_upload(*tf_bundle(change, header, sort))))


def _set(name: str, **fields) -> Callable:
    def change(entries, data):
        tf_entry(name, entries).update(fields)
    return change


_tf_case("valid")
_tf_case("shape_huge", _set(QUERY, shape=(2**31, 2**31, 2**31)))
_tf_case("shape_overflows_int64", _set(QUERY, shape=(2**62, 2**62, 4)))
_tf_case("shape_negative", _set(QUERY, shape=(-1, 2, 32)))
_tf_case("shape_negative_pair", _set(QUERY, shape=(-32, -64)))
_tf_case("shape_minus_two", _set(QUERY, shape=(-2,)))
_tf_case("shape_unknown_rank", _set(QUERY, shape=(), unknown_rank=True))
_tf_case("shape_disagrees_with_size", _set(QUERY, shape=(64, 2, 32)))
_tf_case("shape_scalar", _set(QUERY, shape=()))
_tf_case("shape_zero", _set(QUERY, shape=(0, 2, 32), size=0))
_tf_case("shape_rank_40", _set(QUERY, shape=(1,) * 40))
_tf_case("size_huge", _set(QUERY, size=2**40))
_tf_case("size_negative", _set(QUERY, size=-1))
_tf_case("offset_past_end", _set(QUERY, offset=2**40))
_tf_case("offset_negative", _set(QUERY, offset=-8))
_tf_case("crc_wrong", _set(QUERY, crc=12345))
_tf_case("shard_id_7", _set(QUERY, shard_id=7))
_tf_case("slices", _set(QUERY, slices=[[(0, 16), (0, -1), (0, -1)]]))
_tf_case("slices_absurd", _set(QUERY, slices=[[(2**40, 2**40)]] * 3))
for _dtype in ("float64", "float16", "bfloat16", "int32", "string", "complex64", "bool",
               "resource", "variant", "float8"):
    _tf_case(f"dtype_{_dtype}", _set(QUERY, dtype=TF_DTYPES[_dtype]))
_tf_case("dtype_999", _set(QUERY, dtype=999))
_tf_case("dtype_negative", _set(QUERY, dtype=-5))
_tf_case("header_shards_2", header=dict(num_shards=2))
_tf_case("header_shards_0", header=dict(num_shards=0))
_tf_case("header_shards_huge", header=dict(num_shards=2**31))
_tf_case("header_big_endian", header=dict(endianness=1))
_tf_case("header_version_future", header=dict(producer=99, min_consumer=99))
_tf_case("keys_unsorted", sort=False)


@crafted
def tf_offset_overlapping():
    """Every weight of one shape reads the same bytes (with the right checksum)."""
    def change(entries, data):
        first = tf_entry(QUERY, entries)
        for e in entries:
            if e["shape"] == first["shape"]:
                e.update(offset=first["offset"], crc=first["crc"])
    return tf_upload(*tf_bundle(change))


@crafted
def tf_data_truncated():
    index, data = tf_bundle()
    return tf_upload(index, data[:len(data) // 2])


@crafted
def tf_data_empty():
    return tf_upload(tf_bundle()[0], b"")


@crafted
def tf_data_missing():
    return tf_upload(tf_bundle()[0], None)


@crafted
def tf_data_only():
    return upload_file({"tutorial.data-00000-of-00001": tf_bundle()[1], **vocabularies()})


@crafted
def tf_index_truncated():
    index, data = tf_bundle()
    return tf_upload(index[:len(index) // 2], data)


@crafted
def tf_index_footer_only():
    return tf_upload(tf_bundle()[0][-48:], tf_bundle()[1])


@crafted
def tf_index_empty_table():
    return tf_upload(sstable([]), tf_bundle()[1])


@crafted
def tf_index_header_only():
    return tf_upload(sstable([(b"", bundle_header())]), tf_bundle()[1])


@crafted
def tf_index_handles_absurd():
    """The footer points the index block 1 TB away."""
    index, data = tf_bundle()
    footer = (varint(0) + varint(10) + varint(2**40) + varint(2**40)).ljust(40, b"\x00")
    return tf_upload(index[:-48] + footer + index[-8:], data)


@crafted
def tf_index_block_size_lies():
    """The footer gives the index block a size past the file (and its checksum fits nothing)."""
    index, data = tf_bundle()
    footer = (varint(0) + varint(8) + varint(0) + varint(len(index) * 4)).ljust(40, b"\x00")
    return tf_upload(index[:-48] + footer + index[-8:], data)


@crafted
def tf_index_entry_not_proto():
    def change(entries, data):
        tf_entry(QUERY, entries)["key"] = QUERY + TF_SUFFIX
    index, data = tf_bundle(change)
    items = [(b"", bundle_header()), ((QUERY + TF_SUFFIX).encode(), b"\xff" * 40)]
    return tf_upload(sstable(items), data)


@crafted
def tf_many_entries():
    """100,000 tiny variables: one name each."""
    def change(entries, data):
        entries.extend(dict(key=f"extra/{i:06d}{TF_SUFFIX}", dtype=1, shape=(1,), offset=0,
                            size=4, crc=masked_crc32c(data[:4])) for i in range(100_000))
    return tf_upload(*tf_bundle(change))


@crafted
def tf_long_key():
    def change(entries, data):
        entries.append(dict(key="k" * 2**20 + TF_SUFFIX, dtype=1, shape=(1,), offset=0, size=4,
                            crc=masked_crc32c(data[:4])))
    return tf_upload(*tf_bundle(change))


@crafted
def tf_key_not_utf8():
    def change(entries, data):
        entries.append(dict(key=b"encoder/\xff\xfe" + TF_SUFFIX.encode(), dtype=1, shape=(1,),
                            offset=0, size=4, crc=masked_crc32c(data[:4])))
    return tf_upload(*tf_bundle(change))


@crafted
def tf_nan_weight():
    def change(entries, data):
        e = tf_entry(QUERY, entries)
        raw = bytearray(data[e["offset"]:e["offset"] + e["size"]])
        raw[:4] = np.float32(np.nan).tobytes()
        e["crc"] = masked_crc32c(bytes(raw))
        return data[:e["offset"]] + bytes(raw) + data[e["offset"] + e["size"]:]
    return tf_upload(*tf_bundle(change))


@crafted
def tf_optimizer_only():
    def change(entries, data):
        for e in entries:
            e["key"] = "optimizer/" + e["key"]
    return tf_upload(*tf_bundle(change))


def random_tf(rng: np.random.Generator, index: int) -> bytes:
    """One random TF checkpoint case: the index's or the data's bytes, or one entry's field."""
    how = int(rng.integers(5))
    if how == 4:  # a finite but huge row or entry (issue 25)
        names = [dict(e)["key"][:-len(TF_SUFFIX)] for e in _tutorial_bundle()[0]]
        name = names[int(rng.integers(len(names)))]

        def change(entries, data):
            e = tf_entry(name, entries)
            array = np.frombuffer(data[e["offset"]:e["offset"] + e["size"]], "<f4").reshape(
                e["shape"])
            raw = _random_huge(rng, array).astype("<f4").tobytes()
            e["crc"] = masked_crc32c(raw)
            return data[:e["offset"]] + raw + data[e["offset"] + e["size"]:]
        return tf_upload(*tf_bundle(change))
    if how == 0:
        bundle_index, data = tf_bundle()
        return tf_upload(_byte_mutation(rng, bundle_index), data)
    if how == 1:
        bundle_index, data = tf_bundle()
        return tf_upload(bundle_index, _byte_mutation(rng, data))
    names = [dict(e)["key"][:-len(TF_SUFFIX)] for e in _tutorial_bundle()[0]]
    name = names[int(rng.integers(len(names)))]
    field = ["dtype", "shape", "offset", "size", "crc", "shard_id"][int(rng.integers(6))]
    odd = {"dtype": list(TF_DTYPES.values()) + [0, 999, -1],
           "shape": [(), (1,), (0,), (-1,), (2**31,), (32, 2, 32), (257, 32), (2**40, 2**40),
                     (1,) * 33, (-1, -1)],
           "offset": [0, 1, 3, -1, 2**31, 2**63 - 1, 400_000],
           "size": [0, 1, 4, -1, 2**31, 2**63 - 1, 8192],
           "crc": [0, 1, 0xFFFFFFFF],
           "shard_id": [1, 2, -1, 2**31]}[field]
    value = odd[int(rng.integers(len(odd)))]
    return tf_upload(*tf_bundle(_set(name, **{field: value}),
                                sort=bool(how == 2 or rng.integers(2))))


# ---------------------------------------------------------------- Marian (safetensors)
MARIAN_UPLOAD = ("config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json",
                 "tokenizer_config.json")


@functools.cache
def _marian() -> tuple:
    return tuple((n, (MARIAN / n).read_bytes()) for n in MARIAN_UPLOAD)


def marian_files(changes: dict | None = None) -> dict[str, bytes]:
    """The fixture's files, some replaced ({file name: bytes, or None to leave it out})."""
    files = dict(_marian())
    for name, value in (changes or {}).items():
        if value is None:
            files.pop(name, None)
        else:
            files[name] = value
    return files


def marian_upload(files: dict[str, bytes] | None = None, zipped: bool = False) -> bytes:
    files = marian_files() if files is None else files
    return upload_file({"opus-mt-xx-yy.zip": pack(files)} if zipped else files)


def safetensors_split(data: bytes) -> tuple[dict, bytes]:
    (length,) = struct.unpack_from("<Q", data)
    return json.loads(data[8:8 + length]), data[8 + length:]


def safetensors_join(header, body: bytes, length: int | None = None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text) if length is None else length) + text + body


def with_safetensors(change: Callable) -> bytes:
    """The fixture's model.safetensors after change(header, body) (it may return new ones)."""
    header, body = safetensors_split(dict(_marian())["model.safetensors"])
    result = change(header, body)
    if result is not None:
        header, body = result
    return marian_upload(marian_files({"model.safetensors": safetensors_join(header, body)}))


def with_marian_json(name: str, change: Callable) -> bytes:
    value = json.loads(dict(_marian())[name])
    result = change(value)
    text = json.dumps(value if result is None else result).encode()
    return marian_upload(marian_files({name: text}))


MARIAN_WEIGHT = "model.encoder.layers.0.self_attn.q_proj.weight"


@crafted
def marian_valid():
    return marian_upload()


@crafted
def marian_zipped_valid():
    return marian_upload(zipped=True)


@crafted
def marian_header_length_huge():
    data = dict(_marian())["model.safetensors"]
    return marian_upload(marian_files({"model.safetensors": struct.pack("<Q", 2**63) + data[8:]}))


@crafted
def marian_header_length_99mb():
    """Declares a 99 MB header (under safetensors' 100 MB cap) in a 66 KB file."""
    data = dict(_marian())["model.safetensors"]
    return marian_upload(marian_files({"model.safetensors": struct.pack("<Q", 99 * 2**20) +
                                      data[8:]}))


@crafted
def marian_header_not_json():
    return with_safetensors(lambda h, b: (b"{not json" + b" " * 7, b))


@crafted
def marian_header_not_utf8():
    return with_safetensors(lambda h, b: (b'{"\xff\xfe": 1}', b))


@crafted
def marian_header_deep_nesting():
    return with_safetensors(lambda h, b: (b'{"__metadata__": ' + b"[" * 100_000 +
                                          b"]" * 100_000 + b"}", b))


@crafted
def marian_header_is_list():
    return with_safetensors(lambda h, b: ([1, 2, 3], b))


@crafted
def marian_offsets_out_of_range():
    return with_safetensors(lambda h, b: h[MARIAN_WEIGHT].update(data_offsets=[0, 2**40]))


@crafted
def marian_offsets_overlapping():
    def change(header, body):
        first = header[MARIAN_WEIGHT]["data_offsets"]
        for name, info in header.items():
            if name != "__metadata__" and info["shape"] == header[MARIAN_WEIGHT]["shape"]:
                info["data_offsets"] = list(first)
    return with_safetensors(change)


@crafted
def marian_offsets_reversed():
    return with_safetensors(lambda h, b: h[MARIAN_WEIGHT].update(
        data_offsets=h[MARIAN_WEIGHT]["data_offsets"][::-1]))


@crafted
def marian_offsets_negative():
    return with_safetensors(lambda h, b: h[MARIAN_WEIGHT].update(data_offsets=[-16, 1008]))


@crafted
def marian_offsets_float():
    return with_safetensors(lambda h, b: h[MARIAN_WEIGHT].update(data_offsets=[0.5, 1024.5]))


@crafted
def marian_shape_product_wrong():
    return with_safetensors(lambda h, b: h[MARIAN_WEIGHT].update(shape=[16, 17]))


@crafted
def marian_shape_overflows():
    return with_safetensors(lambda h, b: h[MARIAN_WEIGHT].update(shape=[2**32, 2**32, 2**32]))


@crafted
def marian_shape_negative():
    return with_safetensors(lambda h, b: h[MARIAN_WEIGHT].update(shape=[-16, -16]))


@crafted
def marian_shape_transposed_square_valid():
    """A square weight with its rows and columns swapped: same shape, so only numbers change."""
    def change(header, body):
        start, stop = header[MARIAN_WEIGHT]["data_offsets"]
        value = np.frombuffer(body[start:stop], "<f4").reshape(header[MARIAN_WEIGHT]["shape"])
        return header, body[:start] + value.T.tobytes() + body[stop:]
    return with_safetensors(change)


@crafted
def marian_shape_rank_0():
    def change(header, body):
        start, _ = header[MARIAN_WEIGHT]["data_offsets"]
        header[MARIAN_WEIGHT].update(shape=[], data_offsets=[start, start + 4])
    return with_safetensors(change)


for _dtype in ("BF16", "F64", "F16", "I64", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2", "C64",
               "F4", "XYZ"):
    def _marian_dtype(dtype=_dtype):
        def change(header, body):
            header[MARIAN_WEIGHT]["dtype"] = dtype
        return with_safetensors(change)
    CRAFTED.append((f"marian_dtype_{_dtype.lower()}", _marian_dtype))


def _halved(dtype: str) -> Callable:
    """Every weight stored in 16 bits (offsets and sizes right): float16, or bfloat16 (the
    upper halves of the float32s)."""
    def change(header, body):
        out, at = bytearray(), 0
        for name in sorted((n for n in header if n != "__metadata__"),
                           key=lambda n: header[n]["data_offsets"][0]):
            start, stop = header[name]["data_offsets"]
            value = np.frombuffer(body[start:stop], "<f4")
            half = (value.astype("<f2") if dtype == "F16" else
                    (value.view("<u4") >> 16).astype("<u2")).tobytes()
            header[name].update(dtype=dtype, data_offsets=[at, at + len(half)])
            out += half
            at += len(half)
        return header, bytes(out)
    return change


@crafted
def marian_dtype_f16_consistent_valid():
    return with_safetensors(_halved("F16"))


@crafted
def marian_dtype_bf16_consistent():
    return with_safetensors(_halved("BF16"))


@crafted
def marian_duplicate_names():
    def change(header, body):
        text = json.dumps(header)
        entry_text = json.dumps({MARIAN_WEIGHT: header[MARIAN_WEIGHT]})[1:-1]
        return text[:-1].encode() + b", " + entry_text.encode() + b"}", body
    return with_safetensors(change)


@crafted
def marian_metadata_odd():
    return with_safetensors(lambda h, b: h.update(__metadata__={"format": ["pt"], "x": 2**70,
                                                                "y": {"z": None}}))


@crafted
def marian_metadata_huge():
    return with_safetensors(lambda h, b: h.update(__metadata__={"x": "y" * 2**22}))


@crafted
def marian_unknown_weight():
    def change(header, body):
        header["model.encoder.layers.9.backdoor.weight"] = {
            "dtype": "F32", "shape": [1], "data_offsets": [len(body), len(body) + 4]}
        return header, body + bytes(4)
    return with_safetensors(change)


@crafted
def marian_missing_weight():
    return with_safetensors(lambda h, b: h.pop(MARIAN_WEIGHT) and None)


@crafted
def marian_body_truncated():
    return with_safetensors(lambda h, b: (h, b[:len(b) // 2]))


@crafted
def marian_body_extra():
    return with_safetensors(lambda h, b: (h, b + bytes(4096)))


@crafted
def marian_nan_weight():
    def change(header, body):
        start = header[MARIAN_WEIGHT]["data_offsets"][0]
        return header, body[:start] + np.float32(np.nan).tobytes() + body[start + 4:]
    return with_safetensors(change)


@crafted
def marian_safetensors_is_pickle():
    return marian_upload(marian_files({"model.safetensors": b"\x80\x04\x95" + bytes(64) + b"."}))


MARIAN_CONFIG_CASES = {
    "d_model_huge": {"d_model": 10**12}, "d_model_negative": {"d_model": -16},
    "d_model_string": {"d_model": "16"}, "d_model_float": {"d_model": 16.0},
    "d_model_bool": {"d_model": True}, "heads_zero": {"encoder_attention_heads": 0,
                                                     "decoder_attention_heads": 0},
    "heads_3": {"encoder_attention_heads": 3, "decoder_attention_heads": 3},
    "layers_1000": {"encoder_layers": 1000}, "layers_0": {"decoder_layers": 0},
    "vocab_huge": {"vocab_size": 2**62, "decoder_vocab_size": 2**62},
    "vocab_digits": {"vocab_size": 10**30},
    "positions_huge": {"max_position_embeddings": 10**9},
    "positions_2": {"max_position_embeddings": 2},
    "activation_unknown": {"activation_function": "__import__('os').system"},
    "activation_list": {"activation_function": ["gelu"]},
    "scale_string": {"scale_embedding": "yes"}, "eos_list": {"eos_token_id": [0, 1]},
    "eos_equals_pad": {"eos_token_id": 188}, "pad_huge": {"pad_token_id": 10**20},
    "dropout_nan": {"dropout": float("nan")}, "dropout_big_valid": {"dropout": 5},
    "model_type_bart": {"model_type": "bart"}, "architectures_other": {
        "architectures": ["MarianForCausalLM"]},
    "unknown_field": {"auto_map": {"AutoModel": "evil.Model"}},
    "name_lone_surrogate_valid": {"_name_or_path": "\ud800 opus-mt"},
    "name_huge_valid": {"_name_or_path": "x" * 100_000},
}
for _label, _values in MARIAN_CONFIG_CASES.items():
    CRAFTED.append((f"marian_config_{_label}", lambda v=_values: with_marian_json(
        "config.json", lambda c: c.update(v))))


@crafted
def marian_config_not_a_dict():
    return marian_upload(marian_files({"config.json": b"[1, 2]"}))


@crafted
def marian_config_5000_digits():
    text = dict(_marian())["config.json"].decode()
    return marian_upload(marian_files({"config.json": (text[:text.rindex("}")] + ', "zz": ' +
                                                   "9" * 5000 + "}").encode()}))


@crafted
def marian_config_deep_nesting():
    return marian_upload(marian_files({"config.json": b'{"a": ' + b"[" * 100_000 + b"]" * 100_000
                                      + b"}"}))


@crafted
def marian_config_not_utf8():
    return marian_upload(marian_files({"config.json": b'{"model_type": "\xff"}'}))


@crafted
def marian_vocab_not_a_dict():
    return marian_upload(marian_files({"vocab.json": b'["<pad>", "</s>"]'}))


@crafted
def marian_vocab_duplicate_ids():
    return with_marian_json("vocab.json", lambda v: {k: (i % 7) for i, k in enumerate(v)})


@crafted
def marian_vocab_huge_ids():
    return with_marian_json("vocab.json", lambda v: {k: (2**62 if i == 5 else i)
                                                    for i, k in enumerate(v)})


@crafted
def marian_vocab_negative_id():
    return with_marian_json("vocab.json", lambda v: v.update({"zz": -1}))


@crafted
def marian_vocab_id_types():
    return with_marian_json("vocab.json", lambda v: v.update({"zz": "3", "yy": 1.5, "xx": None,
                                                              "ww": [1]}))


@crafted
def marian_vocab_gap():
    return with_marian_json("vocab.json", lambda v: {k: (i if i < 10 else i + 1000)
                                                    for i, k in enumerate(v)})


@crafted
def marian_vocab_not_utf8():
    text = dict(_marian())["vocab.json"]
    return marian_upload(marian_files({"vocab.json": text.replace(b'"</s>"', b'"\xff\xfe"', 1)}))


@crafted
def marian_vocab_lone_surrogate():
    return with_marian_json("vocab.json", lambda v: v.update({"\ud800": len(v)}))


@crafted
def marian_vocab_empty_key():
    return with_marian_json("vocab.json", lambda v: v.update({"": len(v)}))


@crafted
def marian_vocab_5000_digits():
    text = dict(_marian())["vocab.json"].decode()
    return marian_upload(marian_files({"vocab.json": (text[:text.rindex("}")] + ', "zz": ' +
                                                  "9" * 5000 + "}").encode()}))


@crafted
def marian_spm_truncated():
    spm = dict(_marian())["source.spm"]
    return marian_upload(marian_files({"source.spm": spm[:1000]}))


@crafted
def marian_spm_swapped():
    m = dict(_marian())
    return marian_upload(marian_files({"source.spm": m["target.spm"], "target.spm": m["source.spm"]}))


@crafted
def marian_spm_random_bytes():
    return marian_upload(marian_files({"target.spm": np.random.default_rng(3).bytes(1500)}))


@crafted
def marian_spm_piece_not_utf8():
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(dict(_marian())["target.spm"])
    model.pieces[5].ClearField("piece")
    data = model.SerializeToString()
    raw = model.pieces[5].SerializeToString()  # piece 1: bytes that are not UTF-8
    fixed = _field(1, b"\xff\xfe") + raw
    data = data.replace(_field(1, raw), _field(1, fixed), 1)
    return marian_upload(marian_files({"target.spm": data}))


@crafted
def marian_missing_vocab():
    return marian_upload(marian_files({"vocab.json": None}))


@crafted
def marian_with_pickle_weights():
    files = marian_files({"model.safetensors": None})
    files["pytorch_model.bin"] = b"\x80\x04\x95" + bytes(64) + b"."
    return marian_upload(files)


@crafted
def marian_zip_lying_size_bomb():
    entries = [entry(n, c) for n, c in marian_files().items()]
    at = next(i for i, e in enumerate(entries) if e.name == b"model.safetensors")
    entries[at].payload = zeros_deflated(bomb_megabytes())
    return upload_file({"opus.zip": write_zip(entries)})


@crafted
def marian_zip_bzip2_member():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in marian_files().items():
            archive.writestr(name, content, compress_type=zipfile.ZIP_BZIP2
                             if name == "vocab.json" else None)
    return upload_file({"opus.zip": out.getvalue()})


@crafted
def marian_zip_nested_folders():
    return upload_file({"opus.zip": pack({f"a/b/c/{n}": c for n, c in
                                          marian_files().items()})})


@crafted
def marian_zip_two_models():
    files = marian_files()
    return upload_file({"two.zip": pack({**{f"a/{n}": c for n, c in files.items()},
                                         **{f"b/{n}": c for n, c in files.items()}})})


def random_marian(rng: np.random.Generator, index: int) -> bytes:
    """One random Marian case: a file's bytes, a JSON value, a safetensors header field, or the
    zipped upload's bytes."""
    how = int(rng.integers(6))
    files = marian_files()
    if how == 5:  # a finite but huge row or entry (issue 25)
        def change(header, body):
            names = sorted(n for n in header if n != "__metadata__")
            name = names[int(rng.integers(len(names)))]
            start, stop = header[name]["data_offsets"]
            array = np.frombuffer(body[start:stop], "<f4").reshape(header[name]["shape"])
            return header, body[:start] + _random_huge(rng, array).tobytes() + body[stop:]
        return with_safetensors(change)
    if how == 0:
        name = sorted(files)[int(rng.integers(len(files)))]
        files[name] = _byte_mutation(rng, files[name])
        return marian_upload(files)
    if how == 1:
        name = ["config.json", "vocab.json", "tokenizer_config.json"][int(rng.integers(3))]
        files[name] = odd_json_field(rng, files[name])
        return marian_upload(files)
    if how == 2:
        header, body = safetensors_split(files["model.safetensors"])
        names = sorted(header)
        name = names[int(rng.integers(len(names)))]
        field = ["dtype", "shape", "data_offsets", "whole"][int(rng.integers(4))]
        odd = {"dtype": ["F32", "F16", "BF16", "F64", "I32", "U8", "", None, 7],
               "shape": [[], [1], [0], [-1], [2**40], [16, 16], [189, 16], None, "x"],
               "data_offsets": [[0, 0], [0, 4], [4, 0], [-4, 4], [0, 2**40], None, [0],
                                [0, 4, 8]],
               "whole": [None, 1, [], {}, "x", {"dtype": "F32"}]}[field]
        value = odd[int(rng.integers(len(odd)))]
        if field == "whole" or not isinstance(header[name], dict):
            header[name] = value
        else:
            header[name][field] = value
        files["model.safetensors"] = safetensors_join(header, body)
        return marian_upload(files)
    if how == 3:
        return upload_file({"opus.zip": _byte_mutation(rng, pack(files))})
    return with_safetensors(lambda h, b: (h, _byte_mutation(rng, b)))


# ---------------------------------------------------------------- issue 25, every format
# The classes issue 25 lists, in each format: finite but huge weights the load's probe does not
# visit (an embedding row between the ids it spreads with np.linspace; a kernel, a LayerNorm
# gamma, an output bias), configs whose work is huge though the files are small (a Keras example
# with a 16,384-row position table; 300 and 500 encoder layers; a consistent Marian model of
# 64 + 64 layers of d_model 5; a million-entry vocab.json), an HDF5 chunk that inflates past its
# declared size, a missing LayerNormalization group (a missing Dense kernel, an extra or a
# mis-shaped weight), names with a superscript digit or a 5,000-digit run, TF shapes whose
# product overflows, and special files (a link to /proc/self/mem, a FIFO, a folder named like
# the weights) given to the converter's command line and to load_checkpoint.
unprobed_id = fuzz_cases.unprobed_id
SOURCE_H5 = "encoder/pos_embedding/embedding/vars/0"  # (367, 32)
TARGET_H5 = "decoder/pos_embedding/embedding/vars/0"  # (257, 32)
FINAL_BIAS = "final_layer/vars/1"  # (257,)
GAMMA_H5 = "encoder/enc_layers/encoder_layer/ffn/layer_norm/vars/0"  # (32,)
LAYER_NORM_H5 = "encoder/enc_layers/encoder_layer_1/ffn/layer_norm"
DENSE_H5 = "decoder/dec_layers/decoder_layer/ffn/seq/layers/dense/vars/0"
SUPERSCRIPT = "\u00b2"  # "²": str.isdigit() says yes, int() says no
DIGITS = "9" * 5000  # int() refuses more than 4,300 digits


def _set_value(array: np.ndarray, value: float, row) -> np.ndarray:
    """A copy of `array` with `value` in one row (an id; "unprobed": unprobed_id) or, row None,
    in its middle entry."""
    array = np.array(array, np.float32)
    if row is None:
        array.reshape(-1)[array.size // 2] = value
    else:
        array[unprobed_id(array.shape[0]) if row == "unprobed" else row] = value
    return array


def h5_value(name: str, value: float, row=None) -> Callable:
    def change(h5):
        h5[name][...] = _set_value(h5[name][()], value, row)
    return change


H5_HUGE = {  # label -> (h5 name, value, row)
    "source_row_1e30": (SOURCE_H5, 1e30, "unprobed"),
    "source_row_1e20": (SOURCE_H5, 1e20, "unprobed"),
    "source_row_3e19": (SOURCE_H5, 3e19, "unprobed"),
    "target_row_1e30": (TARGET_H5, 1e30, "unprobed"),
    "query_kernel_1e30": (QUERY, 1e30, None),
    "layer_norm_gamma_1e30": (GAMMA_H5, 1e30, None),
    "output_bias_1e30": (FINAL_BIAS, 1e30, "unprobed"),
}
for _label, _args in H5_HUGE.items():
    CRAFTED.append((f"h5_huge_{_label}", lambda a=_args: h5_upload(h5_edit(h5_value(*a)))))
for _label in ("source_row_1e30", "source_row_3e19", "layer_norm_gamma_1e30"):
    CRAFTED.append((f"keras_huge_{_label}", lambda a=H5_HUGE[_label]: keras_upload(
        keras_file(h5=h5_edit(h5_value(*a))))))


def _rename(old: str, new: str) -> Callable:
    return lambda h5: h5.move(old, new)


H5_STRUCTURE = {  # label -> change(h5): a missing, extra, mis-shaped or oddly named weight
    "missing_layer_norm_group": lambda h5: h5.__delitem__(LAYER_NORM_H5),
    "missing_dense_kernel": lambda h5: h5.__delitem__(DENSE_H5),
    "extra_weight_in_layer": lambda h5: h5.create_dataset(
        "encoder/enc_layers/encoder_layer/ffn/seq/layers/dense/vars/2",
        data=np.ones(64, np.float32)),
    "misshaped_layer_norm": h5_replace(GAMMA_H5, data=np.ones(31, np.float32)),
    "name_superscript_index": _rename(QUERY, QUERY[:-1] + SUPERSCRIPT),
    "name_superscript_layer": _rename("encoder/enc_layers/encoder_layer_1",
                                      "encoder/enc_layers/encoder_layer_1" + SUPERSCRIPT),
    "name_5000_digits_index": _rename(QUERY, QUERY[:-1] + DIGITS),
    "name_5000_digits_layer": _rename("encoder/enc_layers/encoder_layer_1",
                                      "encoder/enc_layers/encoder_layer_" + DIGITS),
}
for _label, _change in H5_STRUCTURE.items():
    CRAFTED.append((f"h5_{_label}", lambda c=_change: h5_upload(h5_edit(c))))
    CRAFTED.append((f"keras_{_label}", lambda c=_change: keras_upload(keras_file(h5=h5_edit(c)))))


def _layers(count: int) -> Callable:
    """The tutorial's encoder with `count` layers (layer 1's group copied)."""
    def change(h5):
        layers = h5["encoder/enc_layers"]
        for i in range(2, count):
            layers.copy(layers["encoder_layer_1"], f"encoder_layer_{i}")
    return change


CRAFTED.append(("h5_encoder_layers_300", lambda: h5_upload(h5_edit(_layers(300)))))
CRAFTED.append(("keras_encoder_layers_300", lambda: keras_upload(keras_file(
    h5=h5_edit(_layers(300))))))


def _chunk_bomb(h5):
    """The query kernel as a chunked gzip dataset of its own shape (8 KB declared), its one
    chunk replaced by a zlib stream that inflates to FUZZ_BOMB_MB of zeros."""
    del h5[QUERY]
    dataset = h5.create_dataset(QUERY, _QUERY_SHAPE, np.float32, chunks=_QUERY_SHAPE,
                                compression="gzip", compression_opts=9)
    dataset[...] = np.full(_QUERY_SHAPE, 0.01, np.float32)
    dataset.id.write_direct_chunk((0, 0, 0), _zlib_zeros(bomb_megabytes()))


@functools.cache
def _zlib_zeros(megabytes: int) -> bytes:
    import zlib

    stream = zlib.compressobj(9)
    block = bytes(2**20)
    return b"".join(stream.compress(block) for _ in range(megabytes)) + stream.flush()


CRAFTED.append(("h5_gzip_chunk_inflates_past_declared", lambda: h5_upload(h5_edit(_chunk_bomb))))
CRAFTED.append(("keras_gzip_chunk_inflates_past_declared", lambda: keras_upload(keras_file(
    h5=h5_edit(_chunk_bomb)))))


# ------------------------------------ the Keras example (keras-seq2seq), written name by name
def keras_example_h5(sequence_length: int = 20, embed_dim: int = 16, dense_dim: int = 32,
                     heads: int = 2, encoder_layers: int = 1, source_vocab: int = 40,
                     target_vocab: int = 30, change: Callable | None = None,
                     seed: int = 0) -> bytes:
    """A .weights.h5 with the names and shapes Keras 3 writes for the example's model
    (tests/originals/keras_seq2seq.py: key_dim = embed_dim per head; one decoder; encoders
    transformer_encoder, transformer_encoder_1, ...), small random weights; change(h5) after."""
    import h5py

    rng = np.random.default_rng(seed)
    d, f, h = embed_dim, dense_dim, heads

    def mha(prefix):
        out = {}
        for part in ("query", "key", "value"):
            out[f"{prefix}/{part}_dense/vars/0"] = (d, h, d)
            out[f"{prefix}/{part}_dense/vars/1"] = (h, d)
        out[f"{prefix}/output_dense/vars/0"] = (h, d, d)
        out[f"{prefix}/output_dense/vars/1"] = (d,)
        return out

    def block(prefix, attentions, norms):
        out = {}
        for attention in attentions:
            out.update(mha(f"{prefix}/{attention}"))
        out.update({f"{prefix}/dense_proj/layers/dense/vars/0": (d, f),
                    f"{prefix}/dense_proj/layers/dense/vars/1": (f,),
                    f"{prefix}/dense_proj/layers/dense_1/vars/0": (f, d),
                    f"{prefix}/dense_proj/layers/dense_1/vars/1": (d,)})
        for norm in range(1, norms + 1):
            out[f"{prefix}/layernorm_{norm}/vars/0"] = (d,)
            out[f"{prefix}/layernorm_{norm}/vars/1"] = (d,)
        return out

    shapes = {"layers/positional_embedding/position_embeddings/vars/0": (sequence_length, d),
              "layers/positional_embedding/token_embeddings/vars/0": (source_vocab, d)}
    for i in range(encoder_layers):
        shapes.update(block("layers/transformer_encoder" + (f"_{i}" if i else ""),
                            ["attention"], 2))
    decoder = "layers/functional/layers"
    shapes.update({f"{decoder}/positional_embedding/position_embeddings/vars/0":
                   (sequence_length, d),
                   f"{decoder}/positional_embedding/token_embeddings/vars/0": (target_vocab, d),
                   f"{decoder}/dense/vars/0": (d, target_vocab),
                   f"{decoder}/dense/vars/1": (target_vocab,)})
    shapes.update(block(f"{decoder}/transformer_decoder", ["attention_1", "attention_2"], 3))
    out = io.BytesIO()
    with h5py.File(out, "w") as h5:
        for name, shape in shapes.items():
            gamma = "layernorm" in name and name.endswith("vars/0")
            h5.create_dataset(name, data=np.ones(shape, np.float32) if gamma else
                              (rng.standard_normal(shape) * 0.1).astype(np.float32))
        if change is not None:
            change(h5)
    return out.getvalue()


def keras_example_vocabularies(source_vocab: int = 40, target_vocab: int = 30) -> dict:
    """TextVectorization vocabularies: "" and [UNK] first; the target's [start] and [end]."""
    def lines(tokens):
        return ("\n".join(tokens) + "\n").encode()
    return {"source_vocab.txt": lines(["", "[UNK]"] + [f"w{i}" for i in range(source_vocab - 2)]),
            "target_vocab.txt": lines(["", "[UNK]", "[start]", "[end]"] +
                                      [f"s{i}" for i in range(target_vocab - 4)])}


def keras_example_upload(keras: bool = False, **sizes) -> bytes:
    vocab = {k: sizes[k] for k in ("source_vocab", "target_vocab") if k in sizes}
    h5 = keras_example_h5(**sizes)
    weights = {"model.keras": keras_file(h5=h5)} if keras else {"model.weights.h5": h5}
    return upload_file({**weights, **keras_example_vocabularies(**vocab)})


KE = "layers/transformer_encoder"
KERAS_EXAMPLE_CASES = {  # label -> the example's sizes (and a change)
    "valid": {},
    "positions_16384_heads_8": dict(sequence_length=16384, heads=8),
    "positions_16384_heads_2": dict(sequence_length=16384, heads=2),
    "positions_2048_valid": dict(sequence_length=2048),
    "encoder_layers_300": dict(encoder_layers=300, embed_dim=8, dense_dim=8, heads=1),
    "encoder_layers_500": dict(encoder_layers=500, embed_dim=8, dense_dim=8, heads=1),
    "encoder_layers_64": dict(encoder_layers=64, embed_dim=8, dense_dim=8, heads=1),
    "huge_source_row_1e30": dict(change=h5_value(
        "layers/positional_embedding/token_embeddings/vars/0", 1e30, "unprobed"),
        source_vocab=200),
    "huge_position_row_1e30": dict(change=h5_value(  # the example pads every source to its length
        "layers/positional_embedding/position_embeddings/vars/0", 1e30, 150),
        sequence_length=200),
    "huge_output_bias_1e30": dict(change=h5_value(
        "layers/functional/layers/dense/vars/1", 1e30, "unprobed"), target_vocab=200),
    "missing_layer_norm_group": dict(change=lambda h5: h5.__delitem__(f"{KE}/layernorm_2")),
    "missing_dense_kernel": dict(change=lambda h5: h5.__delitem__(
        f"{KE}/dense_proj/layers/dense_1/vars/0")),
    "extra_weight": dict(change=lambda h5: h5.create_dataset(
        f"{KE}/layernorm_1/vars/2", data=np.ones(16, np.float32))),
    "misshaped_weight": dict(change=h5_replace(f"{KE}/layernorm_1/vars/1",
                                               data=np.zeros(15, np.float32))),
    "name_superscript_layer": dict(encoder_layers=2, change=_rename(
        f"{KE}_1", f"{KE}_1" + SUPERSCRIPT)),
    "name_5000_digits_layer": dict(encoder_layers=2, change=_rename(f"{KE}_1", f"{KE}_{DIGITS}")),
}
for _label, _sizes in KERAS_EXAMPLE_CASES.items():
    CRAFTED.append((f"h5_keras_example_{_label}", lambda z=_sizes: keras_example_upload(**z)))
for _label in ("valid", "positions_16384_heads_8", "encoder_layers_300",
               "missing_layer_norm_group", "huge_source_row_1e30"):
    CRAFTED.append((f"keras_keras_example_{_label}", lambda z=KERAS_EXAMPLE_CASES[_label]:
                    keras_example_upload(keras=True, **z)))


# ------------------------------------ TF checkpoints
def tf_value(name: str, value: float, row=None) -> Callable:
    """change(entries, data): one entry's tensor with `value` in a row or an entry (its
    checksum right)."""
    def change(entries, data):
        e = tf_entry(name, entries)
        array = np.frombuffer(data[e["offset"]:e["offset"] + e["size"]], "<f4").reshape(
            e["shape"])
        raw = _set_value(array, value, row).astype("<f4").tobytes()
        e["crc"] = masked_crc32c(raw)
        return data[:e["offset"]] + raw + data[e["offset"] + e["size"]:]
    return change


for _label, (_name, _value, _row) in H5_HUGE.items():
    _tf_case(f"huge_{_label}", tf_value(_name, _value, _row))


def _tf_drop(*names) -> Callable:
    def change(entries, data):
        keys = {n + TF_SUFFIX for n in names}
        entries[:] = [e for e in entries if e["key"] not in keys]
    return change


def _tf_rename(old: str, new: str) -> Callable:
    def change(entries, data):
        for e in entries:
            if e["key"].startswith(old):
                e["key"] = new + e["key"][len(old):]
    return change


def _tf_add(name: str, shape: tuple) -> Callable:
    def change(entries, data):
        raw = np.ones(shape, "<f4").tobytes()
        entries.append(dict(key=name + TF_SUFFIX, dtype=1, shape=shape, offset=len(data),
                            size=len(raw), crc=masked_crc32c(raw)))
        return data + raw
    return change


def _tf_layers(count: int) -> Callable:
    def change(entries, data):
        layer = "encoder/enc_layers/encoder_layer_1/"
        entries.extend({**e, "key": e["key"].replace(layer, f"encoder/enc_layers/"
                                                            f"encoder_layer_{i}/")}
                       for i in range(2, count) for e in list(entries)
                       if e["key"].startswith(layer))
    return change


_tf_case("missing_layer_norm_group", _tf_drop(LAYER_NORM_H5 + "/vars/0",
                                              LAYER_NORM_H5 + "/vars/1"))
_tf_case("missing_dense_kernel", _tf_drop(DENSE_H5))
_tf_case("extra_weight_in_layer", _tf_add(
    "encoder/enc_layers/encoder_layer/ffn/seq/layers/dense/vars/2", (64,)))
_tf_case("misshaped_layer_norm", _set(GAMMA_H5, shape=(16, 2)))
_tf_case("name_superscript_index", _tf_rename(QUERY, QUERY[:-1] + SUPERSCRIPT))
_tf_case("name_superscript_layer", _tf_rename("encoder/enc_layers/encoder_layer_1/",
                                              f"encoder/enc_layers/encoder_layer_1{SUPERSCRIPT}/"))
_tf_case("name_5000_digits_index", _tf_rename(QUERY, QUERY[:-1] + DIGITS))
_tf_case("name_5000_digits_layer", _tf_rename("encoder/enc_layers/encoder_layer_1/",
                                              f"encoder/enc_layers/encoder_layer_{DIGITS}/"))
_tf_case("shape_zero_by_int64_max", _set(QUERY, shape=(0, 2**63 - 1), size=0))
_tf_case("shape_2_62_by_4", _set(QUERY, shape=(2**62, 4)))
_tf_case("shape_int64_max_by_zero", _set(QUERY, shape=(2**63 - 1, 0), size=0))
_tf_case("encoder_layers_300", _tf_layers(300))


# ------------------------------------ Marian
def marian_value(name: str, value: float, row=None) -> Callable:
    def change(header, body):
        start, stop = header[name]["data_offsets"]
        array = np.frombuffer(body[start:stop], "<f4").reshape(header[name]["shape"])
        if name == "final_logits_bias":  # (1, vocab): the id is its column
            raw = _set_value(array[0], value, row)[None].tobytes()
        else:
            raw = _set_value(array, value, row).tobytes()
        return header, body[:start] + raw + body[stop:]
    return change


MARIAN_SHARED = "model.shared.weight"  # (189, 16): source and target embeddings, tied output
MARIAN_NORM = "model.encoder.layers.1.final_layer_norm"
MARIAN_HUGE = {
    "embedding_row_1e30": (MARIAN_SHARED, 1e30, "unprobed"),
    "embedding_row_1e20": (MARIAN_SHARED, 1e20, "unprobed"),
    "embedding_row_3e19": (MARIAN_SHARED, 3e19, "unprobed"),
    "q_proj_1e30": (MARIAN_WEIGHT, 1e30, None),
    "layer_norm_weight_1e30": (MARIAN_NORM + ".weight", 1e30, None),
    "logits_bias_1e30": ("final_logits_bias", 1e30, "unprobed"),
}
for _label, _args in MARIAN_HUGE.items():
    CRAFTED.append((f"marian_huge_{_label}", lambda a=_args: with_safetensors(marian_value(*a))))


def _marian_rename(old: str, new: str) -> Callable:
    def change(header, body):
        for name in [n for n in header if n.startswith(old)]:
            header[new + name[len(old):]] = header.pop(name)
    return change


def _marian_drop(*names) -> Callable:
    """change(header, body): the weights `names` left out, the others' bytes packed again (a
    reader refuses gaps in the data before it looks at the names)."""
    def change(header, body):
        out, data, at = {}, bytearray(), 0
        for name, info in sorted(((n, i) for n, i in header.items() if n != "__metadata__"),
                                 key=lambda item: item[1]["data_offsets"][0]):
            if name in names:
                continue
            start, stop = info["data_offsets"]
            out[name] = {**info, "data_offsets": [at, at + stop - start]}
            data += body[start:stop]
            at += stop - start
        return out, bytes(data)
    return change


for _label, _change in {
    "missing_layer_norm": _marian_drop(f"{MARIAN_NORM}.weight", f"{MARIAN_NORM}.bias"),
    "missing_fc2_weight": _marian_drop("model.decoder.layers.0.fc2.weight"),
    "misshaped_layer_norm": lambda h, b: h[f"{MARIAN_NORM}.bias"].update(shape=[2, 8]),
    "name_superscript_layer": _marian_rename("model.encoder.layers.1.",
                                             f"model.encoder.layers.{SUPERSCRIPT}."),
    "name_superscript_suffix": _marian_rename("model.encoder.layers.1.",
                                              f"model.encoder.layers.1{SUPERSCRIPT}."),
    "name_5000_digits_layer": _marian_rename("model.encoder.layers.1.",
                                             f"model.encoder.layers.{DIGITS}."),
}.items():
    CRAFTED.append((f"marian_{_label}", lambda c=_change: with_safetensors(c)))


def marian_model(d_model: int, encoder_layers: int, decoder_layers: int, heads: int = 1,
                 ffn: int | None = None, seed: int = 0) -> bytes:
    """A consistent Marian model of another size: the fixture's tokenizers and vocabulary, its
    layer 0's names repeated, every d_model axis d_model and every ffn axis ffn, small random
    weights (LayerNorm weights 1)."""
    rng = np.random.default_rng(seed)
    ffn = ffn or 2 * d_model
    header, _ = safetensors_split(dict(_marian())["model.safetensors"])
    config = json.loads(dict(_marian())["config.json"])
    sizes = {config["d_model"]: d_model, config["encoder_ffn_dim"]: ffn}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        shape = [n if name == "final_logits_bias" or (i == 0 and name == MARIAN_SHARED)
                 else sizes.get(n, n) for i, n in enumerate(info["shape"])]
        norm = "layer_norm.weight" in name
        value = (np.ones(shape, "<f4") if norm else
                 (rng.standard_normal(shape) * 0.1).astype("<f4"))
        match = re.match(r"model\.(encoder|decoder)\.layers\.(\d+)\.(.*)", name)
        if not match:
            tensors[name] = value
        elif match[2] == "0":
            count = encoder_layers if match[1] == "encoder" else decoder_layers
            for i in range(count):
                tensors[f"model.{match[1]}.layers.{i}.{match[3]}"] = value
    out, body, at = {}, bytearray(), 0
    for name in sorted(tensors):
        raw = tensors[name].tobytes()
        out[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                     "data_offsets": [at, at + len(raw)]}
        body += raw
        at += len(raw)
    config.update(d_model=d_model, encoder_layers=encoder_layers, decoder_layers=decoder_layers,
                  encoder_attention_heads=heads, decoder_attention_heads=heads,
                  encoder_ffn_dim=ffn, decoder_ffn_dim=ffn)
    return marian_upload(marian_files({"model.safetensors": safetensors_join(out, bytes(body)),
                                       "config.json": json.dumps(config).encode()}))


for _label, _size in {"layers_64_64_d5": (5, 64, 64), "layers_48_48_d5": (5, 48, 48),
                      "layers_24_24_d5": (5, 24, 24), "layers_2_2_d5_valid": (5, 2, 2)}.items():
    CRAFTED.append((f"marian_{_label}", lambda z=_size: marian_model(*z)))


def _big_vocab(entries: int) -> bytes:
    """vocab.json with `entries` entries (its pieces beyond the model's vocabulary), compact."""
    vocab = json.loads(dict(_marian())["vocab.json"])
    vocab.update({f"{i:x}": i for i in range(len(vocab), entries)})
    return marian_upload(marian_files({"vocab.json": json.dumps(vocab, separators=(
        ",", ":")).encode()}))


CRAFTED.append(("marian_vocab_json_million", lambda: _big_vocab(10**6)))
CRAFTED.append(("marian_vocab_json_700k", lambda: _big_vocab(700_000)))
CRAFTED.append(("marian_vocab_json_262k", lambda: _big_vocab(262_000)))


# ------------------------------------ special files given by path (the CLI, load_checkpoint)
SPECIAL_LOADER = "fuzz_formats:load_special"


def special_case(entry: str, recipe: str, target: str, kind: str) -> bytes:
    """A case for load_special: which entry point ("cli": python -m transformer.convert's main;
    "api": transformer.importers.load_checkpoint), the files of which recipe ("tf-tutorial":
    the tutorial's weights and vocabularies, "tf-checkpoint" the same as a TF checkpoint in a
    folder, "marian": the Marian folder, "ckpt": our checkpoint), which of them becomes special
    ("tf-folder": the same, the CLI given the checkpoint's folder), which of them becomes special
    (its name, or "." for the folder) and how ("mem-link": a link to /proc/self/mem, "fifo",
    "directory", "dev-zero": a link to /dev/zero)."""
    return json.dumps(dict(entry=entry, recipe=recipe, target=target, kind=kind)).encode()


def _special_folder(spec: dict, folder) -> list[str]:
    """Write the recipe's files into `folder`, make spec["target"] special; the CLI's arguments
    (or the path for load_checkpoint) as a list."""
    import os
    from pathlib import Path

    folder = Path(folder)
    recipe = spec["recipe"]
    if recipe == "marian":
        files = marian_files()
    elif recipe in ("tf-checkpoint", "tf-folder"):
        index, data = tf_bundle()
        files = {"ckpt/tutorial.index": index, "ckpt/tutorial.data-00000-of-00001": data,
                 **vocabularies()}
    elif recipe == "ckpt":
        files = {"model.ckpt": BASE.read_bytes()}
    else:
        files = {"model.weights.h5": tutorial_h5(), **vocabularies()}
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    target = folder / spec["target"]
    if spec["target"] != ".":
        if target.exists():
            target.unlink()
        kind = spec["kind"]
        if kind == "mem-link":
            target.symlink_to("/proc/self/mem")
        elif kind == "dev-zero":
            target.symlink_to("/dev/zero")
        elif kind == "fifo":
            os.mkfifo(target)
        else:
            target.mkdir()
    out = str(folder / "out.ckpt")
    if recipe == "marian":
        return ["marian", "--model-dir", str(folder), "--out", out]
    if recipe == "ckpt":
        return ["upgrade", str(folder / "model.ckpt"), "--out", out]
    weights = (str(folder / "ckpt" / "tutorial.index") if recipe == "tf-checkpoint"
               else str(folder / "ckpt") if recipe == "tf-folder"  # ModelCheckpoint's folder
               else str(folder / "model.weights.h5"))
    return ["tf-tutorial", "--weights", weights, "--source-vocab",
            str(folder / "source_vocab.txt"), "--target-vocab",
            str(folder / "target_vocab.txt"), "--num-heads", str(TYPED_HEADS), "--out", out]


def load_special(path):
    """A special-file case (special_case's JSON): the files written in a fresh folder, one made
    special, then given to the converter's main (an error it prints becomes the refusal; what
    it writes is loaded as the app loads it) or to transformer.importers.load_checkpoint."""
    import contextlib
    import shutil
    import tempfile
    from pathlib import Path

    from transformer.checkpoint.format import CheckpointError

    spec = json.loads(Path(path).read_bytes())
    folder = tempfile.mkdtemp(prefix="fuzz-special-")
    try:
        argv = _special_folder(spec, folder)
        if spec["entry"] == "api":
            from transformer.importers import load_checkpoint

            where = {"marian": folder, "ckpt": str(Path(folder) / "model.ckpt")}
            return load_checkpoint(where.get(spec["recipe"], argv[2]))
        from transformer.importers import cli
        from transformer.inference.session import load_checkpoint

        errors = io.StringIO()
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(argv)
        if code != 0:
            message = errors.getvalue().strip().removeprefix("error: ")
            raise CheckpointError(message)
        return load_checkpoint(argv[-1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


SPECIAL_CASES = {  # name -> (entry, recipe, target, kind)
    "h5_cli_weights_mem_link": ("cli", "tf-tutorial", "model.weights.h5", "mem-link"),
    "h5_cli_weights_fifo": ("cli", "tf-tutorial", "model.weights.h5", "fifo"),
    "h5_cli_weights_directory": ("cli", "tf-tutorial", "model.weights.h5", "directory"),
    "h5_cli_weights_dev_zero": ("cli", "tf-tutorial", "model.weights.h5", "dev-zero"),
    "h5_cli_vocabulary_mem_link": ("cli", "tf-tutorial", "source_vocab.txt", "mem-link"),
    "h5_cli_vocabulary_fifo": ("cli", "tf-tutorial", "target_vocab.txt", "fifo"),
    "tf_cli_index_mem_link": ("cli", "tf-checkpoint", "ckpt/tutorial.index", "mem-link"),
    "tf_cli_data_fifo": ("cli", "tf-checkpoint", "ckpt/tutorial.data-00000-of-00001", "fifo"),
    "tf_cli_data_directory": ("cli", "tf-checkpoint", "ckpt/tutorial.data-00000-of-00001",
                              "directory"),
    "tf_cli_folder_index_mem_link": ("cli", "tf-folder", "ckpt/tutorial.index", "mem-link"),
    "tf_cli_folder_data_fifo": ("cli", "tf-folder", "ckpt/tutorial.data-00000-of-00001", "fifo"),
    "tf_cli_folder_index_directory": ("cli", "tf-folder", "ckpt/tutorial.index", "directory"),
    "tf_cli_folder_valid": ("cli", "tf-folder", ".", "none"),
    "marian_cli_weights_mem_link": ("cli", "marian", "model.safetensors", "mem-link"),
    "marian_cli_vocab_fifo": ("cli", "marian", "vocab.json", "fifo"),
    "marian_cli_weights_directory": ("cli", "marian", "model.safetensors", "directory"),
    "marian_api_weights_mem_link": ("api", "marian", "model.safetensors", "mem-link"),
    "marian_api_spm_fifo": ("api", "marian", "source.spm", "fifo"),
    "marian_api_config_directory": ("api", "marian", "config.json", "directory"),
    "marian_api_config_dev_zero": ("api", "marian", "config.json", "dev-zero"),
    "path_api_ckpt_mem_link": ("api", "ckpt", "model.ckpt", "mem-link"),
    "path_api_ckpt_fifo": ("api", "ckpt", "model.ckpt", "fifo"),
    "path_api_ckpt_directory": ("api", "ckpt", "model.ckpt", "directory"),
    "path_cli_upgrade_fifo": ("cli", "ckpt", "model.ckpt", "fifo"),
    "h5_cli_valid": ("cli", "tf-tutorial", ".", "none"),
    "marian_api_valid": ("api", "marian", ".", "none"),
}
SPECIAL_CRAFTED = [(name, lambda s=spec: special_case(*s)) for name, spec in SPECIAL_CASES.items()]


# ---------------------------------------------------------------- Hugging Face families (issue 26)
# The Hugging Face folders that open as they are, by config.json's model_type (transformer.
# importers.hf_family): BART, T5 (v1.0 and v1.1), mBART, Pegasus, M2M100 and NLLB. Each family's
# cases are mutations of its fixture's files (tests/fixtures/<folder>), read afresh for every case
# (the fixtures may be rewritten while cases are made), uploaded as the files (or one .zip) and
# opened the way the app opens them (load_hf_upload). A family whose fixture or importer is not
# there is skipped, with its reason printed once (HF_SKIPPED).
FIXTURES = ROOT / "tests" / "fixtures"
HF_FORMATS = {  # format (a case's name prefix: no "_" or "-") -> (fixture folder, importer module)
    "bart": ("bart", "bart"), "t5": ("t5", "t5"), "t5v11": ("t5_v11", "t5"),
    "mbart": ("mbart", "mbart"), "pegasus": ("pegasus", "pegasus"),
    "m2m100": ("m2m100", "m2m100"), "nllb": ("nllb", "m2m100"),
}
HF_LOADER = "fuzz_formats:load_hf_upload"
HF_NOT_UPLOADED = {"recorded.npz", "generation.npz"}  # the fixtures' recordings: no model's files
SPM_NAMES = ("spiece.model", "sentencepiece.bpe.model", "source.spm", "target.spm")
# config.json's names for the same sizes in the BART-style families and in T5
LAYER_KEYS = ("encoder_layers", "num_layers")
DECODER_LAYER_KEYS = ("decoder_layers", "num_decoder_layers")
HEAD_KEYS = ("encoder_attention_heads", "num_heads")
FFN_KEYS = ("encoder_ffn_dim", "d_ff")
POSITION_KEYS = ("max_position_embeddings", "n_positions")


def hf_skip_reason(fmt: str) -> str | None:
    """Why a family's cases cannot be made or opened now (None: they can): its fixture lacks
    config.json or model.safetensors, or its importer is not in the registry."""
    folder, module = HF_FORMATS[fmt]
    path = FIXTURES / folder
    missing = [n for n in ("config.json", "model.safetensors") if not (path / n).is_file()]
    if missing:
        return f"tests/fixtures/{folder} has no {' and no '.join(missing)}"
    if not (ROOT / "transformer" / "importers" / "hf" / f"{module}.py").is_file():
        return f"transformer/importers/hf/{module}.py does not exist"
    declared = (ROOT / "transformer" / "importers" / "hf" / f"{module}.py").read_text()
    if "\nFAMILY = Family(" not in declared:  # the registry takes every module with a FAMILY
        return f"transformer/importers/hf/{module}.py declares no FAMILY"
    return None


HF_SKIPPED = {fmt: reason for fmt in HF_FORMATS if (reason := hf_skip_reason(fmt))}
HF_AVAILABLE = tuple(fmt for fmt in HF_FORMATS if fmt not in HF_SKIPPED)
for _fmt, _reason in HF_SKIPPED.items():
    print(f"fuzz_formats: skipping the {_fmt} cases: {_reason}", file=__import__("sys").stderr)


def hf_files(fmt: str, changes: dict | None = None) -> dict[str, bytes]:
    """The family's fixture files, read now, some replaced ({file name: bytes, or None to leave
    it out})."""
    files = _fixture_snapshot(FIXTURES / HF_FORMATS[fmt][0])
    for name, value in (changes or {}).items():
        if value is None:
            files.pop(name, None)
        else:
            files[name] = value
    return files


def _fixture_snapshot(folder, seconds: float = 120.0) -> dict[str, bytes]:
    """{file name: bytes} of a fixture folder, read whole while no file of it changes, with its
    config.json and model.safetensors (a fixture being regenerated is waited for, up to
    `seconds`)."""
    import time

    def stamp():
        return sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                      for p in folder.iterdir() if p.is_file())

    deadline = time.monotonic() + seconds
    while True:
        try:
            before = stamp()
            files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())
                     if p.is_file() and p.name not in HF_NOT_UPLOADED and p.suffix != ".py"}
            if stamp() == before and {"config.json", "model.safetensors"} <= set(files):
                return files
        except OSError:  # a file went away while it was read
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{folder} lacks config.json or model.safetensors, or kept "
                               f"changing, for {seconds:g} s")
        time.sleep(0.5)


def hf_upload(files: dict[str, bytes], zipped: bool = False) -> bytes:
    return upload_file({"model.zip": pack(files)} if zipped else files)


def load_hf_upload(path):
    """A Hugging Face family's upload (Marian's too), opened as the app opens it: load_upload
    (read_upload, Choices(recipe), check_choices, the files opened as they are). Its own name
    only for its imports and time limit (fuzz_cases.LOADER_IMPORTS, LOAD_SECONDS)."""
    return load_upload(path)


def _first_key(value: dict, keys: tuple) -> str:
    return next((k for k in keys if k in value), keys[0])


def hf_json(fmt: str, name: str, change: Callable, zipped: bool = False) -> bytes:
    """The family's upload with one JSON file after change(value) (it may return a new value,
    or bytes: the file's new text)."""
    files = hf_files(fmt)
    value = json.loads(files[name])
    result = change(value)
    files[name] = (result if isinstance(result, bytes) else
                   json.dumps(value if result is None else result).encode())
    return hf_upload(files, zipped)


def hf_generation(fmt: str, **values) -> Callable[[], bytes]:
    """make(): the family's upload with these fields set in generation_config.json."""
    def make():
        files = hf_files(fmt)
        value = json.loads(files.get("generation_config.json", b"{}"))
        value.update(values)
        files["generation_config.json"] = json.dumps(value).encode()
        return hf_upload(files)
    return make


def hf_raw(fmt: str, name: str, make: Callable) -> bytes:
    """The upload with one file replaced by make(its bytes, the files) (None: left out)."""
    files = hf_files(fmt)
    files[name] = make(files.get(name, b""), files)
    return hf_upload({n: v for n, v in files.items() if v is not None})


def hf_safetensors(fmt: str, change: Callable, **changes) -> bytes:
    """The upload with model.safetensors after change(header, body) (it may return new ones)."""
    files = hf_files(fmt, changes)
    header, body = safetensors_split(files["model.safetensors"])
    result = change(header, body)
    if result is not None:
        header, body = result
    files["model.safetensors"] = safetensors_join(header, body)
    return hf_upload(files)


def _tensor_names(header: dict) -> list[str]:
    return sorted(n for n in header if n != "__metadata__")


def _embedding_name(header: dict) -> str:
    """The shared embedding (model.shared.weight, shared.weight): the largest 2-D tensor."""
    return max(_tensor_names(header), key=lambda n: (len(header[n]["shape"]) == 2,
                                                     np.prod(header[n]["shape"]), n))


def _named(header: dict, *patterns: str) -> str:
    """The first tensor whose name matches one of the patterns (in order), else the first."""
    names = _tensor_names(header)
    for pattern in patterns:
        found = [n for n in names if re.search(pattern, n)]
        if found:
            return found[0]
    return names[0]


def _layer_norm_name(header: dict) -> str:
    return _named(header, r"encoder\.layers\.1\..*final_layer_norm\.weight",
                  r"encoder\.block\.1\..*layer_norm\.weight", r"layer_?norm.*weight")


def _query_name(header: dict) -> str:
    return _named(header, r"encoder\.layers\.0\.self_attn\.q_proj\.weight",
                  r"encoder\.block\.0\.layer\.0\.SelfAttention\.q\.weight", r"q_proj|\.q\.")


def hf_tensor_value(value: float, pick: Callable, row=None) -> Callable:
    """change(header, body): `value` in one row (an id; "unprobed") or the middle entry of the
    tensor pick(header) names."""
    def change(header, body):
        name = pick(header)
        start, stop = header[name]["data_offsets"]
        array = np.frombuffer(body[start:stop], "<f4").reshape(header[name]["shape"])
        if name.endswith("final_logits_bias"):  # (1, vocab): the id is its column
            raw = _set_value(array[0], value, row)[None].tobytes()
        else:
            raw = _set_value(array, value, row).tobytes()
        return header, body[:start] + raw + body[stop:]
    return change


def hf_drop(pick: Callable) -> Callable:
    """change(header, body): the tensor pick(header) names left out, the rest packed again."""
    def change(header, body):
        return _marian_drop(pick(header))(header, body)
    return change


def hf_more_layers(fmt: str, encoder: int, decoder: int) -> bytes:
    """A consistent model with more layers: each stack's last layer's tensors copied to the new
    ones (BART-style "...layers.N." and T5's "...block.N."), config.json's counts to match."""
    files = hf_files(fmt)
    header, body = safetensors_split(files["model.safetensors"])
    tensors = {}
    for name in _tensor_names(header):
        start, stop = header[name]["data_offsets"]
        tensors[name] = (header[name], body[start:stop])
    pattern = re.compile(r"^(.*(encoder|decoder)\.(?:layers|block))\.(\d+)\.(.*)$")
    last = {}
    for name in tensors:
        match = pattern.match(name)
        if match:
            last[match[1]] = max(last.get(match[1], 0), int(match[3]))
    out = dict(tensors)
    for name, value in tensors.items():
        match = pattern.match(name)
        if not match or int(match[3]) != last[match[1]] or "relative_attention_bias" in name:
            continue
        for i in range(last[match[1]] + 1, encoder if match[2] == "encoder" else decoder):
            out[f"{match[1]}.{i}.{match[4]}"] = value
    new, data = {}, bytearray()
    for name in sorted(out):
        info, raw = out[name]
        new[name] = {**info, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    files["model.safetensors"] = safetensors_join(new, bytes(data))
    config = json.loads(files["config.json"])
    config[_first_key(config, LAYER_KEYS)] = encoder
    config[_first_key(config, DECODER_LAYER_KEYS)] = decoder
    files["config.json"] = json.dumps(config).encode()
    return hf_upload(files)


def _hf_config_cases(fmt: str) -> dict[str, Callable]:
    """label -> make(): config.json with huge, negative or wrong-typed sizes, unknown fields, a
    wrong model_type, or not a JSON object at all."""
    other = "t5" if HF_FORMATS[fmt][1] != "t5" else "bart"

    def field(keys, value):
        return lambda: hf_json(fmt, "config.json",
                               lambda c: c.update({_first_key(c, keys): value}))

    def with_text(text: bytes):
        return lambda: hf_raw(fmt, "config.json", lambda old, files: text)

    def digits():
        text = hf_files(fmt)["config.json"].decode()
        return hf_raw(fmt, "config.json", lambda old, files: (
            text[:text.rindex("}")] + ', "vocab_size": ' + "9" * 5000 + "}").encode())

    return {
        "config_vocab_huge": field(("vocab_size",), 2**40),
        "config_vocab_5000_digits": digits,
        "config_vocab_zero": field(("vocab_size",), 0),
        "config_d_model_negative": field(("d_model",), -16),
        "config_d_model_huge": field(("d_model",), 10**12),
        "config_d_model_float": field(("d_model",), 16.0),
        "config_layers_string": field(LAYER_KEYS, "2"),
        "config_layers_million": field(LAYER_KEYS, 10**6),
        "config_layers_null": field(LAYER_KEYS, None),
        "config_heads_zero": field(HEAD_KEYS, 0),
        "config_heads_bool": field(HEAD_KEYS, True),
        "config_heads_huge": field(HEAD_KEYS, 10**6),
        "config_ffn_list": field(FFN_KEYS, [32]),
        "config_ffn_huge": field(FFN_KEYS, 2**31),
        "config_positions_huge": field(POSITION_KEYS, 10**9),
        "config_positions_1": field(POSITION_KEYS, 1),
        "config_pad_huge": field(("pad_token_id",), 10**20),
        "config_eos_list_long": field(("eos_token_id",), list(range(100_000))),
        "config_unknown_field": field(("rope_scaling",), {"type": "dynamic", "factor": 8.0}),
        "config_auto_map": field(("auto_map",), {"AutoModel": "evil.Model"}),
        "config_model_type_wrong": field(("model_type",), "gpt2"),
        "config_model_type_other_family": field(("model_type",), other),
        "config_model_type_list": field(("model_type",), [HF_FORMATS[fmt][1]]),
        "config_model_type_missing": lambda: hf_json(fmt, "config.json",
                                                     lambda c: c.pop("model_type", None) and None),
        "config_architectures_other": field(("architectures",), ["GPT2LMHeadModel"]),
        "config_not_object": with_text(b"[1, 2]"),
        "config_deep_nesting": with_text(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        "config_not_utf8": with_text(b'{"model_type": "\xff\xfe"}'),
        "config_missing": lambda: hf_upload(hf_files(fmt, {"config.json": None})),
        "config_lone_surrogate_name_valid": field(("_name_or_path",), "\ud800 model"),
    }


def _hf_generation_cases(fmt: str) -> dict[str, Callable]:
    """label -> make(): generation_config.json with absurd numbers, deep nesting, wrong types,
    huge bad_words_ids."""
    vocab = json.loads(hf_files(fmt)["config.json"]).get("vocab_size", 300)
    vocab = vocab if isinstance(vocab, int) and 0 < vocab < 10**6 else 300

    def field(**values):
        return hf_generation(fmt, **values)

    def with_text(text: bytes):
        return lambda: hf_upload(hf_files(fmt, {"generation_config.json": text}))

    return {
        "generation_num_beams_million_valid": field(num_beams=10**6),
        "generation_max_length_billion_valid": field(max_length=10**9),
        "generation_beams_and_lengths_huge": field(num_beams=10**6, max_length=10**9,
                                                   max_new_tokens=10**9, min_length=10**9),
        "generation_min_length_huge": field(min_length=10**9, num_beams=4),
        "generation_num_beams_string": field(num_beams="4"),
        "generation_num_beams_negative": field(num_beams=-1),
        "generation_num_beams_float": field(num_beams=4.5),
        "generation_max_length_bool": field(max_length=True),
        "generation_max_length_zero": field(max_length=0),
        "generation_eos_string": field(eos_token_id="</s>"),
        "generation_eos_out_of_vocab": field(eos_token_id=10**9),
        "generation_forced_bos_out_of_vocab": field(forced_bos_token_id=10**6),
        "generation_length_penalty_huge": field(length_penalty=1e308, num_beams=4),
        "generation_length_penalty_string": field(length_penalty="nan"),
        "generation_bad_words_huge": field(bad_words_ids=[[i % vocab] for i in range(100_000)]),
        "generation_bad_words_long": field(bad_words_ids=[list(range(100_000))]),
        "generation_bad_words_out_of_vocab": field(bad_words_ids=[[10**9], [-1]]),
        "generation_bad_words_not_lists": field(bad_words_ids=[1, "x", None]),
        "generation_bad_words_every_id": field(bad_words_ids=[[i] for i in range(min(vocab,
                                                                                       1024))]),
        "generation_suppress_every_id": field(suppress_tokens=list(range(min(vocab, 4096)))),
        "generation_no_repeat_1_beams": field(no_repeat_ngram_size=1, num_beams=8,
                                              max_length=10**9),
        "generation_sampling": field(do_sample=True, temperature=0.0, top_k=0),
        "generation_unknown_keys": field(zz_new={"a": [1, 2]}, custom_generate="evil.py"),
        "generation_deep_nesting_200k": with_text(b'{"a": ' + b"[" * 200_000 + b"]" * 200_000
                                                  + b"}"),
        "generation_deep_nesting_40": with_text(b'{"a": ' + b"[" * 40 + b"]" * 40 + b"}"),
        "generation_5000_digits": with_text(b'{"num_beams": ' + b"9" * 5000 + b"}"),
        "generation_not_object": with_text(b"[4]"),
        "generation_not_utf8": with_text(b'{"num_beams": 4, "x": "\xff"}'),
        "generation_empty_file": with_text(b""),
        "generation_missing_valid": lambda: hf_upload(hf_files(
            fmt, {"generation_config.json": None})),
    }


def _tokenizer_vocab_huge(entries: int) -> Callable:
    def change(doc):
        model = doc["model"]
        if isinstance(model.get("vocab"), dict):  # BPE: piece -> id
            base = len(model["vocab"])
            model["vocab"].update({f"zz{i:x}": i for i in range(base, entries)})
        else:  # Unigram: [piece, score]
            model["vocab"] += [[f"zz{i:x}", -20.0] for i in range(len(model["vocab"]), entries)]
    return change


def _nested_normalizer(depth: int) -> Callable:
    def change(doc):
        inner = doc.get("normalizer") or {"type": "Replace", "pattern": {"String": "x"},
                                          "content": "x"}
        for _ in range(depth):
            inner = {"type": "Sequence", "normalizers": [inner]}
        doc["normalizer"] = inner
    return change


def _nested_text(data: bytes, depth: int) -> bytes:
    """tokenizer.json with its normalizer inside `depth` Sequences (written as text: too deep
    for json.dumps)."""
    doc = json.loads(data)
    inner = json.dumps(doc.get("normalizer") or {"type": "Replace", "pattern": {"String": "x"},
                                                 "content": "x"})
    doc["normalizer"] = "__NEST__"
    nest = '{"type": "Sequence", "normalizers": [' * depth + inner + "]}" * depth
    return json.dumps(doc).replace('"__NEST__"', nest, 1).encode()


def _hf_tokenizer_cases(fmt: str) -> dict[str, Callable]:
    """label -> make(): tokenizer.json damaged, nested, of unknown kinds, with a huge
    vocabulary; merges.txt, vocab.json and SentencePiece models as garbage (each used alone:
    the other tokenizer files left out)."""
    files = hf_files(fmt)
    out = {}
    if "tokenizer.json" in files:
        def tok(change):
            return lambda: hf_json(fmt, "tokenizer.json", change)

        def text(make):
            return lambda: hf_raw(fmt, "tokenizer.json", lambda old, f: make(old))

        out.update({
            "tokenizer_truncated": text(lambda old: old[:len(old) // 2]),
            "tokenizer_not_json": text(lambda old: b"{not json"),
            "tokenizer_not_utf8": text(lambda old: old.replace(b'"model"', b'"\xff\xfe"', 1)),
            "tokenizer_deep_nesting_200k": text(lambda old: b'{"normalizer": ' + b"[" * 200_000
                                                + b"]" * 200_000 + b"}"),
            "tokenizer_normalizer_nested_20": tok(_nested_normalizer(20)),
            "tokenizer_normalizer_nested_5000": text(lambda old: _nested_text(old, 5000)),
            "tokenizer_normalizer_unknown": tok(lambda d: d.update(normalizer={
                "type": "PythonCallable", "module": "os", "function": "system"})),
            "tokenizer_normalizer_replace_redos": tok(lambda d: d.update(normalizer={
                "type": "Replace", "pattern": {"Regex": "(a|a?)+$"}, "content": ""})),
            "tokenizer_normalizer_sequence_wide": tok(lambda d: d.update(normalizer={
                "type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {
                    "String": "a"}, "content": "aa"}] * 10_000})),
            "tokenizer_pre_tokenizer_unknown": tok(lambda d: d.update(pre_tokenizer={
                "type": "Split", "pattern": {"Regex": "(x+x+)+y"}, "behavior": "Isolated"})),
            "tokenizer_model_unknown": tok(lambda d: d["model"].update(type="WordLevel")),
            "tokenizer_model_not_object": tok(lambda d: d.update(model=[1, 2])),
            "tokenizer_vocab_huge_300k": tok(_tokenizer_vocab_huge(300_000)),
            "tokenizer_vocab_huge_million": tok(_tokenizer_vocab_huge(1_000_000)),
            "tokenizer_vocab_bad_entries": tok(lambda d: d["model"].update(vocab=(
                {"a": -1, "b": 10**30, "c": "x", "d": None} if isinstance(d["model"]["vocab"],
                                                                          dict)
                else [["a", float("nan")], ["b"], [1, 2], "x"]))),
            "tokenizer_vocab_empty": tok(lambda d: d["model"].update(
                vocab={} if isinstance(d["model"]["vocab"], dict) else [])),
            "tokenizer_added_token_huge_id": tok(lambda d: d.setdefault("added_tokens", []).append(
                {"id": 10**12, "content": "zz", "special": True, "single_word": False,
                 "lstrip": False, "rstrip": False, "normalized": False})),
            "tokenizer_added_tokens_many": tok(lambda d: d.update(added_tokens=[
                {"id": i % 50, "content": f"zz{i}", "special": True} for i in range(100_000)])),
            "tokenizer_added_token_huge_content": tok(lambda d: d.setdefault(
                "added_tokens", []).append({"id": 3, "content": "x" * 2**20, "special": True})),
            "tokenizer_merges_garbage": tok(lambda d: d["model"].update(
                merges=[1, [2], None, "no_space_here", ["a"], "a b c"] * 1000)),
            "tokenizer_not_object": text(lambda old: b'"tokenizer"'),
        })
    if "merges.txt" in files and "vocab.json" in files:  # BART's pair, tokenizer.json left out
        def pair(name, make):
            def build():
                f = hf_files(fmt, {"tokenizer.json": None})
                f[name] = make(f[name])
                return hf_upload(f)
            return build

        rng = np.random.default_rng(26)
        out.update({
            "pair_only_valid": pair("vocab.json", lambda old: old),
            "merges_random_bytes": pair("merges.txt", lambda old: rng.bytes(4000)),
            "merges_not_utf8": pair("merges.txt", lambda old: old + b"\xff\xfe \xfd\n"),
            "merges_million_lines": pair("merges.txt", lambda old: old + b"".join(
                b"q%x z%x\n" % (i, i) for i in range(1_000_000))),
            "merges_one_huge_line": pair("merges.txt", lambda old: b"#version: 0.2\n" +
                                         b"a" * 2**22 + b" b\n"),
            "merges_unknown_pieces": pair("merges.txt", lambda old: old + b"\xc4\xa0zzz yyy\n"),
            "vocab_json_not_object": pair("vocab.json", lambda old: b'["<s>", "</s>"]'),
            "vocab_json_ids_odd": pair("vocab.json", lambda old: json.dumps(
                {**json.loads(old), "zz": -1, "yy": 10**30, "xx": "3"}).encode()),
            "vocab_json_million": pair("vocab.json", lambda old: json.dumps(
                {**json.loads(old), **{f"q{i:x}": i + 400 for i in range(1_000_000)}},
                separators=(",", ":")).encode()),
        })
    for spm in (n for n in SPM_NAMES if n in files):  # SentencePiece alone (no tokenizer.json)
        label = "spiece" if spm == "spiece.model" else "spm"

        def alone(make, spm=spm):
            def build():
                f = hf_files(fmt, {"tokenizer.json": None})
                f[spm] = make(f[spm])
                return hf_upload(f)
            return build

        rng = np.random.default_rng(27)
        out.update({
            f"{label}_only_valid": alone(lambda old: old),
            f"{label}_random_bytes": alone(lambda old: rng.bytes(3000)),
            f"{label}_truncated": alone(lambda old: old[:len(old) // 3]),
            f"{label}_empty": alone(lambda old: b""),
            f"{label}_length_2_62": alone(lambda old: b"\x0a" + varint(2**62) + old[2:]),
            f"{label}_is_tokenizer_json": alone(lambda old: hf_files(fmt).get(
                "tokenizer.json", b"{}")),
        })
        break  # one SentencePiece file per family
    return out


def _hf_safetensors_cases(fmt: str) -> dict[str, Callable]:
    """label -> make(): model.safetensors with wrong shapes, missing or extra weights, NaN and
    huge values, header bombs."""
    def st(change):
        return lambda: hf_safetensors(fmt, change)

    def raw(make):
        return lambda: hf_raw(fmt, "model.safetensors", lambda old, f: make(old))

    def set_info(pick, **info):
        return st(lambda h, b: h[pick(h)].update(info))

    def many_entries(count: int):
        def change(header, body):
            header.update({f"zz.{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
                           for i in range(count)})
        return change

    def transposed(pick):
        def change(header, body):
            name = pick(header)
            start, stop = header[name]["data_offsets"]
            value = np.frombuffer(body[start:stop], "<f4").reshape(header[name]["shape"])
            header[name]["shape"] = list(value.T.shape)
            return header, body[:start] + value.T.tobytes() + body[stop:]
        return change

    def fc1(h):
        return _named(h, r"encoder\.layers\.0\.fc1\.weight", r"DenseReluDense\.wi(_0)?\.weight",
                      r"fc1|wi")

    return {
        "st_header_length_huge": raw(lambda old: struct.pack("<Q", 2**63) + old[8:]),
        "st_header_length_99mb": raw(lambda old: struct.pack("<Q", 99 * 2**20) + old[8:]),
        "st_header_not_json": st(lambda h, b: (b"{not json" + b" " * 7, b)),
        "st_header_deep_nesting": st(lambda h, b: (b'{"__metadata__": ' + b"[" * 100_000 +
                                                   b"]" * 100_000 + b"}", b)),
        "st_header_bomb_200k_entries": st(many_entries(200_000)),
        "st_header_bomb_20k_entries": st(many_entries(20_000)),
        "st_metadata_huge": st(lambda h, b: h.update(__metadata__={"x": "y" * 2**22})),
        "st_is_pickle": raw(lambda old: b"\x80\x04\x95" + bytes(64) + b"."),
        "st_empty": raw(lambda old: b""),
        "st_body_truncated": st(lambda h, b: (h, b[:len(b) // 2])),
        "st_offsets_out_of_range": set_info(_query_name, data_offsets=[0, 2**40]),
        "st_shape_overflows": set_info(_query_name, shape=[2**32, 2**32, 2**32]),
        "st_shape_negative": set_info(_query_name, shape=[-16, -16]),
        "st_shape_product_wrong": st(lambda h, b: h[_embedding_name(h)].update(
            shape=[h[_embedding_name(h)]["shape"][0] + 1, h[_embedding_name(h)]["shape"][1]])),
        "st_shape_transposed_ffn": st(transposed(fc1)),
        "st_dtype_f64_declared": set_info(_query_name, dtype="F64"),
        "st_dtype_i64": set_info(_query_name, dtype="I64"),
        "st_dtype_f16_consistent_valid": st(_halved("F16")),
        "st_missing_layer_norm": st(hf_drop(_layer_norm_name)),
        "st_missing_embedding": st(hf_drop(_embedding_name)),
        "st_extra_weight": st(lambda h, b: (
            {**h, "model.encoder.layers.9.backdoor.weight": {
                "dtype": "F32", "shape": [1], "data_offsets": [len(b), len(b) + 4]}},
            b + bytes(4))),
        "st_nan": st(hf_tensor_value(np.nan, _query_name)),
        "st_inf": st(hf_tensor_value(np.inf, _layer_norm_name)),
        "st_huge_embedding_row_1e30": st(hf_tensor_value(1e30, _embedding_name, "unprobed")),
        "st_huge_embedding_row_3e19": st(hf_tensor_value(3e19, _embedding_name, "unprobed")),
        "st_huge_layer_norm_1e30": st(hf_tensor_value(1e30, _layer_norm_name)),
        "st_huge_query_1e30": st(hf_tensor_value(1e30, _query_name)),
        "layers_8_8_valid": lambda: hf_more_layers(fmt, 8, 8),
        "layers_12_12": lambda: hf_more_layers(fmt, 12, 12),
    }


# ---------------------------------------------------------------- issue 37: tokenizers and
# generation configs at and past their limits, in every family and tokenizer kind
# The classes, each family's cases named "<family>_<kind>_<class>_...", with the tokenizer files
# its fixture has: tokenizer_ (tokenizer.json), pair_ and merges_txt_ (vocab.json + merges.txt,
# tokenizer.json left out), spiece_ / spm_ (its SentencePiece model, alone where the family opens
# from one, else beside tokenizer.json):
#   *_charsmap_*  Precompiled normalization rules (tokenizer.json's normalizer, a SentencePiece
#       model's normalizer_spec; a family without any is given T5's): a trie size of 4k + 1 (the
#       tokenizers library panicked on a typed 'ﬁ': pyo3's PanicException), valid rules, and
#       valid-shaped ones whose rule for 'ﬁ' outputs 1 MB; an accepted one types text holding
#       the characters the rules cover (TYPED_CHARSMAP; the 1 MB one also 100 'ﬁ')
#   *_added_token*, *_extra_id_pieces_*  added tokens: MAX_ADDED_TOKENS of MAX_PIECE_CHARS
#       characters, one past, 6,000, one of MAX_PIECE_CHARS + 1; tokenizer_config.json listing
#       6,000; T5's <extra_id_N> pieces in the vocabulary (each made a special token) at and past
#       MAX_ADDED_TOKENS and filling the vocabulary
#   *_long_pieces_N*  pieces 'a' x 2..N: a Unigram's at limits.MAX_UNIGRAM_PIECE_CHARS (128) and
#       one past, a BPE's (with the merges making them) at 128 and 2,000; an accepted one types
#       100,000 'a' (TYPED_LONG: the most the app reads)
#   *_vocab_at_limit_valid, *_vocab_past_limit, *_merges*_past_limit, *_vocab_262144_pieces  a
#       vocabulary of limits.MAX_VOCAB ids (the model grown to match) with hf_files.MAX_MERGES
#       merges (tokenizer.json) or MAX_MERGES_TXT (merges.txt), one piece or merge past, a
#       SentencePiece model of MAX_VOCAB pieces (the family's ids past them make more)
#   *_family_*  this family's config.json and weights with another family's tokenizer files, or a
#       Marian folder whose config.json names this family: refused, naming the mismatch
#   *_generation_*  generation_config.json at its limits: eos_token_id listing every id, num_beams
#       at its cap, every id suppressed or a bad word with renormalize_logits, min_length past
#       max_length, lists of MAX_TOKEN_LIST ids and one more: generating ends without NaN (with
#       no token left, stopped_by "banned": the case's detail says how it stopped)
# A tokenizer at the vocabulary, merge or added-token limits takes memory per piece and merge,
# not per byte of its files: those cases are held to the budget with their pieces and merges
# (MEMORY_HOLDS: limits.load_memory_budget) and their growth is reported in a table of its own
# (MEMORY_REPORTED; issue 37, item 4).
from transformer.core import limits as _limits  # noqa: E402 - the limits the cases sit at
from transformer.core.text import MAX_TEXT_CHARS  # noqa: E402
from transformer.inference.generation_config import (  # noqa: E402
    MAX_NUM_BEAMS,
    MAX_TOKEN_LIST,
)
from transformer.tokenizers.hf_files import (  # noqa: E402
    MAX_ADDED_TOKENS,
    MAX_MERGES,
    MAX_MERGES_TXT,
    MAX_PIECE_CHARS,
)

MAX_VOCAB = _limits.MAX_VOCAB
MAX_UNIGRAM_PIECE = _limits.MAX_UNIGRAM_PIECE_CHARS
TYPED_CHARSMAP = ("Un café, une ﬁle: e\u0301te\u0301 ﬁ ﬂ é \u00a0①Ａ",)  # rules for ﬁ, e+́, ...
TYPED_LONG = ("a" * MAX_TEXT_CHARS,)
TYPED_EXPANDED = ("ﬁ" * 100,)  # 100 typed characters, each 1 MB once normalized
BPE_LONG_PIECE = 2_000  # a BPE's longest piece in the long-pieces class (no limit of its own)
# A family whose SentencePiece model is not read alone (NLLB opens from tokenizer.json, or
# vocab.json with the model): its SentencePiece cases keep tokenizer.json beside the model.
SPM_BESIDE_TOKENIZER_JSON = {"nllb"}
# Other families' tokenizer files for the family_ cases: this family's config.json and weights,
# that family's tokenizer files (the first a different kind of file, the second the same kind).
OTHER_TOKENIZERS = {"bart": ("t5", "nllb"), "t5": ("bart", "pegasus"),
                    "t5v11": ("m2m100", "pegasus"),
                    "mbart": ("bart", "pegasus"), "pegasus": ("m2m100", "t5"),
                    "m2m100": ("t5", "nllb"), "nllb": ("bart", "m2m100")}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "spiece.model", "sentencepiece.bpe.model", "special_tokens_map.json")
HF_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id",
              "forced_bos_token_id", "forced_eos_token_id", "suppress_tokens",
              "begin_suppress_tokens", "bad_words_ids", "sep_token_id", "unk_token_id",
              "mask_token_id")
HF_VOCAB_TENSOR = re.compile(r"shared|embed_tokens|lm_head|final_logits_bias")


def _shifted(value, at: int, k: int):
    """An id (or a nested list of ids) with every id at or past `at` moved up k."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value + k if value >= at else value
    if isinstance(value, list):
        return [_shifted(v, at, k) for v in value]
    return value


def _safetensors_of(tensors: dict[str, np.ndarray], metadata=None) -> bytes:
    header, body = {}, bytearray()
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    return safetensors_join(header, bytes(body))


def hf_grow_vocab(files: dict[str, bytes], at: int, k: int, total: int | None = None) -> None:
    """The model's vocabulary given k more ids at id `at` (in place): every id at and past it
    moves up k (config.json's and generation_config.json's ids, tokenizer_config.json's added
    tokens), the rows of the vocabulary's tensors (the shared embedding, lm_head: normal values
    of the table's spread; final_logits_bias: zeros) inserted there, then cut or padded to
    `total` rows when given (T5's unused rows past its tokenizer), config.json's vocab_size
    to match. The tokenizer files are the caller's to change."""
    config = json.loads(files["config.json"])
    old = config["vocab_size"]
    rows = old + k if total is None else total
    config = {key: _shifted(v, at, k) if key in HF_ID_KEYS else v for key, v in config.items()}
    config["vocab_size"] = rows
    files["config.json"] = json.dumps(config).encode()
    if files.get("generation_config.json"):
        value = json.loads(files["generation_config.json"])
        files["generation_config.json"] = json.dumps(
            {key: _shifted(v, at, k) if key in HF_ID_KEYS else v
             for key, v in value.items()}).encode()
    if files.get("tokenizer_config.json"):
        value = json.loads(files["tokenizer_config.json"])
        if isinstance(value.get("added_tokens_decoder"), dict):
            value["added_tokens_decoder"] = {str(_shifted(int(i), at, k)): v for i, v in
                                             value["added_tokens_decoder"].items()}
        files["tokenizer_config.json"] = json.dumps(value).encode()
    header, body = safetensors_split(files["model.safetensors"])
    rng = np.random.default_rng(37)
    tensors = {}
    for name in _tensor_names(header):
        start, stop = header[name]["data_offsets"]
        value = np.frombuffer(body[start:stop], "<f4").reshape(header[name]["shape"])
        if HF_VOCAB_TENSOR.search(name) and value.ndim == 2 and old in value.shape:
            axis = value.shape.index(old)  # (vocab, d) rows, or (1, vocab) columns
            table = np.moveaxis(value, axis, 0)

            def new(count, table=table, name=name):
                if name.endswith("bias"):
                    return np.zeros((count,) + table.shape[1:], np.float32)
                return rng.normal(0, float(table.std()) or 0.02,
                                  (count,) + table.shape[1:]).astype(np.float32)

            table = np.concatenate([table[:at], new(k), table[at:]])[:rows]
            table = np.concatenate([table, new(rows - len(table))])
            value = np.moveaxis(table, 0, axis)
        tensors[name] = value
    files["model.safetensors"] = _safetensors_of(tensors, header.get("__metadata__"))


def _shift_post_processor(node, at: int, k: int) -> None:
    """tokenizer.json's post_processor with its special tokens' ids at or past `at` moved up k
    (TemplateProcessing's special_tokens "ids", RobertaProcessing's sep and cls)."""
    if isinstance(node, list):
        for item in node:
            _shift_post_processor(item, at, k)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "ids" and isinstance(value, list):
                node[key] = _shifted(value, at, k)
            elif key in ("sep", "cls") and isinstance(value, list) and len(value) == 2:
                node[key] = [value[0], _shifted(value[1], at, k)]
            else:
                _shift_post_processor(value, at, k)


def tokenizer_total(doc: dict) -> int:
    """The ids a tokenizer.json gives: its model's pieces and the added tokens past them."""
    ids = [t["id"] for t in doc.get("added_tokens") or []]
    return max([len(doc["model"]["vocab"])] + [i + 1 for i in ids])


def tokenizer_json_grown(doc: dict, pieces: list[tuple[str, float]],
                         merges: list[tuple[str, str]] = ()) -> tuple[int, int]:
    """tokenizer.json's model given `pieces` more (in place): a Unigram's [piece, score]
    appended, a BPE's pieces at the next ids (its merges appended, in the file's own style), the
    added tokens and post-processor ids past them moved up. Returns (at, k): where the new ids
    start and how many there are (for hf_grow_vocab)."""
    model = doc["model"]
    at, k = len(model["vocab"]), len(pieces)
    if model["type"] == "Unigram":
        model["vocab"] += [[p, s] for p, s in pieces]
    else:
        model["vocab"].update({p: at + i for i, (p, _) in enumerate(pieces)})
        as_text = bool(model.get("merges")) and isinstance(model["merges"][0], str)
        model["merges"] = list(model.get("merges") or []) + [
            f"{a} {b}" if as_text else [a, b] for a, b in merges]
    for token in doc.get("added_tokens") or []:
        if token["id"] >= at:
            token["id"] += k
    _shift_post_processor(doc.get("post_processor"), at, k)
    return at, k


@functools.cache
def _letter_pieces(alphabet: str, count: int, merges: int) -> tuple[tuple, tuple]:
    """`count` distinct pieces over `alphabet` (its letters, then every string of 2, 3, ...
    letters), and up to `merges` merges making them (every split of each piece in two shorter
    ones, shorter pieces first): a vocabulary and merge list at their limits."""
    import itertools

    pieces, pairs = list(alphabet), []
    length = 2
    while len(pieces) < count:
        for letters in itertools.product(alphabet, repeat=length):
            if len(pieces) >= count:
                break
            piece = "".join(letters)
            pieces.append(piece)
            if len(pairs) < merges:
                pairs.extend((piece[:i], piece[i:]) for i in range(1, length))
        length += 1
    return tuple(pieces[:count]), tuple(pairs[:merges])


def _bpe_additions(vocab, count: int, merges: int, alphabet: str = "qxzjkv"):
    """(pieces, merges) to add to a BPE vocabulary (its pieces: a dict or set): `count` new
    pieces over `alphabet` (its letters first where the vocabulary lacks them) and `merges`
    merges of them (each of two pieces whose join is one, all in the vocabulary then)."""
    merges = max(0, merges)
    pieces, pairs = _letter_pieces(alphabet, count + 64, merges + 2**16 if merges else 0)
    new = [p for p in pieces if p not in vocab][:count]
    known = set(new) | set(vocab)
    pairs = [m for m in pairs if m[0] + m[1] in known and m[0] in known and m[1] in known]
    return [(p, 0.0) for p in new], pairs[:merges]


def _unigram_additions(pieces, count: int, alphabet: str = "qxzjkv"):
    """`count` new Unigram pieces (with scores) over `alphabet`, none of `pieces`."""
    known = set(pieces)
    new = [p for p in _letter_pieces(alphabet, count + 64, 0)[0] if p not in known][:count]
    return [(p, -12.0 - len(p) / 8) for p in new]


def _a_pieces(longest: int) -> tuple[list[tuple[str, float]], list[tuple[str, str]]]:
    """Pieces 'a' x 2..longest (scores favouring the longest, as a Unigram would learn them)
    and BPE merges making each from two halves."""
    pieces = [("a" * n, -20.0 + n / longest) for n in range(2, longest + 1)]
    merges = [("a" * (n // 2), "a" * (n - n // 2)) for n in range(2, longest + 1)]
    return pieces, merges


def _spm_pieces(data: bytes, add: list[tuple[str, float]] = (), keep: int | None = None,
                charsmap: bytes | None = None) -> bytes:
    """A SentencePiece model with pieces `add` appended (NORMAL, their scores), cut to `keep`
    pieces first when given, and its normalization rules `charsmap` when given."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(data)
    if keep is not None:
        del proto.pieces[keep:]
    for piece, score in add:
        item = proto.pieces.add()
        item.piece, item.score, item.type = piece, score, 1
    if charsmap is not None:
        proto.normalizer_spec.precompiled_charsmap = charsmap
    return proto.SerializeToString()


def _spm_piece_list(data: bytes) -> list[str]:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(data)
    return [p.piece for p in proto.pieces]


def _spm_charsmap(data: bytes) -> bytes:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(data)
    return bytes(proto.normalizer_spec.precompiled_charsmap)


# Normalization rules (precompiled_charsmap): a uint32 trie size, a Darts-clone trie of 4-byte
# units over the input's bytes, then NUL-separated output strings (sentencepiece_model.py).
def _charsmap_offset(unit: int) -> int:
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


def charsmap_rule(blob: bytes, key: bytes) -> tuple[int, int]:
    """(the trie unit holding the output offset of the rule whose input is `key`, that offset),
    walked as SentencePiece's commonPrefixSearch walks it; KeyError when no rule has it."""
    trie = int.from_bytes(blob[:4], "little")
    units = np.frombuffer(blob, "<u4", count=trie // 4, offset=4).astype(np.int64)
    base, unit = _charsmap_offset(int(units[0])), None
    for byte in key:
        target = base ^ byte
        unit = int(units[target])
        if unit & ((1 << 31) | 0xFF) != byte:
            raise KeyError(key)
        base = target ^ _charsmap_offset(unit)
    if unit is None or not (unit >> 8) & 1:
        raise KeyError(key)
    return base, int(units[base]) & ((1 << 31) - 1)


def charsmap_trie_4k_plus_1(blob: bytes, output: bytes = b"fi") -> bytes:
    """The rules with a trie size of 4k + 1 (one byte more than the trie holds), the byte before
    `output`'s rule output and its first byte made an 'é': SentencePiece reads the outputs from
    4 + trie size, the tokenizers library from 4 + 4k, so the library's offset for that rule
    ('ﬁ' -> "fi") falls inside the 'é' and it panicked on a typed 'ﬁ' (issue 37)."""
    trie = int.from_bytes(blob[:4], "little")
    outputs = bytearray(blob[4 + trie:])
    at = outputs.find(b"\x00" + output + b"\x00") + 1
    outputs[at - 1:at + 1] = "é".encode()
    return (trie + 1).to_bytes(4, "little") + blob[4:4 + trie] + bytes(outputs)


def charsmap_expanded(blob: bytes, key: bytes = "ﬁ".encode(), size: int = 2**20) -> bytes:
    """Valid-shaped rules (every check SentencePiece's format allows passes) whose rule for
    `key` outputs `size` bytes of 'x' (appended to the outputs, the rule's offset pointed at
    them): one typed character becomes a megabyte of text."""
    trie = int.from_bytes(blob[:4], "little")
    unit_at, _ = charsmap_rule(blob, key)
    units = bytearray(blob[4:4 + trie])
    outputs = blob[4 + trie:]
    unit = int.from_bytes(units[4 * unit_at:4 * unit_at + 4], "little")
    unit = (unit & ~((1 << 31) - 1)) | len(outputs)
    units[4 * unit_at:4 * unit_at + 4] = unit.to_bytes(4, "little")
    return blob[:4] + bytes(units) + outputs + b"x" * size + b"\0"


@functools.cache
def _valid_charsmap() -> bytes:
    """T5's fixture's rules (a real nmt_nfkc table, cut down): for a family that has none."""
    import base64

    doc = json.loads(hf_files("t5")["tokenizer.json"])
    return base64.b64decode(doc["normalizer"]["precompiled_charsmap"])


def _with_charsmap(doc: dict, blob: bytes) -> None:
    """tokenizer.json's Precompiled normalizer given the rules `blob` (one added in front of
    its normalizer where it has none)."""
    import base64

    text = base64.b64encode(blob).decode()
    normalizer = doc.get("normalizer")
    items = ([normalizer] if normalizer and normalizer.get("type") != "Sequence"
             else (normalizer or {}).get("normalizers", []))
    for item in items:
        if item.get("type") == "Precompiled":
            item["precompiled_charsmap"] = text
            return
    precompiled = {"type": "Precompiled", "precompiled_charsmap": text}
    doc["normalizer"] = (precompiled if not items else
                         {"type": "Sequence", "normalizers": [precompiled] + items})


def _spm_name(files: dict) -> str | None:
    return next((n for n in SPM_NAMES if n in files), None)


def _spm_first_after(files: dict) -> int:
    """The id past the SentencePiece model's last piece in the family's layout (T5's extra ids,
    mBART's language codes, M2M100's come after it): from the fixture's tokenizer.json, or
    M2M100's vocab.json."""
    last = _spm_piece_list(files[_spm_name(files)])[-1]
    if "tokenizer.json" in files:
        vocab = json.loads(files["tokenizer.json"])["model"]["vocab"]
        ids = ({p: i for i, (p, _) in enumerate(vocab)} if isinstance(vocab, list) else vocab)
    else:
        ids = json.loads(files["vocab.json"])
    return ids[last] + 1


def _tokenizer_total_of(fmt: str) -> int:
    """The ids the family's tokenizer gives (its fixture's tokenizer.json, else config.json's
    vocab_size: M2M100's vocab.json, language codes and made-up words)."""
    files = hf_files(fmt)
    if "tokenizer.json" in files:
        return tokenizer_total(json.loads(files["tokenizer.json"]))
    return json.loads(files["config.json"])["vocab_size"]


def _hf_issue37_cases(fmt: str) -> dict[str, Callable]:
    """label -> make(): issue 37's classes for one family (see the comment above), with the
    tokenizer files its fixture has. Sets TYPED_TEXTS and MEMORY_REPORTED for its cases."""
    files = hf_files(fmt)
    out: dict[str, Callable] = {}
    typed: dict[str, tuple[str, ...]] = {}
    reported: dict[str, str] = {}
    holds: dict[str, tuple[int, int]] = {}  # what the budget counts (MEMORY_HOLDS)
    spm = _spm_name(files)
    spm_label = "spiece" if spm == "spiece.model" else "spm"
    has_json = "tokenizer.json" in files
    model_type = json.loads(files["tokenizer.json"])["model"]["type"] if has_json else None
    total = _tokenizer_total_of(fmt)  # the ids the family's tokenizer gives now

    def tok(change, **grow):
        """tokenizer.json after change(doc) (which may return (at, k[, total]) to grow the
        model's vocabulary to match)."""
        def make():
            f = hf_files(fmt)
            doc = json.loads(f["tokenizer.json"])
            grown = change(doc)
            f["tokenizer.json"] = json.dumps(doc, ensure_ascii=False).encode()
            if grown:
                hf_grow_vocab(f, *grown)
            return hf_upload(f)
        return make

    def spm_alone(change):
        """The SentencePiece model after change(files) (tokenizer.json left out where the
        family opens from the model alone); change may return (at, k[, total])."""
        def make():
            f = hf_files(fmt, {} if fmt in SPM_BESIDE_TOKENIZER_JSON else
                          {"tokenizer.json": None})
            grown = change(f)
            if grown:
                hf_grow_vocab(f, *grown)
            return hf_upload(f)
        return make

    # ---- 1. normalization rules (charsmaps), and text holding what they cover
    if has_json:
        out["tokenizer_charsmap_trie_4k_plus_1"] = tok(lambda d: _with_charsmap(
            d, charsmap_trie_4k_plus_1(_valid_charsmap())))
        out["tokenizer_charsmap_valid"] = tok(lambda d: _with_charsmap(d, _valid_charsmap()))
        out["tokenizer_charsmap_rule_output_1mb"] = tok(lambda d: _with_charsmap(
            d, charsmap_expanded(_valid_charsmap())))
        typed.update({"tokenizer_charsmap_trie_4k_plus_1": TYPED_CHARSMAP,
                      "tokenizer_charsmap_valid": TYPED_CHARSMAP,
                      "tokenizer_charsmap_rule_output_1mb": TYPED_CHARSMAP + TYPED_EXPANDED})
    if spm:
        def spm_charsmap(make_blob):
            def change(f):
                f[spm] = _spm_pieces(f[spm], charsmap=make_blob(_spm_charsmap(f[spm])))
            return spm_alone(change)

        out[f"{spm_label}_charsmap_trie_4k_plus_1"] = spm_charsmap(charsmap_trie_4k_plus_1)
        out[f"{spm_label}_charsmap_valid"] = spm_charsmap(lambda blob: blob)
        out[f"{spm_label}_charsmap_rule_output_1mb"] = spm_charsmap(charsmap_expanded)
        typed.update({f"{spm_label}_charsmap_trie_4k_plus_1": TYPED_CHARSMAP,
                      f"{spm_label}_charsmap_valid": TYPED_CHARSMAP,
                      f"{spm_label}_charsmap_rule_output_1mb": TYPED_CHARSMAP + TYPED_EXPANDED})

    # ---- 2. added tokens at and past the limits
    if has_json:
        def added(count: int, chars: int = MAX_PIECE_CHARS):
            """`count` added tokens in all: the file's, then new ones of `chars` characters at
            the next ids (special and not in turn), the model's vocabulary grown to match."""
            def change(doc):
                at = tokenizer_total(doc)
                listed = doc.setdefault("added_tokens", [])
                new = count - len(listed)
                listed += [{"id": at + i, "content": (f"<t{i:05d}>" + "x" * chars)[:chars],
                            "special": bool(i % 2), "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False} for i in range(new)]
                return at, new
            return tok(change)

        out["tokenizer_added_tokens_at_limit_valid"] = added(MAX_ADDED_TOKENS)
        reported["tokenizer_added_tokens_at_limit_valid"] = (
            f"{MAX_ADDED_TOKENS:,} added tokens of {MAX_PIECE_CHARS:,} characters")
        holds["tokenizer_added_tokens_at_limit_valid"] = (total + MAX_ADDED_TOKENS, 0)
        out["tokenizer_added_tokens_past_limit"] = added(MAX_ADDED_TOKENS + 1)
        out["tokenizer_added_tokens_6000"] = added(6000)
        out["tokenizer_added_token_past_chars"] = added(
            len(json.loads(files["tokenizer.json"]).get("added_tokens") or []) + 1,
            MAX_PIECE_CHARS + 1)
        if HF_FORMATS[fmt][1] == "t5":  # <extra_id_N> pieces of the vocabulary: all special
            def extra_ids(count: int):
                def change(doc):
                    first = sum(p.startswith("<extra_id_") for p, _ in doc["model"]["vocab"])
                    return tokenizer_json_grown(doc, [(f"<extra_id_{first + i}>", 0.0)
                                                      for i in range(count)])
                return change

            out[f"tokenizer_extra_id_pieces_{MAX_ADDED_TOKENS}"] = tok(extra_ids(MAX_ADDED_TOKENS))
            out[f"tokenizer_extra_id_pieces_{MAX_ADDED_TOKENS + 1}"] = tok(
                extra_ids(MAX_ADDED_TOKENS + 1))
            out["tokenizer_extra_id_pieces_fill_vocab"] = tok(lambda d: (
                *extra_ids(MAX_VOCAB - total)(d), MAX_VOCAB))
            reported["tokenizer_extra_id_pieces_fill_vocab"] = (
                f"{MAX_VOCAB:,} pieces, {MAX_VOCAB - total + 100:,} of them <extra_id_N>")
            holds["tokenizer_extra_id_pieces_fill_vocab"] = (MAX_VOCAB, 0)
    out["tokenizer_config_added_tokens_6000"] = lambda: hf_json(
        fmt, "tokenizer_config.json", lambda c: c.update(added_tokens_decoder={
            str(10_000 + i): {"content": f"<t{i:05d}>" + "x" * 1017, "special": True}
            for i in range(6000)}))

    # ---- 3. long pieces and long texts
    if has_json:
        if model_type == "Unigram":
            def unigram_a(longest: int):
                return tok(lambda d: tokenizer_json_grown(d, _a_pieces(longest)[0]))

            out[f"tokenizer_long_pieces_{MAX_UNIGRAM_PIECE}_valid"] = unigram_a(MAX_UNIGRAM_PIECE)
            out[f"tokenizer_long_pieces_{MAX_UNIGRAM_PIECE + 1}"] = unigram_a(MAX_UNIGRAM_PIECE + 1)
            typed[f"tokenizer_long_pieces_{MAX_UNIGRAM_PIECE}_valid"] = TYPED_LONG
        else:
            def bpe_a(longest: int):
                def change(doc):
                    pieces, merges = _a_pieces(longest)
                    if "a" not in doc["model"]["vocab"]:
                        pieces = [("a", 0.0)] + pieces
                    return tokenizer_json_grown(doc, pieces, merges)
                return tok(change)

            out[f"tokenizer_long_pieces_{MAX_UNIGRAM_PIECE}_valid"] = bpe_a(MAX_UNIGRAM_PIECE)
            out[f"tokenizer_long_pieces_{BPE_LONG_PIECE}"] = bpe_a(BPE_LONG_PIECE)
            typed[f"tokenizer_long_pieces_{MAX_UNIGRAM_PIECE}_valid"] = TYPED_LONG
            typed[f"tokenizer_long_pieces_{BPE_LONG_PIECE}"] = TYPED_LONG
    if "merges.txt" in files and "vocab.json" in files:
        def pair_grown(additions: Callable, total: int | None = None):
            """vocab.json + merges.txt (tokenizer.json left out) given the pieces and merges
            additions() gives, the model's vocabulary grown to match (to `total` rows)."""
            def make():
                f = hf_files(fmt, {"tokenizer.json": None})
                pieces, merges = additions()
                vocab = json.loads(f["vocab.json"])
                at = len(vocab)
                vocab.update({p: at + i for i, (p, _) in enumerate(pieces)})
                f["vocab.json"] = json.dumps(vocab, ensure_ascii=False).encode()
                f["merges.txt"] = f["merges.txt"].rstrip(b"\n") + b"\n" + "".join(
                    f"{a} {b}\n" for a, b in merges).encode()
                hf_grow_vocab(f, at, len(vocab) - at, total)
                return hf_upload(f)
            return make

        out[f"pair_long_pieces_{MAX_UNIGRAM_PIECE}_valid"] = pair_grown(
            lambda: _a_pieces(MAX_UNIGRAM_PIECE))
        out[f"pair_long_pieces_{BPE_LONG_PIECE}"] = pair_grown(lambda: _a_pieces(BPE_LONG_PIECE))
        typed[f"pair_long_pieces_{MAX_UNIGRAM_PIECE}_valid"] = TYPED_LONG
        typed[f"pair_long_pieces_{BPE_LONG_PIECE}"] = TYPED_LONG
    if spm and fmt not in SPM_BESIDE_TOKENIZER_JSON:
        def spm_grown(pieces: Callable, total: int | None = None):
            """The SentencePiece model given pieces() (M2M100's vocab.json too), the model's
            vocabulary grown at the id past its pieces."""
            def change(f):
                add = pieces()
                at = _spm_first_after(hf_files(fmt))
                f[spm] = _spm_pieces(f[spm], add)
                if "vocab.json" in f and "merges.txt" not in f:  # M2M100: piece -> id
                    vocab = json.loads(f["vocab.json"])
                    vocab.update({p: len(vocab) + i for i, (p, _) in enumerate(add)})
                    f["vocab.json"] = json.dumps(vocab, ensure_ascii=False).encode()
                return at, len(add), total
            return spm_alone(change)

        longest = BPE_LONG_PIECE if fmt == "m2m100" else MAX_UNIGRAM_PIECE + 1  # BPE or Unigram
        out[f"{spm_label}_long_pieces_{MAX_UNIGRAM_PIECE}_valid"] = spm_grown(
            lambda: _a_pieces(MAX_UNIGRAM_PIECE)[0])
        out[f"{spm_label}_long_pieces_{longest}"] = spm_grown(lambda: _a_pieces(longest)[0])
        typed[f"{spm_label}_long_pieces_{MAX_UNIGRAM_PIECE}_valid"] = TYPED_LONG
        typed[f"{spm_label}_long_pieces_{longest}"] = TYPED_LONG

    # ---- 4. vocabularies and merges at the limits (memory reported: issue 37, item 4)
    total = _tokenizer_total_of(fmt)
    if has_json:
        def vocab_at(pieces_in_all: int, merges_in_all: int | None = None):
            """tokenizer.json whose model holds pieces_in_all pieces (BPE: merges_in_all merges,
            MAX_MERGES by default), the model grown so that the tokenizer gives MAX_VOCAB ids
            (or more, past the limit)."""
            def change(doc):
                model = doc["model"]
                count = pieces_in_all - len(model["vocab"])
                if model_type == "Unigram":
                    pieces, merges = _unigram_additions((p for p, _ in model["vocab"]), count), []
                else:
                    wanted = MAX_MERGES if merges_in_all is None else merges_in_all
                    pieces, merges = _bpe_additions(model["vocab"], count,
                                                    wanted - len(model.get("merges") or []))
                at, k = tokenizer_json_grown(doc, pieces, merges)
                return at, k, MAX_VOCAB  # past the limit: the tokenizer's own count refuses
            return tok(change)

        # the model's pieces and the added tokens past them: MAX_VOCAB ids in all
        beyond = total - len(json.loads(files["tokenizer.json"])["model"]["vocab"])
        out["tokenizer_vocab_at_limit_valid"] = vocab_at(MAX_VOCAB - beyond)
        reported["tokenizer_vocab_at_limit_valid"] = (
            f"{MAX_VOCAB:,} ids" + (f", {MAX_MERGES:,} merges" if model_type == "BPE" else ""))
        holds["tokenizer_vocab_at_limit_valid"] = (MAX_VOCAB,
                                                   MAX_MERGES if model_type == "BPE" else 0)
        out["tokenizer_vocab_past_limit"] = vocab_at(MAX_VOCAB + 1, 0)  # no merges added
        if model_type == "BPE":
            out["tokenizer_merges_past_limit"] = vocab_at(MAX_VOCAB - beyond, MAX_MERGES + 1)
            reported["tokenizer_merges_past_limit"] = (f"{MAX_VOCAB:,} ids, "
                                                       f"{MAX_MERGES + 1:,} merges")
            holds["tokenizer_merges_past_limit"] = (MAX_VOCAB, MAX_MERGES + 1)
    if "merges.txt" in files and "vocab.json" in files:
        base = json.loads(files["vocab.json"])

        def pair_limit(count: int, merges: int):
            return pair_grown(lambda: _bpe_additions(base, count - len(base), merges), MAX_VOCAB)

        lines = files["merges.txt"].rstrip(b"\n").split(b"\n")
        merges_now = len(lines) - lines[0].startswith(b"#version")
        out["pair_vocab_at_limit_valid"] = pair_limit(MAX_VOCAB, MAX_MERGES_TXT - merges_now)
        reported["pair_vocab_at_limit_valid"] = (f"{MAX_VOCAB:,} pieces, {MAX_MERGES_TXT:,} "
                                                 "merges")
        holds["pair_vocab_at_limit_valid"] = (MAX_VOCAB, MAX_MERGES_TXT)
        out["pair_vocab_past_limit"] = pair_limit(MAX_VOCAB + 1, 0)
        out["merges_txt_past_limit"] = pair_limit(MAX_VOCAB, MAX_MERGES_TXT - merges_now + 1)
        reported["merges_txt_past_limit"] = f"{MAX_VOCAB:,} pieces, {MAX_MERGES_TXT + 1:,} merges"
        holds["merges_txt_past_limit"] = (MAX_VOCAB, MAX_MERGES_TXT + 1)
    if spm and fmt not in SPM_BESIDE_TOKENIZER_JSON:
        spm_pieces = _spm_piece_list(files[spm])
        pieces_now = len(spm_pieces)

        def letters(count):
            return lambda: _unigram_additions(spm_pieces, count)

        # the ids past the model's pieces (T5's 100 extra ids, ...) leave it MAX_VOCAB in all
        out[f"{spm_label}_vocab_at_limit_valid"] = spm_grown(letters(MAX_VOCAB - total),
                                                             MAX_VOCAB)
        reported[f"{spm_label}_vocab_at_limit_valid"] = (
            f"{MAX_VOCAB:,} ids, {pieces_now + MAX_VOCAB - total:,} SentencePiece pieces")
        holds[f"{spm_label}_vocab_at_limit_valid"] = (MAX_VOCAB, 0)
        out[f"{spm_label}_vocab_{MAX_VOCAB}_pieces"] = spm_grown(
            letters(MAX_VOCAB - pieces_now), MAX_VOCAB)
        reported[f"{spm_label}_vocab_{MAX_VOCAB}_pieces"] = (
            f"{MAX_VOCAB:,} SentencePiece pieces, {MAX_VOCAB + total - pieces_now:,} ids")
        holds[f"{spm_label}_vocab_{MAX_VOCAB}_pieces"] = (MAX_VOCAB + total - pieces_now, 0)
        out[f"{spm_label}_vocab_past_limit"] = spm_grown(letters(MAX_VOCAB + 1 - pieces_now),
                                                         MAX_VOCAB)

    # ---- 5. another family's tokenizer files, or a Marian folder naming this family
    model_type_name = json.loads(files["config.json"])["model_type"]
    for other in OTHER_TOKENIZERS[fmt]:
        if other not in HF_AVAILABLE:
            continue

        def mixed(other=other):
            own = {n: v for n, v in hf_files(fmt).items() if n not in TOKENIZER_FILES}
            theirs = {n: v for n, v in hf_files(other).items() if n in TOKENIZER_FILES}
            return hf_upload({**own, **theirs})

        out[f"family_tokenizer_of_{other}"] = mixed
    out["family_marian_files"] = lambda: hf_upload({
        **marian_files(), "config.json": json.dumps(
            {**json.loads(dict(_marian())["config.json"]),
             "model_type": model_type_name}).encode()})

    # ---- 6. generation_config.json at its limits
    vocab = json.loads(files["config.json"]).get("vocab_size", 300)
    every = list(range(vocab))

    def gen(**values):
        return hf_generation(fmt, **values)

    end = json.loads(files["config.json"]).get("eos_token_id", 1)
    end = end if isinstance(end, int) else 1
    out.update({
        "generation_eos_every_id_valid": gen(eos_token_id=every, num_beams=4),
        "generation_eos_every_id_beams_at_cap_valid": gen(eos_token_id=every,
                                                          num_beams=MAX_NUM_BEAMS),
        "generation_eos_list_at_limit_valid": gen(eos_token_id=[i % vocab for i in
                                                                range(MAX_TOKEN_LIST)]),
        "generation_eos_list_past_limit": gen(eos_token_id=[i % vocab for i in
                                                            range(MAX_TOKEN_LIST + 1)]),
        "generation_num_beams_at_cap_valid": gen(num_beams=MAX_NUM_BEAMS,
                                                 num_return_sequences=MAX_NUM_BEAMS,
                                                 early_stopping="never", length_penalty=-2.0),
        "generation_num_beams_past_cap_valid": gen(num_beams=MAX_NUM_BEAMS + 1),
        "generation_suppress_every_id_valid": gen(suppress_tokens=every, num_beams=1,
                                                  renormalize_logits=True),
        "generation_suppress_every_id_beams_valid": gen(suppress_tokens=every, num_beams=4,
                                                        renormalize_logits=True),
        "generation_suppress_list_past_limit": gen(suppress_tokens=[i % vocab for i in
                                                                    range(MAX_TOKEN_LIST + 1)]),
        "generation_begin_suppress_every_id_valid": gen(begin_suppress_tokens=every,
                                                        num_beams=4, renormalize_logits=True),
        "generation_bad_words_every_id_valid": gen(bad_words_ids=[[i] for i in every],
                                                   num_beams=4, renormalize_logits=True),
        "generation_two_ids_left_valid": gen(
            suppress_tokens=[i for i in every if i not in (5, 6)], no_repeat_ngram_size=1,
            eos_token_id=[vocab - 1], num_beams=3, renormalize_logits=True),
        "generation_min_length_past_max_valid": gen(min_length=10**6, max_length=8,
                                                    num_beams=4),
        "generation_min_length_past_max_eos_every_id_valid": gen(
            min_length=50, max_length=8, eos_token_id=every, num_beams=4,
            renormalize_logits=True),
        "generation_forced_eos_every_id_valid": gen(forced_eos_token_id=every, num_beams=4,
                                                    max_length=6),
        "generation_forced_bos_is_end_valid": gen(forced_bos_token_id=end,
                                                  suppress_tokens=[end], num_beams=4,
                                                  renormalize_logits=True),
    })
    for label, texts in typed.items():
        fuzz_cases.TYPED_TEXTS[f"{fmt}_{label}"] = texts
    for label, what in reported.items():
        fuzz_cases.MEMORY_REPORTED[f"{fmt}_{label}"] = what
    for label, counts in holds.items():
        fuzz_cases.MEMORY_HOLDS[f"{fmt}_{label}"] = counts
    return out


def _hf_crafted(fmt: str) -> list[tuple[str, Callable[[], bytes]]]:
    cases = {"valid": lambda: hf_upload(hf_files(fmt)),
             "zipped_valid": lambda: hf_upload(hf_files(fmt), zipped=True),
             "zip_nested_folders_valid": lambda: upload_file({"model.zip": pack(
                 {f"a/b/{n}": c for n, c in hf_files(fmt).items()})}),
             "zip_lying_size_bomb": lambda: upload_file({"model.zip": write_zip(
                 [Entry(b"model.safetensors", zeros_deflated(bomb_megabytes()), 8, 0,
                        len(hf_files(fmt)["model.safetensors"]))]
                 + [entry(n, c) for n, c in hf_files(fmt).items() if n != "model.safetensors"])}),
             "with_pickle_weights": lambda: hf_upload(hf_files(fmt, {
                 "model.safetensors": None, "pytorch_model.bin": b"\x80\x04\x95" + bytes(64) + b"."})),
             "no_tokenizer": lambda: hf_upload({n: v for n, v in hf_files(fmt).items()
                                                if n in ("config.json", "model.safetensors")})}
    for group in (_hf_config_cases, _hf_generation_cases, _hf_tokenizer_cases,
                  _hf_safetensors_cases, _hf_issue37_cases):
        cases.update(group(fmt))
    return [(f"{fmt}_{label}", make) for label, make in cases.items()]


HF_JSON_VALUES = fuzz_cases.JSON_VALUES + (10**6, 10**9, -10**9, 2**63, [[1, 2]], [[10**9]],
                                           "gelu", "relu", "bart", "t5", [0] * 300)


def _odd_json(rng, data: bytes) -> bytes:
    """A JSON object's bytes with one field (or "zz_new") set to an odd value (HF_JSON_VALUES)."""
    try:
        value = json.loads(data or b"{}")
    except ValueError:
        return data
    if not isinstance(value, dict):
        return data
    keys = sorted(value) + ["zz_new"]
    value[keys[int(rng.integers(len(keys)))]] = HF_JSON_VALUES[int(rng.integers(
        len(HF_JSON_VALUES)))]
    return json.dumps(value).encode()


def _odd_nested(rng, data: bytes) -> bytes:
    """tokenizer.json with one node anywhere in it (a key of an object, an item of a short list)
    set to an odd value, or a component's "type" to another kind."""
    doc = json.loads(data)
    nodes = []  # (container, key)

    def walk(value, depth):
        if depth > 6 or len(nodes) > 5000:
            return
        if isinstance(value, dict):
            for key in value:
                nodes.append((value, key))
                walk(value[key], depth + 1)
        elif isinstance(value, list) and len(value) <= 64:
            for i in range(len(value)):
                nodes.append((value, i))
                walk(value[i], depth + 1)

    walk(doc, 0)
    container, key = nodes[int(rng.integers(len(nodes)))]
    kinds = ["Sequence", "Precompiled", "Replace", "ByteLevel", "Metaspace", "BPE", "Unigram",
             "WordPiece", "NFKC", "Strip", "Lowercase", "TemplateProcessing", "Evil"]
    container[key] = (kinds[int(rng.integers(len(kinds)))] if key == "type" and rng.integers(2)
                      else HF_JSON_VALUES[int(rng.integers(len(HF_JSON_VALUES)))])
    return json.dumps(doc).encode()


def random_hf(fmt: str) -> Callable[[np.random.Generator, int], bytes]:
    """One family's random cases: a file's bytes, a JSON field of config.json,
    generation_config.json or tokenizer_config.json, a node of tokenizer.json, a safetensors
    header field, a finite but huge row or entry, a file left out, or the zipped upload's bytes."""
    def make(rng: np.random.Generator, index: int) -> bytes:
        files = hf_files(fmt)
        how = int(rng.integers(8))
        if how == 0:
            name = sorted(files)[int(rng.integers(len(files)))]
            files[name] = _byte_mutation(rng, files[name])
        elif how == 1:
            names = [n for n in ("config.json", "generation_config.json", "tokenizer_config.json")
                     if n in files] or ["config.json"]
            name = names[int(rng.integers(len(names)))]
            files[name] = _odd_json(rng, files.get(name, b"{}"))
        elif how == 2 and "tokenizer.json" in files:
            files["tokenizer.json"] = _odd_nested(rng, files["tokenizer.json"])
        elif how == 3:
            header, body = safetensors_split(files["model.safetensors"])
            names = _tensor_names(header) + ["__metadata__"]
            name = names[int(rng.integers(len(names)))]
            field = ["dtype", "shape", "data_offsets", "whole"][int(rng.integers(4))]
            odd = {"dtype": ["F32", "F16", "BF16", "F64", "I32", "U8", "", None, 7],
                   "shape": [[], [1], [0], [-1], [2**40], [16, 16], [301, 16], None, "x"],
                   "data_offsets": [[0, 0], [0, 4], [4, 0], [-4, 4], [0, 2**40], None, [0],
                                    [0, 4, 8]],
                   "whole": [None, 1, [], {}, "x", {"dtype": "F32"}]}[field]
            value = odd[int(rng.integers(len(odd)))]
            if field == "whole" or not isinstance(header.get(name), dict):
                header[name] = value
            else:
                header[name][field] = value
            files["model.safetensors"] = safetensors_join(header, body)
        elif how == 4:
            header, body = safetensors_split(files["model.safetensors"])
            name = _tensor_names(header)[int(rng.integers(len(_tensor_names(header))))]
            start, stop = header[name]["data_offsets"]
            array = np.frombuffer(body[start:stop], "<f4").reshape(header[name]["shape"])
            files["model.safetensors"] = safetensors_join(
                header, body[:start] + _random_huge(rng, array).tobytes() + body[stop:])
        elif how == 5:
            name = sorted(files)[int(rng.integers(len(files)))]
            files.pop(name)
        elif how == 6:
            files["generation_config.json"] = _odd_json(rng, files.get("generation_config.json",
                                                                       b"{}"))
        else:
            return upload_file({"model.zip": _byte_mutation(rng, pack(files))})
        return hf_upload(files)
    return make


for _fmt in HF_AVAILABLE:
    CRAFTED.extend(_hf_crafted(_fmt))
HF_CRAFTED_NAMES = frozenset(name for name, _ in CRAFTED if name.split("_", 1)[0] in HF_FORMATS)


GENERATORS = [("h5", random_h5), ("keras", random_keras), ("tf", random_tf),
              ("marian", random_marian)]
fuzz_cases.OTHER_CRAFTED.extend((name, make, HF_LOADER if name in HF_CRAFTED_NAMES
                                  else UPLOAD_LOADER) for name, make in CRAFTED)
# Marian's cases keep UPLOAD_LOADER's name (tests/checkpoint/test_fuzz.py asks for it): the same
# path as HF_LOADER's (load_upload opens every family's files as they are, as the app does).
fuzz_cases.OTHER_FORMAT_GENERATORS.extend((name, make, UPLOAD_LOADER) for name, make in GENERATORS)
fuzz_cases.OTHER_FORMAT_GENERATORS.extend((fmt, random_hf(fmt), HF_LOADER) for fmt in HF_AVAILABLE)
fuzz_cases.OTHER_CRAFTED.extend((name, make, SPECIAL_LOADER) for name, make in SPECIAL_CRAFTED)
fuzz_cases.LOAD_SECONDS[UPLOAD_LOADER] = LOAD_SECONDS
fuzz_cases.LOAD_SECONDS[SPECIAL_LOADER] = LOAD_SECONDS
fuzz_cases.LOADER_IMPORTS[SPECIAL_LOADER] = ("transformer.importers", "transformer.importers.cli",
                                             "h5py", "safetensors.numpy")
fuzz_cases.LOADER_IMPORTS[UPLOAD_LOADER] = ("explorer.uploads", "transformer.importers",
                                            "transformer.inference.generation_config",
                                            "transformer.importers.keras_seq2seq",
                                            "transformer.importers.tf_tutorial",
                                            "transformer.importers.hf.marian", "h5py", "safetensors.numpy")
fuzz_cases.LOAD_SECONDS[HF_LOADER] = LOAD_SECONDS
fuzz_cases.FORMAT_LABELS.update({"bart": "BART", "t5": "T5", "t5v11": "T5 v1.1", "mbart": "mBART",
                                 "pegasus": "Pegasus", "m2m100": "M2M100", "nllb": "NLLB"})
fuzz_cases.LOADER_IMPORTS[HF_LOADER] = tuple(
    ["explorer.uploads", "transformer.importers", "transformer.inference.generation_config",
     "safetensors.numpy"]
    + [f"transformer.importers.{m}" for m in sorted({"marian"} | {m for _, m in HF_FORMATS.values()})
       if (ROOT / "transformer" / "importers" / f"{m}.py").is_file()])
