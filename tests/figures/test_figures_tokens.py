"""figures.tokenization: pure figure functions (no Streamlit, no model)."""

import html

import numpy as np
import plotly.graph_objects as go
import pytest
from figure_ticks import tick_texts, ticks

from figures.tokenization import (
    PIECE,
    SPECIAL,
    UNKNOWN,
    padded_batch_fig,
    piece_kinds,
    piece_spans_fig,
    pieces_fig,
    plotly_text,
    round_trip_fig,
    text_differences,
)
from transformer.core.masking import pad_ids

PIECES = ["<s>", "▁friday", ",", "▁", "5", ",", "ü", "</s>"]
IDS = [2, 75, 205, 197, 211, 205, 1, 3]
SPECIALS = (0, 2, 3)
UNK = 1


def test_plotly_text_escapes_markup_and_round_trips():
    assert plotly_text("<s>") == "&lt;s&gt;"
    assert plotly_text("</s>") == "&lt;/s&gt;"
    assert plotly_text("<b>") == "&lt;b&gt;"
    assert plotly_text("a&amp;b") == "a&amp;amp;b"
    for label in ("<pad>", "<unk>", "<", "a & b", "<sx>"):
        assert html.unescape(plotly_text(label)) == label
    for plain in ("2021", "-"):
        assert plotly_text(plain) == plain
    assert plotly_text("▁friday") == "␣friday"  # the word-start mark, drawn visibly


def test_piece_kinds():
    assert piece_kinds(IDS, SPECIALS, UNK).tolist() == [SPECIAL, PIECE, PIECE, PIECE, PIECE, PIECE,
                                                        UNKNOWN, SPECIAL]


def test_piece_kinds_of_a_tokenizer_without_start_and_end():
    """A TextVectorization source vocabulary has no start or end word: their ids are None."""
    np.testing.assert_array_equal(piece_kinds([5, 1, 0], [None, None, 0], 1), [PIECE, UNKNOWN, SPECIAL])


def test_pieces_fig_one_cell_per_piece_with_its_id():
    fig = pieces_fig(PIECES, IDS, SPECIALS, UNK)
    assert isinstance(fig, go.Figure) and len(fig.data) == 1
    heatmap = fig.data[0]
    assert heatmap.type == "heatmap"
    assert np.asarray(heatmap.z).shape == (1, len(PIECES))
    assert list(heatmap.x) == list(range(len(PIECES)))
    assert tick_texts(fig.layout.xaxis) == [p.replace("▁", "␣") for p in PIECES]
    assert np.asarray(heatmap.customdata)[0].tolist() == IDS
    assert html.unescape(heatmap.hovertext[0][0]) == "piece 0 (<s>)<br>id 2<br>special token"
    assert np.asarray(heatmap.z)[0].tolist() == piece_kinds(IDS, SPECIALS, UNK).tolist()
    assert [t.endswith(f"<br>{i}") for t, i in zip(heatmap.text[0], IDS)] == [True] * len(IDS)
    assert "<unk>" not in heatmap.text[0][6] and "ü" in heatmap.text[0][6]  # keeps its characters


def test_pieces_fig_repeated_pieces_are_the_same_tick_at_their_positions():
    fig = pieces_fig(PIECES, IDS, SPECIALS, UNK)
    assert len(set(fig.data[0].x)) == len(PIECES)  # one cell per position
    assert (2, ",") in ticks(fig.layout.xaxis) and (5, ",") in ticks(fig.layout.xaxis)
    assert fig.data[0].hovertext[0][5].startswith("piece 5 (,)")


def test_pieces_fig_rejects_mismatched_lengths_naming_both():
    with pytest.raises(ValueError, match=r"7 entries.*8 pieces"):
        pieces_fig(PIECES, IDS[:-1], SPECIALS, UNK)


def test_piece_spans_fig_colours_each_piece_over_its_characters():
    text = "  ab ü"
    spans, pieces = [(2, 4), (4, 5), (5, 6), (6, 6)], ["▁ab", "▁", "ü", "▁"]
    ids = [5, 6, 1, 7]
    fig = piece_spans_fig(text, spans, pieces, ids, UNK)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert fig.data[0].type == "heatmap" and z.shape == (1, len(text))
    assert np.isnan(z[0, :2]).all()  # collapsed spaces belong to no piece
    assert z[0, 2:].tolist() == [0, 0, 1, UNKNOWN]
    assert list(fig.layout.xaxis.ticktext) == ["␣", "␣", "a", "b", "␣", "ü"]
    assert len(fig.layout.shapes) == 3  # a boundary before each non-empty piece


def test_piece_spans_fig_rejects_bad_spans():
    with pytest.raises(ValueError, match=r"spans has 1 entries, pieces 2 and ids 2"):
        piece_spans_fig("ab", [(0, 1)], ["a", "b"], [4, 5], UNK)
    with pytest.raises(ValueError, match=r"\(1, 3\).*2 characters"):
        piece_spans_fig("ab", [(0, 1), (1, 3)], ["a", "b"], [4, 5], UNK)


def test_pad_ids_pads_a_batch():
    padded = pad_ids([[2, 5, 6, 3], [2, 3], [2, 7, 3]], pad_id=0)
    assert padded.tolist() == [[2, 5, 6, 3], [2, 3, 0, 0], [2, 7, 3, 0]]
    with pytest.raises(ValueError):
        pad_ids([], 0)


def test_padded_batch_fig_pad_cells_are_a_separate_trace():
    ids = pad_ids([[2, 5, 6, 3], [2, 3]], pad_id=0)
    tokens = [["<s>", "a", "b", "</s>"], ["<s>", "</s>", "<pad>", "<pad>"]]
    fig = padded_batch_fig(ids, tokens, pad_id=0, row_labels=["first", "second"])
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]
    real, pad = (np.asarray(t.z, dtype=float) for t in fig.data)
    assert real.shape == pad.shape == (2, 4)
    np.testing.assert_array_equal(np.isnan(pad), ids != 0)
    np.testing.assert_array_equal(np.nan_to_num(real) + np.nan_to_num(pad), ids)
    assert list(fig.data[0].y) == [0, 1] and tick_texts(fig.layout.yaxis) == ["first", "second"]
    assert tuple(np.asarray(fig.data[1].customdata)[1, 3]) == ("second", "&lt;pad&gt;")
    assert html.unescape(fig.data[0].text[1][0]) == "<s><br>2"


def test_padded_batch_fig_rejects_mismatched_tokens_naming_both():
    ids = np.array([[2, 5, 3], [2, 3, 0]])
    with pytest.raises(ValueError, match=r"row 1 has 2 tokens but ids_matrix has 3 columns"):
        padded_batch_fig(ids, [["a", "b", "c"], ["a", "b"]], 0)
    with pytest.raises(ValueError, match=r"1 rows but ids_matrix has 2"):
        padded_batch_fig(ids, [["a", "b", "c"]], 0)


def test_round_trip_fig_flags_the_differing_characters():
    fig = round_trip_fig("Friday 5", "friday 0")
    z = np.asarray(fig.data[0].z)
    assert fig.data[0].type == "heatmap" and z.shape == (2, 8)
    assert z[0].tolist() == [1, 0, 0, 0, 0, 0, 0, 1]
    assert "2 character(s) differ" in fig.layout.title.text
    assert np.asarray(round_trip_fig("same", "same").data[0].z).sum() == 0


def test_round_trip_fig_aligns_insertions_and_deletions():
    fig = round_trip_fig("a  b", "a b ⁇")
    top, bottom = fig.data[0].text
    assert len(top) == len(bottom)
    assert "".join(top).replace("␣", " ") == "a  b"
    assert "".join(bottom).replace("␣", " ") == "a b ⁇"


def test_text_differences():
    assert text_differences("abc", "abc") == []
    assert text_differences("Ab1", "ab0") == [
        {"change": "replace", "at": 0, "original": "A", "decoded": "a"},
        {"change": "replace", "at": 2, "original": "1", "decoded": "0"}]
