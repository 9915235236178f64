"""Head statistics' alignment quality (views/Head_Statistics.py, explorer/alignments.py)
through AppTest on the bundled model.

The AER shown is checked against transformer.analysis.alignment applied to maps computed here,
independently of the app (its own checkpoint object, no Streamlit cache)."""

import json

import numpy as np
import pytest
from conftest import ROOT, open_page, plotly_array, set_widget

from explorer.alignments import BUILT_IN_PER_FORMAT
from transformer.analysis.alignment import (
    AlignmentError,
    aligned_pairs,
    alignment_statistics,
    parse_pharaoh,
    rank_heads,
)
from transformer.inference.maps import attention_maps
from transformer.training.data import held_out_date_alignments

PAGE = "views/Head_Statistics.py"
DATES = (False, True)  # the dates model's words: target characters, source words
PAIRS = "Friday, March 5, 2021\t2021-03-05\n05.03.2021\t2021-03-05\n5 March 2021\t2021-03-05\n"
# hand-written: source word -> the ISO characters it writes (0-3 year, 5-6 month, 8-9 day)
GOLD = ("3-0 3-1 3-2 3-3 1-5 1-6 2-8 2-9 1?4 2?7\n"
        "0-0 0-1 0-2 0-3 0-4 0-5 0-6 0-7 0-8 0-9\n"
        "2-0 2-1 2-2 2-3 1-5 1-6 0-8 0-9\n")


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def _options(ckpt):
    return {"merge_words": DATES, "source_tokenizer": ckpt.source_tokenizer,
            "target_tokenizer": ckpt.target_tokenizer}


def _maps(ckpt, pairs):
    return attention_maps(ckpt, [ckpt.encode_source(s) for s, _ in pairs],
                          [ckpt.encode_target(t) for _, t in pairs])


@pytest.fixture(scope="module")
def page():
    """The page opened once on the bundled model (the built-in gold by default)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    return open_page(at, PAGE)


def _ranking(at):
    tables = [d.value for d in at.dataframe if "rank" in d.value.columns]
    assert len(tables) == 1, [list(d.value.columns) for d in at.dataframe]
    return tables[0]


def _stats_table(at):
    return [d.value for d in at.dataframe if "kind" in d.value.columns][0]


def test_the_dates_gold_ranks_heads_as_the_library_does(page, ckpt):
    golds = held_out_date_alignments(BUILT_IN_PER_FORMAT, seed=ckpt.metadata.get("seed", 0))
    maps = _maps(ckpt, [(g.source, g.target) for g in golds])
    ranked = rank_heads(maps, golds, **_options(ckpt))
    stats = alignment_statistics(maps, golds, **_options(ckpt))

    ranking = _ranking(page)
    assert list(ranking["head"]) == [f"cross L{h.layer} H{h.head}" for h in ranked]
    np.testing.assert_allclose(ranking["AER"], [h.aer for h in ranked], atol=1e-9)
    assert ranking["AER"].iloc[0] == pytest.approx(ranked[0].aer, abs=1e-9)
    [chart] = [json.loads(c.proto.spec) for c in page.get("plotly_chart")
               if c.proto.id.endswith("align_chart")]
    bars = chart["data"][0]  # one bar per head, best first
    assert list(bars["y"]) == list(ranking["head"])
    np.testing.assert_allclose(plotly_array([bars["x"]])[0] if isinstance(bars["x"], list)
                               else plotly_array(bars["x"]), [h.aer for h in ranked], atol=1e-9)
    assert any("Och & Ney 2000" in m.value for m in page.markdown)
    assert any(f"{len(golds)} held-out dates" in c.value for c in page.caption)

    table = _stats_table(page)  # the AER column: cross-attention heads only
    cross = table[table["kind"] == "cross"].sort_values(["layer", "head"])
    np.testing.assert_allclose(cross["aer"].to_numpy(float), stats["aer"].ravel(), atol=1e-9)
    np.testing.assert_allclose(cross["aer_recall"].to_numpy(float), stats["recall"].ravel(),
                               atol=1e-9)
    assert table[table["kind"] != "cross"]["aer"].isna().all()


def test_a_malformed_upload_is_a_sentence_and_a_valid_one_is_scored(page, ckpt):
    at = set_widget(page, "radio", "align_source", "uploaded")
    assert any("Give both" in i.value for i in at.info)
    at.text_area(key="align_pairs").set_value(PAIRS)
    at.text_area(key="align_pharaoh").set_value(GOLD.replace("2?7", "2~7")).run()
    assert not at.exception, at.exception
    with pytest.raises(AlignmentError) as refused:
        parse_pharaoh(GOLD.replace("2?7", "2~7"))
    assert [e.value for e in at.error] == [str(refused.value)]
    assert not [d for d in at.dataframe if "rank" in d.value.columns]  # no ranking of nothing
    assert "aer" not in _stats_table(at).columns  # the rest of the page stays
    assert at.radio(key="align_source").value == "uploaded"

    at.text_area(key="align_pharaoh").set_value(GOLD).run()
    assert not at.exception, at.exception
    assert not at.error
    pairs = [tuple(line.split("\t")) for line in PAIRS.splitlines()]
    golds = aligned_pairs(GOLD, [(s, " ".join(t)) for s, t in pairs])  # target words: characters
    ranked = rank_heads(_maps(ckpt, pairs), golds, **_options(ckpt))
    ranking = _ranking(at)
    assert list(ranking["head"]) == [f"cross L{h.layer} H{h.head}" for h in ranked]
    np.testing.assert_allclose(ranking["AER"], [h.aer for h in ranked], atol=1e-9)
    assert _stats_table(at)["aer"].notna().sum() == len(ranked)


def test_uploaded_files_replace_the_text_boxes(page, ckpt):
    at = set_widget(page, "radio", "align_source", "uploaded")
    at.text_area(key="align_pharaoh").set_value("0-0\n")  # would not fit 3 pairs: replaced
    at.file_uploader(key="align_pairs_file").upload("pairs.tsv", PAIRS.encode()).run()
    at.file_uploader(key="align_gold_file").upload("gold.txt", GOLD.encode()).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("over 3 sentence pairs" in c.value for c in at.caption)


def test_a_sentence_whose_words_the_model_cuts_is_left_out_and_named(ckpt):
    from explorer import alignments

    long = " ".join(["March"] * 200) + " 5, 2021"  # cut to the model's source length
    pairs, golds = alignments.uploaded_golds(ckpt, GOLD.splitlines()[0] + "\n0-0\n",
                                             f"{PAIRS.splitlines()[0]}\n{long}\t2021-03-05\n")
    scores = alignments._score(ckpt, pairs, golds)
    assert scores.scored == 1 and len(scores.left_out) == 1
    assert scores.left_out[0].startswith("sentence 2: the model's word merging makes ")
    assert "source words" in scores.left_out[0] and "where the alignment counts 202" in \
        scores.left_out[0]
