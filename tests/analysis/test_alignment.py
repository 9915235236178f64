"""transformer.analysis.alignment (AER, precision and recall against an oracle written from Och &
Ney's equation; the Pharaoh reader's refusals; what a head predicts, on hand-made maps) and the
gold alignments the dates generator records (transformer.training.data), then every head of the
bundled model ranked against them."""

import datetime
import hashlib
import itertools
import json

import numpy as np
import pytest

from transformer.analysis import alignment
from transformer.analysis.alignment import (
    MAX_ALIGNMENT_BYTES,
    MAX_ALIGNMENT_SENTENCES,
    MAX_LINKS_PER_SENTENCE,
    MAX_WORD_INDEX,
    AlignedPair,
    AlignmentError,
    AlignmentScores,
    GoldAlignment,
    aligned_pairs,
    alignment_error_rate,
    alignment_scores,
    alignment_statistics,
    argmax_alignment,
    corpus_alignment_scores,
    head_alignment,
    parse_pharaoh,
    rank_heads,
    word_alignment_maps,
)
from transformer.training.data import (
    CASES,
    DATE_FORMATS,
    DAY_AFTER_12_FORMATS,
    NUM_VARIANTS,
    PUNCTUATION,
    date_alignment,
    date_alignment_examples,
    date_examples,
    held_out_date_alignments,
    held_out_date_examples,
)


# ---------------------------------------------------------------- the measures, against an oracle
def oracle(a, s, p):
    """Och & Ney (2000), written out: P includes S; precision |A&P|/|A|, recall |A&S|/|S|,
    AER = 1 - (|A&S| + |A&P|) / (|A| + |S|)."""
    a, s = set(a), set(s)
    p = set(p) | s
    return (1 - (len(a & s) + len(a & p)) / (len(a) + len(s)), len(a & p) / len(a),
            len(a & s) / len(s))


def scores(a, s, p):
    out = alignment_scores(a, s, p)
    return out.aer, out.precision, out.recall


S = {(0, 0), (1, 1), (2, 2)}
P = S | {(1, 2), (3, 2)}


def test_a_perfect_aligner_scores_aer_0():
    assert alignment_error_rate(S, S, P) == 0.0
    assert scores(S, S, P) == (0.0, 1.0, 1.0)
    # possible links claimed besides every sure one cost nothing
    assert scores(S | {(3, 2)}, S, P) == (0.0, 1.0, 1.0)


@pytest.mark.parametrize("predicted, expected", [
    # |A&S| = 1, |A&P| = 2, |A| = 4, |S| = 3: AER 1 - 3/7, precision 2/4, recall 1/3
    ({(0, 0), (1, 2), (2, 1), (4, 4)}, (4 / 7, 0.5, 1 / 3)),
    # only a possible link: |A&S| = 0, |A&P| = 1, |A| = 1, |S| = 3: AER 1 - 1/4
    ({(3, 2)}, (0.75, 1.0, 0.0)),
    # two sure links of three and one wrong: |A&S| = 2, |A&P| = 2, |A| = 3: AER 1 - 4/6
    ({(0, 0), (1, 1), (2, 0)}, (1 / 3, 2 / 3, 2 / 3)),
    ({(5, 5), (6, 6)}, (1.0, 0.0, 0.0)),  # nothing in P
])
def test_hand_computed_scores_equal_the_oracle(predicted, expected):
    assert scores(predicted, S, P) == pytest.approx(expected, abs=1e-12)
    assert scores(predicted, S, P) == pytest.approx(oracle(predicted, S, P), abs=1e-12)


def test_random_alignments_equal_the_oracle():
    rng = np.random.default_rng(0)
    cells = list(itertools.product(range(5), range(6)))
    for _ in range(300):
        def pick(k):
            return {cells[i] for i in rng.choice(len(cells), size=k, replace=False)}
        a, s = pick(int(rng.integers(1, 12))), pick(int(rng.integers(1, 8)))
        p = pick(int(rng.integers(0, 8))) | s
        aer, precision, recall = scores(a, s, p)
        assert 0.0 <= aer <= 1.0
        assert (aer, precision, recall) == pytest.approx(oracle(a, s, p), abs=1e-12)
        assert scores(a, s, p - s) == (aer, precision, recall)  # sure links count as possible


def test_the_empty_cases_are_defined():
    assert scores(set(), set(), set()) == (0.0, 1.0, 1.0)  # nothing to find, nothing claimed
    assert scores(set(), set(), {(0, 0)}) == (0.0, 1.0, 1.0)
    assert scores(set(), S, P) == (1.0, 1.0, 0.0)  # nothing claimed: no wrong link, none found
    assert scores({(0, 0)}, set(), set()) == (1.0, 0.0, 1.0)  # nothing to find, one wrong
    assert scores({(0, 0)}, set(), {(0, 0)}) == (0.0, 1.0, 1.0)
    assert alignment_error_rate(S, S) == 0.0  # possible None: the sure links only


def test_a_corpus_sums_its_counts_before_dividing():
    sentences = [({(0, 0)}, {(0, 0)}, set()), ({(0, 1), (1, 0), (2, 2)}, {(0, 0), (1, 1), (2, 2)},
                                               {(0, 1)})]
    total = corpus_alignment_scores(sentences)
    assert total == AlignmentScores(predicted=4, sure=4, predicted_sure=2, predicted_possible=3)
    pooled_a = {(k, j, i) for k, (a, _, _) in enumerate(sentences) for j, i in a}
    pooled_s = {(k, j, i) for k, (_, s, _) in enumerate(sentences) for j, i in s}
    pooled_p = {(k, j, i) for k, (_, s, p) in enumerate(sentences) for j, i in p | s}
    assert (total.aer, total.precision, total.recall) == pytest.approx(
        oracle(pooled_a, pooled_s, pooled_p))
    assert total.aer == pytest.approx(1 - 5 / 8)


@pytest.mark.parametrize("bad, error", [([(0,)], TypeError), ([(0, 1, 2)], TypeError),
                                        ([(0.5, 1)], TypeError), ([(-1, 0)], ValueError),
                                        ([(True, 0)], TypeError), ([3], TypeError)])
def test_links_must_be_pairs_of_indices(bad, error):
    with pytest.raises(error):
        alignment_scores(bad, S, P)


# ---------------------------------------------------------------- Pharaoh text
def test_pharaoh_lines_become_sure_and_possible_links():
    text = "0-0 1-2 2?1\n\n3-3 3?3  0?1\t1-1\n"
    gold = parse_pharaoh(text)
    assert gold == [GoldAlignment(frozenset({(0, 0), (1, 2)}), frozenset({(2, 1)})),
                    GoldAlignment(frozenset(), frozenset()),
                    GoldAlignment(frozenset({(3, 3), (1, 1)}), frozenset({(0, 1)}))]
    assert gold[0].possible == {(0, 0), (1, 2), (2, 1)}  # possible includes sure
    assert gold[2].sure == {(3, 3), (1, 1)}  # a link given both ways is sure
    as_bytes = parse_pharaoh(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    assert as_bytes == gold
    assert parse_pharaoh("") == [] and parse_pharaoh("\n") == [GoldAlignment(set(), set())]
    assert parse_pharaoh(f"{MAX_WORD_INDEX}-0")[0].sure == {(MAX_WORD_INDEX, 0)}


@pytest.mark.parametrize("text, sentence", [
    ("0-0\n0-99999999999999999999", "line 2: word index '99999999999999999999' in "
     "'0-99999999999999999999' is larger than any sentence a model reads (indices up to 511)"),
    (f"{MAX_WORD_INDEX + 1}?0", "line 1: word index '512' in '512?0' is larger than any "
     "sentence a model reads (indices up to 511)"),
    ("0-0 1:2", "line 1: '1:2' is not a link: a link is two word indices, such as 0-2 (sure) "
     "or 0?2 (possible)"),
    ("0-0\n\n0-", "line 3: '0-' is not a link"),
    ("a-b", "line 1: 'a-b' is not a link"),
    ("0-1-2", "line 1: '0-1-2' is not a link"),
    ("-1-0", "line 1: '-1-0' is not a link"),
    ("\u0663-0", "line 1: '\u0663-0' is not a link"),  # an Arabic-Indic digit
    ("0-0 " + "1" * 100, "line 1: '" + "1" * 40 + "...' is not a link"),
])
def test_pharaoh_refuses_what_is_not_a_link(text, sentence):
    with pytest.raises(AlignmentError) as refused:
        parse_pharaoh(text)
    assert str(refused.value).startswith(sentence)


def test_pharaoh_refuses_too_much():
    with pytest.raises(AlignmentError, match=r"^the alignment file has 10,001 lines: at most "
                       r"10,000 sentences are read$"):
        parse_pharaoh("0-0\n" * (MAX_ALIGNMENT_SENTENCES + 1))
    assert len(parse_pharaoh("0-0\n" * MAX_ALIGNMENT_SENTENCES)) == MAX_ALIGNMENT_SENTENCES
    with pytest.raises(AlignmentError, match=r"^line 2 has 4,097 links: at most 4,096 per "
                       r"sentence are read$"):
        parse_pharaoh("0-0\n" + "0-0 " * (MAX_LINKS_PER_SENTENCE + 1))
    with pytest.raises(AlignmentError, match=r"^the alignment file is 2,097,153 bytes: at "
                       r"most 2,097,152 are read$"):
        parse_pharaoh(b" " * (MAX_ALIGNMENT_BYTES + 1))
    with pytest.raises(AlignmentError, match="^the alignment text has 2,097,153 characters"):
        parse_pharaoh(" " * (MAX_ALIGNMENT_BYTES + 1))
    with pytest.raises(AlignmentError, match=r"^the alignment file is not UTF-8 text \(byte 4 "):
        parse_pharaoh(b"0-0 \xff")
    with pytest.raises(TypeError):
        parse_pharaoh(["0-0"])


def test_pharaoh_refuses_too_many_links_in_all(monkeypatch):
    monkeypatch.setattr(alignment, "MAX_LINKS", 5)
    with pytest.raises(AlignmentError, match=r"^the alignment file has more than 5 links \(line "
                       r"3\): at most 5 are read$"):
        parse_pharaoh("0-0 1-1\n0-0 1-1\n0-0 1-1\n")


PAIRS = [("le chat noir", "the black cat"), ("oui", "yes")]


def test_aligned_pairs_check_each_index_against_its_sentence():
    pairs = aligned_pairs("0-0 1-2 2-1 0?1\n0-0\n", PAIRS)
    assert pairs[0] == AlignedPair(frozenset({(0, 0), (1, 2), (2, 1)}), frozenset({(0, 1)}),
                                   source="le chat noir", target="the black cat")
    assert pairs[0].source_words == ("le", "chat", "noir") and pairs[1].target_words == ("yes",)
    assert aligned_pairs(parse_pharaoh(b"0-0 1-2 2-1 0?1\n0-0"), PAIRS) == pairs


@pytest.mark.parametrize("text, pairs, sentence", [
    ("0-0\n", PAIRS, "the alignments have 1 sentences but there are 2 sentence pairs: each "
     "line of the alignments goes with the sentence pair of the same line"),
    ("0-0\n0-0\n0-0\n", PAIRS, "the alignments have 3 sentences but there are 2"),
    ("0-0\n1-0\n", PAIRS, "sentence 2: link 1-0 names source word 1, but the source 'oui' has "
     "1 words (counted from 0)"),
    ("0-0 2?3\n0-0\n", PAIRS, "sentence 1: link 2?3 names target word 3, but the target 'the "
     "black cat' has 3 words (counted from 0)"),
])
def test_aligned_pairs_refuse_what_does_not_fit(text, pairs, sentence):
    with pytest.raises(AlignmentError) as refused:
        aligned_pairs(text, pairs)
    assert str(refused.value).startswith(sentence)


def test_aligned_pairs_refuse_too_many_pairs():
    with pytest.raises(AlignmentError, match="^there are 10,001 sentence pairs: at most 10,000"):
        aligned_pairs("", [("a", "b")] * (MAX_ALIGNMENT_SENTENCES + 1))


# ---------------------------------------------------------------- what a head predicts
SOURCE = ["<s>", "▁fri", "day", ",", "▁5", "</s>"]  # words: "friday," "5"
TARGET = ["▁", "2", "-", "0", "5", "</s>"]  # pieces: the bare ▁ writes nothing
#                 <s>  ▁fri  day   ,    ▁5   </s>
CROSS = np.array([[.1, .2, .2, .0, .4, .1],  # predicts ▁
                  [.0, .5, .1, .1, .2, .1],  # predicts 2: "friday," .7
                  [.0, .1, .1, .1, .6, .1],  # predicts -: "5" .6
                  [.5, .0, .0, .0, .0, .5],  # predicts 0: only special tokens, no word
                  [.1, .3, .0, .0, .5, .1],  # predicts 5: "5"
                  [.0, .2, .2, .2, .2, .2]])  # predicts </s>


def test_word_maps_merge_source_words_and_keep_target_pieces():
    words, target_words, source_words = word_alignment_maps(CROSS, TARGET, SOURCE,
                                                            merge_words=(False, True))
    assert source_words == ["friday,", "5"] and target_words == ["2", "-", "0", "5"]
    assert words.shape == (4, 2)
    np.testing.assert_allclose(words, [[.7 / .9, .2 / .9], [.3 / .9, .6 / .9], [0, 0],
                                       [.3 / .8, .5 / .8]])
    assert argmax_alignment(words) == {(0, 0), (1, 1), (1, 3)}  # target word 2: no link
    merged, target_words, _ = word_alignment_maps(CROSS, TARGET, SOURCE)
    assert target_words == ["2-05"] and merged.shape == (1, 2)  # one word once merged
    stacked, _, _ = word_alignment_maps(np.stack([CROSS, CROSS[::-1]])[None], TARGET, SOURCE,
                                        merge_words=(False, True))
    assert stacked.shape == (1, 2, 4, 2)  # (layers, heads, target words, source words)


def test_head_alignment_reads_rows_as_output_or_target_tokens():
    maps = {"cross": np.stack([CROSS, np.roll(CROSS, 1, axis=0)])[None],  # (1, 2, 6, 6)
            "source_tokens": SOURCE, "output_tokens": TARGET,
            "target_tokens": ["<s>"] + TARGET[:-1]}
    links = head_alignment(maps, 0, 0, merge_words=(False, True))
    assert links == {(0, 0), (1, 1), (1, 3)}
    # rows="target": row t stands for its input, target_tokens[t]; head 1 holds the rows one
    # step later, so it reads as head 0 does with rows="output"
    assert head_alignment(maps, 0, 1, rows="target", merge_words=(False, True)) == links
    with pytest.raises(ValueError, match="rows must be one of"):
        head_alignment(maps, 0, 0, rows="input")


def test_argmax_alignment_of_an_empty_map():
    assert argmax_alignment(np.zeros((3, 0))) == frozenset()
    assert argmax_alignment(np.zeros((0, 3))) == frozenset()


# ---------------------------------------------------------------- the dates task's gold
FRIDAY = datetime.date(2021, 3, 5)


def test_friday_march_5_2021():
    gold = date_alignment(FRIDAY, "weekday_month_d_y")
    assert gold.source == "Friday, March 5, 2021" and gold.target == "2021-03-05"
    assert gold.source_words == ("Friday,", "March", "5,", "2021")
    assert gold.target_words == tuple("2021-03-05")
    assert gold.sure == {(3, 0), (3, 1), (3, 2), (3, 3), (1, 5), (1, 6), (2, 8), (2, 9)}
    assert gold.possible - gold.sure == {(3, 4), (1, 4), (1, 7), (2, 7)}  # the hyphens
    assert gold.pharaoh() == "1?4 1-5 1-6 1?7 2?7 2-8 2-9 3-0 3-1 3-2 3-3 3?4"


@pytest.mark.parametrize("fmt, kwargs, source, sure_words, possible_only", [
    ("the_nth_of_month_y", {"variant": 4, "case": "upper", "punctuation": "extra_comma"},
     "THE TWENTY FIRST OF MARCH, 2021", {1: "day", 2: "day", 4: "month", 5: "year"},
     {(0, 8), (0, 9), (3, 5), (3, 6), (3, 8), (3, 9)}),  # "the" and "of"
    ("dd_mm_yyyy", {}, "21.03.2021", {0: ("year", "month", "day")}, set()),
    ("y_month_d", {"punctuation": "trailing_period"}, "2021 March 21.",
     {0: "year", 1: "month", 2: "day"}, set()),
])
def test_every_word_writes_what_its_format_says(fmt, kwargs, source, sure_words, possible_only):
    gold = date_alignment(FRIDAY.replace(day=21), fmt, **kwargs)
    assert gold.source == source
    digits = {"year": (0, 1, 2, 3), "month": (5, 6), "day": (8, 9)}
    expected = {(j, i) for j, parts in sure_words.items()
                for part in ((parts,) if isinstance(parts, str) else parts) for i in digits[part]}
    assert gold.sure == expected
    assert possible_only <= gold.possible - gold.sure
    separators = gold.possible - gold.sure - possible_only
    assert {i for _, i in separators} == {4, 7}


def _every_choice():
    """Every format, case and punctuation, spread over variants and days (1st..31st)."""
    days = [datetime.date(2021, 3, 1) + datetime.timedelta(days=k) for k in range(31)]
    days += [datetime.date(1999, 9, 22), datetime.date(2000, 2, 29), datetime.date(2099, 12, 31)]
    for k, (fmt, case, punctuation) in enumerate(itertools.product(DATE_FORMATS, CASES,
                                                                   PUNCTUATION)):
        for d in days[k % 5::5]:
            if fmt not in DAY_AFTER_12_FORMATS or d.day > 12:
                yield d, fmt, case, (k + d.day) % NUM_VARIANTS, punctuation


def test_every_format_aligns_within_its_words():
    count = 0
    for d, fmt, case, variant, punctuation in _every_choice():
        gold = date_alignment(d, fmt, case, variant=variant, punctuation=punctuation)
        count += 1
        assert gold.source_words == tuple(gold.source.split())
        assert gold.target == d.isoformat() and len(gold.target_words) == 10
        assert gold.sure <= gold.possible
        assert all(0 <= j < len(gold.source_words) and 0 <= i < 10 for j, i in gold.possible)
        # every digit comes from a sure source word; the hyphens have possible links only
        assert {i for _, i in gold.sure} == {0, 1, 2, 3, 5, 6, 8, 9}
        assert {i for _, i in gold.possible - gold.sure} >= {4, 7}
        for j, parts in enumerate(gold.source_parts):
            if parts == ("weekday",):  # the weekday writes no character of the ISO date
                assert not any(link[0] == j for link in gold.possible)
        parsed = aligned_pairs(gold.pharaoh(), [(gold.source, " ".join(gold.target_words))])[0]
        assert (parsed.sure, parsed.possible) == (gold.sure, gold.possible)
    assert count > 700


def test_the_draws_are_unchanged_and_recorded():
    # the bundled model was trained on these draws: they must never change
    drawn = json.dumps([date_examples(2000), date_examples(500, split="test", seed=3),
                        held_out_date_examples(3)])
    assert hashlib.sha256(drawn.encode()).hexdigest() == \
        "611f3dcc087aec7339fb77d557998e62986c2defa8c2a3cc724996bc19b63984"
    golds = date_alignment_examples(300, seed=2, split="test")
    assert [(g.source, g.target, g.fmt) for g in golds] == date_examples(300, seed=2,
                                                                        split="test")
    held_out = held_out_date_alignments(2, seed=1)
    assert [(g.source, g.target, g.fmt) for g in held_out] == held_out_date_examples(2, seed=1)


# ---------------------------------------------------------------- the bundled model's heads
DATES = (False, True)  # the dates model's words: target pieces (the ISO characters), source words


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def dates(ckpt):
    """20 generated dates with their gold, and their maps with the gold target teacher-forced
    (one padded pass)."""
    from transformer.inference.maps import attention_maps

    golds = date_alignment_examples(20, seed=0)
    maps = attention_maps(ckpt, [ckpt.encode_source(g.source) for g in golds],
                          [ckpt.encode_target(g.target) for g in golds])
    return golds, maps


def _options(ckpt):
    return {"merge_words": DATES, "source_tokenizer": ckpt.source_tokenizer,
            "target_tokenizer": ckpt.target_tokenizer}


def test_the_apps_word_merging_gives_the_gold_words(ckpt):
    from transformer.analysis.flow import word_groups

    for d, fmt, case, variant, punctuation in itertools.islice(_every_choice(), 0, None, 7):
        gold = date_alignment(d, fmt, case, variant=variant, punctuation=punctuation)
        pieces = ckpt.source_tokenizer.pieces(gold.source)
        assert len(word_groups(pieces, tokenizer=ckpt.source_tokenizer)[0]) == \
            len(gold.source_words), (gold.source, pieces)
        target = [p for p in ckpt.target_tokenizer.pieces(gold.target) if p != "▁"]
        assert target == list(gold.target_words)


def test_every_head_of_the_bundled_model_is_ranked(ckpt, dates):
    golds, maps = dates
    ranked = rank_heads(maps, golds, **_options(ckpt))
    layers, heads = maps[0]["cross"].shape[:2]
    assert sorted((h.layer, h.head) for h in ranked) == [
        (layer, head) for layer in range(layers) for head in range(heads)]
    assert [h.aer for h in ranked] == sorted(h.aer for h in ranked)
    assert all(0 <= value <= 1 for h in ranked for value in (h.aer, h.precision, h.recall))
    # the vectorised counts equal the sets, head by head (alignment_scores of head_alignment)
    for h in ranked:
        total = corpus_alignment_scores(
            (head_alignment(m, h.layer, h.head, **_options(ckpt)), g.sure, g.possible)
            for m, g in zip(maps, golds))
        assert (h.aer, h.precision, h.recall) == pytest.approx(
            (total.aer, total.precision, total.recall), abs=1e-12)


def test_the_bundled_models_heads_align_dates(ckpt, dates):
    """Measured on these 20 dates (rows="output"): the best head (cross L0 H1) has AER 0.042
    (precision 0.955, recall 0.963), the worst (L0 H3) 0.153. A trivial aligner does far worse:
    every target character to the last source word 0.25, to a random word ~0.36, to the first
    0.41 (10 of the 20 sources are one word, "05.03.2021", where any aligner is right)."""
    golds, maps = dates
    ranked = rank_heads(maps, golds, **_options(ckpt))
    best, worst = ranked[0], ranked[-1]
    assert best.aer < 0.1 and best.precision > 0.9 and best.recall > 0.9
    last_word = corpus_alignment_scores(
        ({(len(g.source_words) - 1, i) for i in range(10)}, g.sure, g.possible) for g in golds)
    assert last_word.aer > 0.2
    assert worst.aer < last_word.aer  # every head aligns better than the best trivial aligner
    assert best.aer < last_word.aer - 0.15
    # the step after (shift-att) reads worse for this model, but still well
    shifted = rank_heads(maps, golds, rows="target", **_options(ckpt))
    assert best.aer < shifted[0].aer < last_word.aer


def test_alignment_statistics_are_layers_by_heads(ckpt, dates):
    golds, maps = dates
    stats = alignment_statistics(maps, golds, **_options(ckpt))
    assert set(stats) == {"aer", "precision", "recall", "predicted", "sure", "predicted_sure",
                          "predicted_possible"}
    assert all(v.shape == maps[0]["cross"].shape[:2] for v in stats.values())
    assert (stats["sure"] == sum(len(g.sure) for g in golds)).all()
    assert (stats["predicted"] == 10 * len(golds)).all()  # each ISO character linked once


def test_words_that_differ_from_the_golds_are_refused(ckpt, dates):
    golds, maps = dates
    with pytest.raises(AlignmentError, match=r"^sentence 1: the gold alignment has 10 target "
                       r"words but the model's target pieces make 1 \("):
        rank_heads(maps, golds, merge_words=True, source_tokenizer=ckpt.source_tokenizer,
                   target_tokenizer=ckpt.target_tokenizer)
    too_far = GoldAlignment(frozenset({(40, 0)}), frozenset())  # no words given: indices checked
    with pytest.raises(AlignmentError, match=r"^sentence 2: the gold alignment has at least 41 "
                       r"source words but the model's source pieces make \d+ "):
        rank_heads(maps[:2], [golds[0], too_far], **_options(ckpt))
    with pytest.raises(ValueError, match="no sentences"):
        rank_heads([], [])
