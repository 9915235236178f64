"""Weight files other programs wrote, read as data: names and float32 arrays, nothing else.

* a Keras 3 ``.weights.h5`` (``model.save_weights``), walked with h5py;
* a ``.keras`` archive (``model.save``): only its ``model.weights.h5`` member is read, never its
  ``config.json`` (that would name classes to build);
* a TensorFlow checkpoint (``NAME.index`` + ``NAME.data-00000-of-00001``, as
  ``ModelCheckpoint(save_weights_only=True)`` or ``model.save_weights("NAME")`` write them under
  TF 2.x with Keras 2 = tf-keras), read with ``tf.train.load_checkpoint``; optimizer slots and
  bookkeeping are skipped.

Nothing here deserializes Keras objects, loads a SavedModel or unpickles. Each reader returns an
ordered ``{name: float32 ndarray}`` (names in the file's own spelling, in natural order) and
raises ``CheckpointError`` sentences that name the file.
"""

from __future__ import annotations

import io
import re
import tempfile
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .checkpoint import CheckpointError
from .limits import MAX_COMPRESSION_RATIO, MAX_FILE_BYTES, MAX_MEMBER_BYTES, RATIO_CHECKED_ABOVE

__all__ = ["read_weights", "read_keras_h5", "read_keras_archive", "read_tf_checkpoint",
           "natural_key", "MAX_ARRAYS"]

MAX_ARRAYS = 8192  # weights in one file: a 64 + 64 layer model holds ~1,500
MAX_ARRAY_BYTES = MAX_MEMBER_BYTES  # all arrays together, as float32
KERAS_WEIGHTS_MEMBER = "model.weights.h5"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
ZIP_MAGIC = b"PK\x03\x04"
TF_DATA_SUFFIX = ".data-00000-of-00001"
_TF_SKIPPED = ("save_counter", "_CHECKPOINTABLE_OBJECT_GRAPH", "optimizer", "_optimizer", "keras_api")


def natural_key(name: str):
    """Sort key that puts "dense_2" before "dense_10" and "layer_with_weights-9" before "-10"."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", name)]


# ------------------------------------------------------------------ dispatch
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
            return read_tf_checkpoint(files[index[0]], data, name=Path(prefix).name)
        if len(files) != 1:
            raise CheckpointError(
                "Give one weights file (.weights.h5 or .keras) or a TensorFlow checkpoint's "
                f".index and .data files; got {', '.join(sorted(map(str, files)))[:200]}.")
        ((file_name, data),) = files.items()
        return read_weights(_bytes(data, str(file_name)), name=Path(str(file_name)).name)
    if isinstance(files, (str, Path)):
        path = Path(files)
        if path.suffix == ".index" or (not path.exists() and Path(str(path) + ".index").exists()):
            prefix = str(path)[: -len(".index")] if path.suffix == ".index" else str(path)
            return read_tf_checkpoint(Path(prefix + ".index"), Path(prefix + TF_DATA_SUFFIX),
                                      name=Path(prefix).name)
        return read_weights(_bytes(path, path.name), name=name or path.name)
    data = _bytes(files, name or "the weights file")
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


def read_keras_h5(source, name: str | None = None) -> dict[str, np.ndarray]:
    """Every float dataset of an HDF5 weights file, keyed by its path ("layers/dense/vars/0")."""
    import h5py

    label = name or (Path(source).name if isinstance(source, (str, Path)) else "the weights file")
    data = _bytes(source, label)
    if not data.startswith(HDF5_MAGIC):
        raise CheckpointError(f"{label!r} is not an HDF5 file (a Keras .weights.h5).")
    arrays: dict[str, np.ndarray] = {}
    total = 0
    try:
        with h5py.File(io.BytesIO(data), "r") as h5:
            stack = [("", h5)]
            while stack:
                prefix, group = stack.pop()
                for key in sorted(group.keys(), key=natural_key):
                    path = prefix + key
                    if not prefix and key in TRAINING_STATE:
                        continue  # a model saved after fit() also holds its optimizer's state
                    link = group.get(key, getlink=True)
                    if not isinstance(link, h5py.HardLink):  # soft and external links point elsewhere
                        raise CheckpointError(
                            f"{label!r} holds a link {path!r} to another place or file; only "
                            "plain groups and arrays are read.")
                    item = group[key]
                    if isinstance(item, h5py.Group):
                        stack.append((path + "/", item))
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
                    total += int(item.size) * 4
                    if len(arrays) >= MAX_ARRAYS or total > MAX_ARRAY_BYTES:
                        raise CheckpointError(f"{label!r} holds more weights than the limit.")
                    arrays[path] = np.asarray(item[()], dtype=np.float32)
                stack.sort(key=lambda entry: natural_key(entry[0]), reverse=True)
    except CheckpointError:
        raise
    except Exception as err:  # h5py raises OSError, KeyError, ValueError... on damaged files
        raise CheckpointError(
            f"{label!r} could not be read as an HDF5 weights file (damaged or truncated: "
            f"{type(err).__name__}).") from None
    if not arrays:
        raise CheckpointError(f"{label!r} holds no weights.")
    return dict(sorted(arrays.items(), key=lambda item: natural_key(item[0])))


# ------------------------------------------------------------------ Keras 3 .keras archive
def read_keras_archive(source, name: str | None = None) -> dict[str, np.ndarray]:
    """The weights of a .keras archive: its model.weights.h5 member, nothing else."""
    label = name or (Path(source).name if isinstance(source, (str, Path)) else "the .keras file")
    data = _bytes(source, label)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise CheckpointError(f"{label!r} is not a .keras archive (not a ZIP file, or truncated).") from None
    with archive:
        infos = [info for info in archive.infolist() if info.filename == KERAS_WEIGHTS_MEMBER]
        if not infos:
            raise CheckpointError(
                f"{label!r} has no {KERAS_WEIGHTS_MEMBER!r}: it holds no weights (was it saved "
                "with model.save(...) after the model was built?).")
        if len(infos) > 1:
            raise CheckpointError(f"{label!r} holds {KERAS_WEIGHTS_MEMBER!r} twice.")
        info = infos[0]
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > MAX_MEMBER_BYTES or (
                info.file_size > RATIO_CHECKED_ABOVE and ratio > MAX_COMPRESSION_RATIO):
            raise CheckpointError(
                f"{KERAS_WEIGHTS_MEMBER!r} in {label!r} unpacks to {info.file_size / 2**20:.0f} MB: "
                "refused (too large, or a possible decompression bomb).")
        try:
            with archive.open(info) as member:
                weights = member.read(MAX_MEMBER_BYTES + 1)  # never trust the declared size alone
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, ValueError,
                NotImplementedError):
            raise CheckpointError(f"{KERAS_WEIGHTS_MEMBER!r} in {label!r} is damaged or truncated.") from None
        if len(weights) > MAX_MEMBER_BYTES:
            raise CheckpointError(f"{KERAS_WEIGHTS_MEMBER!r} in {label!r} is too large.")
    return read_keras_h5(weights, name=f"{label}/{KERAS_WEIGHTS_MEMBER}")


# ------------------------------------------------------------------ TensorFlow checkpoint
def read_tf_checkpoint(index, data, name: str | None = None) -> dict[str, np.ndarray]:
    """The model variables of a TF checkpoint (.index + .data-00000-of-00001, bytes or paths),
    keyed by their object path without "/.ATTRIBUTES/VARIABLE_VALUE"."""
    label = name or (Path(index).stem if isinstance(index, (str, Path)) else "the checkpoint")
    index_bytes = _bytes(index, f"{label}.index")
    data_bytes = _bytes(data, f"{label}{TF_DATA_SUFFIX}", allow_empty=True)
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="tf-checkpoint-") as folder:
        prefix = str(Path(folder) / "ckpt")
        Path(prefix + ".index").write_bytes(index_bytes)
        Path(prefix + TF_DATA_SUFFIX).write_bytes(data_bytes)
        try:
            reader = tf.train.load_checkpoint(prefix)
            shapes = reader.get_variable_to_shape_map()
            dtypes = reader.get_variable_to_dtype_map()
        except Exception as err:  # DataLossError, NotFoundError, ...
            raise CheckpointError(
                f"The TensorFlow checkpoint {label!r} could not be read ({type(err).__name__}: its "
                ".index file is damaged, or it is not a TensorFlow checkpoint).") from None
        names = []
        for key in shapes:
            if not key.endswith("/.ATTRIBUTES/VARIABLE_VALUE") or ".OPTIMIZER_SLOT" in key:
                continue
            if key.split("/", 1)[0] in _TF_SKIPPED:
                continue
            names.append(key)
        if not names:
            raise CheckpointError(f"The TensorFlow checkpoint {label!r} holds no model weights.")
        if len(names) > MAX_ARRAYS:
            raise CheckpointError(f"The TensorFlow checkpoint {label!r} holds more weights than the limit.")
        total = sum(int(np.prod(shapes[key], dtype=np.int64)) * 4 for key in names)
        if total > MAX_ARRAY_BYTES:
            raise CheckpointError(f"The TensorFlow checkpoint {label!r} holds more weights than the limit.")
        arrays = {}
        for key in sorted(names, key=natural_key):
            short = key[: -len("/.ATTRIBUTES/VARIABLE_VALUE")]
            if not dtypes[key].is_floating:
                raise CheckpointError(
                    f"The TensorFlow checkpoint {label!r} holds {short!r} of type "
                    f"{dtypes[key].name}; only float weights are read.")
            try:
                value = reader.get_tensor(key)
            except Exception:
                raise CheckpointError(
                    f"The TensorFlow checkpoint {label!r}: the weight {short!r} is damaged or "
                    "missing from its data file (truncated?).") from None
            arrays[short] = np.asarray(value, dtype=np.float32)
    return arrays


# ------------------------------------------------------------------ helpers
def _bytes(source, label: str, allow_empty: bool = False) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise CheckpointError(f"No file at {path}.")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise CheckpointError(
                f"{label!r} is {path.stat().st_size / 2**20:.0f} MB; the limit is "
                f"{MAX_FILE_BYTES / 2**20:.0f} MB.")
        data = path.read_bytes()
    elif hasattr(source, "read"):
        data = source.read(MAX_FILE_BYTES + 1)
        if not isinstance(data, (bytes, bytearray)):
            raise CheckpointError(f"{label!r} must be opened in binary mode.")
        data = bytes(data)
    else:
        raise CheckpointError(f"Cannot read {label!r} from a {type(source).__name__}.")
    if len(data) > MAX_FILE_BYTES:
        raise CheckpointError(f"{label!r} is larger than the {MAX_FILE_BYTES / 2**20:.0f} MB limit.")
    if not data and not allow_empty:
        raise CheckpointError(f"{label!r} is empty.")
    return data
