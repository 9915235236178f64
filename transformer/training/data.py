"""Training data: the built-in "dates" task and a reader for TSV parallel corpora.

The dates task maps a calendar date written in one of several human formats
(e.g. "Friday, March 5, 2021") to its ISO 8601 form ("2021-03-05").  Calendar
days are split into disjoint train and held-out sets, so a held-out date is
never seen in training in any format.  Every drawn pair can also come with its gold word
alignment (date_alignment_examples: which source word writes the year, the month and the day
of the ISO date), for scoring how well attention heads align (transformer.analysis.alignment).

The corpus reader loads Tatoeba-style exports (``source<TAB>target[<TAB>...]``)
and reports every line it could not use instead of silently dropping it.
"""

from __future__ import annotations

import datetime
import functools
import os
import re
from dataclasses import dataclass, field
from typing import BinaryIO, Union

import numpy as np

__all__ = [
    "CASES",
    "DATE_FORMATS",
    "DAY_AFTER_12_FORMATS",
    "FIRST_DAY",
    "LAST_DAY",
    "CorpusError",
    "DateAlignment",
    "ISO_DATE_PARTS",
    "ISO_SEPARATORS",
    "ParallelCorpus",
    "NUM_VARIANTS",
    "PUNCTUATION",
    "add_stray_punctuation",
    "date_alignment",
    "date_alignment_examples",
    "date_examples",
    "date_pairs",
    "format_date",
    "held_out_date_alignments",
    "held_out_date_examples",
    "ordinal_suffix",
    "read_parallel_tsv",
    "spelled_ordinal",
    "split_days",
]

# --------------------------------------------------------------------------
# Dates task
# --------------------------------------------------------------------------

FIRST_DAY = datetime.date(1900, 1, 1)
LAST_DAY = datetime.date(2099, 12, 31)

# Format name -> template, each rendering 2021-03-05 (a Friday) as in the comment, in title case.
# Fields: {d} day, {dd} zero-padded day, {dth} 5th, {nth} spelled ordinal (fifth, twenty-first
# or twenty first), {m} month number, {mm} zero-padded, {month} March, {mon} Mar (Sep, Sept,
# Sept., ...), {weekday} Friday, {wkd} Fri, {y} year; "the" and "of" are written as they are.
_TEMPLATES = {
    "d_month_y": "{d} {month} {y}",  # 5 March 2021
    "d_mon_y": "{d} {mon} {y}",  # 5 Mar 2021
    "month_d_y": "{month} {d}, {y}",  # March 5, 2021
    "mon_d_y": "{mon} {d}, {y}",  # Mar 5, 2021
    "month_dth_y": "{month} {dth}, {y}",  # March 5th, 2021
    "weekday_month_d_y": "{weekday}, {month} {d}, {y}",  # Friday, March 5, 2021
    "weekday_d_month_y": "{weekday} {d} {month} {y}",  # Friday 5 March 2021
    "dd_mm_yyyy": "{dd}.{mm}.{y}",  # 05.03.2021
    "yyyy_mm_dd": "{y}/{mm}/{dd}",  # 2021/03/05
    "dth_of_month_y": "{dth} of {month} {y}",  # 5th of March 2021
    "the_dth_of_month_y": "the {dth} of {month} {y}",  # the 5th of March 2021
    "the_dth_of_mon_y": "the {dth} of {mon} {y}",  # the 5th of Mar 2021
    "dth_month_y": "{dth} {month} {y}",  # 5th March 2021
    "dth_mon_y": "{dth} {mon} {y}",  # 5th Mar 2021
    "mon_dth_y": "{mon} {dth}, {y}",  # Mar 5th, 2021
    "the_nth_of_month_y": "the {nth} of {month} {y}",  # the fifth of March 2021
    "nth_of_month_y": "{nth} of {month} {y}",  # fifth of March 2021
    "month_nth_y": "{month} {nth}, {y}",  # March fifth, 2021
    "weekday_the_dth_of_month_y": "{weekday} the {dth} of {month} {y}",  # Friday the 5th of March 2021
    "weekday_the_nth_of_month_y": "{weekday} the {nth} of {month} {y}",  # Friday the fifth of March 2021
    "weekday_month_dth_y": "{weekday}, {month} {dth}, {y}",  # Friday, March 5th, 2021
    "weekday_dth_month_y": "{weekday} {dth} {month} {y}",  # Friday 5th March 2021
    "wkd_mon_d_y": "{wkd}, {mon} {d}, {y}",  # Fri, Mar 5, 2021
    "wkd_d_mon_y": "{wkd} {d} {mon} {y}",  # Fri 5 Mar 2021
    "iso": "{y}-{mm}-{dd}",  # 2021-03-05
    "d_m_yyyy": "{d}.{m}.{y}",  # 5.3.2021
    "dd_mon_yyyy": "{dd}-{mon}-{y}",  # 05-Mar-2021
    "yyyy_m_d": "{y}/{m}/{d}",  # 2021/3/5
    "yyyy_m_d_dash": "{y}-{m}-{d}",  # 2021-3-5
    "yyyy_mm_dd_dot": "{y}.{mm}.{dd}",  # 2021.03.05
    "yyyy_m_d_dot": "{y}.{m}.{d}",  # 2021.3.5
    "y_month_d": "{y} {month} {d}",  # 2021 March 5
    "dd_mm_yyyy_slash": "{dd}/{mm}/{y}",  # 25/12/2021: only days after the 12th
    "mm_dd_yyyy_slash": "{mm}/{dd}/{y}",  # 12/25/2021: only days after the 12th
    "d_m_yyyy_slash": "{d}/{m}/{y}",  # 25/3/2021: only days after the 12th
    "m_d_yyyy_slash": "{m}/{d}/{y}",  # 3/25/2021: only days after the 12th
}
DATE_FORMATS = tuple(_TEMPLATES)
# Formats that would be ambiguous (day-first or month-first?) for the 1st to the 12th.
DAY_AFTER_12_FORMATS = (
    "dd_mm_yyyy_slash", "mm_dd_yyyy_slash", "d_m_yyyy_slash", "m_d_yyyy_slash",
)
CASES = ("lower", "title", "upper", "sentence")
# Stray punctuation people type, added to a share of the drawn pairs (see add_stray_punctuation).
PUNCTUATION = ("none", "no_commas", "extra_comma", "trailing_period", "double_space")
# Spelling choices inside one format (format_date's variant): 0 is the plain one.
NUM_VARIANTS = 24

# Fixed English tables rather than strftime, whose names depend on the locale.
_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)
_MONTH_ABBRS = tuple(m[:3] for m in _MONTHS)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_ABBRS = (("mon",), ("tue", "tues"), ("wed",), ("thu", "thur", "thurs"), ("fri",),
                  ("sat",), ("sun",))
_UNITS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
_TEENS = ("tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
          "seventeenth", "eighteenth", "nineteenth")


def ordinal_suffix(day: int) -> str:
    """English ordinal suffix for a day of the month: 1 -> "st", 12 -> "th", 22 -> "nd"."""
    if 11 <= day % 100 <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def spelled_ordinal(day: int, hyphen: bool = True) -> str:
    """1 -> "first", 21 -> "twenty-first" (or "twenty first"), 30 -> "thirtieth"; 1..31."""
    if not 1 <= day <= 31:
        raise ValueError(f"day must be in 1..31, got {day}")
    if day < 10:
        return _UNITS[day - 1]
    if day < 20:
        return _TEENS[day - 10]
    tens, unit = divmod(day, 10)
    if unit == 0:
        return ("twentieth", "thirtieth")[tens - 2]
    return ("twenty", "thirty")[tens - 2] + ("-" if hyphen else " ") + _UNITS[unit - 1]


def _month_abbr(month: int, variant: int) -> str:
    """Sep, Sept, Sep., Sept. for September; Mar or Mar. for the others (May never takes a dot)."""
    if month == 9:
        return ("sep", "sept", "sep.", "sept.")[variant % 4]
    abbr = _MONTH_ABBRS[month - 1]
    return abbr + "." if variant % 2 and abbr != "may" else abbr


def format_date(d: datetime.date, fmt: str, case: str = "title", *, variant: int = 0) -> str:
    """Render ``d`` in format ``fmt`` (one of DATE_FORMATS) and ``case`` (one of CASES).

    "title" capitalises month and weekday names only; ordinal suffixes, spelled ordinals, "the"
    and "of" stay lower case ("the 5th of March 2021").  "upper" upper-cases every letter,
    "lower" none, "sentence" only the first.  Numeric formats are the same in every case.
    ``variant`` (0..NUM_VARIANTS-1) picks among spellings people use: month abbreviations with
    or without a dot and Sep/Sept, "twenty-first" or "twenty first", Thu/Thur/Thurs; variant 0
    is the plain one (Sep, twenty-first, Thu).  The formats of DAY_AFTER_12_FORMATS refuse a day
    from the 1st to the 12th (ValueError), where they would be ambiguous.
    """
    if fmt not in _TEMPLATES:
        raise ValueError(f"unknown date format {fmt!r}; expected one of {DATE_FORMATS}")
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; expected one of {CASES}")
    if fmt in DAY_AFTER_12_FORMATS and d.day <= 12:
        raise ValueError(f"format {fmt!r} is ambiguous for day {d.day}: only days after the 12th")

    def name(word: str) -> str:  # month and weekday names
        return word.capitalize() if case == "title" else word

    wkd_choices = _WEEKDAY_ABBRS[d.weekday()]
    text = _TEMPLATES[fmt].format(
        d=d.day, dd=f"{d.day:02d}", dth=f"{d.day}{ordinal_suffix(d.day)}",
        nth=spelled_ordinal(d.day, hyphen=(variant // 4) % 2 == 0), m=d.month,
        mm=f"{d.month:02d}", month=name(_MONTHS[d.month - 1]),
        mon=name(_month_abbr(d.month, variant).rstrip(".") if fmt == "dd_mon_yyyy"
                 else _month_abbr(d.month, variant)), weekday=name(_WEEKDAYS[d.weekday()]),
        wkd=name(wkd_choices[(variant // 8) % len(wkd_choices)]), y=f"{d.year:04d}")
    if case == "upper":
        return text.upper()
    if case == "sentence":
        return text[:1].upper() + text[1:]
    return text


def add_stray_punctuation(text: str, kind: str) -> str:
    """``text`` as people also type it: "no_commas", an "extra_comma" (before the year, or after
    the first word), a "trailing_period", a "double_space" (or "none")."""
    if kind == "none":
        return text
    if kind == "no_commas":
        return text.replace(",", "")
    if kind == "trailing_period":
        return text + "."
    if kind == "double_space":
        return text.replace(" ", "  ", 1) if " " in text else " " + text + " "
    if kind != "extra_comma":
        raise ValueError(f"unknown punctuation {kind!r}; expected one of {PUNCTUATION}")
    words = text.split(" ")
    if len(words) >= 3 and words[-1].isdigit() and not words[-2].endswith(","):
        return " ".join(words[:-2] + [words[-2] + ","] + words[-1:])
    if len(words) >= 2 and not words[0].endswith(","):
        return " ".join([words[0] + ","] + words[1:])
    return text + ","


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


def _check_split(split: str, n: int) -> None:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")


def _draw_choices(rng, days: np.ndarray, formats) -> list[tuple[datetime.date, str, str, int, str]]:
    """One (date, format, case, variant, punctuation) per entry of ``formats``: day, case,
    variant and punctuation drawn from ``rng`` (half the pairs keep their punctuation as
    rendered). _render renders them; date_alignment_examples records their gold alignments."""
    out = []
    for fmt in formats:
        while True:
            d = datetime.date.fromordinal(int(days[rng.integers(len(days))]))
            if fmt not in DAY_AFTER_12_FORMATS or d.day > 12:
                break
        case = CASES[rng.integers(len(CASES))]
        variant = int(rng.integers(NUM_VARIANTS))
        kind = "none" if rng.random() < 0.5 else PUNCTUATION[1 + rng.integers(len(PUNCTUATION) - 1)]
        out.append((d, fmt, case, variant, kind))
    return out


def _render(choices) -> list[tuple[str, str, str]]:
    """One (source, ISO target, format) per drawn choice (see _draw_choices)."""
    return [(add_stray_punctuation(format_date(d, fmt, case, variant=variant), kind),
             d.isoformat(), fmt) for d, fmt, case, variant, kind in choices]


def date_examples(
    n: int,
    *,
    seed: int = 0,
    split: str = "train",
    held_out_fraction: float = 0.05,
) -> list[tuple[str, str, str]]:
    """Draw ``n`` (source, ISO target, format name) triples from the ``split`` days.

    Format, day (one after the 12th for DAY_AFTER_12_FORMATS), case, spelling variant and stray
    punctuation are each drawn uniformly.  The same arguments always give the same list.
    """
    return _render(_example_choices(n, seed, split, held_out_fraction))


def date_pairs(
    n: int,
    *,
    seed: int = 0,
    split: str = "train",
    held_out_fraction: float = 0.05,
) -> list[tuple[str, str]]:
    """``date_examples`` without the format names: ``n`` (source, ISO target) pairs."""
    return [(s, t) for s, t, _ in date_examples(n, seed=seed, split=split,
                                                  held_out_fraction=held_out_fraction)]


def held_out_date_examples(
    per_format: int,
    *,
    seed: int = 0,
    held_out_fraction: float = 0.05,
) -> list[tuple[str, str, str]]:
    """``per_format`` (source, ISO target, format name) triples of every format, drawn from the
    held-out days: the set that measures each format's accuracy."""
    return _render(_held_out_choices(per_format, seed, held_out_fraction))


def _example_choices(n: int, seed: int, split: str, held_out_fraction: float):
    """What date_examples draws, before it is rendered (see _draw_choices)."""
    _check_split(split, n)
    train, test = split_days(seed, held_out_fraction)
    days = train if split == "train" else test
    # A stream separate from split_days' own, and different per split, so the
    # two splits are not sampled in lockstep.
    rng = np.random.default_rng([seed, 1 if split == "train" else 2])
    fmt_idx = rng.integers(len(DATE_FORMATS), size=n)
    return _draw_choices(rng, days, [DATE_FORMATS[i] for i in fmt_idx])


def _held_out_choices(per_format: int, seed: int, held_out_fraction: float):
    """What held_out_date_examples draws, before it is rendered (see _draw_choices)."""
    _check_split("test", per_format)
    days = split_days(seed, held_out_fraction)[1]
    rng = np.random.default_rng([seed, 3])
    return _draw_choices(rng, days, [fmt for fmt in DATE_FORMATS for _ in range(per_format)])


# --------------------------------------------------------------------------
# Gold word alignments of the dates task
# --------------------------------------------------------------------------
#
# The generator knows which source word writes each date part, so every drawn pair comes with
# the alignment an annotator would give it (for scoring how well attention heads align: AER,
# transformer.analysis.alignment). Pharaoh's conventions: links are (source word, target word)
# pairs of 0-based indices, "sure" links and "possible" ones (possible includes sure).
#
# Source words: the source split at whitespace (str.split()), punctuation staying on its word
# ("Friday," is one word): what the app's word merging gives for the bundled model's source
# tokenizer (a word starts at each "▁").
# Target words: the characters of the ISO date, "2021-03-05" -> 2 0 2 1 - 0 3 - 0 5 (indices
# 0..9): the bundled model's target tokenizer writes one piece per character after a bare "▁",
# so its pieces (special tokens and the bare "▁" left out) are these characters; the ISO date is
# one whitespace word, which would leave nothing to align.
#
# Links, by what each source word writes (one word may write several parts: "05.03.2021"):
#   sure      the year -> the year digits 0-3; the month (name, abbreviation or number) -> the
#             month digits 5-6; the day (number, "5th", "fifth", both words of "twenty first")
#             -> the day digits 8-9
#   possible  the hyphen 4 -> the words writing the year or the month, the hyphen 7 -> those
#             writing the month or the day (a separator belongs to the parts it separates);
#             "the" (of "the 5th") -> the day digits; "of" (between day and month) -> the day
#             and month digits
#   none      the weekday: it follows from the date and writes no character of it (a head that
#             looks at it while writing a digit is counted wrong)

ISO_DATE_PARTS = {"year": (0, 1, 2, 3), "month": (5, 6), "day": (8, 9)}  # target characters
ISO_SEPARATORS = {4: ("year", "month"), 7: ("month", "day")}  # the hyphens: what they separate
_FIELD_PARTS = {"d": "day", "dd": "day", "dth": "day", "nth": "day", "m": "month", "mm": "month",
                "month": "month", "mon": "month", "y": "year", "weekday": "weekday",
                "wkd": "weekday"}
_FUNCTION_WORD_PARTS = {"the": ("day",), "of": ("day", "month")}  # possible links only
_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class DateAlignment:
    """A drawn date pair with its gold word alignment (see the section's comment above).

    sure and possible: frozensets of (source word index, target word index); possible includes
    sure. source_parts[j]: the date parts source word j writes ("year", "month", "day",
    "weekday", "the", "of")."""

    source: str
    target: str  # the ISO date
    fmt: str
    source_words: tuple[str, ...]
    target_words: tuple[str, ...]  # the ISO date's characters
    source_parts: tuple[tuple[str, ...], ...]
    sure: frozenset[tuple[int, int]]
    possible: frozenset[tuple[int, int]]

    def pharaoh(self) -> str:
        """The alignment as one line of Pharaoh text: "j-i" sure, "j?i" possible only."""
        links = [(j, i, "-") for j, i in self.sure]
        links += [(j, i, "?") for j, i in self.possible - self.sure]
        return " ".join(f"{j}{mark}{i}" for j, i, mark in sorted(links))


def _template_word_parts(fmt: str) -> list[tuple[str, ...]]:
    """The date parts each space-separated word of fmt's template writes."""
    parts = []
    for word in _TEMPLATES[fmt].split(" "):
        fields = _FIELD.findall(word)
        parts.append(tuple(dict.fromkeys(_FIELD_PARTS[f] for f in fields)) if fields
                     else (word,))  # a literal word: "the" or "of"
    return parts


def date_alignment(d: datetime.date, fmt: str, case: str = "title", *, variant: int = 0,
                   punctuation: str = "none") -> DateAlignment:
    """The source add_stray_punctuation(format_date(d, fmt, case, variant=variant),
    punctuation), its ISO target and their gold word alignment (see DateAlignment).

    Only a spelled ordinal may render as two words ("twenty first", by the variant): both write
    the day. Case and stray punctuation never move a word boundary."""
    source = add_stray_punctuation(format_date(d, fmt, case, variant=variant), punctuation)
    rendered = format_date(d, fmt, case, variant=variant).split(" ")
    source_parts: list[tuple[str, ...]] = []
    for template_word, parts in zip(_TEMPLATES[fmt].split(" "), _template_word_parts(fmt)):
        extra = len(rendered) - len(_TEMPLATES[fmt].split(" ")) if "{nth}" in template_word else 0
        source_parts.extend([parts] * (1 + extra))
    source_words = tuple(source.split())
    if len(source_words) != len(source_parts):  # a template or punctuation this code misreads
        raise AssertionError(f"{source!r} has {len(source_words)} words but format {fmt!r} "
                             f"gives parts for {len(source_parts)}")
    target = d.isoformat()
    sure, possible = set(), set()
    for j, parts in enumerate(source_parts):
        for part in parts:
            sure.update((j, i) for i in ISO_DATE_PARTS.get(part, ()))
            for linked in _FUNCTION_WORD_PARTS.get(part, ()):
                possible.update((j, i) for i in ISO_DATE_PARTS[linked])
        for i, sides in ISO_SEPARATORS.items():
            if set(parts) & set(sides):
                possible.add((j, i))
    return DateAlignment(source=source, target=target, fmt=fmt, source_words=source_words,
                         target_words=tuple(target), source_parts=tuple(source_parts),
                         sure=frozenset(sure), possible=frozenset(possible | sure))


def date_alignment_examples(
    n: int,
    *,
    seed: int = 0,
    split: str = "train",
    held_out_fraction: float = 0.05,
) -> list[DateAlignment]:
    """date_examples(n, ...) with their gold alignments: the same draws, so entry k's source,
    target and format are date_examples(n, ...)[k]'s."""
    return [date_alignment(d, fmt, case, variant=variant, punctuation=kind)
            for d, fmt, case, variant, kind in _example_choices(n, seed, split, held_out_fraction)]


def held_out_date_alignments(
    per_format: int,
    *,
    seed: int = 0,
    held_out_fraction: float = 0.05,
) -> list[DateAlignment]:
    """held_out_date_examples(per_format, ...) with their gold alignments (the same draws)."""
    return [date_alignment(d, fmt, case, variant=variant, punctuation=kind)
            for d, fmt, case, variant, kind in _held_out_choices(per_format, seed,
                                                                 held_out_fraction)]


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
