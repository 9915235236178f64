"""The bundled model on dates as people type them (issue 24): a hand-written list of everyday
phrasings, not produced by the generator, every one translated right; and the generator itself:
every named format renders a date that an independent parser (below) reads back as that date."""

from __future__ import annotations

import datetime
import re

import pytest

from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.training import data

# (as typed, the date meant). Years stay in the task's 1900..2099.
EVERYDAY = [
    ("the 3rd of June 1999", "1999-06-03"),
    ("3rd June 1999", "1999-06-03"),
    ("June 3rd 1999", "1999-06-03"),
    ("the third of June 1999", "1999-06-03"),
    ("the 4th of July 1976", "1976-07-04"),
    ("4th July 1976", "1976-07-04"),
    ("July 4th, 1976", "1976-07-04"),
    ("2020-05-01", "2020-05-01"),
    ("Sept 11, 2001", "2001-09-11"),
    ("11 Sept 2001", "2001-09-11"),
    ("Tuesday, September 11, 2001", "2001-09-11"),
    ("thursday the twenty-first of march 2024", "2024-03-21"),
    ("1 jan 2000.", "2000-01-01"),
    ("January 1st, 2000", "2000-01-01"),
    ("Jan. 1, 2000", "2000-01-01"),
    ("the first of january 2000", "2000-01-01"),
    ("June twenty-first, 2001", "2001-06-21"),
    ("June twenty first 2001", "2001-06-21"),
    ("the thirty-first of December 1999", "1999-12-31"),
    ("Dec 25, 2020", "2020-12-25"),
    ("25 December 2020", "2020-12-25"),
    ("12/25/2020", "2020-12-25"),
    ("25/12/2020", "2020-12-25"),
    ("25.12.2020", "2020-12-25"),
    ("2020/12/25", "2020-12-25"),
    ("Fri, Mar 5, 2021", "2021-03-05"),
    ("Friday, March 5, 2021", "2021-03-05"),
    ("friday the 5th of march 2021", "2021-03-05"),
    ("5th of march 2021", "2021-03-05"),
    ("MARCH 5TH, 2021", "2021-03-05"),
    ("march 5 2021", "2021-03-05"),
    ("5 March, 2021", "2021-03-05"),
    ("  5 march 2021  ", "2021-03-05"),
    ("5  March  2021", "2021-03-05"),
    ("5th of March, 2021.", "2021-03-05"),
    ("Sep 1, 1939", "1939-09-01"),
    ("1st Sept 1939", "1939-09-01"),
    ("sept. 15, 2008", "2008-09-15"),
    ("15-Sep-2008", "2008-09-15"),
    ("Sept 30 2015", "2015-09-30"),
    ("the 30th of september 2015", "2015-09-30"),
    ("the 20th of July, 1969", "1969-07-20"),
    ("July 20th, 1969", "1969-07-20"),
    ("Sunday, July 20, 1969", "1969-07-20"),
    ("sun 20 jul 1969", "1969-07-20"),
    ("1969-07-20", "1969-07-20"),
    ("20.7.1969", "1969-07-20"),
    ("Nov 9th 1989", "1989-11-09"),
    ("9 November 1989", "1989-11-09"),
    ("the ninth of november 1989", "1989-11-09"),
    ("Thursday, November 9th, 1989", "1989-11-09"),
    ("11/22/1963", "1963-11-22"),
    ("22 nov 1963", "1963-11-22"),
    ("Friday 22nd November 1963", "1963-11-22"),
    ("the twenty-second of november 1963", "1963-11-22"),
    ("Feb 29, 2024", "2024-02-29"),
    ("29th February 2024", "2024-02-29"),
    ("2024-02-29", "2024-02-29"),
    ("Tues 14 May 2024", "2024-05-14"),
    ("tuesday, may 14, 2024", "2024-05-14"),
    ("May 14th 2024.", "2024-05-14"),
    ("the 14th of may, 2024", "2024-05-14"),
    ("31 Oct 2023", "2023-10-31"),
    ("October thirty-first, 2023", "2023-10-31"),
    ("2 April 2005", "2005-04-02"),
    ("april second, 2005", "2005-04-02"),
    ("the 2nd of april 2005", "2005-04-02"),
    ("2005/04/02", "2005-04-02"),
    ("02.04.2005", "2005-04-02"),
    ("Wed, Aug 8, 2012", "2012-08-08"),
    ("8th August 2012", "2012-08-08"),
    ("the 8th of aug 2012", "2012-08-08"),
    ("Saturday the 1st of June 2030", "2030-06-01"),
    ("june 1st, 2030", "2030-06-01"),
    ("Mon 1 Jan 1900", "1900-01-01"),
    ("Dec 31st 2099", "2099-12-31"),
    ("the twelfth of october 1992", "1992-10-12"),
    ("Thurs 12 Oct 2017", "2017-10-12"),
    ("14/07/1989", "1989-07-14"),
    ("07/14/1989", "1989-07-14"),
    # Days of the held-out split (never trained on in any format).
    ("Friday the 1st of May 2026", "2026-05-01"),
    ("may 1st 2026", "2026-05-01"),
    ("the 15th of April, 1993", "1993-04-15"),
    ("Thu 15 Apr 1993", "1993-04-15"),
    ("the sixteenth of may 2003", "2003-05-16"),
    ("16/05/2003", "2003-05-16"),
    ("Aug 6th, 1957", "1957-08-06"),
    ("tuesday 6 august 1957", "1957-08-06"),
    ("the eleventh of March 1905", "1905-03-11"),
    ("11th mar. 1905", "1905-03-11"),
    ("Nov 16, 2060", "2060-11-16"),
    ("2060-11-16", "2060-11-16"),
    ("October 9th, 2033", "2033-10-09"),
    ("9.10.2033", "2033-10-09"),
    # Year first with an unpadded month or day, or dots; one-digit month with a day after the 12th.
    ("2001/9/11", "2001-09-11"),
    ("2001-9-11", "2001-09-11"),
    ("2022.08.15", "2022-08-15"),
    ("2022.8.15", "2022-08-15"),
    ("1987/6/3", "1987-06-03"),
    ("2021 March 5", "2021-03-05"),
    ("3/25/2021", "2021-03-25"),
    ("25/3/2021", "2021-03-25"),
    ("7/14/1989", "1989-07-14"),
]

# ------------------------------------------------------------------ an independent date parser
_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december"]
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_SMALL = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
          "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
          "seventeenth", "eighteenth", "nineteenth", "twentieth"]
_SPELLED = {word: i + 1 for i, word in enumerate(_SMALL)}
_SPELLED.update({f"twenty {w}": 20 + i + 1 for i, w in enumerate(_SMALL[:9])})
_SPELLED.update({"thirtieth": 30, "thirty first": 31})
_SPELLED_RE = re.compile(r"\b(" + "|".join(sorted(_SPELLED, key=len, reverse=True)) + r")\b")


def parse(text: str) -> datetime.date | None:
    """The date a person meant, read without the generator: numbers by their shape (None for
    an ambiguous dd/mm vs mm/dd), words by name; a weekday must agree with the date."""
    t = " ".join(text.lower().replace(",", " ").split()).rstrip(".")
    if m := re.fullmatch(r"(\d{4})([-/.])(\d{1,2})\2(\d{1,2})", t):
        y, mo, d = map(int, m.group(1, 3, 4))
        return datetime.date(y, mo, d)
    if m := re.fullmatch(r"(\d{1,2})\.(\d{1,2})\.(\d{4})", t):
        d, mo, y = map(int, m.groups())
        return datetime.date(y, mo, d)
    if m := re.fullmatch(r"(\d{1,2})/(\d{1,2})/(\d{4})", t):
        a, b, y = map(int, m.groups())
        if (a > 12) == (b > 12):
            return None
        return datetime.date(y, b, a) if a > 12 else datetime.date(y, a, b)
    t = t.replace("-", " ")
    t = _SPELLED_RE.sub(lambda m: str(_SPELLED[m.group(1)]), t)
    day = month = year = weekday = None
    for word in t.split():
        word = word.rstrip(".")
        if re.fullmatch(r"\d{4}", word):
            year = int(word)
        elif m := re.fullmatch(r"(\d{1,2})(st|nd|rd|th)?", word):
            day = int(m.group(1))
        elif word in ("the", "of"):
            continue
        elif any(name.startswith(word) and len(word) >= 3 for name in _MONTHS) and \
                not any(name.startswith(word) for name in _WEEKDAYS):
            month = next(i for i, name in enumerate(_MONTHS, 1) if name.startswith(word))
        elif word == "sept":
            month = 9
        elif any(name.startswith(word) and len(word) >= 3 for name in _WEEKDAYS):
            weekday = next(i for i, name in enumerate(_WEEKDAYS) if name.startswith(word))
        else:
            return None
    if None in (day, month, year):
        return None
    date = datetime.date(year, month, day)
    return date if weekday in (None, date.weekday()) else None


def test_the_parser_reads_every_everyday_phrasing_as_meant():
    assert len(EVERYDAY) >= 60
    wrong = [(text, meant, parse(text)) for text, meant in EVERYDAY
             if parse(text) != datetime.date.fromisoformat(meant)]
    assert not wrong, wrong


def test_the_everyday_list_has_days_in_and_out_of_the_training_split():
    train, test = data.split_days(seed=0)
    ordinals = {datetime.date.fromisoformat(meant).toordinal() for _, meant in EVERYDAY}
    assert ordinals & set(train.tolist()) and ordinals & set(test.tolist())


@pytest.mark.parametrize("fmt", data.DATE_FORMATS)
def test_every_format_renders_and_parses_back_to_its_date(fmt):
    days = list(range(data.FIRST_DAY.toordinal(), data.LAST_DAY.toordinal() + 1, 331))
    days += [datetime.date(2001, 9, day).toordinal() for day in range(1, 31)]  # every ordinal
    days = [d for d in map(datetime.date.fromordinal, days)
            if fmt not in data.DAY_AFTER_12_FORMATS or d.day > 12]
    renderings = [(d, data.CASES[(i + j) % 4], (7 * i + 5 * j) % data.NUM_VARIANTS,
                   data.PUNCTUATION[(i + 2 * j) % 5]) for i, d in enumerate(days) for j in range(6)]
    renderings += [(days[-1], case, variant, kind) for case in data.CASES
                   for variant in range(data.NUM_VARIANTS) for kind in data.PUNCTUATION]
    for d, case, variant, kind in renderings:
        text = data.add_stray_punctuation(data.format_date(d, fmt, case, variant=variant), kind)
        assert parse(text) == d, (text, d)


def test_every_named_format_is_drawn_for_training_and_for_the_held_out_report():
    assert {f for _, _, f in data.date_examples(1000, seed=0)} == set(data.DATE_FORMATS)
    assert {f for _, _, f in data.held_out_date_examples(1, seed=0)} == set(data.DATE_FORMATS)


# ------------------------------------------------------------------ the bundled model
@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(DEFAULT_CHECKPOINT)


def test_the_bundled_model_translates_every_everyday_phrasing(bundled):
    wrong = [(text, meant, bundled.translate(text).text) for text, meant in EVERYDAY]
    wrong = [w for w in wrong if w[1] != w[2]]
    assert not wrong, f"{len(wrong)} of {len(EVERYDAY)} wrong: {wrong}"


def test_the_bundled_model_records_every_format_at_99_percent(bundled):
    per_format = bundled.metadata["held_out"]["per_format"]
    assert [row["format"] for row in per_format] == list(data.DATE_FORMATS)
    low = [row for row in per_format if row["exact_match"] < 0.99 or row["num_examples"] < 100]
    assert not low, low
