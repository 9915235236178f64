"""figures.common: token axes at positions ticked with the tokens as they are, escaped labels,
per-cell hover data, numbers written for people, matrix checks, and that figures need no
TensorFlow."""

import html
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from figures.common import (
    MAX_TICKS,
    cell_hover,
    cell_tokens,
    check_matrix,
    number_text,
    plotly_text,
    positions,
    tick_text,
    token_axis,
)


def test_a_repeated_token_is_the_same_tick_text_at_two_positions():
    axis = token_axis(["<s>", "0", "5", "0", "</s>"], title="key")
    assert axis["tickvals"] == [0, 1, 2, 3, 4]
    assert axis["ticktext"] == ["&lt;s&gt;", "0", "5", "0", "&lt;/s&gt;"]
    assert axis["ticktext"][1] == axis["ticktext"][3]  # no "0 ·2": the token as it is
    assert (axis["type"], axis["tickmode"], axis["title"]) == ("linear", "array", "key")
    assert [html.unescape(t) for t in axis["ticktext"]] == ["<s>", "0", "5", "0", "</s>"]
    assert positions(["a", "a", "b"]) == [0, 1, 2]


@pytest.mark.parametrize("n", [0, 1, MAX_TICKS, MAX_TICKS + 1, 200])
def test_short_and_long_axes(n):
    tokens = [f"t{i}" for i in range(n)]
    axis = token_axis(tokens)
    step = max(1, -(-n // MAX_TICKS))
    assert axis["tickvals"] == list(range(0, n, step))
    assert axis["ticktext"] == [tokens[i] for i in axis["tickvals"]]
    assert len(axis["tickvals"]) <= MAX_TICKS
    assert (n <= MAX_TICKS) == (axis["tickvals"] == list(range(n)))


def test_tick_text_escapes_markup_and_keeps_everything_else():
    assert tick_text(["<s>", "▁march", "a & b", "<pad>"]) == [
        "&lt;s&gt;", "␣march", "a &amp; b", "&lt;pad&gt;"]  # SentencePiece's ▁ drawn visibly
    for label in ("<unk>", "<", "a&amp;b", "2021"):
        assert html.unescape(plotly_text(label)) == label


def test_cell_tokens_name_every_cell_and_the_hover_reads_them():
    data = cell_tokens(["<s>", "x"], ["a", "b", "a"])
    assert data.shape == (2, 3, 2)
    assert tuple(data[1, 2]) == ("x", "a") and tuple(data[0, 0]) == ("&lt;s&gt;", "a")
    assert cell_tokens([], ["a"]).shape == (0, 1, 2)
    assert cell_hover("target", "source") == ("target %{y:d} (%{customdata[0]})<br>"
                                              "source %{x:d} (%{customdata[1]})")


@pytest.mark.parametrize("value, text", [(-1e9, "−1e9"), (-10000.0, "−10000"), (1e-5, "1e−5"),
                                         (-3.4028235e38, "−3.40282e38"), (0.5, "0.5")])
def test_number_text(value, text):
    assert number_text(value) == text


def test_check_matrix_names_both_sizes():
    assert check_matrix([[1, 2]], 1, 2).dtype == float
    with pytest.raises(ValueError, match="3 rows but 2 row labels"):
        check_matrix(np.zeros((3, 1)), rows=2)
    with pytest.raises(ValueError, match="must be 2-D"):
        check_matrix(np.zeros(3))


def test_figures_import_no_tensorflow():
    # figures use transformer.core.kinds, which must not bring TensorFlow in (nor may anything else).
    code = ("import sys, figures.aggregate, figures.arithmetic, figures.attention, "
            "figures.compare, figures.decoding, figures.head_stats, figures.masks, "
            "figures.model, figures.positional, figures.token_view, figures.tokens; "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=True)
    assert out.stdout.strip() == "False"
