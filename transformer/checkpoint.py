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
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .config import TransformerConfig
from .decoding import Decoding, beam_search, greedy_decode, log_softmax
from .masks import decoder_mask, padding_mask
from .model import Transformer
from .tokenizer import Tokenizer, TokenizerError

FORMAT_NAME = "attention-explorer-checkpoint"
FORMAT_VERSION = 1
MAX_FILE_BYTES = 400 * 2**20  # the archive as uploaded (= server.maxUploadSize in MB)
MAX_MEMBER_BYTES = 1 * 2**30  # one member, uncompressed
MAX_TOTAL_BYTES = 2 * 2**30  # all members, uncompressed
MAX_JSON_BYTES = 1 * 2**20
MAX_COMPRESSION_RATIO = 200  # weights compress ~1.1x; a larger ratio on a big member is a bomb
# Bounds on what a config may ask us to build before its weights prove it is that large.
MAX_LAYERS = 64
MAX_POSITIONS = 16384  # the sinusoid table is max_len x d_model floats that no weight accounts for
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


@dataclass
class Checkpoint:
    config: TransformerConfig
    model: Transformer
    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""  # sha256 of the file's bytes: the cache key for everything derived

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or self.metadata.get("task") or "checkpoint")

    def pieces_cut(self, text: str, side: str = "source") -> int:
        """How many pieces of `text` do not fit the model's max_len (and are cut on encoding)."""
        if side == "source":  # <s> pieces </s>
            return max(0, len(self.source_tokenizer.pieces(text)) + 2 - self.config.max_len)
        if side == "target":  # pieces </s> (the decoder's inputs are <s> pieces)
            return max(0, len(self.target_tokenizer.pieces(text)) + 1 - self.config.max_len)
        raise ValueError(f"side must be 'source' or 'target', got {side!r}")

    def encode_source(self, text: str) -> list[int]:
        """<s> pieces </s>, cut to the model's max_len (keeping both specials)."""
        return self.source_tokenizer.encode(text, add_start=True, add_end=True,
                                            max_len=self.config.max_len)

    def translate(self, source: str, max_len: int | None = None, use_cache: bool = True,
                  head_mask=None, beam_width: int = 1, stop_at_end: bool = True) -> Decoding:
        """Translation with every step's attention; .text is the translation.

        beam_width=1 decodes greedily; more runs beam search (a BeamDecoding, with the beam)."""
        max_len = self.config.max_len if max_len is None else max_len
        if beam_width != 1:
            return beam_search(self.model, self.encode_source(source), beam_width=beam_width,
                               max_len=max_len, use_cache=use_cache, head_mask=head_mask,
                               tokenizer=self.target_tokenizer)
        return greedy_decode(self.model, self.encode_source(source), max_len=max_len,
                             use_cache=use_cache, stop_at_end=stop_at_end, head_mask=head_mask,
                             tokenizer=self.target_tokenizer)

    def attention(self, source: str, target: str | None = None, head_mask=None,
                  details: bool = False) -> dict:
        """Every attention map of one teacher-forced pass, as float32 NumPy arrays:
        "encoder" (L_enc, H, N, N), "decoder" (L_dec, H, T, T), "cross" (L_dec, H, T, N);
        the masks each kind used, as bool "encoder_mask" (N, N), "decoder_mask" (T, T),
        "cross_mask" (T, N) (True = may attend); "source_tokens" (N), "target_tokens" (T: the
        decoder's inputs, <s> first), "output_tokens" (T: the token each row predicts, </s> last)
        and "log_probs" (T: the log-probability the model gives each output token).
        With target=None the target is the model's own greedy translation.
        details=True adds, per kind ("encoder", "decoder", "cross"), "<kind>_q", "<kind>_k",
        "<kind>_v" (L, H, len, d_k) and "<kind>_scores" (L, H, T_q, T_k): QK^T / sqrt(d_k) before
        masking.
        """
        source_ids = self.encode_source(source)
        if target is None:
            output_ids = self.translate(source, head_mask=head_mask).token_ids
        else:
            output_ids = self.target_tokenizer.encode(target, add_end=True,
                                                      max_len=self.config.max_len)
        target_ids = [self.config.start_id] + output_ids[:-1]  # teacher forcing: shifted right
        src, tgt = np.asarray([source_ids], np.int32), np.asarray([target_ids], np.int32)
        out = self.model((src, tgt), return_attention=True, return_qkv=details,
                         head_mask=head_mask)
        log_probs = log_softmax(out["logits"].numpy()[0])  # (T, V)
        source_mask = np.asarray(padding_mask(src, self.config.pad_id))[0, 0, 0] > 0  # (N,)
        result = {
            "encoder": out["encoder_attention"].numpy()[:, 0],
            "decoder": out["decoder_attention"].numpy()[:, 0],
            "cross": out["cross_attention"].numpy()[:, 0],
            "encoder_mask": np.broadcast_to(source_mask, (len(source_ids),) * 2).copy(),
            "decoder_mask": np.asarray(decoder_mask(tgt, self.config.pad_id))[0, 0] > 0,
            "cross_mask": np.broadcast_to(source_mask, (len(target_ids), len(source_ids))).copy(),
            "source_tokens": self.source_tokenizer.ids_to_pieces(source_ids),
            "target_tokens": self.target_tokenizer.ids_to_pieces(target_ids),
            "output_tokens": self.target_tokenizer.ids_to_pieces(output_ids),
            "source_ids": np.asarray(source_ids, np.int32),
            "target_ids": np.asarray(target_ids, np.int32),
            "output_ids": np.asarray(output_ids, np.int32),
            "log_probs": log_probs[np.arange(len(output_ids)), output_ids].astype(np.float32),
        }
        if details:
            for kind in ("encoder", "decoder", "cross"):
                for name in ("q", "k", "v", "scores"):
                    result[f"{kind}_{name}"] = out[f"{kind}_{name}"].numpy()[:, 0]
        return result


def weight_arrays(model: Transformer) -> dict[str, np.ndarray]:
    """{path relative to the model: array} for every weight, the keys a checkpoint stores."""
    return {_relative_path(model, w): np.asarray(w.numpy(), np.float32) for w in model.weights}


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
    _check_consistent(model.config, source_tokenizer, target_tokenizer)
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


def load_checkpoint(source) -> Checkpoint:
    """Load a checkpoint from a path, bytes or a binary file object. Raises CheckpointError."""
    data = _read_source(source)
    members = _read_members(data)
    fmt = _parse_json(members, "format.json")
    if fmt != {"format": FORMAT_NAME, "version": FORMAT_VERSION}:
        raise CheckpointError(
            f"This is not an Attention Explorer checkpoint of version {FORMAT_VERSION} "
            f"(format.json says {json.dumps(fmt)[:200]}).")
    try:
        config = TransformerConfig.from_dict(_parse_json(members, "config.json"))
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"The checkpoint's model settings are invalid: {err}.") from None
    metadata = _parse_json(members, "metadata.json")
    if not isinstance(metadata, dict):
        raise CheckpointError("The checkpoint's metadata.json must hold a JSON object.")
    source_tokenizer = _load_tokenizer(members, "source")
    target_tokenizer = _load_tokenizer(members, "target")
    _check_consistent(config, source_tokenizer, target_tokenizer)
    weights = _read_weights(members["weights.npz"])
    _check_size(config, weights)
    model = Transformer(config).build_weights()
    _assign_weights(model, weights)
    _check_finite(model)
    return Checkpoint(config, model, source_tokenizer, target_tokenizer, metadata,
                      hashlib.sha256(data).hexdigest())


# ------------------------------------------------------------------ reading, defensively
def _read_source(source) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise CheckpointError(f"No checkpoint file at {path}.")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise CheckpointError(
                f"The checkpoint is {path.stat().st_size / 2**20:.0f} MB; the limit is "
                f"{MAX_FILE_BYTES / 2**20:.0f} MB.")
        data = path.read_bytes()
    elif hasattr(source, "read"):
        data = source.read(MAX_FILE_BYTES + 1)
        if not isinstance(data, (bytes, bytearray)):
            raise CheckpointError("The checkpoint must be opened in binary mode.")
    else:
        raise CheckpointError(f"Cannot read a checkpoint from a {type(source).__name__}.")
    if len(data) > MAX_FILE_BYTES:
        raise CheckpointError(f"The checkpoint is larger than the {MAX_FILE_BYTES / 2**20:.0f} MB limit.")
    if not data:
        raise CheckpointError("The checkpoint file is empty.")
    return bytes(data)


def _read_members(data: bytes) -> dict[str, bytes]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise CheckpointError(
            "This file is not a checkpoint: it is not a ZIP archive, or it is truncated.") from None
    with archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        unexpected = sorted(set(names) - set(MEMBERS))
        if unexpected:
            raise CheckpointError(f"The checkpoint holds an unexpected file {unexpected[0]!r}.")
        if len(names) != len(set(names)):
            raise CheckpointError("The checkpoint holds the same file twice.")
        missing = [name for name in MEMBERS if name not in names]
        if missing:
            raise CheckpointError(f"The checkpoint is missing {missing[0]!r}.")
        total = sum(info.file_size for info in infos)
        if total > MAX_TOTAL_BYTES:
            raise CheckpointError(
                f"The checkpoint unpacks to {total / 2**20:.0f} MB; the limit is "
                f"{MAX_TOTAL_BYTES / 2**20:.0f} MB.")
        members = {}
        for info in infos:
            limit = MAX_JSON_BYTES if info.filename.endswith(".json") else MAX_MEMBER_BYTES
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > limit or (info.file_size > 2**20 and ratio > MAX_COMPRESSION_RATIO):
                raise CheckpointError(
                    f"{info.filename!r} in the checkpoint unpacks to {info.file_size / 2**20:.1f} MB "
                    "from a far smaller size: refused as a possible decompression bomb.")
            try:
                with archive.open(info) as member:
                    content = member.read(limit + 1)  # never trust the declared size alone
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, ValueError,
                    NotImplementedError):
                raise CheckpointError(
                    f"{info.filename!r} in the checkpoint is damaged or truncated.") from None
            if len(content) > limit:
                raise CheckpointError(f"{info.filename!r} in the checkpoint is too large.")
            members[info.filename] = content
    return members


def _parse_json(members, name):
    try:
        return json.loads(members[name].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise CheckpointError(f"{name!r} in the checkpoint is not valid JSON.") from None


def _load_tokenizer(members, side) -> Tokenizer:
    spec = _parse_json(members, f"{side}_tokenizer.json")
    try:
        return Tokenizer.from_spec(spec, members[f"{side}_tokenizer.model"])
    except TokenizerError as err:
        raise CheckpointError(f"The checkpoint's {side} tokenizer is invalid: {err}") from None


def _read_weights(raw: bytes) -> dict[str, np.ndarray]:
    try:
        npz = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception:  # NumPy raises many types on garbage; none of them may escape
        npz = None
    if not isinstance(npz, np.lib.npyio.NpzFile):  # a bare .npy loads as one array
        raise CheckpointError("The checkpoint's weights are not a NumPy .npz archive.")
    with npz:
        total = sum(info.file_size for info in npz.zip.infolist())
        if total > MAX_MEMBER_BYTES:
            raise CheckpointError("The checkpoint's weights unpack to more than the size limit.")
        weights = {}
        for name in npz.files:
            try:
                array = npz[name]
            except ValueError as err:
                if "allow_pickle" in str(err):  # an object array: it would need unpickling
                    raise CheckpointError(
                        f"The checkpoint's weight {name!r} is stored as Python objects (a "
                        "pickle), which are never loaded.") from None
                raise CheckpointError(f"The checkpoint's weight {name!r} is damaged.") from None
            except Exception:
                raise CheckpointError(f"The checkpoint's weight {name!r} is damaged.") from None
            if array.dtype != np.float32:
                raise CheckpointError(
                    f"The checkpoint's weight {name!r} has dtype {array.dtype}; expected float32.")
            weights[name] = array
    return weights


def _assign_weights(model: Transformer, weights: dict[str, np.ndarray]) -> None:
    variables = {_relative_path(model, w): w for w in model.weights}
    missing = sorted(set(variables) - set(weights))
    if missing:
        raise CheckpointError(f"The checkpoint has no value for the weight {missing[0]!r}.")
    unexpected = sorted(set(weights) - set(variables))
    if unexpected:
        raise CheckpointError(
            f"The checkpoint has a weight {unexpected[0]!r} that this model does not have.")
    for name, variable in variables.items():
        if tuple(weights[name].shape) != tuple(variable.shape):
            raise CheckpointError(
                f"The weight {name!r} has shape {tuple(weights[name].shape)} in the checkpoint but "
                f"{tuple(variable.shape)} in the model its config describes.")
    for name, variable in variables.items():
        variable.assign(weights[name])


def _check_size(config: TransformerConfig, weights: dict[str, np.ndarray]) -> None:
    """Before building anything: the config must describe the weights the file really holds, so
    a small file cannot make us allocate a huge model."""
    for name in ("num_encoder_layers", "num_decoder_layers"):
        if getattr(config, name) > MAX_LAYERS:
            raise CheckpointError(f"The checkpoint's {name} is {getattr(config, name)}; the "
                                  f"limit is {MAX_LAYERS}.")
    if config.max_len > MAX_POSITIONS:
        raise CheckpointError(f"The checkpoint's max_len is {config.max_len}; the limit is "
                              f"{MAX_POSITIONS}.")
    expected = config.parameter_count()
    held = sum(int(w.size) for w in weights.values())
    # Small differences (a weight missing or extra) get a precise message once the model is
    # built; a config far larger than its weights is refused before anything is allocated.
    if expected > 2 * held + 2**20:
        raise CheckpointError(
            f"The checkpoint's config describes a model with {expected:,} weights but the file "
            f"holds {held:,}: its settings and weights do not belong together.")


def _check_finite(model: Transformer) -> None:
    """Refuse weights that are, or compute, NaN or infinity: every view would be meaningless."""
    for weight in model.weights:
        if not np.isfinite(weight.numpy()).all():
            raise CheckpointError(
                f"The checkpoint's weight {_relative_path(model, weight)!r} holds NaN or infinite "
                "values (training diverged?).")
    c = model.config
    probe = np.array([[c.start_id, c.end_id]], np.int32)  # a real two-token pass
    out = model((probe, probe), return_attention=True)
    if not all(np.isfinite(np.asarray(v)).all() for v in out.values()):
        raise CheckpointError(
            "The checkpoint's weights compute NaN or infinite values (they overflow float32).")


def _check_consistent(config: TransformerConfig, source: Tokenizer, target: Tokenizer) -> None:
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


def _relative_path(model, variable) -> str:
    """A weight's path without the model's own name, so renaming the model changes nothing."""
    path = variable.path
    prefix = model.name + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _json_bytes(value) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True).encode()
