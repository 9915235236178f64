"""transformer.core.mapped.release: a memory-mapped file's pages leave the process once read."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from transformer.core.mapped import release

MB = 2**20


def resident_bytes(mapped: mmap.mmap) -> int:
    """The Rss of the mapping that holds `mapped`, from /proc/self/smaps."""
    address = np.frombuffer(mapped, np.uint8, count=1).ctypes.data
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        first = line.split(" ", 1)[0]
        if "-" in first and all(c in "0123456789abcdef-" for c in first):
            low, high = (int(x, 16) for x in first.split("-"))
            if low <= address < high:
                rss = next(x for x in lines[i + 1:] if x.startswith("Rss:"))
                return int(rss.split()[1]) * 1024
    raise AssertionError("the mapping is not in /proc/self/smaps")


@pytest.fixture
def mapped(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(np.arange(4 * MB, dtype=np.float32).tobytes())  # 16 MB
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    yield m
    m.close()


def test_a_read_view_gives_its_pages_back(mapped):
    values = np.frombuffer(mapped, np.float32).reshape(4096, 1024)
    assert values.sum(dtype=np.float64) > 0  # every page read
    assert resident_bytes(mapped) >= 15 * MB
    release(values[:2048])  # the first half, 8 MB
    assert 7 * MB <= resident_bytes(mapped) <= 9 * MB
    release(values.T)  # a transposed view: the same bytes
    assert resident_bytes(mapped) <= MB
    # the values are still there: read again from the page cache
    assert values[4095, 1023] == 4 * MB - 1
    assert values[0, 5] == 5


def test_anything_else_is_left_as_it_is():
    own = np.arange(10, dtype=np.float32)
    release(own)  # no map under it: nothing happens
    release(np.frombuffer(b"\x00" * 64, np.float32))  # bytes
    assert own[9] == 9
