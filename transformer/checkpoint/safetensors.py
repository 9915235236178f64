"""The safetensors format (an 8-byte little-endian header length, a JSON header, the tensors'
bytes), read as untrusted data: the header is parsed with the bounds of every JSON we read and
checked whole (dtypes, shapes, offsets that tile the data exactly) before any array exists; the
arrays are then read-only views of the bytes (no copy). Our checkpoint's weights.safetensors
member and Hugging Face's model.safetensors are both read here. (The safetensors library writes
them; its NumPy reader copies every tensor, and its memory map opens only a file of its own.)"""

from __future__ import annotations

import json
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from transformer.checkpoint.errors import CheckpointError
from transformer.checkpoint.jsons import bounded_json
from transformer.core import limits
from transformer.core.mapped import release
from transformer.core.text import quoted

MAX_HEADER_BYTES = limits.MAX_WEIGHTS_DIRECTORY_BYTES
MAX_WEIGHT_DIMS = 8  # dimensions of one weight: ours have 1 or 2
# One dimension of one weight: the values of the largest member at the smallest dtype (F16).
# Checked on every dimension, so that a zero dimension cannot hide a huge other one (a shape
# (0, 2**63 - 1) holds no bytes, but NumPy cannot make an array of it).
MAX_DIMENSION = limits.MAX_MEMBER_BYTES // 2
# safetensors' float dtypes, as NumPy holds them (bfloat16: ml_dtypes', which TensorFlow uses)
DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"),
          "BF16": np.dtype(ml_dtypes.bfloat16)}


@dataclass(frozen=True)
class Tensor:
    """One tensor as a checked header describes it: `size` in bytes."""
    shape: tuple[int, ...]
    begin: int  # offset of its data, from the end of the header
    size: int
    dtype: str = "F32"


@dataclass(frozen=True)
class Source:
    """How the sentences name what is read: the file ("The checkpoint's weights.safetensors"),
    the file's name ("weights.safetensors") and a tensor's owner ("The checkpoint's weight")."""
    where: str
    member: str
    weight: str


OUR_MEMBER = Source("The checkpoint's weights.safetensors", "weights.safetensors",
                    "The checkpoint's weight")


def header(raw, source: Source = OUR_MEMBER, dtypes=("F32",)) -> dict[str, Tensor]:
    """{tensor name: Tensor} from the header, checked whole before any array is read: a dtype
    of `dtypes`, shapes of at most MAX_WEIGHT_DIMS non-negative integers, each tensor's
    data_offsets [begin, end) exactly its shape's bytes, and together contiguous from 0 to the
    end of the data (no gap, overlap or trailing byte). `__metadata__`, if any, must map text
    to text (it is not used)."""
    where, member = source.where, source.member
    if len(raw) < 8:
        raise CheckpointError(f"{where} is too short to be a safetensors file ({len(raw)} "
                              "bytes).")
    length = int.from_bytes(bytes(memoryview(raw)[:8]), "little")
    if length > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"{where} declares a header of {length:,} bytes; at most "
            f"{MAX_HEADER_BYTES:,} are read (~200 bytes a weight).")
    if 8 + length > len(raw):
        raise CheckpointError(f"{where} declares a header of {length:,} bytes, more than the "
                              f"{len(raw) - 8:,} bytes that follow: it is damaged or truncated.")
    parsed = bounded_json(memoryview(raw)[8:8 + length], f"The header of {member!r}",
                          duplicates=True)
    if not isinstance(parsed, dict):
        raise CheckpointError(f"{where} has a header that is not a JSON object.")
    body = len(raw) - 8 - length
    extra = parsed.pop("__metadata__", None)
    if extra is not None and not (isinstance(extra, dict) and all(
            isinstance(v, str) for v in extra.values())):
        raise CheckpointError(f"{where} has a __metadata__ that is not an object of texts.")
    if len(parsed) > limits.MAX_WEIGHTS:
        raise CheckpointError(f"{where} holds {len(parsed):,} weights; at most "
                              f"{limits.MAX_WEIGHTS:,} are read.")
    expected_dtypes = " or ".join(f"{d} ({np.dtype(DTYPES[d]).name})" for d in dtypes)
    tensors = {}
    for name, info in parsed.items():
        label = f"{source.weight} {quoted(name)}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"{label} is described by something other than dtype, shape "
                                  f"and data_offsets in {member}'s header.")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in dtypes:
            raise CheckpointError(f"{label} has dtype {str(dtype)[:20]} in {member}; "
                                  f"expected {expected_dtypes}.")
        if not isinstance(shape, list) or len(shape) > MAX_WEIGHT_DIMS or not all(
                type(n) is int and 0 <= n <= MAX_DIMENSION for n in shape):
            raise CheckpointError(f"{label} has an invalid shape {json.dumps(shape)[:80]} in "
                                  f"{member} (each dimension a whole number from 0 to "
                                  f"{MAX_DIMENSION:,}).")
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(
                type(n) is int for n in offsets) or not 0 <= offsets[0] <= offsets[1] <= body:
            raise CheckpointError(
                f"{label} has invalid data_offsets {json.dumps(offsets)[:80]} in "
                f"{member}, whose data is {body:,} bytes.")
        itemsize = np.dtype(DTYPES[dtype]).itemsize
        count = bounded_product(shape, body // itemsize)
        if count > body // itemsize:
            raise CheckpointError(
                f"{label} has shape {tuple(shape)}: more values than the {body:,} bytes of data "
                f"in {member} hold.")
        size = itemsize * count
        if offsets[1] - offsets[0] != size:
            raise CheckpointError(
                f"{label} has shape {tuple(shape)} ({size:,} bytes of "
                f"{np.dtype(DTYPES[dtype]).name}) but {offsets[1] - offsets[0]:,} bytes of data "
                f"in {member}.")
        tensors[name] = Tensor(tuple(shape), offsets[0], size, dtype)
    at = 0
    for name, tensor in sorted(tensors.items(), key=lambda item: (item[1].begin, item[1].size)):
        if tensor.begin != at:
            raise CheckpointError(
                f"{where} has invalid offsets: the weight {quoted(name)} starts at byte "
                f"{tensor.begin:,} of the data, not at {at:,} where the previous one ends "
                "(weights must not overlap or leave gaps).")
        at += tensor.size
    if at != body:
        raise CheckpointError(f"{where} has {body - at:,} bytes of data that no weight "
                              "describes.")
    return tensors


def bounded_product(shape, bound: int) -> int:
    """math.prod(shape), or the first partial product past `bound` (enough to say the shape does
    not fit): never a number larger than bound x MAX_DIMENSION."""
    count = 1
    for n in shape:
        count *= n
        if count > bound:
            return count
    return count


def arrays(raw, tensors: dict[str, Tensor], source: Source = OUR_MEMBER
           ) -> dict[str, np.ndarray]:
    """{name: array} of a checked header's tensors: read-only views of `raw` in their own dtype
    (no copy), each checked finite a million values at a time."""
    start = 8 + int.from_bytes(bytes(memoryview(raw)[:8]), "little")
    out = {}
    for name, tensor in tensors.items():
        dtype = np.dtype(DTYPES[tensor.dtype])
        array = np.frombuffer(raw, dtype, tensor.size // dtype.itemsize, start + tensor.begin)
        array = array.reshape(tensor.shape)
        if not all_finite(array):
            raise CheckpointError(f"{source.weight} {quoted(name)} holds NaN or infinite "
                                  "values (training diverged?).")
        release(array)  # a memory-mapped file's pages leave the process once checked
        out[name] = array
    return out


def all_finite(array: np.ndarray, chunk: int = 2**20) -> bool:
    """np.isfinite(array).all(), a million values at a time (no full-size boolean copy)."""
    flat = array.reshape(-1) if array.flags.c_contiguous else array.ravel(order="K")
    return all(np.isfinite(flat[i:i + chunk]).all() for i in range(0, flat.size, chunk))
