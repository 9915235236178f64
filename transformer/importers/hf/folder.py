"""Reading a Hugging Face model folder as data: the files one family reads, from a folder, a
.zip of it, or the files given one by one ({file name: bytes}, an upload), each within its own
byte cap; its JSON files. Its weights are read by transformer.importers.hf.weight_files (no torch, no
pickle).

Every family's importer (marian, bart, ...) names the files it reads and their caps in a
FolderSpec; nothing else in a folder is read (a folder is never listed: the names are looked
up), and a file a family names only in hints (pytorch_model.bin) is noted as present, never
read. Every failure is a CheckpointError naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from transformer.checkpoint import archive
from transformer.checkpoint.format import CheckpointError, read_input
from transformer.core import limits
from transformer.importers.hf.weight_files import SAFETENSORS, SHARD_FILE, WEIGHT_FILES

__all__ = ["FolderSpec", "gather", "is_folder", "parse_json"]

MAX_ZIP_BYTES = limits.MAX_TOTAL_BYTES  # a zipped model folder (only the files read are unpacked)
MAX_ZIP_MEMBERS = 256


@dataclass(frozen=True)
class FolderSpec:
    """What one family reads of a folder. file_bytes: {file name: its byte cap}, every file it
    may read; hinted: names looked for only to say something about them (never read); what:
    the model in sentences ("the Marian model"). A folder's weight files (weight_files.WEIGHT_FILES)
    are given as their Path, memory-mapped when the weights are read (weight_files; the shards its
    index names are looked up then); given files hold shards (SHARD_FILE) read within
    model.safetensors' cap."""
    file_bytes: dict
    hinted: tuple[str, ...] = ()
    what: str = "the model"


def gather(source, spec: FolderSpec) -> tuple[dict[str, bytes], str]:
    """({file name: bytes} of the files spec reads (a hinted one: b""), a label naming where they
    came from), from a folder path, a .zip (path or bytes), {file name: bytes or file object}
    or a list of uploaded file objects (with .name)."""
    if isinstance(source, (list, tuple)):  # uploaded file objects with .name
        source = {getattr(f, "name", str(i)): f for i, f in enumerate(source)}
    if isinstance(source, dict):
        named = {}
        for key, value in source.items():
            name = PurePosixPath(str(key).replace("\\", "/")).name
            if name in named:
                raise CheckpointError(f"Two of the given files are named {name!r}; give each "
                                      f"file of {spec.what} once.")
            named[name] = value
        zips = [n for n in named if n.lower().endswith(".zip")]
        if len(named) == 1 and zips:
            return _from_zip(read_input(named[zips[0]], zips[0], MAX_ZIP_BYTES),
                             f"the archive {zips[0]!r}", spec)
        if zips:
            raise CheckpointError(f"Give either a .zip of {spec.what} or its files, not "
                                  f"both ({zips[0]!r} came with other files).")
        shard_cap = spec.file_bytes.get(SAFETENSORS, 0)
        wanted = {n: v for n, v in named.items()
                  if n in spec.file_bytes or shard_cap and SHARD_FILE.fullmatch(n)}
        present = {n: b"" for n in named if n not in wanted}  # named in hints only
        files = {n: read_input(v, n, spec.file_bytes.get(n, shard_cap))
                 for n, v in wanted.items()}
        return {**present, **files}, "the given files"
    if isinstance(source, (str, Path)):
        path = Path(source)
        if is_folder(path):
            return _from_folder(path, spec)
        if not path.exists():
            raise CheckpointError(f"No model at {path}: give {spec.what}'s folder or a .zip "
                                  "of it.")
        if path.suffix.lower() != ".zip":
            raise CheckpointError(f"{path.name!r} is neither a folder nor a .zip: give "
                                  f"{spec.what}'s folder, a .zip of it, or its files.")
        return _from_zip(read_input(path, path.name, MAX_ZIP_BYTES), f"the archive {path.name!r}",
                         spec)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _from_zip(bytes(source), "the given .zip archive", spec)
    raise CheckpointError(f"Cannot read {spec.what} from a {type(source).__name__}: give a "
                          "folder, a .zip or {file name: bytes}.")


def is_folder(path: Path) -> bool:
    """Path.is_dir, with an OSError it lets through (a folder on the way that cannot be
    entered) as an error message."""
    try:
        return path.is_dir()
    except OSError as err:
        raise CheckpointError(f"{str(path)!r} could not be read "
                              f"({err.strerror or type(err).__name__}).") from None


def _from_folder(path: Path, spec: FolderSpec) -> tuple[dict[str, bytes], str]:
    """The files spec reads, looked up by name (the folder is not listed: one holding a million
    entries, a FIFO or a link into /proc costs nothing unless it bears one of these names).
    Each is read through read_input, which follows links (Hugging Face's cache links every file
    into its blobs) and reads only regular files; an OSError is an error."""
    label = f"the folder {path.name or str(path)!r}"
    raw = {}
    for name in (*spec.file_bytes, *spec.hinted):
        child = path / name
        try:
            present = child.exists() or child.is_symlink()  # a dangling link: read_input names it
        except OSError as err:
            raise CheckpointError(f"{name} in {label} could not be read "
                                  f"({err.strerror or type(err).__name__}).") from None
        if not present:
            continue
        if name in spec.file_bytes and name in WEIGHT_FILES:
            raw[name] = child  # read (memory-mapped) with the weights: weight_files
        elif name in spec.file_bytes:
            raw[name] = read_input(child, name, spec.file_bytes[name])
        else:
            raw[name] = b""  # present: named in a hint, never read
    return raw, label


def _from_zip(data: bytes, label: str, spec: FolderSpec) -> tuple[dict[str, bytes], str]:
    try:
        entries = archive.read_directory(data, label, MAX_ZIP_MEMBERS, limits.MAX_DIRECTORY_BYTES)
    except archive.ArchiveError as err:
        raise CheckpointError(str(err)) from None
    raw, where = {}, {}
    for entry in entries:
        if entry.name.endswith("/"):
            continue  # a folder
        name = PurePosixPath(entry.name).name
        if name.startswith("._") or "__MACOSX/" in entry.name:
            continue  # macOS's resource forks next to the real files
        if name in where and (name in spec.file_bytes or name in spec.hinted):
            raise CheckpointError(f"{label[0].upper() + label[1:]} holds {name} twice "
                                  f"({where[name]!r} and {entry.name!r}); give one model.")
        where[name] = entry.name
        if name not in spec.file_bytes:
            raw[name] = b""  # present: named in a hint, never read
            continue
        limit = spec.file_bytes[name]
        if archive.unpacks_too_far(entry.size, entry.compressed_size, limit):
            raise CheckpointError(
                f"{name} in {label} unpacks to {entry.size / 2**20:.1f} MB from "
                f"{entry.compressed_size / 2**20:.1f} MB (at most {limit / 2**20:.0f} MB, packed "
                f"at most {limits.MAX_COMPRESSION_RATIO} to 1): refused.")
        try:
            raw[name] = bytes(archive.read_member(data, entry, label))
        except archive.ArchiveError as err:
            raise CheckpointError(str(err)) from None
    return raw, label


def parse_json(data: bytes, name: str, label: str) -> dict:
    """A JSON object file (config.json, generation_config.json) as parsed; an error when it is
    not valid JSON or not an object."""
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # ValueError: JSONDecodeError
        raise CheckpointError(f"{name} in {label} is not valid JSON.") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{name} in {label} must hold a JSON object, not "
                              f"{type(value).__name__}.")
    return value
