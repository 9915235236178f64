"""One-file checkpoints that are data, never code.

A checkpoint is a ZIP archive with these members:

    format.json                 {"format": "attention-explorer-checkpoint", "version": 2}
    config.json                 TransformerConfig fields (parsed against an allow-list)
    metadata.json               task or corpus, steps, training command, held-out metrics
    source_tokenizer.json       Tokenizer.spec()
    source_tokenizer.model      the SentencePiece model bytes
    target_tokenizer.json
    target_tokenizer.model
    weights.safetensors         one F32 tensor per weight, keyed by its path in the model, stored
                                (not deflated) and 64-byte aligned in the ZIP

and, for a model imported from Hugging Face, optionally generation_config.json (as its folder
gave it: read as bounded data when the model opens, transformer.inference.generation_config).

Version 1 (still read, no longer written) has weights.npz (NumPy's savez, deflated) instead of
weights.safetensors; `python -m transformer.convert upgrade` rewrites one as version 2.

Loading never unpickles and never asks Keras to deserialize anything: the config is parsed by
TransformerConfig.from_dict, the model is built from our own classes, and the weights are copied
in by name and shape (NumPy with allow_pickle=False). A version 2 file's safetensors header is
parsed here with the JSON rules of every other member and checked (F32 only, names and shapes
against the config, offsets contiguous inside the member) before any array exists; the arrays are
then views of the file's own bytes: no copy of the weights is made to read them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from transformer.checkpoint import archive as bounded_zip
from transformer.checkpoint import safetensors
from transformer.checkpoint.errors import CheckpointError
from transformer.checkpoint.jsons import bounded_json
from transformer.checkpoint.metadata import clean_metadata, clean_value
from transformer.core import limits

# Every limit lives in transformer/limits.py, with its reason; the MAX_* names stay importable
# from here, and the reading code reads them from this module (tests patch them).
from transformer.core.limits import (
    MAX_COMPRESSION_RATIO,
    MAX_FILE_BYTES,
    MAX_JSON_BYTES,
    MAX_LAYERS,  # noqa: F401 - re-exported, as it always was
    MAX_MEMBER_BYTES,
    MAX_POSITIONS,
    MAX_TOKENIZER_BYTES,
    MAX_TOTAL_BYTES,
)
from transformer.core.mapped import release
from transformer.core.text import quoted
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer
from transformer.model.weights import (
    WeightArena,
    WeightError,
    assign_weights,
    empty_model,
    weight_arrays,
    weight_shapes,
)
from transformer.tokenizers import tokenizer_from_spec
from transformer.tokenizers.base import Tokenizer, TokenizerError

FORMAT_NAME = "attention-explorer-checkpoint"
FORMAT_VERSION = 2  # what is written; every version in WEIGHTS_MEMBER is read
WEIGHTS_MEMBER = {1: "weights.npz", 2: "weights.safetensors"}  # each version's weights member
_COMMON_MEMBERS = (
    "format.json", "config.json", "metadata.json",
    "source_tokenizer.json", "source_tokenizer.model",
    "target_tokenizer.json", "target_tokenizer.model",
)
MEMBERS_BY_VERSION = {v: _COMMON_MEMBERS + (name,) for v, name in WEIGHTS_MEMBER.items()}
# Members a checkpoint may hold besides those: a Hugging Face model's generation_config.json, as
# its folder gave it (read, bounded and checked when the model opens), so that its export
# decodes as the folder does.
OPTIONAL_MEMBERS = ("generation_config.json",)
MEMBERS = MEMBERS_BY_VERSION[FORMAT_VERSION]  # what save_checkpoint writes
MEMBERS_V1 = MEMBERS_BY_VERSION[1]
# The safetensors header is the weights' directory: the same bound as weights.npz's ZIP directory
# (~200 bytes a weight; 4,096 weights).
_ALIGN = 64  # where weights.safetensors' data starts in the file (and its header pads to 8)
_ALIGN_EXTRA_ID = 0xD935  # the ZIP extra field zipalign pads local headers with

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets" / "checkpoints"
DEFAULT_CHECKPOINT = ASSETS / "dates.ckpt"


def save_checkpoint(path, model: Transformer, source_tokenizer: Tokenizer,
                    target_tokenizer: Tokenizer, metadata: dict | None = None) -> Path:
    """Write a checkpoint file (version FORMAT_VERSION); returns its path."""
    return _write_atomic(path, checkpoint_bytes(model, source_tokenizer, target_tokenizer,
                                                metadata))


def checkpoint_bytes(model, source_tokenizer, target_tokenizer, metadata=None,
                     version: int = FORMAT_VERSION, generation_config: bytes | None = None
                     ) -> bytes:
    """The bytes of a checkpoint of `model` (version 2 unless told; 1 is written only to test
    that old files still open), with a generation_config.json when given."""
    check_consistent(model.config, source_tokenizer, target_tokenizer)
    return _archive(model.config, weight_arrays(model), source_tokenizer, target_tokenizer,
                    metadata, version, generation_config)


def data_bytes(data: CheckpointData, version: int = FORMAT_VERSION) -> bytes:
    """The bytes of a checkpoint holding what read_checkpoint read (no model is built): how a
    version 1 file is rewritten as version 2, its config, tokenizers and metadata kept."""
    data.settle()
    check_consistent(data.config, data.source_tokenizer, data.target_tokenizer)
    return _archive(data.config, data.weights, data.source_tokenizer, data.target_tokenizer,
                    data.metadata, version, data.generation_config)


def write_checkpoint(path, data: CheckpointData, version: int = FORMAT_VERSION) -> Path:
    """Write what read_checkpoint read as a checkpoint file; returns its path."""
    return _write_atomic(path, data_bytes(data, version))


def _write_atomic(path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


def _archive(config: TransformerConfig, weights: dict[str, np.ndarray], source_tokenizer,
             target_tokenizer, metadata, version: int, generation_config: bytes | None = None
             ) -> bytes:
    if version not in WEIGHTS_MEMBER:
        raise ValueError(f"checkpoint version {version!r} is not one that can be written")
    arrays = {name: np.ascontiguousarray(array, np.float32) for name, array in weights.items()}
    if version == 1:
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # uncompressed inside; the archive compresses
        weight_bytes = buffer.getvalue()
    else:
        from safetensors.numpy import save  # the Rust writer; its header pads to 8 bytes

        weight_bytes = save(arrays)
    members = {
        "format.json": _json_bytes({"format": FORMAT_NAME, "version": version}),
        "config.json": config.to_json().encode(),
        "metadata.json": _json_bytes(metadata or {}),
        "source_tokenizer.json": _json_bytes(source_tokenizer.spec()),
        "source_tokenizer.model": source_tokenizer.model_bytes,
        "target_tokenizer.json": _json_bytes(target_tokenizer.spec()),
        "target_tokenizer.model": target_tokenizer.model_bytes,
        WEIGHTS_MEMBER[version]: weight_bytes,
    }
    names = list(MEMBERS_BY_VERSION[version])
    if generation_config is not None:  # before the weights, which end the file
        members["generation_config.json"] = bytes(generation_config)
        names.insert(len(names) - 1, "generation_config.json")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible bytes
            info.compress_type = zipfile.ZIP_DEFLATED
            if name == "weights.safetensors":
                # Stored, its data starting at a multiple of _ALIGN in the file: the arrays are
                # views of the file's bytes, aligned (the local header's extra field pads it).
                info.compress_type = zipfile.ZIP_STORED
                at = out.tell() + 30 + len(name.encode()) + 4
                pad = -at % _ALIGN
                info.extra = struct.pack("<HH", _ALIGN_EXTRA_ID, pad) + bytes(pad)
            archive.writestr(info, members[name])
    return out.getvalue()


@dataclass
class CheckpointData:
    """What a checkpoint file holds, read and checked: everything a model is opened from (an
    importer of another program's files makes one too, mapped onto our names)."""
    config: TransformerConfig
    weights: dict[str, np.ndarray]  # {our weight path: float32 array}, checked against the config
    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""  # sha256 of the file's bytes: the cache key for everything derived
    metadata_warnings: list[str] = field(default_factory=list)  # what the metadata schema dropped
    format_version: int = 0  # the checkpoint file's version (0: not read from a checkpoint)
    # A Hugging Face model's generation_config.json, as given (read, bounded and checked when the
    # model opens: transformer.inference.generation_config); None for models without one.
    generation_config: bytes | None = None
    # Who gave it (core.limits.Budgets): a stranger's upload (UPLOAD, the default) or a model
    # the person running the server named (limits.named_budgets()).
    budgets: limits.Budgets = limits.UPLOAD
    # What is still being computed beside the load (a Hugging Face model's weight files'
    # SHA-256, in a thread): it sets metadata's file entries, content_hash and
    # metadata_warnings. settle() waits for it: OpenedModel.open once the model is built, and
    # whatever writes the data; until then metadata holds every entry but the files.
    pending: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def settle(self) -> CheckpointData:
        """Finish what is computed beside the load (pending), once; returns self."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending()
        return self


def read_checkpoint(source) -> CheckpointData:
    """Read and check a checkpoint (version 1 or 2) from a path, bytes or a binary file object;
    builds nothing. Raises CheckpointError."""
    data = read_input(source, "the checkpoint")
    members = _read_members(data)
    weights_member = next(name for name in WEIGHTS_MEMBER.values() if name in members)
    fmt = _parse_json(members, "format.json")
    version = fmt.get("version") if isinstance(fmt, dict) and set(fmt) == {"format", "version"} \
        and fmt["format"] == FORMAT_NAME and type(fmt["version"]) is int else None
    if version not in WEIGHTS_MEMBER:
        raise CheckpointError(
            f"This is not an Attention Explorer checkpoint of version 1 or 2 (format.json says "
            f"{json.dumps(fmt)[:200]}).")
    if WEIGHTS_MEMBER[version] != weights_member:
        raise CheckpointError(
            f"The checkpoint's format.json says version {version}, whose weights are in "
            f"{WEIGHTS_MEMBER[version]!r}, but the checkpoint holds {weights_member!r}.")
    settings = _parse_json(members, "config.json")  # its own error if it is not JSON
    try:
        config = TransformerConfig.from_dict(settings)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"The checkpoint's model settings are invalid: {err}.") from None
    metadata = _parse_json(members, "metadata.json")
    if not isinstance(metadata, dict):
        raise CheckpointError("The checkpoint's metadata.json must hold a JSON object.")
    metadata, metadata_warnings = clean_metadata(metadata)
    source_tokenizer = _load_tokenizer(members, "source")
    target_tokenizer = _load_tokenizer(members, "target")
    check_consistent(config, source_tokenizer, target_tokenizer)
    raw_weights = members.pop(weights_member)
    # Names, shapes and values are checked against what the config describes before anything
    # is built: most bad files are refused without allocating a model.
    if version == 1:
        directory = _weights_directory(raw_weights)  # names and sizes; no array read yet
        check_size(config, directory)
        weights = _read_weights(raw_weights, weight_shapes(config), directory)
    else:
        tensors = safetensors.header(raw_weights)  # names, shapes, offsets; no array yet
        check_size(config, tensors)
        weights = _read_safetensors(raw_weights, weight_shapes(config), tensors)
    return CheckpointData(config, weights, source_tokenizer, target_tokenizer, metadata,
                          hashlib.sha256(data).hexdigest(), metadata_warnings, version,
                          members.get("generation_config.json"))


def build_model(config: TransformerConfig, weights: dict[str, np.ndarray],
                where: str = "the checkpoint", budgets: limits.Budgets = limits.UPLOAD
                ) -> Transformer:
    """The model `config` describes with `weights` ({our path: array}) in it, checked to compute
    finite numbers: for every input, by the weights' bounds (transformer.model.bounds, before
    anything is built), then on a probe sentence (_check_finite, after). Raises
    CheckpointError."""
    from transformer.model.bounds import check_weight_bounds

    check_size(config, weights, budgets)
    try:
        check_weight_bounds(config, weights, where)
    except WeightError as err:
        raise CheckpointError(str(err)) from None
    for array in weights.values():  # the file's pages the bound read leave the process
        release(array)  # (the copies map them again one weight at a time)
    arena = WeightArena(weights)  # its pages made ready while the model is built
    model = _build_model(config)  # as large as the weights hold
    try:
        assign_weights(model, weights, where, arena)
    except WeightError as err:
        raise CheckpointError(str(err)) from None
    _check_finite(model)
    return model


# ------------------------------------------------------------------ reading, defensively
def read_input(source, what: str, limit: int | None = None, allow_empty: bool = False) -> bytes:
    """The bytes of one input a user gives: bytes, a path, or a binary file object (an upload,
    io.BytesIO), never reading more than `limit` (default MAX_FILE_BYTES) + 1 bytes. `what`
    names it in the sentences ("the checkpoint", "'model.weights.h5'"). Every reader of user
    files reads through here."""
    limit = MAX_FILE_BYTES if limit is None else limit
    # "the checkpoint" starts a sentence as "The checkpoint"; a file name stays as it is
    what_ = what[:1].upper() + what[1:] if what.split(" ", 1)[0] in ("the", "a", "an") else what
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif isinstance(source, (str, Path)):
        data = _read_regular_file(Path(source), what, what_, limit)
    elif hasattr(source, "getvalue"):  # Streamlit's UploadedFile, io.BytesIO
        data = source.getvalue()
    elif hasattr(source, "read"):
        try:
            data = source.read(limit + 1)
        except OSError as err:
            raise CheckpointError(f"{what_} could not be read ({_os_reason(err)}).") from None
    else:
        raise CheckpointError(f"Cannot read {what} from a {type(source).__name__}.")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"{what_} must be opened in binary mode.")
    if len(data) > limit:
        raise CheckpointError(f"{what_} is larger than the {limit / 2**20:.0f} MB limit.")
    if not data and not allow_empty:
        raise CheckpointError(f"{what_} is empty.")
    return bytes(data)


def _read_regular_file(path: Path, what: str, what_: str, limit: int) -> bytes:
    """A path's bytes, if it is a regular file (links followed) of at most `limit` bytes: a
    directory, FIFO, socket or device (/proc/self/mem, /dev/zero) is refused from its stat,
    before it is opened, and the size is checked from the stat before anything is read. The
    file is opened without blocking (a FIFO swapped in after the stat cannot hang the read) and
    checked again through its descriptor; every OSError is an error."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise CheckpointError(f"{path} ({what}) is {kind}; give a model's file.")
        if info.st_size > limit:
            raise CheckpointError(f"{what_} is {info.st_size / 2**20:.1f} MB; the limit is "
                                  f"{limit / 2**20:.0f} MB.")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # replaced since the stat
                raise CheckpointError(f"{path} ({what}) is not a regular file.")
            return handle.read(limit + 1)
    except FileNotFoundError:
        raise CheckpointError(f"No file at {path} ({what}).") from None
    except OSError as err:
        raise CheckpointError(f"{what_} at {path} could not be read "
                              f"({_os_reason(err)}).") from None


def _os_reason(err: OSError) -> str:
    """An OSError in words, without the path it may repeat: "Permission denied"."""
    return err.strerror or type(err).__name__


def _read_members(data: bytes) -> dict[str, bytes]:
    """The eight members. The whole ZIP directory is checked first (names, methods, offsets) and
    every declared size against the limits and the load budget; only then is anything unpacked,
    each member through the bounded reader (never past its declared size)."""
    try:
        entries = bounded_zip.read_directory(data, "the checkpoint", limits.MAX_MEMBERS,
                                         limits.MAX_DIRECTORY_BYTES, locate=False)
    except bounded_zip.ArchiveError as err:
        if err.not_zip:
            raise CheckpointError("This file is not a checkpoint: it is not a ZIP archive, or it "
                                  "is truncated.") from None
        raise CheckpointError(str(err)) from None
    names = [entry.name for entry in entries]
    # The weights member tells the version (format.json must agree): version 2's if it is there.
    version = next((v for v in sorted(WEIGHTS_MEMBER, reverse=True)
                    if WEIGHTS_MEMBER[v] in names), None)
    expected = MEMBERS_BY_VERSION[version or FORMAT_VERSION]
    unexpected = sorted(set(names) - set(expected) - set(OPTIONAL_MEMBERS))
    if unexpected:
        raise CheckpointError(f"The checkpoint holds an unexpected file {unexpected[0][:80]!r}.")
    if version is None:
        raise CheckpointError(
            f"The checkpoint is missing its weights ({WEIGHTS_MEMBER[FORMAT_VERSION]!r}, or in a "
            f"file of version 1 {WEIGHTS_MEMBER[1]!r}).")
    missing = [name for name in expected if name not in names]
    if missing:
        raise CheckpointError(f"The checkpoint is missing {missing[0]!r}.")
    total = sum(entry.size for entry in entries)
    if total > MAX_TOTAL_BYTES:
        raise CheckpointError(
            f"The checkpoint unpacks to {total / 2**20:.0f} MB; the limit is "
            f"{MAX_TOTAL_BYTES / 2**20:.0f} MB.")
    for entry in entries:
        limit = _member_limit(entry.name)
        if bounded_zip.unpacks_too_far(entry.size, entry.compressed_size, limit):
            raise CheckpointError(
                f"{entry.name!r} in the checkpoint unpacks to {entry.size / 2**20:.1f} MB from "
                f"{entry.compressed_size / 2**20:.1f} MB (at most {limit / 2**20:.1f} MB, packed "
                f"at most {MAX_COMPRESSION_RATIO} to 1): refused as a possible decompression bomb.")
    budget = limits.load_budget(len(data))
    if total > budget:
        raise CheckpointError(
            f"The checkpoint unpacks to {total / 2**20:.1f} MB from a file of "
            f"{len(data) / 2**20:.1f} MB; a file of that size may unpack to "
            f"{budget / 2**20:.1f} MB at most ({limits.LOAD_BUDGET_FLOOR // 2**20} MB plus "
            f"{limits.LOAD_BUDGET_PER_FILE_BYTE} times the file): refused as a possible "
            "decompression bomb.")
    members = {}
    try:
        for entry in bounded_zip.locate_members(data, entries, "the checkpoint"):
            content = bounded_zip.read_member(data, entry, "the checkpoint")
            # the weights stay a buffer (a view of `data` when stored): arrays are read in place
            members[entry.name] = content if entry.name in WEIGHTS_MEMBER.values() \
                else bytes(content)
    except bounded_zip.ArchiveError as err:
        raise CheckpointError(str(err)) from None
    return members


def _member_limit(name: str) -> int:
    if name.endswith(".json"):
        return MAX_JSON_BYTES
    if name.endswith(".model"):
        return min(MAX_TOKENIZER_BYTES, MAX_MEMBER_BYTES)
    return MAX_MEMBER_BYTES


def _parse_json(members, name):
    """The member parsed as UTF-8 JSON, at most MAX_JSON_DEPTH deep, integers of at most 20
    digits. Text is repaired (lone surrogates become U+FFFD) and NaN/infinity become null in every
    member but metadata.json, which clean_metadata repairs with a warning for each change."""
    value = bounded_json(members[name], repr(name))
    return value if name == "metadata.json" else clean_value(value, set())


def _load_tokenizer(members, side) -> Tokenizer:
    spec = _parse_json(members, f"{side}_tokenizer.json")
    try:
        return tokenizer_from_spec(spec, members[f"{side}_tokenizer.model"])
    except TokenizerError as err:
        raise CheckpointError(f"The checkpoint's {side} tokenizer is invalid: {err}") from None


def _weights_directory(raw) -> dict[str, bounded_zip.Member]:
    """{weight name: its .npy member} from weights.npz's own ZIP directory; reads no array."""
    try:
        directory = bounded_zip.npz_directory(raw, "the checkpoint's weights.npz")
    except bounded_zip.ArchiveError as err:
        if err.not_zip:
            raise CheckpointError(
                "The checkpoint's weights are not a NumPy .npz archive.") from None
        raise CheckpointError(str(err)) from None
    # Arrays deflated inside the .npz (np.savez_compressed) unpack again: the same rules.
    total = sum(member.size for member in directory.values())
    budget = limits.load_budget(len(raw))
    for name, member in directory.items():
        if bounded_zip.unpacks_too_far(member.size, member.compressed_size, MAX_MEMBER_BYTES):
            raise CheckpointError(
                f"The weight {quoted(name)} in the checkpoint unpacks to "
                f"{member.size / 2**20:.1f} MB from {member.compressed_size / 2**20:.1f} MB: "
                "refused as a possible decompression bomb.")
    if total > budget:
        raise CheckpointError(
            f"The checkpoint's weights unpack to {total / 2**20:.1f} MB from "
            f"{len(raw) / 2**20:.1f} MB, more than the {budget / 2**20:.1f} MB allowed: refused "
            "as a possible decompression bomb.")
    return directory


def _read_weights(raw, expected: dict[str, tuple] | None = None,
                  directory: dict[str, bounded_zip.Member] | None = None) -> dict[str, np.ndarray]:
    """{weight name: float32 array} from weights.npz (bytes or a buffer).

    expected ({name: shape} of the model the config describes): a name the model lacks, or
    lacking, is refused from the directory before any array is read. Every .npy header (magic,
    version, dtype float32 little-endian, shape, order, length) is checked before its data, and
    the data is read with the bounded reader; stored arrays are views of `raw` (no copy)."""
    directory = _weights_directory(raw) if directory is None else directory
    if expected is not None:
        unexpected = sorted(set(directory) - set(expected))
        if unexpected:
            raise CheckpointError(f"The checkpoint has a weight {quoted(unexpected[0])} that "
                                  "this model does not have.")
        missing = sorted(set(expected) - set(directory))
        if missing:
            raise CheckpointError(f"The checkpoint has no value for the weight {missing[0]!r}.")
    where = "the checkpoint's weights.npz"
    headers = {}
    try:
        for name, member in directory.items():
            header = bounded_zip.npy_header(raw, member, where)
            if header.dtype.hasobject:
                raise CheckpointError(
                    f"The checkpoint's weight {quoted(name)} is stored as Python objects (a "
                    "pickle), which are never loaded.")
            if header.dtype != np.dtype("<f4"):
                raise CheckpointError(
                    f"The checkpoint's weight {quoted(name)} has dtype "
                    f"{str(header.dtype)[:40]}; expected float32 (little-endian).")
            if expected is not None and tuple(header.shape) != tuple(expected[name]):
                raise CheckpointError(
                    f"The weight {name!r} has shape {str(tuple(header.shape))[:80]} in the "
                    f"checkpoint but {tuple(expected[name])} in the model its config describes.")
            headers[name] = header
        weights = {}
        for name, member in directory.items():
            array = bounded_zip.npy_array(raw, member, headers[name], where)
            if not safetensors.all_finite(array):
                raise CheckpointError(f"The checkpoint's weight {quoted(name)} holds NaN or "
                                      "infinite values (training diverged?).")
            weights[name] = array
    except bounded_zip.ArchiveError as err:
        raise CheckpointError(str(err)) from None
    return weights


def _read_safetensors(raw, expected: dict[str, tuple], tensors: dict[str, safetensors.Tensor]
                      ) -> dict[str, np.ndarray]:
    """{weight name: float32 array}, each a read-only view of `raw` (no copy) at the offsets the
    checked header gives: names and shapes against `expected` first, then every value finite
    (a million at a time)."""
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise CheckpointError(f"The checkpoint has a weight {quoted(unexpected[0])} that "
                              "this model does not have.")
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise CheckpointError(f"The checkpoint has no value for the weight {missing[0]!r}.")
    for name, tensor in tensors.items():
        if tensor.shape != tuple(expected[name]):
            raise CheckpointError(
                f"The weight {name!r} has shape {str(tensor.shape)[:80]} in the checkpoint but "
                f"{tuple(expected[name])} in the model its config describes.")
    return safetensors.arrays(raw, tensors)


def check_config(config: TransformerConfig, budgets: limits.Budgets = limits.UPLOAD) -> None:
    """Every config value must be one the model can run and the pages can show, within the
    budgets of who gave it (limits.UPLOAD for a stranger's file): checked from the config alone,
    before any weight is read."""
    max_layers = budgets.layers
    for name in ("num_encoder_layers", "num_decoder_layers"):
        if getattr(config, name) > max_layers:
            raise CheckpointError(f"The checkpoint's {name} is {getattr(config, name)}; the "
                                  f"limit is {max_layers}.")
    layers = config.num_encoder_layers + config.num_decoder_layers
    if layers > budgets.total_layers:  # tracing and compiling grow with layers, not width
        raise CheckpointError(
            f"The checkpoint's model has {config.num_encoder_layers} + "
            f"{config.num_decoder_layers} layers; the limit is {budgets.total_layers} in all "
            "(each layer takes time to prepare for decoding, however narrow it is).")
    for name in ("src_vocab_size", "tgt_vocab_size"):
        if getattr(config, name) > limits.MAX_VOCAB:
            raise CheckpointError(f"The checkpoint's {name} is {getattr(config, name):,}; the "
                                  f"limit is {limits.MAX_VOCAB:,} pieces.")
    if config.max_len > MAX_POSITIONS:
        raise CheckpointError(f"The checkpoint's max_len is {config.max_len}; the limit is "
                              f"{MAX_POSITIONS}.")
    if config.max_len < limits.MIN_POSITIONS:
        raise CheckpointError(
            f"The checkpoint's max_len is {config.max_len}; at least {limits.MIN_POSITIONS} "
            "positions are needed (<s>, a piece and </s>, and a decoding step).")
    if config.num_heads > limits.MAX_HEADS:  # heads cost no weights (d_model heads of 1)
        raise CheckpointError(f"The checkpoint's num_heads is {config.num_heads:,}; the limit "
                              f"is {limits.MAX_HEADS}.")
    if config.pad_source_to > limits.maps_length(config, 1, budgets):  # padding is its input
        need = limits.maps_copies() * limits.maps_bytes(config, config.pad_source_to)
        raise CheckpointError(
            f"The checkpoint's model is fed every source padded to {config.pad_source_to:,} ids "
            f"(pad_source_to): with its {config.num_encoder_layers} + "
            f"{config.num_decoder_layers} layers of {config.num_heads} heads, the attention "
            f"maps of one sentence would take {need / limits.MB:,.0f} MB; the limit is "
            f"{budgets.maps_bytes // limits.MB} MB.")
    if config.pad_source_to > limits.flops_length(config, budgets):
        raise CheckpointError(
            f"The checkpoint's model is fed every source padded to {config.pad_source_to:,} ids "
            f"(pad_source_to): one pass over a sentence would take "
            f"{limits.pass_flops(config, config.pad_source_to):.1e} operations; the limit is "
            f"{budgets.pass_flops:.1e}.")
    if budgets.memory_bytes:  # a named model: what the load will take against what is free
        need = limits.load_bytes(config)
        if need > budgets.memory_bytes:
            raise CheckpointError(
                f"Opening this model ({config.parameter_count():,} weights, "
                f"{config.num_encoder_layers} + {config.num_decoder_layers} layers) would take "
                f"about {need / 2**30:.1f} GB of memory; {budgets.memory_bytes / 2**30:.1f} GB "
                "are available. Close other programs or models, or use a machine with more "
                "memory.")


def check_size(config: TransformerConfig, weights, budgets: limits.Budgets = limits.UPLOAD
               ) -> None:
    """Before building anything: the config (check_config), and the config must describe the
    weights the file really holds, so a small file cannot make us allocate a huge model.
    weights: {name: array} or {name: bounded_zip.Member}."""
    check_config(config, budgets)
    expected = config.parameter_count()
    held = sum(int(w.size) if isinstance(w, np.ndarray) else w.size // 4 for w in weights.values())
    # Small differences (a weight missing or extra) get a precise message once the model is
    # built; a config far larger than its weights is refused before anything is allocated.
    if expected > 2 * held + 2**20:
        raise CheckpointError(
            f"The checkpoint's config describes a model with {expected:,} weights but the file "
            f"holds {held:,}: its settings and weights do not belong together.")


def _build_model(config: TransformerConfig) -> Transformer:
    """The model the (size-checked) config describes, its variables zero (every weight is
    assigned next); a config that passes validation but that TensorFlow cannot build is refused
    like any other bad setting."""
    try:
        return empty_model(config)  # unwritten: every weight is assigned next
    except Exception as err:  # noqa: BLE001 - whatever TF raises, the file is at fault
        raise CheckpointError(f"The checkpoint's model settings cannot be built "
                              f"({type(err).__name__}).") from None


def _check_finite(model: Transformer) -> None:
    """Refuse a model that computes NaN or infinity (weights that overflow float32 on real
    tokens): every view would be meaningless. The fast first check, kept beside the proof for
    every input (transformer.model.bounds.check_weight_bounds, which build_model ran before
    building): it runs the real kernels, so it also catches what the bound does not model.
    The weights themselves were checked as they were read. The probe is a batch of
    sentence-length rows: min(max_len, PROBE_LENGTH) ids spread over each vocabulary (the
    first and last ids included), and a short row padded to that length, through the full
    teacher-forced pass with every attention map and every layer's output (fewer ids when the
    maps of a model with that many layers and heads would not fit limits.MAX_MAPS_BYTES); the
    output projection runs at the last position only (logits_at): every position's final
    states are checked, and the vocabulary's logits at every position cost NLLB's probe
    0.15-0.2 s (alone: 0.95-1.05 -> 0.80-0.86 s) for nothing the bound does not cover."""
    c = model.config
    n = min(c.max_len, limits.PROBE_LENGTH, limits.maps_length(c))

    def rows(vocab: int, start: int) -> np.ndarray:
        spread = np.linspace(0, vocab - 1, n).round().astype(np.int32)  # (n,)
        short = np.full(n, c.pad_id, np.int32)
        short[:min(n, 4)] = spread[-min(n, 4):]
        for row in (spread, short):
            row[0] = start
        return np.stack([spread, short][:limits.PROBE_ROWS])  # (rows, n)

    src = rows(c.src_vocab_size, c.start_id)
    tgt = rows(c.tgt_vocab_size, c.start_id)
    try:
        enc = model.encode(src, return_hidden_states=True)
        dec = model.decode(tgt, enc["memory"], enc["mask"], return_hidden_states=True,
                           logits_at=-1)
        finite = all(np.isfinite(np.asarray(v)).all() for out in (enc, dec)
                     for v in out.values())
    except Exception as err:  # noqa: BLE001 - a model that cannot run is refused, whatever TF says
        raise CheckpointError(f"The checkpoint's model fails on a probe sentence "
                              f"({type(err).__name__}).") from None
    if not finite:
        raise CheckpointError(
            "The checkpoint's weights compute NaN or infinite values on a probe sentence (they "
            "overflow float32).")


def check_consistent(config: TransformerConfig, source: Tokenizer, target: Tokenizer) -> None:
    problems = []
    if source.vocab_size != config.src_vocab_size:
        problems.append(f"the source tokenizer has {source.vocab_size} pieces but the model "
                        f"expects src_vocab_size {config.src_vocab_size}")
    if target.vocab_size != config.tgt_vocab_size:
        problems.append(f"the target tokenizer has {target.vocab_size} pieces but the model "
                        f"expects tgt_vocab_size {config.tgt_vocab_size}")
    if source.pad_id != config.pad_id:
        problems.append(f"the source tokenizer pads with id {source.pad_id}, the model with {config.pad_id}")
    # A Hugging Face family's target tokenizer names its text's prefix start_id (BART's <s>,
    # mBART-50's language code); the model's start_id is the decoder's first input (BART's </s>).
    for name in ("pad_id", "end_id") if target.prefix_start else ("pad_id", "start_id", "end_id"):
        if getattr(target, name) != getattr(config, name):
            problems.append(f"the target tokenizer's {name} is {getattr(target, name)}, "
                            f"the model's is {getattr(config, name)}")
    if problems:
        raise CheckpointError("The tokenizers do not match the model: " + "; ".join(problems) + ".")


def _json_bytes(value) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True).encode()
