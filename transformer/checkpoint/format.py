"""One-file checkpoints that are data, never code.

A checkpoint is a ZIP archive with exactly these members:

    format.json                 {"format": "attention-explorer-checkpoint", "version": 1}
    config.json                 TransformerConfig fields (parsed against an allow-list)
    metadata.json               task or corpus, steps, training command, held-out metrics
    source_tokenizer.json       Tokenizer.spec()
    source_tokenizer.model      the SentencePiece model bytes
    target_tokenizer.json
    target_tokenizer.model
    weights.npz                 one float32 array per weight, keyed by its path in the model

Loading never unpickles and never asks Keras to deserialize anything: the config is parsed by
TransformerConfig.from_dict, the model is built from our own classes, and the weights are copied
in by name and shape (NumPy with allow_pickle=False).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from transformer.checkpoint import archive as bounded_zip
from transformer.checkpoint.metadata import clean_metadata, clean_value
from transformer.core import limits

# Every limit lives in transformer/limits.py, with its reason; the MAX_* names stay importable
# from here, and the reading code reads them from this module (tests patch them).
from transformer.core.limits import (
    MAX_COMPRESSION_RATIO,
    MAX_FILE_BYTES,
    MAX_JSON_BYTES,
    MAX_LAYERS,
    MAX_MEMBER_BYTES,
    MAX_POSITIONS,
    MAX_TOKENIZER_BYTES,
    MAX_TOTAL_BYTES,
)
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer
from transformer.model.weights import WeightError, assign_weights, weight_arrays, weight_shapes
from transformer.tokenizers import tokenizer_from_spec
from transformer.tokenizers.base import Tokenizer, TokenizerError

FORMAT_NAME = "attention-explorer-checkpoint"
FORMAT_VERSION = 1
MEMBERS = (
    "format.json", "config.json", "metadata.json",
    "source_tokenizer.json", "source_tokenizer.model",
    "target_tokenizer.json", "target_tokenizer.model",
    "weights.npz",
)

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "checkpoints"
DEFAULT_CHECKPOINT = ASSETS / "dates.ckpt"


class CheckpointError(ValueError):
    """Any reason a checkpoint cannot be loaded, in a sentence a user understands."""


def save_checkpoint(path, model: Transformer, source_tokenizer: Tokenizer,
                    target_tokenizer: Tokenizer, metadata: dict | None = None) -> Path:
    """Write a checkpoint file; returns its path."""
    data = checkpoint_bytes(model, source_tokenizer, target_tokenizer, metadata)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


def checkpoint_bytes(model, source_tokenizer, target_tokenizer, metadata=None) -> bytes:
    check_consistent(model.config, source_tokenizer, target_tokenizer)
    weights = io.BytesIO()
    np.savez(weights, **weight_arrays(model))  # uncompressed inside; the archive compresses
    members = {
        "format.json": _json_bytes({"format": FORMAT_NAME, "version": FORMAT_VERSION}),
        "config.json": model.config.to_json().encode(),
        "metadata.json": _json_bytes(metadata or {}),
        "source_tokenizer.json": _json_bytes(source_tokenizer.spec()),
        "source_tokenizer.model": source_tokenizer.model_bytes,
        "target_tokenizer.json": _json_bytes(target_tokenizer.spec()),
        "target_tokenizer.model": target_tokenizer.model_bytes,
        "weights.npz": weights.getvalue(),
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in MEMBERS:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible bytes
            info.compress_type = zipfile.ZIP_DEFLATED
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


def read_checkpoint(source) -> CheckpointData:
    """Read and check a checkpoint from a path, bytes or a binary file object; builds nothing.
    Raises CheckpointError."""
    data = read_input(source, "the checkpoint")
    members = _read_members(data)
    fmt = _parse_json(members, "format.json")
    if fmt != {"format": FORMAT_NAME, "version": FORMAT_VERSION}:
        raise CheckpointError(
            f"This is not an Attention Explorer checkpoint of version {FORMAT_VERSION} "
            f"(format.json says {json.dumps(fmt)[:200]}).")
    settings = _parse_json(members, "config.json")  # its own sentence if it is not JSON
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
    raw_weights = members.pop("weights.npz")
    directory = _weights_directory(raw_weights)  # names and sizes; no array read yet
    check_size(config, directory)
    # Names, shapes and values are checked against what the config describes before anything
    # is built: most bad files are refused without allocating a model.
    weights = _read_weights(raw_weights, weight_shapes(config), directory)
    return CheckpointData(config, weights, source_tokenizer, target_tokenizer, metadata,
                          hashlib.sha256(data).hexdigest(), metadata_warnings)


def build_model(config: TransformerConfig, weights: dict[str, np.ndarray],
                where: str = "the checkpoint") -> Transformer:
    """The model `config` describes with `weights` ({our path: array}) in it, checked to compute
    finite numbers. Raises CheckpointError."""
    check_size(config, weights)
    model = _build_model(config)  # as large as the weights hold
    try:
        assign_weights(model, weights, where)
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
        path = Path(source)
        if not path.is_file():
            raise CheckpointError(f"No file at {path} ({what}).")
        size = path.stat().st_size
        if size > limit:
            raise CheckpointError(f"{what_} is {size / 2**20:.1f} MB; the limit is "
                                  f"{limit / 2**20:.0f} MB.")
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    elif hasattr(source, "getvalue"):  # Streamlit's UploadedFile, io.BytesIO
        data = source.getvalue()
    elif hasattr(source, "read"):
        data = source.read(limit + 1)
    else:
        raise CheckpointError(f"Cannot read {what} from a {type(source).__name__}.")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"{what_} must be opened in binary mode.")
    if len(data) > limit:
        raise CheckpointError(f"{what_} is larger than the {limit / 2**20:.0f} MB limit.")
    if not data and not allow_empty:
        raise CheckpointError(f"{what_} is empty.")
    return bytes(data)


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
    unexpected = sorted(set(names) - set(MEMBERS))
    if unexpected:
        raise CheckpointError(f"The checkpoint holds an unexpected file {unexpected[0][:80]!r}.")
    missing = [name for name in MEMBERS if name not in names]
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
            # weights.npz stays a buffer (a view when stored): its arrays are read in place
            members[entry.name] = content if entry.name == "weights.npz" else bytes(content)
    except bounded_zip.ArchiveError as err:
        raise CheckpointError(str(err)) from None
    return members


def _member_limit(name: str) -> int:
    if name.endswith(".json"):
        return MAX_JSON_BYTES
    if name.endswith(".model"):
        return min(MAX_TOKENIZER_BYTES, MAX_MEMBER_BYTES)
    return MAX_MEMBER_BYTES


class _LongNumber(Exception):
    pass


def _json_int(text: str) -> int:
    """JSON integers are read only up to 20 digits: no setting needs more, and Python refuses
    to convert over 4,300 (with a ValueError) only after the work."""
    if len(text.lstrip("-")) > 20:
        raise _LongNumber
    return int(text)


def _parse_json(members, name):
    """The member parsed as UTF-8 JSON, at most MAX_JSON_DEPTH deep, integers of at most 20
    digits. Text is repaired (lone surrogates become U+FFFD) and NaN/infinity become null in every
    member but metadata.json, which clean_metadata repairs with a warning for each change."""
    try:
        value = json.loads(bytes(members[name]).decode("utf-8"), parse_int=_json_int)
    except _LongNumber:
        raise CheckpointError(f"{name!r} in the checkpoint holds a number of more than 20 "
                              "digits, which no setting needs.") from None
    except (UnicodeDecodeError, ValueError, RecursionError):  # ValueError: JSONDecodeError
        raise CheckpointError(f"{name!r} in the checkpoint is not valid JSON.") from None
    if _json_depth(value) > limits.MAX_JSON_DEPTH:
        raise CheckpointError(f"{name!r} in the checkpoint is nested more than "
                              f"{limits.MAX_JSON_DEPTH} levels deep; checkpoints never are.")
    return value if name == "metadata.json" else clean_value(value, set())


def _json_depth(value) -> int:
    """How deeply lists and objects nest in a parsed JSON value (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            if depth > limits.MAX_JSON_DEPTH:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


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
                f"The weight {_quoted(name)} in the checkpoint unpacks to "
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
            raise CheckpointError(f"The checkpoint has a weight {_quoted(unexpected[0])} that "
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
                    f"The checkpoint's weight {_quoted(name)} is stored as Python objects (a "
                    "pickle), which are never loaded.")
            if header.dtype != np.dtype("<f4"):
                raise CheckpointError(
                    f"The checkpoint's weight {_quoted(name)} has dtype "
                    f"{str(header.dtype)[:40]}; expected float32 (little-endian).")
            if expected is not None and tuple(header.shape) != tuple(expected[name]):
                raise CheckpointError(
                    f"The weight {name!r} has shape {str(tuple(header.shape))[:80]} in the "
                    f"checkpoint but {tuple(expected[name])} in the model its config describes.")
            headers[name] = header
        weights = {}
        for name, member in directory.items():
            array = bounded_zip.npy_array(raw, member, headers[name], where)
            if not _all_finite(array):
                raise CheckpointError(f"The checkpoint's weight {_quoted(name)} holds NaN or "
                                      "infinite values (training diverged?).")
            weights[name] = array
    except bounded_zip.ArchiveError as err:
        raise CheckpointError(str(err)) from None
    return weights


def _all_finite(array: np.ndarray, chunk: int = 2**20) -> bool:
    """np.isfinite(array).all(), a million values at a time (no full-size boolean copy)."""
    flat = array.reshape(-1) if array.flags.c_contiguous else array.ravel(order="K")
    return all(np.isfinite(flat[i:i + chunk]).all() for i in range(0, flat.size, chunk))


def _quoted(name: str) -> str:
    return repr(name if len(name) <= 80 else name[:77] + "...")


def check_size(config: TransformerConfig, weights) -> None:
    """Before building anything: every config value must be one the model can run and the pages
    can show, and the config must describe the weights the file really holds, so a small file
    cannot make us allocate a huge model. weights: {name: array} or {name: bounded_zip.Member}."""
    for name in ("num_encoder_layers", "num_decoder_layers"):
        if getattr(config, name) > MAX_LAYERS:
            raise CheckpointError(f"The checkpoint's {name} is {getattr(config, name)}; the "
                                  f"limit is {MAX_LAYERS}.")
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
    if config.pad_source_to > limits.maps_length(config):  # never cut: padding is its input
        need = limits.maps_copies() * limits.maps_bytes(config, config.pad_source_to)
        raise CheckpointError(
            f"The checkpoint's model is fed every source padded to {config.pad_source_to:,} ids "
            f"(pad_source_to): with its {config.num_encoder_layers} + "
            f"{config.num_decoder_layers} layers of {config.num_heads} heads, the attention "
            f"maps of one sentence would take {need / limits.MB:,.0f} MB; the limit is "
            f"{limits.MAX_MAPS_BYTES // limits.MB} MB.")
    expected = config.parameter_count()
    held = sum(int(w.size) if isinstance(w, np.ndarray) else w.size // 4 for w in weights.values())
    # Small differences (a weight missing or extra) get a precise message once the model is
    # built; a config far larger than its weights is refused before anything is allocated.
    if expected > 2 * held + 2**20:
        raise CheckpointError(
            f"The checkpoint's config describes a model with {expected:,} weights but the file "
            f"holds {held:,}: its settings and weights do not belong together.")


def _build_model(config: TransformerConfig) -> Transformer:
    """The model the (size-checked) config describes, freshly initialised; a config that passes
    validation but that TensorFlow cannot build is refused like any other bad setting."""
    try:
        return Transformer(config).build_weights()
    except Exception as err:  # noqa: BLE001 - whatever TF raises, the file is at fault
        raise CheckpointError(f"The checkpoint's model settings cannot be built "
                              f"({type(err).__name__}).") from None


def _check_finite(model: Transformer) -> None:
    """Refuse a model that computes NaN or infinity (weights that overflow float32 on real
    tokens): every view would be meaningless. The weights themselves were checked as they were
    read. The probe is a batch of sentence-length rows: min(max_len, PROBE_LENGTH) ids spread
    over each vocabulary (the first and last ids included), and a short row padded to that
    length, through the full teacher-forced pass with every attention map (fewer ids when the
    maps of a model with that many layers and heads would not fit limits.MAX_MAPS_BYTES)."""
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
        out = model((src, tgt), return_attention=True)
        finite = all(np.isfinite(np.asarray(v)).all() for v in out.values())
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
    for name in ("pad_id", "start_id", "end_id"):
        if getattr(target, name) != getattr(config, name):
            problems.append(f"the target tokenizer's {name} is {getattr(target, name)}, "
                            f"the model's is {getattr(config, name)}")
    if problems:
        raise CheckpointError("The tokenizers do not match the model: " + "; ".join(problems) + ".")


def _json_bytes(value) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True).encode()
