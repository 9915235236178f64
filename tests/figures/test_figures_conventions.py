"""The app's figure conventions, checked on every figure function: tick labels dark and left to
Plotly's automatic angle (horizontal where they fit), SentencePiece's "▁" drawn as a visible
word-start mark that a subtitle explains, one diverging colour scale for signed values
(positive blue, as the weights), every colour bar titled, cell text that never spills."""

import numpy as np
import plotly.graph_objects as go
import pytest

from figures import (
    aer_bars,
    aggregate,
    arithmetic,
    attention_maps,
    compare,
    decoding,
    head_grids,
    lens,
    mask_maps,
    model,
    positional,
    token_view,
    tokenization,
)
from figures.common import short_label

SOURCE = ["<s>", "▁friday", ",", "▁march", "▁", "5", "</s>"]  # N = 7
TARGET = ["<s>", "▁", "2", "0"]  # T = 4
DARK = "#1f2937"
BLUE_TOP, RED_BOTTOM = "rgb(5,48,97)", "rgb(103,0,31)"  # ColorBrewer RdBu's ends


def rows(shape, seed=0):
    x = np.random.default_rng(seed).random(shape)
    return x / x.sum(-1, keepdims=True)


def signed(shape, seed=1):
    return np.random.default_rng(seed).normal(size=shape)


def arithmetic_result():
    return arithmetic.head_arithmetic(signed(4), signed((7, 4)), signed((7, 4)),
                                      np.array([1, 1, 1, 1, 1, 0, 0]), blocked_score=-1e9)


CONFIG = {"d_model": 8, "num_heads": 2, "dff": 16, "num_encoder_layers": 1,
          "num_decoder_layers": 1, "src_vocab_size": 10, "tgt_vocab_size": 10, "max_len": 8,
          "positional": "sinusoidal", "norm_first": False}
IMPORTANCE = [{"kind": "cross", "layer": 0, "head": h, "delta_log_prob": d}
              for h, d in enumerate((-0.01, -2.5, -0.002, 0.001))]

FIGURES = {  # name: (builder, whether its tokens hold "▁")
    "attention heatmap": (lambda: attention_maps.attention_heatmap_fig(rows((4, 7)), TARGET, SOURCE),
                          True),
    "model view": (lambda: attention_maps.model_view_fig(rows((2, 2, 4, 7)), TARGET, SOURCE), False),
    "linked view": (lambda: attention_maps.linked_view_fig(rows((7, 7)), rows((4, 4)), rows((4, 7)),
                                                      SOURCE, TARGET), True),
    "layer grid": (lambda: aggregate.layer_grid_fig(rows((2, 7, 7)), SOURCE, SOURCE,
                                                    ["a", "b"]), True),
    "side by side": (lambda: compare.side_by_side_fig([rows((4, 7))] * 2, ["a", "b"], TARGET,
                                                      SOURCE), True),
    "difference": (lambda: compare.difference_fig(rows((4, 7)), rows((4, 7), 3), TARGET,
                                                  SOURCE), True),
    "importance": (lambda: compare.importance_fig(IMPORTANCE), False),
    "token log-prob": (lambda: compare.token_log_prob_fig(TARGET, -np.ones(4), -np.ones(4) * 2),
                       True),
    "top k": (lambda: decoding.top_k_fig([("▁", 1, 0.5), ("2", 2, 0.3)], 1), True),
    "step bars": (lambda: decoding.step_attention_fig(rows(7), SOURCE), True),
    "step heads": (lambda: decoding.step_attention_fig(rows((2, 7)), SOURCE), True),
    "heads grid": (lambda: decoding.heads_grid_fig(rows((2, 7)), SOURCE), True),
    "self row": (lambda: decoding.self_attention_row_fig(rows((2, 4)), TARGET), True),
    "alignment": (lambda: decoding.alignment_fig(rows((4, 7)), TARGET, SOURCE), True),
    "q vector": (lambda: arithmetic.vector_fig(signed(4), list("0123"), "q"), False),
    "K matrix": (lambda: arithmetic.matrix_fig(signed((7, 4)), SOURCE, list("0123"), "K"), True),
    "score steps": (lambda: arithmetic.score_steps_fig(arithmetic_result(), SOURCE), True),
    "contributions": (lambda: arithmetic.contributions_fig(signed((7, 4)), signed(4), SOURCE),
                      True),
    "mask": (lambda: mask_maps.mask_heatmap_fig(np.tril(np.ones((4, 4))), TARGET, TARGET, "m"), True),
    "batch mask": (lambda: mask_maps.batch_mask_fig(np.ones((1, 7)), np.ones((1, 7)), [SOURCE],
                                                ["row 0"], "p"), True),
    "masking row": (lambda: mask_maps.masking_row_fig(signed(7), np.ones(7), rows(7), SOURCE,
                                                  blocked_score=-1e9), True),
    "positional": (lambda: positional.positional_heatmap_fig(signed((6, 8))), False),
    "sinusoids": (lambda: positional.sinusoids_fig(signed((6, 8)), [0, 1]), False),
    "similarity": (lambda: positional.similarity_fig(signed((7, 7)), SOURCE), True),
    "encoder input": (lambda: positional.encoder_input_fig(signed((7, 8)), signed((7, 8)),
                                                           signed((7, 8)), SOURCE), True),
    "encoder input, own scales": (lambda: positional.encoder_input_fig(
        signed((7, 8)), signed((7, 8)), signed((7, 8)), SOURCE, shared_scale=False), True),
    "statistic": (lambda: head_grids.stat_heatmap_fig(rows((2, 2)), "entropy",
                                                      colorbar_title="entropy"), False),
    "head similarity": (lambda: head_grids.similarity_matrix_fig(rows((4, 4)), list("abcd")),
                        False),
    "token view": (lambda: token_view.token_view_fig(rows((1, 4, 7)), TARGET, SOURCE,
                                                     head_labels=["head 0"]), True),
    "pieces": (lambda: tokenization.pieces_fig(SOURCE, np.arange(7), (0, 6), 9), True),
    "padded batch": (lambda: tokenization.padded_batch_fig(np.arange(7)[None], [SOURCE], 99), True),
    "history": (lambda: model.history_fig({"loss": [2.0, 1.0], "accuracy": [0.5, 0.8]}), False),
    "architecture": (lambda: model.architecture_fig(CONFIG), False),
    "logit lens": (lambda: lens.layer_lens_fig([["▁a", "b"], ["b", "▁a"]], rows((2, 2)),
                                               [0.2, 0.4], [1, 0], "▁a"), True),
    "AER ranking": (lambda: aer_bars.aer_ranking_fig(["L0 H1", "L0 H0"], [0.1, 0.3],
                                                      [0.9, 0.7], [0.9, 0.6]), False),
}
SIGNED = ("difference", "q vector", "K matrix", "contributions", "positional", "similarity",
          "encoder input", "encoder input, own scales")


def axes(fig):
    found = []
    fig.for_each_xaxis(found.append)
    fig.for_each_yaxis(found.append)
    return found


@pytest.mark.parametrize("name", FIGURES)
def test_tick_labels_are_dark_and_rotated_only_by_plotly(name):
    fig = FIGURES[name][0]()
    for axis in axes(fig):
        assert axis.tickangle in (None, "auto"), (name, axis.tickangle)
        assert axis.tickfont.color == DARK, name


@pytest.mark.parametrize("name", FIGURES)
def test_the_word_start_mark_is_visible_and_explained(name):
    fig, has_mark = FIGURES[name][0](), FIGURES[name][1]
    ticks = [t for axis in axes(fig) for t in (axis.ticktext or ())]
    assert not any("▁" in str(t) for t in ticks), name
    subtitle = fig.layout.title.subtitle.text or ""
    assert ("␣ starts a word" in subtitle) == has_mark, name


def colour_bars(fig):
    """(what, title, colorscale) of every colour bar the figure shows."""
    bars, seen = [], set()
    for trace in fig.data:
        if trace.type != "heatmap":
            continue
        if trace.coloraxis:
            ax = fig.layout[trace.coloraxis]
            if trace.coloraxis not in seen and ax.showscale is not False:
                seen.add(trace.coloraxis)
                bars.append((trace.coloraxis, ax.colorbar.title.text, ax.colorscale))
        elif trace.showscale is not False:
            bars.append((trace.name, trace.colorbar.title.text, trace.colorscale))
    return bars


@pytest.mark.parametrize("name", FIGURES)
def test_every_colour_bar_is_titled(name):
    for what, title, _ in colour_bars(FIGURES[name][0]()):
        assert title, f"{name}: the colour bar of {what} has no title"


@pytest.mark.parametrize("name", SIGNED)
def test_signed_values_share_one_diverging_scale_positive_blue(name):
    fig = FIGURES[name][0]()
    bars = colour_bars(fig)
    assert bars, name
    for what, _, scale in bars:
        assert scale[-1][1] == BLUE_TOP and scale[0][1] == RED_BOTTOM, (name, what)
    for trace in fig.data:
        if trace.type == "heatmap" and not trace.coloraxis and trace.zmin is not None:
            assert trace.zmin == -trace.zmax, (name, trace.name)  # 0 in the middle


def test_arithmetic_scores_and_weights_follow_the_convention():
    fig = FIGURES["score steps"][0]()
    by_name = {t.name: t for t in fig.data}
    assert by_name["dots"].colorscale[-1][1] == BLUE_TOP
    assert by_name["weight"].colorscale == go.Heatmap(colorscale="Blues").colorscale


def test_character_figures_keep_the_space_mark_without_the_word_start_note():
    fig = tokenization.round_trip_fig("Friday, March", "friday, march")
    assert "␣" in fig.data[0].text[0] and not fig.layout.title.subtitle.text
    fig = tokenization.piece_spans_fig("a b", [(0, 1), (1, 3)], ["▁a", "▁b"], [5, 6], 0)
    assert not fig.layout.title.subtitle.text


def test_long_pieces_never_spill_into_the_next_cell():
    many = ["<s>"] + ["▁wednesday"] * 20 + ["</s>"]
    fig = mask_maps.batch_mask_fig(np.ones((1, 22)), np.ones((1, 22)), [many], ["row 0"], "p",
                               width=1000)
    shown = fig.data[0].text[0]
    assert shown[1].endswith("…") and len(shown[1]) <= (1000 / 22) / 7.5
    assert fig.data[0].customdata[0][1][3] == "␣wednesday"  # the hover has it whole
    fig = tokenization.padded_batch_fig(np.arange(22)[None], [many], 99, width=1000)
    assert fig.data[0].text[0][1].split("<br>")[0].endswith("…")
    assert mask_maps.batch_mask_fig(np.ones((1, 3)), np.ones((1, 3)), [many[:3]], ["r"], "p"
                                ).data[0].text[0][1] == "␣wednesday"  # room: kept whole


@pytest.mark.parametrize("text, width, expected", [
    ("the 31st of December, 1999", 24, "the 31st of December, …"),
    ("Wednesday, September 22, 1999", 30, "Wednesday, September 22, 1999"),
    ("3/5/21", 24, "3/5/21"),
    ("Supercalifragilisticexpialidocious", 10, "Supercali…"),
])
def test_row_labels_are_cut_at_a_word_boundary(text, width, expected):
    assert short_label(text, width) == expected
