"""A Hugging Face model's weights, read as data, in every layout and precision the hub uses for
the families read here:

    model.safetensors                       one file
    model.safetensors.index.json            a model split in shards: its weight_map names, for
      + model-00001-of-0000N.safetensors    every tensor, the shard that holds it
    tf_model.h5                             a repository with no safetensors (many opus-mt ones),
                                            read as data through the bounded HDF5 reader
                                            (tf_weights); never Keras objects
    pytorch_model.bin alone                 refused with an error: a pickle can run code

F32, F16, BF16 and F64 tensors are kept in their stored precision (BF16 as ml_dtypes.bfloat16)
until the model's variables take them, a block of rows at a time
(transformer.model.weights.assign_weights): a half-precision file is never widened whole. A
file found in a folder is memory-mapped, not read: float32 tensors are views of the page cache
and the process grows by the model's variables, not by the file. Files an upload gave are bytes
already read within their caps.

Every failure is a CheckpointError naming the file.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import stat
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from transformer.checkpoint import safetensors
from transformer.checkpoint.format import CheckpointError, read_input
from transformer.checkpoint.jsons import bounded_json
from transformer.core import limits
from transformer.core.mapped import give_back

__all__ = ["INDEX", "PICKLE_FILES", "SAFETENSORS", "SHARD_FILE", "TF_WEIGHTS", "WEIGHT_FILES",
           "WEIGHT_FILE_BYTES", "StoredWeights", "found", "is_weight_file", "read_safetensors",
           "read_weights", "refuse_pickle", "files_digest", "settled", "unread"]

SAFETENSORS = "model.safetensors"
INDEX = "model.safetensors.index.json"
TF_WEIGHTS = "tf_model.h5"
WEIGHT_FILES = (SAFETENSORS, INDEX, TF_WEIGHTS)  # looked up in a folder, read in this order
# The caps of given files (an upload's); a folder's are memory-mapped within its budgets.
WEIGHT_FILE_BYTES = {SAFETENSORS: limits.MAX_MEMBER_BYTES, INDEX: limits.MAX_JSON_BYTES,
                     TF_WEIGHTS: limits.MAX_MEMBER_BYTES}
PICKLE_FILES = ("pytorch_model.bin",)  # noted when present, never read
SHARD_FILE = re.compile(r"model-[0-9]{5}-of-[0-9]{5}\.safetensors")  # given shards, as the hub
# names them; a folder's are the names its index gives:
SHARD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.safetensors")  # a plain file name
MAX_SHARDS = 256
STORED_DTYPES = ("F32", "F16", "BF16", "F64")  # what the hub's files hold for these families


@dataclass
class StoredWeights:
    """Where one model's weights are, before any is read: a folder's files (Paths: the shards its
    index names are looked up beside them) or the files given ({name: bytes}), and the budgets
    of who gave them."""
    label: str
    files: dict  # {name: bytes or Path} of WEIGHT_FILES (and shards, for given files)
    budgets: limits.Budgets = limits.UPLOAD

    @property
    def folder(self) -> Path | None:
        return next((v.parent for v in self.files.values() if isinstance(v, Path)), None)


def is_weight_file(name: str) -> bool:
    """Whether a file of a model is one of its weight files (WEIGHT_FILES, or a given shard)."""
    return name in WEIGHT_FILES or bool(SHARD_FILE.fullmatch(name))


def found(raw: dict, label: str, what: str, budgets: limits.Budgets) -> StoredWeights:
    """The weight files among a model's files as hf.folder.gather gives them (a folder's as
    Paths, given ones as bytes); a model whose only weights are pytorch_model.bin is refused
    (refuse_pickle). what: "BART"."""
    files = {n: v for n, v in raw.items() if is_weight_file(n) and (isinstance(v, Path) or v)}
    if not any(n in files for n in WEIGHT_FILES) and any(n in raw for n in PICKLE_FILES):
        raise refuse_pickle(label, what)
    return StoredWeights(label, files, budgets)


def unread(names) -> set[str]:
    """Of these file names, the weight files the model is not read from: read_weights reads the
    first of WEIGHT_FILES present, and the given shards only with their index."""
    names = set(names)
    form = next((n for n in WEIGHT_FILES if n in names), None)
    if form is None:
        return set()
    return {n for n in names if is_weight_file(n) and n != form
            and not (form == INDEX and SHARD_FILE.fullmatch(n))}


def refuse_pickle(label: str, what: str) -> CheckpointError:
    """The sentence for a model whose only weights are pytorch_model.bin."""
    return CheckpointError(
        f"The {what} model in {label} has its weights only in pytorch_model.bin, a pickle, which "
        "can run code when it is loaded, so it is never read here. Convert it once, on a "
        "machine you trust, with transformers: `python -c \"from transformers import "
        "AutoModelForSeq2SeqLM as M; M.from_pretrained('DIR').save_pretrained('DIR')\"` writes "
        "model.safetensors beside it; or download the model's model.safetensors (or "
        "tf_model.h5) from its page.")


def read_weights(stored: StoredWeights) -> tuple[dict[str, np.ndarray], list[dict]]:
    """({Hugging Face name: array in its stored precision}, [{"name", "bytes", "sha256"}] of
    the weight files read) from model.safetensors, a sharded model or tf_model.h5, whichever
    the files hold first."""
    files, label = stored.files, stored.label
    if SAFETENSORS in files:
        data = _open(stored, SAFETENSORS, stored.budgets.weights_bytes)
        return read_safetensors(data, label, SAFETENSORS), [_entry(SAFETENSORS, data, stored)]
    if INDEX in files:
        return _read_shards(stored)
    if TF_WEIGHTS in files:
        from transformer.importers.hf.tf_weights import read_tf_weights

        data = _open(stored, TF_WEIGHTS, stored.budgets.weights_bytes)
        limit = stored.budgets.weights_bytes if stored.budgets.named else None
        return read_tf_weights(data, label, limit), [_entry(TF_WEIGHTS, data, stored)]
    raise CheckpointError(f"{label[:1].upper() + label[1:]} holds no weights "
                          f"(model.safetensors, {INDEX} with its shards, or tf_model.h5).")


def read_safetensors(data, label: str, name: str = SAFETENSORS) -> dict[str, np.ndarray]:
    """Every tensor of one safetensors file (bytes or a memory map) as a read-only view in its
    stored precision: the header checked whole first (transformer.checkpoint.safetensors), then
    every value finite. No torch, no pickle."""
    where = f"{name} in {label}"
    source = safetensors.Source(where, name, f"In {where}, the weight")
    try:
        tensors = safetensors.header(data, source, dtypes=STORED_DTYPES)
    except CheckpointError as err:
        raise CheckpointError(f"{where} is not a valid safetensors file ({err})") from None
    return safetensors.arrays(data, tensors, source)


def _read_shards(stored: StoredWeights) -> tuple[dict[str, np.ndarray], list[dict]]:
    """A model split in shards: the index's weight_map checked (every shard a plain file name,
    every tensor in the shard the index names, none twice), every shard read."""
    label = stored.label
    index_data = _open(stored, INDEX, limits.MAX_JSON_BYTES)
    index = bounded_json(index_data, f"{INDEX} in {label}")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise CheckpointError(f"{INDEX} in {label} has no weight_map of tensor names to shard "
                              "files.")
    shards = sorted(set(weight_map.values()))
    if len(shards) > MAX_SHARDS:
        raise CheckpointError(f"{INDEX} in {label} names {len(shards):,} shards; at most "
                              f"{MAX_SHARDS} are read.")
    for shard in shards:
        if not SHARD_NAME.fullmatch(shard) or shard in (SAFETENSORS,):
            raise CheckpointError(f"{INDEX} in {label} names the shard {shard[:80]!r}; a shard "
                                  "is a .safetensors file beside it (a plain file name).")
    weights, entries, budget = {}, [_entry(INDEX, index_data, stored)], stored.budgets.weights_bytes
    for shard in shards:
        data = _open(stored, shard, budget)
        budget -= len(data)
        tensors = read_safetensors(data, label, shard)
        listed = {n for n, s in weight_map.items() if s == shard}
        if set(tensors) != listed:
            extra = sorted(set(tensors) - listed) or sorted(listed - set(tensors))
            raise CheckpointError(
                f"{shard} in {label} does not hold what {INDEX} says: "
                f"{extra[0][:80]!r} is {'not listed for it' if extra[0] in tensors else 'missing'}.")
        weights.update(tensors)
        entries.append(_entry(shard, data, stored))
    return weights, entries


def _open(stored: StoredWeights, name: str, limit: int):
    """The bytes of one weight file: given bytes (an upload's, within its cap), or a folder's
    file memory-mapped read-only (a regular file, links followed: Hugging Face's cache links
    every file into its blobs) of at most `limit` bytes."""
    given = stored.files.get(name)
    if given is None and stored.folder is not None:
        given = stored.folder / name  # a shard its index names
    if given is None:
        raise CheckpointError(f"{stored.label[:1].upper() + stored.label[1:]} is missing "
                              f"{name}, which {INDEX} names.")
    if not isinstance(given, Path):
        data = read_input(given, name, limit)
        return data
    try:
        with open(given, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise CheckpointError(f"{name} in {stored.label} is not a regular file.")
            if info.st_size > limit:
                raise CheckpointError(
                    f"{name} in {stored.label} is {info.st_size / 2**20:,.1f} MB; the limit is "
                    f"{limit / 2**20:,.0f} MB"
                    + (" (the memory available)." if stored.budgets.named else
                       " for an uploaded model (a model you open by its folder or name on your "
                       "own server has no such limit: python -m explorer.serve --model DIR)."))
            if info.st_size == 0:
                raise CheckpointError(f"{name} in {stored.label} is empty.")
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise CheckpointError(f"{stored.label[:1].upper() + stored.label[1:]} is missing "
                              f"{name}, which {INDEX} names.") from None
    except OSError as err:
        raise CheckpointError(f"{name} in {stored.label} could not be read "
                              f"({err.strerror or type(err).__name__}).") from None


BLOB_NAME = re.compile(r"[0-9a-f]{64}")  # a Hugging Face cache blob of an LFS file: its SHA-256


def _entry(name: str, data, stored: StoredWeights) -> dict:
    """{"name", "bytes", "sha256"} of one weight file for the provenance and the cache key. A
    file in Hugging Face's cache is a link to blobs/<its SHA-256> (for files stored in LFS, as
    weights are): that name is the hash, so a 2 GB file is not read to hash it again. Any
    other file is hashed in a thread while the load goes on (hashlib lets go of the GIL: a
    2 GB file's 1.1 s overlaps the tokenizers' building); "sha256" is then a Future until
    settled() waits for it."""
    folder = stored.folder
    path = folder / name if folder is not None and name not in stored.files \
        else stored.files.get(name)
    if isinstance(path, Path):
        try:
            target = path.resolve()
        except OSError:
            target = path
        if target.parent.name == "blobs" and BLOB_NAME.fullmatch(target.name):
            return {"name": name, "bytes": len(data), "sha256": target.name}
    if len(data) < HASH_IN_THREAD_BYTES:
        return {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return {"name": name, "bytes": len(data), "sha256": _HASHING.submit(_sha256, data)}


HASH_IN_THREAD_BYTES = 16 * 2**20
_HASHING = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256")


def _sha256(data, chunk: int = 64 * 2**20) -> str:
    """The SHA-256 of data: bytes, or a memory map whose pages leave this process once hashed
    (core.mapped.give_back, as the weights' readers give theirs back)."""
    digest = hashlib.sha256()
    with memoryview(data) as view:
        for start in range(0, len(view), chunk):
            digest.update(view[start:start + chunk])
            if isinstance(data, mmap.mmap):
                give_back(data, start, chunk)
    return digest.hexdigest()


def settled(files: list[dict]) -> list[dict]:
    """The file entries of a load with every hash computed (waiting for _entry's threads)."""
    return [{**f, "sha256": f["sha256"].result()} if isinstance(f["sha256"], futures.Future)
            else f for f in files]


def files_digest(files: list[dict]) -> str:
    """The cache key of a model read from these settled file entries: the SHA-256 of their
    names and hashes."""
    return hashlib.sha256(json.dumps(sorted((f["name"], f["sha256"]) for f in files))
                          .encode()).hexdigest()
