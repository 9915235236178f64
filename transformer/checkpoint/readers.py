"""Weight files other programs wrote, read as data: names and float32 arrays, nothing else.

* a Keras 3 ``.weights.h5`` (``model.save_weights``), walked with h5py;
* a ``.keras`` archive (``model.save``): only its ``model.weights.h5`` member is read (through
  transformer.checkpoint.archive's bounded ZIP reader), never its ``config.json`` (that would name classes
  to build);
* a TensorFlow checkpoint (``NAME.index`` + ``NAME.data-00000-of-00001``, as
  ``ModelCheckpoint(save_weights_only=True)`` or ``model.save_weights("NAME")`` write them under
  TF 2.x with Keras 2 = tf-keras), read here in Python: the .index table and each variable's
  entry are checked before any byte of the data file is read (TensorFlow's own C++ reader aborts
  the process on a negative dimension and trusts offsets); optimizer slots and bookkeeping are
  skipped.

Nothing here deserializes Keras objects, loads a SavedModel or unpickles. Each reader returns an
ordered ``{name: float32 ndarray}`` (names in the file's own spelling, in natural order) and
raises a ``CheckpointError`` that names the file. What one read may allocate is bounded
by the file's size (``limits.load_budget``), however much its headers declare.
"""

from __future__ import annotations

import io
import os
import re
import struct
from pathlib import Path

import google_crc32c
import numpy as np

from transformer.checkpoint import archive
from transformer.checkpoint.format import CheckpointError, read_input
from transformer.core.limits import (
    MAX_DIRECTORY_BYTES,
    MAX_MEMBER_BYTES,
    load_budget,
)

__all__ = ["read_weights", "read_keras_h5", "read_keras_archive", "read_tf_checkpoint",
           "natural_key", "MAX_ARRAYS"]

MAX_ARRAYS = 4096  # arrays in one file: 12 + 12 layers (limits.MAX_LAYERS) hold ~300 weights,
# ~900 with an optimizer's two slots each (a .keras archive may carry them); a margin beyond
MAX_ARRAY_BYTES = MAX_MEMBER_BYTES  # all arrays together, as float32
MAX_OBJECTS = 2 * MAX_ARRAYS  # groups and arrays walked in one HDF5 file: h5py's lookups take
# ~0.5 s per 1,000 on 2 cores, so a file at this cap is refused in ~4 s
MAX_NAME_DEPTH = 64  # parts of one weight's name ("layers/dense/vars/0" has 4); Keras nests ~12
MAX_KERAS_MEMBERS = 256  # files in a .keras archive (config, metadata, weights, assets)
MAX_TF_INDEX_BYTES = 4 * 2**20  # a TF checkpoint's .index: ~120 bytes per variable, its slots
KERAS_WEIGHTS_MEMBER = "model.weights.h5"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
ZIP_MAGIC = b"PK\x03\x04"
TF_DATA_SUFFIX = ".data-00000-of-00001"
TF_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_TF_SKIPPED = ("save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH", "optimizer", "_optimizer", "keras_api")


_DIGIT_RUNS = re.compile(r"([0-9]+)")


def natural_key(name: str):
    """Sort key that puts "dense_2" before "dense_10" and "layer_with_weights-9" before "-10".

    A run of ASCII digits compares as a number without becoming one: by its length without
    leading zeros, then as text (so a name from a file can hold a run of any length, and a
    digit that str.isdigit knows but int() does not, such as "²", is plain text)."""
    key = []
    for index, part in enumerate(_DIGIT_RUNS.split(name)):
        number = part.lstrip("0") if index % 2 else ""
        key.append((0, len(number), number, part) if index % 2 else (1, 0, part, ""))
    return key


MAX_DIMENSION = MAX_ARRAY_BYTES // 4  # one dimension of one weight: no longer one fits the budget


def element_count(dims, what: str) -> int:
    """The number of values in an array of shape `dims`, from a file: each dimension is checked
    (a whole number from 0 to MAX_DIMENSION) before any product is formed, and the product
    against MAX_DIMENSION after each step, so no size is computed that overflows NumPy's
    arithmetic, and a zero dimension cannot hide a huge other one ((0, 2**63 - 1) is refused
    for its second dimension, not read as empty). what: the array, in the sentence."""
    dims = list(dims)
    if len(dims) > MAX_NAME_DEPTH or not all(
            isinstance(d, (int, np.integer)) and 0 <= d <= MAX_DIMENSION for d in dims):
        raise CheckpointError(
            f"{what} has the shape {[int(d) for d in dims[:8]]}"
            f"{'...' if len(dims) > 8 else ''}: a dimension below 0 or above "
            f"{MAX_DIMENSION:,}, which no weight it may hold has (damaged?).")
    count = 1
    for d in dims:
        count *= int(d)
        if count > MAX_DIMENSION:
            raise CheckpointError(f"{what} declares more than {MAX_DIMENSION:,} values (shape "
                                  f"{[int(d) for d in dims[:8]]}); no weight it may hold has "
                                  "as many.")
    return count


# ------------------------------------------------------------------ dispatch
def tf_checkpoint_prefix(path: Path) -> str | None:
    """The prefix of the TensorFlow checkpoint a path names, or None when it names none: its
    .index file, its prefix, or a folder holding one checkpoint. A folder is what Keras 2's
    ModelCheckpoint(filepath="/tmp/checkpoint/", save_weights_only=True) writes: the prefix is
    the folder itself, so its files are named ".index" and ".data-00000-of-00001".

    Only names are looked at here (a folder's listing, at most MAX_FOLDER_ENTRIES of them,
    without opening anything: a FIFO or a link into /proc among them is never read); the files
    themselves are read through read_input, which reads only regular files. An OSError (a
    folder that cannot be listed) is an error."""
    path = Path(path)
    if path.suffix == ".index" or path.name == ".index":
        return str(path)[: -len(".index")]
    try:
        if path.is_dir():
            indexes = sorted(_folder_indexes(path))
            if len(indexes) != 1:
                raise CheckpointError(
                    f"The folder {path.name!r} holds {len(indexes)} TensorFlow checkpoints "
                    "(.index files); give the .index file of the one to open.")
            return str(path / indexes[0])[: -len(".index")]
        if not path.exists() and Path(str(path) + ".index").exists():
            return str(path)
    except OSError as err:
        raise CheckpointError(f"{str(path)!r} could not be read "
                              f"({err.strerror or type(err).__name__}).") from None
    return None


MAX_FOLDER_ENTRIES = 4096  # names listed in a folder given as a checkpoint: ModelCheckpoint writes 3


def _folder_indexes(path: Path) -> list[str]:
    """The names ending in ".index" in a folder that are not folders (each entry's type comes
    with the listing; nothing is opened)."""
    indexes = []
    with os.scandir(path) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_FOLDER_ENTRIES:
                raise CheckpointError(
                    f"The folder {path.name!r} holds more than {MAX_FOLDER_ENTRIES:,} files; "
                    "give the .index file of the TensorFlow checkpoint to open.")
            if entry.name.endswith(".index") and not entry.is_dir():
                indexes.append(entry.name)
    return indexes


def checkpoint_label(prefix: str) -> str:
    """A TF checkpoint's name for sentences: its prefix's file name, or the folder's name when
    the prefix is a folder ("/tmp/checkpoint/")."""
    return Path(prefix).name or Path(prefix).parent.name or "checkpoint"


def read_weights(files, name: str | None = None) -> dict[str, np.ndarray]:
    """Read whichever of the three formats `files` is.

    files: a path (a .weights.h5, a .keras, a TF checkpoint's .index file or its prefix), bytes
    (an .h5 or a .keras), or a mapping {file name: bytes} holding one file, or a TF checkpoint's
    ``.index`` and ``.data-00000-of-00001``.
    """
    if isinstance(files, dict):
        index = [n for n in files if str(n).endswith(".index")]
        if index:
            prefix = str(index[0])[: -len(".index")]
            data = files.get(prefix + TF_DATA_SUFFIX)
            if data is None:
                raise CheckpointError(
                    f"The TensorFlow checkpoint {Path(index[0]).name!r} comes without its data "
                    f"file {Path(prefix).name + TF_DATA_SUFFIX!r}: upload both.")
            return read_tf_checkpoint(files[index[0]], data, name=checkpoint_label(prefix))
        if len(files) != 1:
            raise CheckpointError(
                "Give one weights file (.weights.h5 or .keras) or a TensorFlow checkpoint's "
                f".index and .data files; got {', '.join(sorted(map(str, files)))[:200]}.")
        ((file_name, data),) = files.items()
        return read_weights(read_input(data, repr(str(file_name))), name=Path(str(file_name)).name)
    if isinstance(files, (str, Path)):
        path = Path(files)
        prefix = tf_checkpoint_prefix(path)
        if prefix is not None:
            return read_tf_checkpoint(Path(prefix + ".index"), Path(prefix + TF_DATA_SUFFIX),
                                      name=checkpoint_label(prefix))
        return read_weights(read_input(path, repr(path.name)), name=name or path.name)
    data = read_input(files, repr(name) if name else "the weights file")
    label = name or "the weights file"
    if data.startswith(HDF5_MAGIC):
        return read_keras_h5(data, name=label)
    if data.startswith(ZIP_MAGIC):
        return read_keras_archive(data, name=label)
    raise CheckpointError(
        f"{label!r} is neither a Keras weights file (.weights.h5, HDF5) nor a .keras archive "
        "(ZIP); for a TensorFlow checkpoint give its .index and .data-00000-of-00001 files.")


# ------------------------------------------------------------------ Keras 3 .weights.h5
TRAINING_STATE = ("optimizer", "metrics")  # top-level groups that are not the model's weights


def read_keras_h5(source, name: str | None = None, limit: int | None = None
                  ) -> dict[str, np.ndarray]:
    """Every float dataset of an HDF5 weights file, keyed by its path ("layers/dense/vars/0").

    Only plain groups and datasets whose bytes are in the file are read: links (soft, external,
    a group linked back into itself), external storage and virtual datasets are refused, and
    HDF5 never loads a filter plugin. The arrays' declared sizes are added up before any is
    read: a few chunks of zeros (or none, read as the fill value) cannot make gigabytes.
    limit: the file's bytes at most (read_input's default, an upload's), and its arrays' as
    float32 (a named model's file: the memory its source may use)."""
    import h5py

    label = name or (Path(source).name if isinstance(source, (str, Path)) else "the weights file")
    data = read_input(source, repr(label), limit)
    if not data.startswith(HDF5_MAGIC):
        raise CheckpointError(f"{label!r} is not an HDF5 file (a Keras .weights.h5).")
    budget = min(MAX_ARRAY_BYTES, load_budget(len(data))) if limit is None else limit
    while h5py.h5pl.size():  # no plugin folders: a filter HDF5 lacks is an error, not a library
        h5py.h5pl.remove(0)
    datasets, total, seen = [], 0, 0
    try:
        with h5py.File(io.BytesIO(data), "r") as h5:
            groups_seen = {hash(h5.id)}  # (file, address): a group linked back is seen again
            stack = [""]  # names, not open groups: HDF5 keeps each open one's headers
            while stack:  # depth first; the names are sorted at the end
                prefix = stack.pop()
                group = h5[prefix] if prefix else h5
                for key in group.keys():
                    path = prefix + key
                    seen += 1
                    if seen > MAX_OBJECTS or path.count("/") >= MAX_NAME_DEPTH:
                        raise CheckpointError(
                            f"{label!r} holds more than {MAX_OBJECTS:,} groups and arrays, or "
                            f"arrays nested more than {MAX_NAME_DEPTH} groups deep; a model's "
                            "weights file holds far fewer.")
                    if not prefix and key in TRAINING_STATE:
                        continue  # a model saved after fit() also holds its optimizer's state
                    link = group.get(key, getlink=True)
                    if not isinstance(link, h5py.HardLink):  # soft and external links point elsewhere
                        raise CheckpointError(
                            f"{label!r} holds a link {path!r} to another place or file; only "
                            "plain groups and arrays are read.")
                    item = group[key]
                    if isinstance(item, h5py.Group):
                        if hash(item.id) in groups_seen:
                            raise CheckpointError(
                                f"{label!r} links the group {path!r} into itself or twice; only "
                                "plain groups and arrays are read.")
                        groups_seen.add(hash(item.id))
                        stack.append(path + "/")
                        continue
                    if not isinstance(item, h5py.Dataset):
                        raise CheckpointError(f"{label!r} holds {path!r}, which is not an array.")
                    if item.is_virtual or item.external:
                        raise CheckpointError(
                            f"{label!r} stores the array {path!r} outside the file; refused.")
                    if item.dtype.kind != "f" or item.dtype.itemsize not in (2, 4, 8):
                        raise CheckpointError(
                            f"{label!r} holds {path!r} of type {item.dtype}; only float weights "
                            "are read.")
                    count = element_count(item.shape, f"{label!r}: the array {path!r}")
                    total += count * max(4, item.dtype.itemsize)
                    if len(datasets) >= MAX_ARRAYS or total > budget:
                        raise CheckpointError(
                            f"{label!r} declares more weights than it can hold: at least "
                            f"{total / 2**20:,.1f} MB in {len(datasets) + 1:,} arrays, from a "
                            f"file of {len(data) / 2**20:,.1f} MB (at most "
                            f"{budget / 2**20:,.0f} MB and {MAX_ARRAYS:,} arrays are read).")
                    datasets.append(path)  # not the open dataset: HDF5 caches each one's headers
            arrays = {path: _h5_array(h5[path], label, path) for path in datasets}
    except CheckpointError:
        raise
    except Exception as err:  # h5py raises OSError, KeyError, ValueError... on damaged files
        raise CheckpointError(
            f"{label!r} could not be read as an HDF5 weights file (damaged or truncated: "
            f"{type(err).__name__}).") from None
    if not arrays:
        raise CheckpointError(f"{label!r} holds no weights.")
    return dict(sorted(arrays.items(), key=lambda item: natural_key(item[0])))


_H5_SHUFFLE, _H5_DEFLATE = 2, 1  # HDF5's filter ids: the only filters read here


def _h5_array(item, label: str, path: str) -> np.ndarray:
    """One checked dataset as float32. Unfiltered data HDF5 reads itself: exactly its declared
    bytes. Filtered chunks are never handed to HDF5, whose deflate filter inflates a chunk
    whole, however far past its declared size (2.9 MB of file grew memory by 1.5 GB): each
    stored chunk is read raw and inflated here, at most its declared bytes."""
    plist = item.id.get_create_plist()
    filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    if not filters:
        return np.asarray(item[()], dtype=np.float32)
    other = [f for f in filters if f not in (_H5_SHUFFLE, _H5_DEFLATE)]
    if other:
        raise CheckpointError(
            f"{label!r} stores the array {path!r} through the HDF5 filter {other[0]}; only "
            "gzip and shuffle are read (Keras writes its weights unfiltered).")
    shape, chunk = tuple(item.shape), tuple(item.chunks)
    if any(c > max(n, 1) for c, n in zip(chunk, shape)):  # Keras's arrays are never resized
        raise CheckpointError(
            f"{label!r} stores the array {path!r} {shape} in chunks of {chunk}, larger than "
            "the array: refused (a chunk may inflate to its own size).")
    itemsize = item.dtype.itemsize
    chunk_bytes = element_count(chunk, f"{label!r}: a chunk of the array {path!r}") * itemsize
    out = np.full(shape, item.fillvalue, dtype=item.dtype)
    for i in range(item.id.get_num_chunks()):
        offset = tuple(item.id.get_chunk_info(i).chunk_offset)
        if len(offset) != len(shape) or any(o % c or o >= n for o, c, n in
                                             zip(offset, chunk, shape)):
            raise CheckpointError(f"{label!r} holds a chunk of {path!r} at {offset}, outside "
                                  f"the array {shape}: it is damaged.")
        mask, data = item.id.read_direct_chunk(offset)
        for position in reversed(range(len(filters))):  # undone in the reverse order
            if mask & (1 << position):
                continue  # this chunk skipped that filter
            if filters[position] == _H5_DEFLATE:
                data = _inflate_chunk(data, chunk_bytes, label, path)
            else:
                data = _unshuffle(data, itemsize)
        if len(data) != chunk_bytes:
            raise CheckpointError(f"{label!r} holds a chunk of {path!r} of {len(data):,} bytes "
                                  f"where its chunks are {chunk_bytes:,}: it is damaged.")
        block = np.frombuffer(data, item.dtype).reshape(chunk)
        region = tuple(slice(o, min(o + c, n)) for o, c, n in zip(offset, chunk, shape))
        out[region] = block[tuple(slice(0, r.stop - r.start) for r in region)]
    return out.astype(np.float32)


def _inflate_chunk(data: bytes, limit: int, label: str, path: str) -> bytes:
    """A gzip (zlib) chunk inflated to at most `limit` bytes: one byte more is refused."""
    import zlib

    stream = zlib.decompressobj()
    try:
        out = stream.decompress(data, limit + 1)
    except zlib.error:
        raise CheckpointError(f"{label!r} holds a compressed chunk of {path!r} that is "
                              "damaged.") from None
    if len(out) > limit or stream.unconsumed_tail:
        raise CheckpointError(
            f"{label!r} holds a compressed chunk of {path!r} that inflates past its declared "
            f"size of {limit:,} bytes: refused (a possible decompression bomb).")
    if not stream.eof:
        raise CheckpointError(f"{label!r} holds a compressed chunk of {path!r} that is "
                              "truncated.")
    return out


def _unshuffle(data: bytes, itemsize: int) -> bytes:
    """HDF5's shuffle filter undone: byte j of every value was stored together, j = 0, 1, ..."""
    count = len(data) // itemsize
    whole = np.frombuffer(data, np.uint8, count * itemsize).reshape(itemsize, count)
    return whole.T.tobytes() + bytes(data[count * itemsize:])


# ------------------------------------------------------------------ Keras 3 .keras archive
def read_keras_archive(source, name: str | None = None) -> dict[str, np.ndarray]:
    """The weights of a .keras archive: its model.weights.h5 member, nothing else, unpacked by
    transformer.checkpoint.archive (stored or deflated, never past its declared size)."""
    label = name or (Path(source).name if isinstance(source, (str, Path)) else "the .keras file")
    data = read_input(source, repr(label))
    where = f"the .keras archive {label!r}"
    try:
        entries = archive.read_directory(data, where, MAX_KERAS_MEMBERS, MAX_DIRECTORY_BYTES)
    except archive.ArchiveError as err:
        if err.not_zip:
            raise CheckpointError(f"{label!r} is not a .keras archive (not a ZIP file, or "
                                  "truncated).") from None
        raise CheckpointError(str(err)) from None
    infos = [entry for entry in entries if entry.name == KERAS_WEIGHTS_MEMBER]
    if not infos:  # read_directory refuses a name given twice
        raise CheckpointError(
            f"{label!r} has no {KERAS_WEIGHTS_MEMBER!r}: it holds no weights (was it saved "
            "with model.save(...) after the model was built?).")
    info = infos[0]
    if archive.unpacks_too_far(info.size, info.compressed_size, MAX_MEMBER_BYTES):
        raise CheckpointError(
            f"{KERAS_WEIGHTS_MEMBER!r} in {label!r} unpacks to {info.size / 2**20:.0f} MB: "
            "refused (too large, or a possible decompression bomb).")
    try:
        weights = bytes(archive.read_member(data, info, where))
    except archive.ArchiveError as err:
        raise CheckpointError(str(err)) from None
    return read_keras_h5(weights, name=f"{label}/{KERAS_WEIGHTS_MEMBER}")


# ------------------------------------------------------------------ TensorFlow checkpoint
# A TF checkpoint's .index is a LevelDB-format table: blocks of key/value entries, each block
# followed by a compression byte and a masked CRC32C, and a 48-byte footer pointing at the
# index block (which points at the data blocks). Key "" holds a BundleHeaderProto, every other
# key a variable's BundleEntryProto: dtype, shape, and where its bytes are in the data file.
_TF_FOOTER_BYTES = 48
_TF_MAGIC = 0xDB4775248B80FB57
_TF_BFLOAT16 = 14  # stored as the upper 16 bits of a float32
_TF_FLOATS = {1: np.dtype("<f4"), 2: np.dtype("<f8"), 19: np.dtype("<f2"),
              _TF_BFLOAT16: np.dtype("<u2")}  # DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16
_TF_TYPE_NAMES = {3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string", 8: "complex64",
                  9: "int64", 10: "bool", 17: "uint16", 18: "complex128", 20: "resource",
                  21: "variant", 22: "uint32", 23: "uint64"}


def read_tf_checkpoint(index, data, name: str | None = None) -> dict[str, np.ndarray]:
    """The model variables of a TF checkpoint (.index + .data-00000-of-00001, bytes or paths),
    keyed by their object path without "/.ATTRIBUTES/VARIABLE_VALUE".

    The .index's blocks are checked against their checksums and every variable's entry against
    the data file before its bytes are read; the data's own checksums are not recomputed (a
    damaged weight reads as other numbers, and loading refuses NaN and infinite ones)."""
    label = name or (Path(index).stem if isinstance(index, (str, Path)) else "the checkpoint")
    index_bytes = read_input(index, repr(f"{label}.index"))
    data_bytes = read_input(data, repr(f"{label}{TF_DATA_SUFFIX}"), allow_empty=True)
    what = f"The TensorFlow checkpoint {label!r}"
    if len(index_bytes) > MAX_TF_INDEX_BYTES:
        raise CheckpointError(f"{what} has an .index of {len(index_bytes) / 2**20:.0f} MB; a "
                              f"model's is far smaller (at most {MAX_TF_INDEX_BYTES // 2**20} "
                              "MB are read).")
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import tensor_bundle_pb2

    table = _tf_table(index_bytes, what)
    if not table or table[0][0] != b"":
        raise CheckpointError(f"{what}: its .index has no header entry (is it a TensorFlow "
                              "checkpoint?).")
    try:
        header = tensor_bundle_pb2.BundleHeaderProto.FromString(table[0][1])
    except DecodeError:
        raise CheckpointError(f"{what}: its .index is damaged (the header entry).") from None
    if header.num_shards != 1 or header.endianness != 0 or header.version.min_consumer > 1:
        raise CheckpointError(
            f"{what} is written in {header.num_shards} data files, or big-endian, or by a "
            "TensorFlow newer than its reader; only one-file little-endian checkpoints "
            "(.data-00000-of-00001) are read.")
    entries, total = [], 0
    budget = min(MAX_ARRAY_BYTES, load_budget(len(index_bytes) + len(data_bytes)))
    for raw_key, value in table[1:]:
        try:
            key = raw_key.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(f"{what}: its .index names a variable in bytes that are not "
                                  "UTF-8 (damaged?).") from None
        if not key.endswith(TF_VALUE_SUFFIX) or ".OPTIMIZER_SLOT" in key or \
                key.split("/", 1)[0] in _TF_SKIPPED:
            continue
        short = key[: -len(TF_VALUE_SUFFIX)]
        try:
            entry = tensor_bundle_pb2.BundleEntryProto.FromString(value)
        except DecodeError:
            raise CheckpointError(f"{what}: the .index entry of {short[:200]!r} is damaged.") \
                from None
        dtype = _TF_FLOATS.get(entry.dtype)
        if dtype is None:
            kind = _TF_TYPE_NAMES.get(entry.dtype, f"an unknown type ({entry.dtype})")
            raise CheckpointError(f"{what} holds {short[:200]!r} of type {kind}; only float "
                                  "weights are read.")
        dims = [d.size for d in entry.shape.dim]
        if entry.shape.unknown_rank or len(dims) > MAX_NAME_DEPTH or any(d < 0 for d in dims):
            raise CheckpointError(f"{what}: the .index gives {short[:200]!r} the shape "
                                  f"{dims[:8]}, which no array has (damaged?).")
        if entry.shard_id != 0 or len(entry.slices):
            raise CheckpointError(f"{what} holds {short[:200]!r} split in parts (a partitioned "
                                  "variable); only whole variables are read.")
        count = element_count(dims, f"{what}: the variable {short[:200]!r}")
        if entry.size != count * dtype.itemsize or entry.offset < 0 or \
                entry.offset + entry.size > len(data_bytes):
            raise CheckpointError(
                f"{what}: the .index says {short[:200]!r} ({dims}) is {entry.size:,} bytes at "
                f"{entry.offset:,} of the data file, which has {len(data_bytes):,}: the data "
                "file is truncated, or the .index is damaged or not its own.")
        total += count * 4
        if len(entries) >= MAX_ARRAYS or total > budget:
            raise CheckpointError(f"{what} declares more weights than its files hold (at most "
                                  f"{budget / 2**20:,.0f} MB and {MAX_ARRAYS:,} arrays are read).")
        entries.append((short, entry.dtype, dims, entry.offset, count))
    if not entries:
        raise CheckpointError(f"{what} holds no model weights.")
    arrays = {}
    for short, kind, dims, offset, count in sorted(entries, key=lambda e: natural_key(e[0])):
        raw = np.frombuffer(data_bytes, _TF_FLOATS[kind], count, offset)
        if kind == _TF_BFLOAT16:
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        arrays[short] = raw.astype(np.float32).reshape(dims)
    return arrays


def _tf_table(index: bytes, what: str) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a LevelDB-format table, in order; keys must increase."""
    damaged = CheckpointError(f"{what} could not be read: its .index is damaged or not a "
                              "TensorFlow checkpoint's.")
    if len(index) < _TF_FOOTER_BYTES or \
            struct.unpack_from("<Q", index, len(index) - 8)[0] != _TF_MAGIC:
        raise damaged
    footer = index[-_TF_FOOTER_BYTES:-8]
    _, at = _tf_handle(footer, 0, len(index), damaged)  # the metaindex block: unused
    index_block, _ = _tf_handle(footer, at, len(index), damaged)
    items = []
    for _, handle in _tf_block(index, index_block, damaged):
        block, _ = _tf_handle(handle, 0, len(index), damaged)
        items.extend(_tf_block(index, block, damaged))
        if len(items) > 2 * MAX_ARRAYS + 8:  # optimizer slots double a model's variables
            raise CheckpointError(f"{what}: its .index lists more than {2 * MAX_ARRAYS:,} "
                                  "variables; a model's checkpoint holds far fewer.")
    if any(a[0] >= b[0] for a, b in zip(items, items[1:])):
        raise damaged  # a table's keys are sorted and unique
    return items


def _tf_handle(data: bytes, at: int, limit: int, damaged) -> tuple[tuple[int, int], int]:
    """A BlockHandle (offset, size) at `at`, and where the next field starts."""
    offset, at = _varint(data, at, damaged)
    size, at = _varint(data, at, damaged)
    if offset + size + 5 > limit:
        raise damaged
    return (offset, size), at


def _tf_block(index: bytes, handle: tuple[int, int], damaged) -> list[tuple[bytes, bytes]]:
    """The entries of one block: each key shares a prefix with the one before it."""
    offset, size = handle
    block = index[offset:offset + size]
    if index[offset + size] != 0 or struct.unpack_from("<I", index, offset + size + 1)[0] != \
            masked_crc32c(index[offset:offset + size + 1]):
        raise damaged  # compressed (TensorFlow writes tables uncompressed), or damaged
    if size < 4:
        raise damaged
    restarts = struct.unpack_from("<I", block, size - 4)[0]
    end = size - 4 - 4 * restarts
    if restarts < 1 or end < 0:
        raise damaged
    items, key, at = [], b"", 0
    while at < end:
        shared, at = _varint(block, at, damaged)
        unshared, at = _varint(block, at, damaged)
        length, at = _varint(block, at, damaged)
        if shared > len(key) or at + unshared + length > end:
            raise damaged
        key = key[:shared] + block[at:at + unshared]
        items.append((key, block[at + unshared:at + unshared + length]))
        at += unshared + length
    return items


def _varint(data: bytes, at: int, damaged) -> tuple[int, int]:
    value = 0
    for shift in range(0, 64, 7):
        if at >= len(data):
            raise damaged
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
    raise damaged


def masked_crc32c(data: bytes) -> int:
    """LevelDB's masked CRC-32C of a block, as TensorFlow's checkpoint index stores it (the
    CRC-32C itself from google-crc32c)."""
    crc = google_crc32c.value(bytes(data))
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
