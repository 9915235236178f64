"""Bounded reading of ZIP archives and of the NumPy .npz archives inside them, from bytes.

Python's zipfile trusts the archive: it decompresses as far as the data goes (a member whose
header says 100 bytes may unpack to a gigabyte before the excess is cut off), supports bzip2 and
LZMA (with their own bombs), walks a directory of any length, and lets NotImplementedError,
OverflowError or UnicodeDecodeError out of odd headers. Here the archive's central directory is
parsed by hand, with every field checked against the file before it is used, and each member is
unpacked into a buffer of exactly its declared size: decompression stops one byte past it.

Only what the project writes is accepted: members stored or deflated, "version needed to
extract" at most 4.5 (NumPy's savez writes zip64 size extras in local headers), no encryption, no
archive spanning disks, no zip64 end record, UTF-8 names, no overlapping members, no data before
or after the archive. Every refusal is an ArchiveError whose text is a message for a person.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import math
import struct
import zlib
from dataclasses import dataclass

import numpy as np
from numpy.lib import format as npy_format

from transformer.core import limits

STORED, DEFLATED = 0, 8
METHOD_NAMES = {1: "shrink", 6: "implode", 9: "deflate64", 12: "bzip2", 14: "LZMA", 93: "Zstandard",
                95: "XZ", 98: "PPMd", 99: "AES encryption"}

_END = struct.Struct("<4s4H2LH")  # end of central directory record (22 bytes + comment)
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # central directory entry (46 bytes + name, extra...)
_LOCAL = struct.Struct("<4s2B4HL2L2H")  # local file header (30 bytes + name + extra)
_END_SIG, _CENTRAL_SIG, _LOCAL_SIG = b"PK\x05\x06", b"PK\x01\x02", b"PK\x03\x04"
_ZIP64_LOCATOR_SIG = b"PK\x06\x07"
_ZIP64_EXTRA = 0x0001
_FLAG_ENCRYPTED, _FLAG_DESCRIPTOR, _FLAG_STRONG, _FLAG_MASKED = 0x1, 0x8, 0x40, 0x2000
_MAX_COMMENT = 0xFFFF
_FLOAT32 = np.dtype("<f4")


class ArchiveError(ValueError):
    """Why an archive is refused, as an error message. not_zip: it is no ZIP archive at all."""

    def __init__(self, message: str, not_zip: bool = False):
        super().__init__(message)
        self.not_zip = not_zip


@dataclass(frozen=True)
class Member:
    name: str
    method: int  # STORED or DEFLATED
    compressed_size: int
    size: int  # uncompressed, as the central directory declares it
    crc: int
    header_offset: int  # where its local header starts
    data_offset: int  # where its (compressed) bytes start


# ============================================================================= ZIP directory
def read_directory(data, where: str, max_members: int, max_directory_bytes: int,
                   locate: bool = True) -> list[Member]:
    """Every member of the ZIP archive `data`, in directory order, each checked against the file.

    where: how messages name the archive ("the checkpoint"). Reads no member's data.
    locate=False stops after the central directory (data_offset -1): check the declared sizes,
    then call locate_members for the local headers."""
    what = where[0].upper() + where[1:]
    view = memoryview(data)
    end = _find_end(data, what)
    _, disk, directory_disk, count_on_disk, count, directory_size, directory_offset, \
        comment_len = _END.unpack_from(view, end)
    if end >= 20 and bytes(view[end - 20:end - 16]) == _ZIP64_LOCATOR_SIG or \
            0xFFFF in (count, count_on_disk) or 0xFFFFFFFF in (directory_size, directory_offset):
        raise ArchiveError(f"{what} is a zip64 archive (for files over 4 GB or 65,535 members), "
                           "which no checkpoint needs; it is refused.")
    if disk != 0 or directory_disk != 0 or count_on_disk != count:
        raise ArchiveError(f"{what} is part of an archive split over several disks, which is "
                           "not supported.")
    if count > max_members:
        raise ArchiveError(f"{what} holds {count:,} files; at most {max_members:,} are read.")
    if directory_size > max_directory_bytes:
        raise ArchiveError(f"{what} has a ZIP directory of {directory_size:,} bytes; at most "
                           f"{max_directory_bytes:,} are read.")
    if directory_offset + directory_size != end:
        raise ArchiveError(f"{what} is damaged: its ZIP directory is not where its end record "
                           "says (or there are extra bytes before the archive).")
    if count == 0:
        raise ArchiveError(f"{what} is an empty ZIP archive.")

    members, names, position = [], set(), directory_offset
    for _ in range(count):
        if position + _CENTRAL.size > end or bytes(view[position:position + 4]) != _CENTRAL_SIG:
            raise ArchiveError(f"{what} is damaged: its ZIP directory is cut short or garbled.")
        (_, _, _, needed, _, flags, method, _, _, crc, compressed_size, size, name_len, extra_len,
         comment_len, start_disk, _, _, header_offset) = _CENTRAL.unpack_from(view, position)
        name_start = position + _CENTRAL.size
        position = name_start + name_len + extra_len + comment_len
        if position > end:
            raise ArchiveError(f"{what} is damaged: its ZIP directory is cut short or garbled.")
        raw_name = bytes(view[name_start:name_start + name_len])
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise ArchiveError(f"{what} holds a file whose name is not valid UTF-8 "
                               f"({raw_name[:40]!r}).") from None
        if needed > limits.MAX_ZIP_VERSION:
            raise ArchiveError(
                f"{what} needs ZIP version {needed // 10}.{needed % 10} to unpack "
                f"{_short(name)}; only archives up to version {limits.MAX_ZIP_VERSION // 10}."
                f"{limits.MAX_ZIP_VERSION % 10} (stored or deflated files) are read.")
        if flags & (_FLAG_ENCRYPTED | _FLAG_STRONG | _FLAG_MASKED):
            raise ArchiveError(f"{what} holds an encrypted file ({_short(name)}), which is not "
                               "read.")
        if method not in (STORED, DEFLATED):
            kind = METHOD_NAMES.get(method, f"method {method}")
            raise ArchiveError(f"{what} holds {_short(name)} compressed with {kind}; only stored "
                               "and deflated files (what checkpoints are written with) are read.")
        if 0xFFFFFFFF in (compressed_size, size, header_offset) or start_disk not in (0, 0xFFFF):
            raise ArchiveError(f"{what} declares zip64 sizes or offsets for {_short(name)} (files "
                               "over 4 GB), which no checkpoint needs; it is refused.")
        if start_disk != 0:
            raise ArchiveError(f"{what} is part of an archive split over several disks, which is "
                               "not supported.")
        if name in names:
            raise ArchiveError(f"{what} holds the same file twice ({_short(name)}).")
        names.add(name)
        if method == STORED and compressed_size != size:
            raise ArchiveError(f"{what} is damaged: {_short(name)} is stored uncompressed but "
                               f"declares {compressed_size:,} bytes packed and {size:,} unpacked.")
        members.append(Member(name, method, compressed_size, size, crc, header_offset, -1))
    if position != end:
        raise ArchiveError(f"{what} is damaged: its ZIP directory is cut short or garbled.")
    return locate_members(data, members, where, directory_offset) if locate else members


def locate_members(data, members: list[Member], where: str,
                   directory_offset: int | None = None) -> list[Member]:
    """The members with data_offset set from their local headers, each checked against its
    directory entry; members that overlap (one compressed stream read twice) are refused."""
    what = where[0].upper() + where[1:]
    view = memoryview(data)
    if directory_offset is None:
        end = _find_end(data, what)
        directory_offset = _END.unpack_from(view, end)[6]
    located = []
    for member in members:
        raw_name = member.name.encode("utf-8")
        located.append(dataclasses.replace(member, data_offset=_local_header(
            view, what, member.name, raw_name, member.method, member.compressed_size,
            member.size, member.header_offset, directory_offset)))
    members = located
    ordered = sorted(members, key=lambda m: m.header_offset)
    for first, second in itertools.pairwise(ordered):
        if first.data_offset + first.compressed_size > second.header_offset:
            raise ArchiveError(f"{what} has overlapping files ({_short(first.name)} and "
                               f"{_short(second.name)}): refused as a possible decompression bomb.")
    return members


def _find_end(data, what: str) -> int:
    """Offset of the end-of-central-directory record whose comment runs exactly to the end."""
    not_zip = ArchiveError(f"{what} is not a ZIP archive, or it is truncated.", not_zip=True)
    if len(data) < _END.size:
        raise not_zip
    lowest = max(0, len(data) - _END.size - _MAX_COMMENT)
    tail = bytes(memoryview(data)[lowest:])  # at most 64 KB: the record and its comment
    at = len(tail)
    while at > 0:
        at = tail.rfind(_END_SIG, 0, at)
        if at < 0:
            break
        if at + _END.size <= len(tail):
            comment_len = struct.unpack_from("<H", tail, at + 20)[0]
            if at + _END.size + comment_len == len(tail):
                return lowest + at
    raise not_zip


def _local_header(view, what, name, raw_name, method, compressed_size, size, header_offset,
                  directory_offset) -> int:
    """Check a member's local header against its directory entry; return where its data starts."""
    damaged = ArchiveError(f"{what} is damaged: the local header of {_short(name)} does not "
                           "match its directory entry.")
    if header_offset + _LOCAL.size > directory_offset:
        raise damaged
    (sig, _, _, local_flags, local_method, _, _, _, local_compressed, local_size, name_len,
     extra_len) = _LOCAL.unpack_from(view, header_offset)
    data_offset = header_offset + _LOCAL.size + name_len + extra_len
    name_at = header_offset + _LOCAL.size
    if sig != _LOCAL_SIG or local_method != method or data_offset > directory_offset or \
            bytes(view[name_at:name_at + name_len]) != raw_name:
        raise damaged
    if local_flags & (_FLAG_ENCRYPTED | _FLAG_STRONG | _FLAG_MASKED):
        raise ArchiveError(f"{what} holds an encrypted file ({_short(name)}), which is not read.")
    if not local_flags & _FLAG_DESCRIPTOR:  # sizes are in the local header: they must agree
        if 0xFFFFFFFF in (local_compressed, local_size):
            extra = bytes(view[data_offset - extra_len:data_offset])
            local_size, local_compressed = _zip64_sizes(extra, local_size, local_compressed,
                                                        damaged)
        if (local_compressed, local_size) != (compressed_size, size):
            raise damaged
    if data_offset + compressed_size > directory_offset:
        raise ArchiveError(f"{what} is damaged or truncated: {_short(name)} runs past the end "
                           "of its data.")
    return data_offset


def _zip64_sizes(extra: bytes, size: int, compressed: int, damaged: ArchiveError):
    """The (size, compressed size) a local header's zip64 extra field gives (NumPy writes one)."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        body = extra[at + 4:at + 4 + length]
        if len(body) != length:
            raise damaged
        if kind == _ZIP64_EXTRA:
            values = list(struct.unpack_from(f"<{length // 8}Q", body)) if length % 8 == 0 else None
            if values is None:
                raise damaged
            if size == 0xFFFFFFFF:
                if not values:
                    raise damaged
                size = values.pop(0)
            if compressed == 0xFFFFFFFF:
                if not values:
                    raise damaged
                compressed = values.pop(0)
            return size, compressed
        at += 4 + length
    raise damaged


# ============================================================================= bounded reading
def unpacks_too_far(size: int, compressed_size: int, limit: int) -> bool:
    """A member that declares more than `limit` bytes, or (above limits.RATIO_CHECKED_ABOVE)
    packs more than limits.MAX_COMPRESSION_RATIO to 1: refused as a possible bomb before it
    is unpacked."""
    ratio = size / max(compressed_size, 1)
    return size > limit or (size > limits.RATIO_CHECKED_ABOVE
                            and ratio > limits.MAX_COMPRESSION_RATIO)


def read_member(data, member: Member, where: str, prefix: int | None = None):
    """The member's bytes: never more than its declared size is produced (one byte more and it is
    refused), and the buffer is allocated once, at that size (a bytearray; a stored member is a
    memoryview of `data`, no copy). prefix: only the first `prefix` bytes (no checksum then), to
    look at a header before reading the rest."""
    want = member.size if prefix is None else min(prefix, member.size)
    source = memoryview(data)[member.data_offset:member.data_offset + member.compressed_size]
    if member.method == STORED:
        return bytes(source[:want]) if prefix is not None else _checked(source, member, where)
    out = bytearray(want)
    written = 0
    decompressor = zlib.decompressobj(-15)
    try:
        for start in range(0, len(source), limits.READ_CHUNK_BYTES):
            pending = source[start:start + limits.READ_CHUNK_BYTES]
            while pending and written <= want:
                piece = decompressor.decompress(pending, want - written + 1)  # max_length >= 1
                if written + len(piece) > want:
                    if prefix is not None:
                        piece = piece[:want - written]
                    else:
                        raise ArchiveError(
                            f"{_short(member.name)} in {where} unpacks to more than the "
                            f"{member.size:,} bytes its header declares: refused as a possible "
                            "decompression bomb.")
                out[written:written + len(piece)] = piece
                written += len(piece)
                if prefix is not None and written >= want:
                    return bytes(out)
                pending = decompressor.unconsumed_tail
                if decompressor.eof:
                    break
            if decompressor.eof:
                break
    except zlib.error:
        raise ArchiveError(f"{_short(member.name)} in {where} is damaged (its deflate data is "
                           "invalid).") from None
    if prefix is not None and written >= want:
        return bytes(out)
    if not decompressor.eof or written != want:
        raise ArchiveError(f"{_short(member.name)} in {where} is damaged or truncated (it "
                           f"unpacks to {written:,} bytes, its header declares {member.size:,}).")
    return _checked(out, member, where)


def _checked(content, member: Member, where: str):
    if zlib.crc32(content) != member.crc:
        raise ArchiveError(f"{_short(member.name)} in {where} is damaged (its checksum does not "
                           "match).")
    return content


# ============================================================================= NumPy .npz
@dataclass(frozen=True)
class NpyHeader:
    shape: tuple
    fortran_order: bool
    dtype: np.dtype
    header_bytes: int  # magic + header; the data follows


def npz_directory(raw, where: str) -> dict[str, Member]:
    """{array name (without .npy): member} of an .npz held in memory; reads no array."""
    members = read_directory(raw, where, limits.MAX_WEIGHTS, limits.MAX_WEIGHTS_DIRECTORY_BYTES)
    what = where[0].upper() + where[1:]
    arrays = {}
    for member in members:
        if member.name.endswith("/"):
            raise ArchiveError(f"{what} holds a folder ({_short(member.name)}); only .npy arrays "
                               "belong there.")
        if not member.name.endswith(".npy") or len(member.name) == 4:
            raise ArchiveError(f"{what} holds {_short(member.name)}, which is not a NumPy .npy "
                               "array.")
        name = member.name[:-4]
        if name in arrays:
            raise ArchiveError(f"{what} holds the array {_short(name)} twice.")
        arrays[name] = member
    return arrays


def npy_header(raw, member: Member, where: str) -> NpyHeader:
    """Parse one .npy member's header (NumPy's own readers) reading only the header's bytes."""
    label = f"The array {_short(member.name[:-4])} in {where}"
    head = read_member(raw, member, where, prefix=12 + limits.MAX_NPY_HEADER_BYTES)
    stream = io.BytesIO(head)
    try:
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = npy_format.read_array_header_1_0(
                stream, max_header_size=limits.MAX_NPY_HEADER_BYTES)
        elif version == (2, 0):
            shape, fortran_order, dtype = npy_format.read_array_header_2_0(
                stream, max_header_size=limits.MAX_NPY_HEADER_BYTES)
        else:
            raise ArchiveError(f"{label} is a .npy of version {version[0]}.{version[1]}; only "
                               "versions 1.0 and 2.0 are read.")
    except ArchiveError:
        raise
    except Exception:  # noqa: BLE001 - NumPy raises ValueError, SyntaxError, ... on garbage
        raise ArchiveError(f"{label} is not a valid NumPy .npy array (its header is damaged "
                           "or missing).") from None
    if not isinstance(fortran_order, bool) or not isinstance(shape, tuple) or \
            not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ArchiveError(f"{label} has an invalid .npy header (shape {str(shape)[:80]}).")
    return NpyHeader(shape, fortran_order, dtype, stream.tell())


def npy_array(raw, member: Member, header: NpyHeader, where: str) -> np.ndarray:
    """The float32 array a checked header describes: a view of `raw` when stored, else unpacked
    into a buffer of exactly the declared size. The data must be exactly shape x 4 bytes."""
    count = math.prod(header.shape)
    if member.size - header.header_bytes != count * _FLOAT32.itemsize:
        raise ArchiveError(f"The array {_short(member.name[:-4])} in {where} holds "
                           f"{member.size - header.header_bytes:,} bytes of data, but its header "
                           f"describes {count:,} float32 values.")
    if member.method == STORED:
        array = np.frombuffer(raw, _FLOAT32, count, member.data_offset + header.header_bytes)
        _check_crc_stored(raw, member, where)
    else:
        array = np.frombuffer(read_member(raw, member, where), _FLOAT32, count,
                              header.header_bytes)
    if header.fortran_order:
        return array.reshape(header.shape[::-1]).T
    return array.reshape(header.shape)


def _check_crc_stored(raw, member: Member, where: str) -> None:
    view = memoryview(raw)[member.data_offset:member.data_offset + member.size]
    if zlib.crc32(view) != member.crc:
        raise ArchiveError(f"{_short(member.name)} in {where} is damaged (its checksum does not "
                           "match).")


def _short(name: str) -> str:
    """A name from the file, quoted and cut to fit a sentence."""
    return repr(name if len(name) <= 80 else name[:77] + "...")
