"""Views of memory-mapped files: giving their pages back once they are read.

A weight file opened from a folder is memory-mapped (transformer.importers.hf.weight_files): its
arrays are views of the page cache, and every page a reader touches counts in this process's
resident memory until the map is closed. A load reads each weight twice (checked finite, then
copied into the model's variables), so without giving pages back it held the whole file besides
the variables at its peak (nllb-200-distilled-600M: 5.5 GB for 2.35 GB of weights).
"""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["give_back", "release"]


def release(array: np.ndarray) -> None:
    """Drop the pages under `array`, a view of a read-only memory map, from this process
    (madvise MADV_DONTNEED: the page cache keeps them, so a later read maps them again without
    touching the disk). Anything else (an array of its own, bytes an upload gave) is left."""
    base = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    if base is None or base.closed:
        return
    if not (array.flags.c_contiguous or array.flags.f_contiguous) or not array.nbytes:
        return
    origin = np.frombuffer(base, np.uint8, count=1).ctypes.data
    give_back(base, array.ctypes.data - origin, array.nbytes)  # its first byte, either order


def give_back(mapped: mmap.mmap, start: int, length: int) -> None:
    """Drop the pages of bytes start .. start + length of a memory map from this process
    (the pages at either end whole: a neighbour's next read maps them again)."""
    low = start // mmap.PAGESIZE * mmap.PAGESIZE
    high = min(len(mapped), start + length)
    if 0 <= low < high and hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED, low, high - low)
