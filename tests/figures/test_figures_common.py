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
    CHAR_PX,
    CHART_WIDTH,
    MAX_TICKS,
    cell_hover,
    cell_tokens,
    check_matrix,
    number_text,
    plotly_text,
    positions,
    probability_text,
    tick_step,
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


@pytest.mark.parametrize("n", [0, 1, MAX_TICKS, MAX_TICKS + 1, 200, 400])
def test_short_and_long_axes(n):
    tokens = [f"t{i}" for i in range(n)]
    axis = token_axis(tokens)
    step = tick_step(n)
    assert step == 1 if n <= MAX_TICKS else step in (2, 5, 10)
    assert axis["tickvals"] == list(range(0, n, step))
    assert len(axis["tickvals"]) <= MAX_TICKS
    assert (n <= MAX_TICKS) == (axis["tickvals"] == list(range(n)))


def test_a_thinned_axis_labels_each_shown_row_with_its_own_position_and_token():
    # Issue 24: a 300-character sentence labelled every other row read "n e e n n", a word
    # made of tokens two rows apart. Every label sits on its own row and, when rows are
    # skipped, starts with that row's position.
    sentence = "on the ninth of june in the year nineteen ninety nine " * 6  # 300 characters
    tokens = list(sentence[:300])
    axis = token_axis(tokens)
    texts = tick_text(tokens)
    assert len(axis["tickvals"]) <= MAX_TICKS and axis["tickvals"][0] == 0
    for position, label in zip(axis["tickvals"], axis["ticktext"], strict=True):
        assert label == f"{position}: {texts[position]}"
    short = token_axis(tokens[:MAX_TICKS])
    assert short["ticktext"] == texts[:MAX_TICKS]  # no position needed: every row labelled
    # Issue 38: a vector's 512 dimensions read "0: 0, 5: 5, ...": labels that are the
    # positions themselves are not repeated
    dims = token_axis([str(i) for i in range(512)])
    assert dims["ticktext"] == [str(i) for i in dims["tickvals"]] and len(dims["tickvals"]) > 1


def test_a_long_axis_opens_on_a_window_of_rows_and_says_so():
    tokens = [f"t{i}" for i in range(400)]
    axis = token_axis(tokens, window=50, title=dict(text="query"), autorange="reversed")
    assert axis["range"] == [49.5, -0.5] and axis["autorange"] is False
    assert axis["title"]["text"].startswith("query (0-49 of 400 shown")
    across = token_axis(tokens, window=50)
    assert across["range"] == [-0.5, 49.5]
    assert "range" not in token_axis(tokens[:50], window=50, autorange="reversed")


def test_tick_steps_are_round_numbers():
    assert [tick_step(n) for n in (0, 1, 60, 61, 120, 121, 300, 400, 601, 3001)] == [
        1, 1, 1, 2, 2, 5, 5, 10, 20, 100]


@pytest.mark.parametrize("p, text", [(0.4731, "0.473"), (0.001, "0.001"), (3.2e-5, "3.2e−5"),
                                     (1.234e-12, "1.2e−12"), (0.0, "0"), (1.0, "1.000")])
def test_a_chosen_tokens_probability_is_never_written_0_000(p, text):
    assert probability_text(p) == text


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
    code = ("import sys, figures.aggregate, figures.arithmetic, figures.attention_maps, "
            "figures.compare, figures.decoding, figures.head_grids, figures.mask_maps, "
            "figures.model, figures.positional, figures.token_view, figures.tokenization; "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=True)
    assert out.stdout.strip() == "False"


def test_two_trace_legends_sit_at_the_foot_of_the_figure():
    """Issue 38: on the right a narrow window clipped them ("original mod", "heads silenc");
    at the top they covered the title's subtitle. Now in one row at the figure's foot."""
    from figures.compare import token_log_prob_fig
    from figures.contribution_maps import source_share_fig, step_bars_fig

    figures = [token_log_prob_fig(["▁a", "b"], [-1.0, -2.0], [-1.5, -2.5], title="t"),
               source_share_fig(["▁a", "b"], {"ALTI+": [0.2, 0.3], "saliency": [0.4, 0.5]},
                                title="t"),
               step_bars_fig(["▁a", "b"], [0.1, 0.2], ["<s>"], [0.3], title="t")]
    for fig in figures:
        legend = fig.layout.legend
        assert (legend.orientation, legend.yref, legend.yanchor) == ("h", "container", "bottom")
        assert legend.y < 0.05 and fig.layout.margin.b >= 40  # room below the axis title


def test_side_by_side_panels_leave_room_for_the_next_panels_labels():
    """Issue 38: Compare heads with mixed kinds put each panel's y labels into the panel
    before; the gap between panels now fits the longest label after the first panel."""
    from figures.compare import side_by_side_fig

    short = side_by_side_fig([np.ones((2, 2))] * 2, ["a", "b"], ["x", "y"], ["x", "y"])
    words = ["▁wednesday", "▁september", "1999"]
    mixed = side_by_side_fig([np.ones((2, 2)), np.ones((3, 2))], ["a", "b"],
                             [["x", "y"], words], [["x", "y"], ["x", "y"]])
    def gap(fig):
        return fig.layout.xaxis2.domain[0] - fig.layout.xaxis.domain[1]
    assert gap(mixed) > gap(short)
    assert gap(mixed) * CHART_WIDTH >= len("␣september") * CHAR_PX


# ------------------------------------------------------------------ narrow screens (issue 38)

def test_wrap_words_breaks_between_words_and_keeps_tags_and_breaks():
    from figures.common import wrap_words

    assert wrap_words("Encoder self-attention, layer 0, head 0", 16) == \
        "Encoder<br>self-attention,<br>layer 0, head 0"
    assert wrap_words("<b>bold</b> words here<br>next", 10) == "<b>bold</b> words<br>here<br>next"
    assert wrap_words("short", 40) == "short"
    assert wrap_words("a-very-long-word-alone", 5) == "a-very-long-word-alone"


def test_narrow_wraps_each_text_to_its_width_and_keeps_the_plots_size():
    from plotly.subplots import make_subplots

    from figures.common import narrow

    fig = make_subplots(rows=1, cols=3, subplot_titles=[
        "Encoder self, layer 0", "Decoder self, layer 0", "Cross, layer 0"])
    fig.update_layout(title="Log-probability of each token of the model's own translation",
                      title_subtitle_text="␣ starts a word (SentencePiece's ▁, byte-level BPE's Ġ)",
                      height=400, margin=dict(t=90, b=60, l=60, r=20))
    before = fig.to_plotly_json()
    phone = narrow(fig, 358)
    assert fig.to_plotly_json() == before  # the original is untouched
    layout = phone.layout
    lines = layout.title.text.split("<br>")
    assert len(lines) >= 2 and all(len(line) <= 358 / (7.5 * 17 / 12) for line in lines)
    assert "<br>" in layout.title.subtitle.text
    for note in layout.annotations:  # a third of the plot's width each: a few words a line
        assert "<br>" in note.text, note.text
    assert layout.title.yanchor == "top" and layout.title.yref == "container"
    grown = layout.margin.t - 90
    assert grown > 0 and layout.height == 400 + grown  # the plots keep their height
    # the title's lines, the subtitle's, and the subplot titles' (3 lines) fit in the margin
    needed = 10 + (len(lines) * 17 + 2 * 13) * 1.3 + 3 * 16 * 1.3
    assert layout.margin.t >= needed


def test_narrow_leaves_a_figure_that_fits_as_it_is():
    import plotly.graph_objects as go

    from figures.common import narrow

    fig = go.Figure(go.Bar(y=[1, 2]), layout=dict(title="Short", margin=dict(t=60)))
    phone = narrow(fig)
    assert phone.layout.title.text == "Short" and phone.layout.margin.t == 60
    assert phone.layout.height is None
