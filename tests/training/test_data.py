"""Tests for transformer.training.data: the dates task and the TSV corpus reader."""

import datetime
import io
import re

import numpy as np
import pytest

from transformer.training.data import (
    CASES,
    DATE_FORMATS,
    CorpusError,
    ParallelCorpus,
    date_pairs,
    format_date,
    ordinal_suffix,
    read_parallel_tsv,
    split_days,
)

NUM_DAYS = 73049  # 1900-01-01 .. 2099-12-31 inclusive
FIRST = datetime.date(1900, 1, 1)
LAST = datetime.date(2099, 12, 31)

# 2021-03-05 is a Friday; hand-written renderings in lower, title, upper case.
EXPECTED_2021_03_05 = {
    "d_month_y": ("5 march 2021", "5 March 2021", "5 MARCH 2021"),
    "d_mon_y": ("5 mar 2021", "5 Mar 2021", "5 MAR 2021"),
    "month_d_y": ("march 5, 2021", "March 5, 2021", "MARCH 5, 2021"),
    "mon_d_y": ("mar 5, 2021", "Mar 5, 2021", "MAR 5, 2021"),
    "month_dth_y": ("march 5th, 2021", "March 5th, 2021", "MARCH 5TH, 2021"),
    "weekday_month_d_y": (
        "friday, march 5, 2021",
        "Friday, March 5, 2021",
        "FRIDAY, MARCH 5, 2021",
    ),
    "weekday_d_month_y": ("friday 5 march 2021", "Friday 5 March 2021", "FRIDAY 5 MARCH 2021"),
    "dd_mm_yyyy": ("05.03.2021", "05.03.2021", "05.03.2021"),
    "yyyy_mm_dd": ("2021/03/05", "2021/03/05", "2021/03/05"),
    "dth_of_month_y": ("5th of march 2021", "5th of March 2021", "5TH OF MARCH 2021"),
}


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------


def test_constants():
    assert CASES == ("lower", "title", "upper")
    assert len(DATE_FORMATS) == 10
    assert len(set(DATE_FORMATS)) == len(DATE_FORMATS)
    assert set(EXPECTED_2021_03_05) == set(DATE_FORMATS)


@pytest.mark.parametrize("fmt", sorted(EXPECTED_2021_03_05))
def test_format_date_exact(fmt):
    d = datetime.date(2021, 3, 5)
    for case, expected in zip(CASES, EXPECTED_2021_03_05[fmt]):
        assert format_date(d, fmt, case) == expected, (fmt, case)


@pytest.mark.parametrize(
    "day, suffix",
    [(1, "st"), (2, "nd"), (3, "rd"), (4, "th"), (11, "th"), (12, "th"), (13, "th"),
     (21, "st"), (22, "nd"), (23, "rd"), (24, "th"), (30, "th"), (31, "st")],
)
def test_ordinal_suffix(day, suffix):
    assert ordinal_suffix(day) == suffix
    d = datetime.date(2020, 1, day)
    assert format_date(d, "month_dth_y", "lower") == f"january {day}{suffix}, 2020"
    assert format_date(d, "dth_of_month_y", "upper") == f"{day}{suffix.upper()} OF JANUARY 2020"


def test_all_month_abbreviations():
    abbrs = [format_date(datetime.date(2001, m, 1), "d_mon_y", "title").split()[1]
             for m in range(1, 13)]
    assert abbrs == ["Jan", "Feb", "Mar", "Apr", "May", "Jun",
                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


@pytest.mark.parametrize(
    "ymd, weekday",
    [((1900, 1, 1), "Monday"), ((2000, 2, 29), "Tuesday"), ((1969, 7, 20), "Sunday"),
     ((2099, 12, 31), "Thursday"), ((2021, 3, 5), "Friday")],
)
def test_weekday_is_true_weekday(ymd, weekday):
    d = datetime.date(*ymd)
    assert format_date(d, "weekday_month_d_y", "title").startswith(weekday + ", ")
    assert format_date(d, "weekday_d_month_y", "lower").startswith(weekday.lower() + " ")


def test_numeric_formats_zero_pad_edge_dates():
    assert format_date(FIRST, "dd_mm_yyyy", "lower") == "01.01.1900"
    assert format_date(LAST, "yyyy_mm_dd", "upper") == "2099/12/31"


def test_format_date_rejects_bad_format_and_case():
    d = datetime.date(2021, 3, 5)
    with pytest.raises(ValueError, match="nope"):
        format_date(d, "nope", "lower")
    with pytest.raises(ValueError, match="shouting"):
        format_date(d, "d_month_y", "shouting")


# --------------------------------------------------------------------------
# Split and sampling
# --------------------------------------------------------------------------


def test_split_days_disjoint_and_covering():
    train, test = split_days(seed=0, held_out_fraction=0.05)
    assert len(np.intersect1d(train, test)) == 0
    union = np.union1d(train, test)
    assert len(union) == NUM_DAYS
    assert union[0] == FIRST.toordinal() and union[-1] == LAST.toordinal()
    assert len(test) == round(0.05 * NUM_DAYS)


def test_split_days_depends_on_seed_and_is_deterministic():
    a_train, a_test = split_days(seed=1)
    b_train, b_test = split_days(seed=1)
    assert np.array_equal(a_test, b_test) and np.array_equal(a_train, b_train)
    assert not np.array_equal(split_days(seed=2)[1], a_test)


def test_split_days_rejects_bad_fraction():
    for fraction in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            split_days(seed=0, held_out_fraction=fraction)


def test_targets_are_iso_and_in_range():
    for source, target in date_pairs(500, seed=3):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", target)
        d = datetime.date.fromisoformat(target)
        assert FIRST <= d <= LAST
        assert source and source != target


def test_sources_render_their_target_date():
    for source, target in date_pairs(300, seed=4, split="test"):
        d = datetime.date.fromisoformat(target)
        assert source in {format_date(d, f, c) for f in DATE_FORMATS for c in CASES}


def test_every_format_and_case_appears():
    seen = set()
    for source, target in date_pairs(3000, seed=0):
        d = datetime.date.fromisoformat(target)
        for fmt in DATE_FORMATS:
            for case in CASES:
                if format_date(d, fmt, case) == source:
                    seen.add((fmt, case))
    assert seen == {(f, c) for f in DATE_FORMATS for c in CASES}


def test_date_pairs_deterministic_and_seed_dependent():
    assert date_pairs(200, seed=7) == date_pairs(200, seed=7)
    assert date_pairs(200, seed=7, split="test") == date_pairs(200, seed=7, split="test")
    assert date_pairs(200, seed=7) != date_pairs(200, seed=8)
    assert date_pairs(200, seed=7) != date_pairs(200, seed=7, split="test")
    assert date_pairs(0) == []


@pytest.mark.parametrize("seed", [0, 5])
def test_held_out_days_never_in_training(seed):
    train, test = split_days(seed=seed)
    train_set, test_set = set(train.tolist()), set(test.tolist())
    test_days = {datetime.date.fromisoformat(t).toordinal()
                 for _, t in date_pairs(1000, seed=seed, split="test")}
    train_days = {datetime.date.fromisoformat(t).toordinal()
                  for _, t in date_pairs(3000, seed=seed, split="train")}
    assert test_days <= test_set
    assert train_days <= train_set
    assert not test_days & train_days


def test_date_pairs_rejects_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        date_pairs(10, split="validation")
    with pytest.raises(ValueError):
        date_pairs(-1)


# --------------------------------------------------------------------------
# TSV corpus reader
# --------------------------------------------------------------------------

# Line numbers (1-based):            reason
CRAFTED = b"".join([
    b"\xef\xbb\xbfGo.\tVa !\r\n",  # 1 ok, BOM stripped
    b"Hi.\tSalut !\tCC-BY 2.0 (France) Attribution: tatoeba.org\r\n",  # 2 ok, 3rd column dropped
    b"\r\n",  # 3 blank
    b"no tab here\r\n",  # 4 missing target column
    b"Run!\t   \r\n",  # 5 empty target
    b"\t\xc3\x89coute.\n",  # 6 empty source
    b"Caf\xe9\tbad latin-1 byte\n",  # 7 not UTF-8
    b"   \n",  # 8 blank (whitespace only)
    b"Who?\tQui ?\n",  # 9 ok, LF ending
    b"\xc3\x89t\xc3\xa9.\t\xc3\x89t\xc3\xa9 !",  # 10 ok, no final newline
])


def test_reader_exact_counts_on_crafted_file(tmp_path):
    path = tmp_path / "fra.txt"
    path.write_bytes(CRAFTED)
    corpus = read_parallel_tsv(path)
    assert isinstance(corpus, ParallelCorpus)
    assert corpus.pairs == [("Go.", "Va !"), ("Hi.", "Salut !"), ("Who?", "Qui ?"),
                            ("Été.", "Été !")]
    assert corpus.num_lines == 10
    assert corpus.num_blank == 2
    assert [n for n, _ in corpus.malformed] == [4, 5, 6]
    reasons = dict(corpus.malformed)
    assert "missing target" in reasons[4]
    assert "empty target" in reasons[5]
    assert "empty source" in reasons[6]
    assert corpus.encoding_errors == [7]
    assert corpus.name == "fra.txt"
    assert corpus.num_skipped == 6
    assert len(corpus.pairs) + corpus.num_skipped == corpus.num_lines


def test_reader_summary_is_one_line_report():
    summary = read_parallel_tsv(CRAFTED, name="corpus.tsv").summary()
    assert "\n" not in summary
    assert summary.startswith("read 4 pairs from corpus.tsv; skipped 2 blank lines; ")
    assert "3 malformed lines (line 4: missing target column" in summary
    assert "line 5: empty target" in summary
    assert summary.endswith("1 line not valid UTF-8 (line 7)")


def test_reader_clean_file_summary_and_inputs():
    data = "a\tb\nc\td\n".encode()
    corpus = read_parallel_tsv(io.BytesIO(data), name="clean.tsv")
    assert corpus.pairs == [("a", "b"), ("c", "d")]
    assert corpus.summary() == "read 2 pairs from clean.tsv"
    assert read_parallel_tsv(bytearray(data)).pairs == corpus.pairs


@pytest.mark.parametrize(
    "data, line",
    [(CRAFTED, 4), (b"a\tb\n\xff\xfe\tx\n", 2), (b"a\tb\nc\t\n", 2), (b"a\n", 1)],
)
def test_reader_strict_raises_with_first_bad_line(data, line):
    with pytest.raises(CorpusError, match=rf"\bline {line}\b"):
        read_parallel_tsv(data, strict=True)


def test_reader_strict_accepts_clean_file_with_blanks():
    corpus = read_parallel_tsv(b"\xef\xbb\xbfa\tb\r\n\r\nc\td\r\n", strict=True)
    assert corpus.pairs == [("a", "b"), ("c", "d")]
    assert corpus.num_blank == 1


@pytest.mark.parametrize("data", [b"", b"\n\n", b"only source\n\tx\n"])
def test_reader_without_pairs_raises(data):
    with pytest.raises(CorpusError, match="no valid"):
        read_parallel_tsv(data, name="empty.tsv")


def test_corpus_error_is_value_error():
    assert issubclass(CorpusError, ValueError)
