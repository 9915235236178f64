"""Training data: the built-in "dates" task and a reader for TSV parallel corpora.

The dates task maps a calendar date written in one of several human formats
(e.g. "Friday, March 5, 2021") to its ISO 8601 form ("2021-03-05").  Calendar
days are split into disjoint train and held-out sets, so a held-out date is
never seen in training in any format.

The corpus reader loads Tatoeba-style exports (``source<TAB>target[<TAB>...]``)
and reports every line it could not use instead of silently dropping it.
"""

from __future__ import annotations

import datetime
import functools
import os
from dataclasses import dataclass, field
from typing import BinaryIO, Union

import numpy as np

__all__ = [
    "CASES",
    "DATE_FORMATS",
    "FIRST_DAY",
    "LAST_DAY",
    "CorpusError",
    "ParallelCorpus",
    "date_pairs",
    "format_date",
    "ordinal_suffix",
    "read_parallel_tsv",
    "split_days",
]

# --------------------------------------------------------------------------
# Dates task
# --------------------------------------------------------------------------

FIRST_DAY = datetime.date(1900, 1, 1)
LAST_DAY = datetime.date(2099, 12, 31)

# Format name -> example rendering of 2021-03-05 in title case.
DATE_FORMATS = (
    "d_month_y",  # 5 March 2021
    "d_mon_y",  # 5 Mar 2021
    "month_d_y",  # March 5, 2021
    "mon_d_y",  # Mar 5, 2021
    "month_dth_y",  # March 5th, 2021
    "weekday_month_d_y",  # Friday, March 5, 2021
    "weekday_d_month_y",  # Friday 5 March 2021
    "dd_mm_yyyy",  # 05.03.2021
    "yyyy_mm_dd",  # 2021/03/05
    "dth_of_month_y",  # 5th of March 2021
)
CASES = ("lower", "title", "upper")

# Fixed English tables rather than strftime, whose names depend on the locale.
_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)
_MONTH_ABBRS = tuple(m[:3] for m in _MONTHS)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def ordinal_suffix(day: int) -> str:
    """English ordinal suffix for a day of the month: 1 -> "st", 12 -> "th", 22 -> "nd"."""
    if 11 <= day % 100 <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def format_date(d: datetime.date, fmt: str, case: str) -> str:
    """Render ``d`` in format ``fmt`` (one of DATE_FORMATS) and ``case`` (one of CASES).

    "title" capitalises month and weekday names only; the ordinal suffix and
    "of" stay lower case ("5th of March 2021").  "upper" upper-cases every
    letter ("5TH OF MARCH 2021").  Numeric formats are the same in every case.
    """
    if fmt not in DATE_FORMATS:
        raise ValueError(f"unknown date format {fmt!r}; expected one of {DATE_FORMATS}")
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; expected one of {CASES}")

    def cased(word: str) -> str:
        if case == "upper":
            return word.upper()
        if case == "title":
            return word.capitalize()
        return word

    def small(word: str) -> str:
        return word.upper() if case == "upper" else word

    month = cased(_MONTHS[d.month - 1])
    mon = cased(_MONTH_ABBRS[d.month - 1])
    weekday = cased(_WEEKDAYS[d.weekday()])
    dth = f"{d.day}{small(ordinal_suffix(d.day))}"
    y = d.year

    if fmt == "d_month_y":
        return f"{d.day} {month} {y}"
    if fmt == "d_mon_y":
        return f"{d.day} {mon} {y}"
    if fmt == "month_d_y":
        return f"{month} {d.day}, {y}"
    if fmt == "mon_d_y":
        return f"{mon} {d.day}, {y}"
    if fmt == "month_dth_y":
        return f"{month} {dth}, {y}"
    if fmt == "weekday_month_d_y":
        return f"{weekday}, {month} {d.day}, {y}"
    if fmt == "weekday_d_month_y":
        return f"{weekday} {d.day} {month} {y}"
    if fmt == "dd_mm_yyyy":
        return f"{d.day:02d}.{d.month:02d}.{y:04d}"
    if fmt == "yyyy_mm_dd":
        return f"{y:04d}/{d.month:02d}/{d.day:02d}"
    return f"{dth} {small('of')} {month} {y}"  # dth_of_month_y


@functools.lru_cache(maxsize=16)
def split_days(seed: int = 0, held_out_fraction: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Split every day in FIRST_DAY..LAST_DAY into (train, test) arrays of date ordinals.

    The split is a seeded permutation of the days, so it is deterministic per
    seed; the test set holds ``round(fraction * num_days)`` days (at least one,
    and at least one day stays in train).  Both arrays are sorted and read-only.
    """
    if not 0.0 < held_out_fraction < 1.0:
        raise ValueError(f"held_out_fraction must be in (0, 1), got {held_out_fraction!r}")
    days = np.arange(FIRST_DAY.toordinal(), LAST_DAY.toordinal() + 1, dtype=np.int64)
    num_test = min(max(1, round(held_out_fraction * len(days))), len(days) - 1)
    perm = np.random.default_rng(seed).permutation(len(days))
    test = np.sort(days[perm[:num_test]])
    train = np.sort(days[perm[num_test:]])
    # Read-only because the arrays are cached and shared between callers.
    train.setflags(write=False)
    test.setflags(write=False)
    return train, test


def date_pairs(
    n: int,
    *,
    seed: int = 0,
    split: str = "train",
    held_out_fraction: float = 0.05,
) -> list[tuple[str, str]]:
    """Draw ``n`` (source, ISO target) pairs from the ``split`` ("train" or "test") days.

    Day, format and case are each drawn uniformly.  The same arguments always
    give the same list.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    train, test = split_days(seed, held_out_fraction)
    days = train if split == "train" else test
    # A stream separate from split_days' own, and different per split, so the
    # two splits are not sampled in lockstep.
    rng = np.random.default_rng([seed, 1 if split == "train" else 2])
    day_idx = rng.integers(len(days), size=n)
    fmt_idx = rng.integers(len(DATE_FORMATS), size=n)
    case_idx = rng.integers(len(CASES), size=n)
    pairs = []
    for di, fi, ci in zip(day_idx, fmt_idx, case_idx):
        d = datetime.date.fromordinal(int(days[di]))
        pairs.append((format_date(d, DATE_FORMATS[fi], CASES[ci]), d.isoformat()))
    return pairs


# --------------------------------------------------------------------------
# TSV parallel corpus
# --------------------------------------------------------------------------

_BOM = b"\xef\xbb\xbf"
_MAX_LISTED = 5  # keep summary() on one readable line


class CorpusError(ValueError):
    """A parallel corpus could not be used (bad line in strict mode, or no pairs)."""


@dataclass
class ParallelCorpus:
    """Pairs read from a TSV corpus plus an account of every line not used."""

    pairs: list[tuple[str, str]]
    num_lines: int
    num_blank: int
    malformed: list[tuple[int, str]] = field(default_factory=list)  # (1-based line, reason)
    encoding_errors: list[int] = field(default_factory=list)  # 1-based lines not valid UTF-8
    name: str = "<corpus>"

    @property
    def num_skipped(self) -> int:
        """Lines that produced no pair (blank, malformed or undecodable)."""
        return self.num_blank + len(self.malformed) + len(self.encoding_errors)

    def summary(self) -> str:
        """One-line human report of what was read and what was skipped."""
        parts = [f"read {_plural(len(self.pairs), 'pair')} from {self.name}"]
        if self.num_blank:
            parts.append(f"skipped {_plural(self.num_blank, 'blank line')}")
        if self.malformed:
            details = _listing(f"line {n}: {reason}" for n, reason in self.malformed)
            parts.append(f"{_plural(len(self.malformed), 'malformed line')} ({details})")
        if self.encoding_errors:
            details = _listing(f"line {n}" for n in self.encoding_errors)
            count = len(self.encoding_errors)
            verb = "line" if count == 1 else "lines"
            parts.append(f"{count} {verb} not valid UTF-8 ({details})")
        return "; ".join(parts)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _listing(items) -> str:
    items = list(items)
    shown = "; ".join(items[:_MAX_LISTED])
    if len(items) > _MAX_LISTED:
        shown += f"; ... and {len(items) - _MAX_LISTED} more"
    return shown


def _read_source(source) -> tuple[bytes, str]:
    """Raw bytes and a display name from a path, bytes, or binary file-like object."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "<bytes>"
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return f.read(), os.path.basename(os.fspath(source))
    if hasattr(source, "read"):
        data = source.read()
        if isinstance(data, str):
            raise TypeError("file-like corpus must be opened in binary mode")
        return bytes(data), os.path.basename(str(getattr(source, "name", "<stream>")))
    raise TypeError(f"expected a path, bytes or binary file, got {type(source).__name__}")


def _line_problem(text: str) -> str | None:
    """Why a non-blank line cannot be used as a pair, or None if it can."""
    fields = text.split("\t")
    if len(fields) < 2:
        return "missing target column (no tab)"
    src, tgt = fields[0].strip(), fields[1].strip()
    if not src and not tgt:
        return "empty source and target"
    if not src:
        return "empty source"
    if not tgt:
        return "empty target"
    return None


def read_parallel_tsv(
    path_or_bytes: Union[str, os.PathLike, bytes, BinaryIO],
    *,
    name: str | None = None,
    strict: bool = False,
) -> ParallelCorpus:
    """Read ``source<TAB>target[<TAB>ignored...]`` lines into a ParallelCorpus.

    Blank lines are skipped and counted; lines without a tab or with an empty
    source or target are recorded in ``malformed``; lines that are not valid
    UTF-8 are recorded in ``encoding_errors``.  With ``strict=True`` the first
    such bad line raises CorpusError.  A corpus with no usable pair always
    raises CorpusError.  A UTF-8 BOM and CRLF line endings are accepted.
    """
    data, default_name = _read_source(path_or_bytes)
    name = name or default_name

    raw_lines = data.split(b"\n")  # safe on UTF-8: 0x0A never occurs inside a multibyte char
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the final newline ends the last line, it does not start a new one
    if raw_lines and raw_lines[0].startswith(_BOM):
        raw_lines[0] = raw_lines[0][len(_BOM):]

    corpus = ParallelCorpus(pairs=[], num_lines=len(raw_lines), num_blank=0, name=name)
    for lineno, raw in enumerate(raw_lines, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if strict:
                raise CorpusError(
                    f"{name} line {lineno}: not valid UTF-8 (byte offset {exc.start})"
                ) from None
            corpus.encoding_errors.append(lineno)
            continue
        # A whitespace-only line with a tab is a malformed pair, not a blank line.
        if not text.strip() and "\t" not in text:
            corpus.num_blank += 1
            continue
        problem = _line_problem(text)
        if problem is not None:
            if strict:
                raise CorpusError(f"{name} line {lineno}: {problem}")
            corpus.malformed.append((lineno, problem))
            continue
        fields = text.split("\t")
        corpus.pairs.append((fields[0].strip(), fields[1].strip()))

    if not corpus.pairs:
        raise CorpusError(f"no valid source/target pairs in {name}: {corpus.summary()}")
    return corpus
