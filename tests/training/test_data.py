"""Tests for transformer.training.data: the dates task and the TSV corpus reader."""

import datetime
import io
import re

import numpy as np
import pytest

from transformer.training.data import (
    CASES,
    DATE_FORMATS,
    DAY_AFTER_12_FORMATS,
    NUM_VARIANTS,
    PUNCTUATION,
    CorpusError,
    ParallelCorpus,
    add_stray_punctuation,
    date_examples,
    date_pairs,
    format_date,
    held_out_date_examples,
    ordinal_suffix,
    read_parallel_tsv,
    spelled_ordinal,
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
    "the_dth_of_month_y": ("the 5th of march 2021", "the 5th of March 2021",
                           "THE 5TH OF MARCH 2021"),
    "the_dth_of_mon_y": ("the 5th of mar 2021", "the 5th of Mar 2021", "THE 5TH OF MAR 2021"),
    "dth_month_y": ("5th march 2021", "5th March 2021", "5TH MARCH 2021"),
    "dth_mon_y": ("5th mar 2021", "5th Mar 2021", "5TH MAR 2021"),
    "mon_dth_y": ("mar 5th, 2021", "Mar 5th, 2021", "MAR 5TH, 2021"),
    "the_nth_of_month_y": ("the fifth of march 2021", "the fifth of March 2021",
                           "THE FIFTH OF MARCH 2021"),
    "nth_of_month_y": ("fifth of march 2021", "fifth of March 2021", "FIFTH OF MARCH 2021"),
    "month_nth_y": ("march fifth, 2021", "March fifth, 2021", "MARCH FIFTH, 2021"),
    "weekday_the_dth_of_month_y": ("friday the 5th of march 2021",
                                   "Friday the 5th of March 2021",
                                   "FRIDAY THE 5TH OF MARCH 2021"),
    "weekday_the_nth_of_month_y": ("friday the fifth of march 2021",
                                   "Friday the fifth of March 2021",
                                   "FRIDAY THE FIFTH OF MARCH 2021"),
    "weekday_month_dth_y": ("friday, march 5th, 2021", "Friday, March 5th, 2021",
                            "FRIDAY, MARCH 5TH, 2021"),
    "weekday_dth_month_y": ("friday 5th march 2021", "Friday 5th March 2021",
                            "FRIDAY 5TH MARCH 2021"),
    "wkd_mon_d_y": ("fri, mar 5, 2021", "Fri, Mar 5, 2021", "FRI, MAR 5, 2021"),
    "wkd_d_mon_y": ("fri 5 mar 2021", "Fri 5 Mar 2021", "FRI 5 MAR 2021"),
    "iso": ("2021-03-05", "2021-03-05", "2021-03-05"),
    "d_m_yyyy": ("5.3.2021", "5.3.2021", "5.3.2021"),
    "dd_mon_yyyy": ("05-mar-2021", "05-Mar-2021", "05-MAR-2021"),
    "yyyy_m_d": ("2021/3/5", "2021/3/5", "2021/3/5"),
    "yyyy_m_d_dash": ("2021-3-5", "2021-3-5", "2021-3-5"),
    "yyyy_mm_dd_dot": ("2021.03.05", "2021.03.05", "2021.03.05"),
    "yyyy_m_d_dot": ("2021.3.5", "2021.3.5", "2021.3.5"),
    "y_month_d": ("2021 march 5", "2021 March 5", "2021 MARCH 5"),
}
# The formats that would be ambiguous for 2021-03-05: 2021-03-25 instead.
EXPECTED_2021_03_25 = {
    "dd_mm_yyyy_slash": "25/03/2021",
    "mm_dd_yyyy_slash": "03/25/2021",
    "d_m_yyyy_slash": "25/3/2021",
    "m_d_yyyy_slash": "3/25/2021",
}


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------


def test_constants():
    assert CASES == ("lower", "title", "upper", "sentence")
    assert len(DATE_FORMATS) == 36
    assert len(set(DATE_FORMATS)) == len(DATE_FORMATS)
    assert set(EXPECTED_2021_03_05) | set(EXPECTED_2021_03_25) == set(DATE_FORMATS)
    assert set(EXPECTED_2021_03_25) == set(DAY_AFTER_12_FORMATS)


@pytest.mark.parametrize("fmt", sorted(EXPECTED_2021_03_25))
def test_day_first_and_month_first_slashes_only_after_the_12th(fmt):
    for case in CASES:
        assert format_date(datetime.date(2021, 3, 25), fmt, case) == EXPECTED_2021_03_25[fmt]
    for day in (1, 5, 12):
        with pytest.raises(ValueError, match="ambiguous"):
            format_date(datetime.date(2021, 3, day), fmt, "lower")
    assert format_date(datetime.date(2021, 3, 13), fmt, "lower") in (
        "13/03/2021", "03/13/2021", "13/3/2021", "3/13/2021")


def test_sentence_case_capitalises_only_the_first_letter():
    d = datetime.date(2021, 3, 5)
    assert format_date(d, "the_dth_of_month_y", "sentence") == "The 5th of march 2021"
    assert format_date(d, "weekday_month_d_y", "sentence") == "Friday, march 5, 2021"
    assert format_date(d, "iso", "sentence") == "2021-03-05"


@pytest.mark.parametrize(
    "day, spelled",
    [(1, "first"), (2, "second"), (3, "third"), (5, "fifth"), (8, "eighth"), (9, "ninth"),
     (10, "tenth"), (11, "eleventh"), (12, "twelfth"), (13, "thirteenth"), (19, "nineteenth"),
     (20, "twentieth"), (21, "twenty-first"), (22, "twenty-second"), (23, "twenty-third"),
     (29, "twenty-ninth"), (30, "thirtieth"), (31, "thirty-first")],
)
def test_spelled_ordinals(day, spelled):
    assert spelled_ordinal(day) == spelled
    assert spelled_ordinal(day, hyphen=False) == spelled.replace("-", " ")


def test_spelled_ordinal_rejects_days_outside_1_to_31():
    for day in (0, 32):
        with pytest.raises(ValueError):
            spelled_ordinal(day)


def test_variants_spell_september_four_ways_and_twenty_first_two_ways():
    d = datetime.date(2001, 9, 21)  # a Friday
    mons = {format_date(d, "mon_d_y", "title", variant=v).split()[0] for v in range(NUM_VARIANTS)}
    assert mons == {"Sep", "Sept", "Sep.", "Sept."}
    assert format_date(d, "mon_d_y", "title") == "Sep 21, 2001"  # variant 0: the plain one
    nths = {format_date(d, "month_nth_y", "lower", variant=v) for v in range(NUM_VARIANTS)}
    assert nths == {"september twenty-first, 2001", "september twenty first, 2001"}
    # Dashed abbreviations never take a dot; May never does.
    dashed = {format_date(d, "dd_mon_yyyy", "title", variant=v) for v in range(NUM_VARIANTS)}
    assert dashed == {"21-Sep-2001", "21-Sept-2001"}
    may = {format_date(datetime.date(2001, 5, 3), "d_mon_y", "lower", variant=v)
           for v in range(NUM_VARIANTS)}
    assert may == {"3 may 2001"}
    thursday = datetime.date(2024, 3, 21)
    wkds = {format_date(thursday, "wkd_d_mon_y", "lower", variant=v).split()[0]
            for v in range(NUM_VARIANTS)}
    assert wkds == {"thu", "thur", "thurs"}


def test_stray_punctuation():
    text = "Friday, March 5, 2021"
    assert add_stray_punctuation(text, "none") == text
    assert add_stray_punctuation(text, "no_commas") == "Friday March 5 2021"
    assert add_stray_punctuation(text, "trailing_period") == text + "."
    assert add_stray_punctuation(text, "double_space") == "Friday,  March 5, 2021"
    assert add_stray_punctuation("5 March 2021", "extra_comma") == "5 March, 2021"
    assert add_stray_punctuation("Friday 5 March 2021", "extra_comma") == "Friday 5 March, 2021"
    assert add_stray_punctuation("Fri 5 Mar", "extra_comma") == "Fri, 5 Mar"
    assert add_stray_punctuation(text, "extra_comma") == text + ","  # commas everywhere already
    assert add_stray_punctuation("2021-03-05", "extra_comma") == "2021-03-05,"
    with pytest.raises(ValueError, match="unknown punctuation"):
        add_stray_punctuation(text, "shouting")


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
    for source, target, fmt in date_examples(500, seed=3):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", target)
        d = datetime.date.fromisoformat(target)
        assert FIRST <= d <= LAST
        assert source and (source != target or fmt in ("iso", "yyyy_m_d_dash"))  # 2021-12-25 either way


def _renderings(d, fmt):
    return {add_stray_punctuation(format_date(d, fmt, c, variant=v), k): c
            for c in CASES for v in range(NUM_VARIANTS) for k in PUNCTUATION}


def test_sources_render_their_target_date():
    for source, target, fmt in date_examples(300, seed=4, split="test"):
        assert source in _renderings(datetime.date.fromisoformat(target), fmt)
    assert [(s, t) for s, t, _ in date_examples(50, seed=4)] == date_pairs(50, seed=4)


def test_every_format_and_case_appears():
    examples = date_examples(3000, seed=0)
    assert {f for _, _, f in examples} == set(DATE_FORMATS)
    title = {format_date(datetime.date.fromisoformat(t), f, "title") for _, t, f in examples}
    sentence = {format_date(datetime.date.fromisoformat(t), f, "sentence")
                for _, t, f in examples}
    letters = ["".join(ch for ch in s if ch.isalpha()) for s, _, _ in examples]
    assert any(w.islower() for w in letters) and any(w.isupper() for w in letters)
    cleaned = {s.replace(",", "").replace(".", "").replace("  ", " ").strip()
               for s, _, _ in examples}
    assert {s.replace(",", "").replace(".", "") for s in title - sentence} & cleaned  # title
    assert {s.replace(",", "").replace(".", "") for s in sentence - title} & cleaned  # sentence


def test_stray_punctuation_appears_in_about_half_the_pairs():
    sources = [s for s, _, f in date_examples(2000, seed=1) if f == "weekday_month_d_y"]
    plain = sum(s.count(",") == 2 and "  " not in s and not s.endswith(".") for s in sources)
    assert 0.35 < plain / len(sources) < 0.75


def test_held_out_examples_have_every_format_in_equal_numbers_from_held_out_days():
    examples = held_out_date_examples(20, seed=0)
    assert [f for _, _, f in examples] == [f for f in DATE_FORMATS for _ in range(20)]
    test_days = set(split_days(seed=0)[1].tolist())
    for source, target, fmt in examples:
        d = datetime.date.fromisoformat(target)
        assert d.toordinal() in test_days
        assert source in _renderings(d, fmt)
    assert held_out_date_examples(20, seed=0) == examples


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
