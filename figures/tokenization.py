"""Tokenization: pieces and ids, piece boundaries over the text, a padded batch, the round trip.

Plotly renders labels as pseudo-HTML, where ``<s>`` and ``</s>`` are strike-through tags: a
start or end token would vanish from an axis. Labels that Plotly would read as markup are
escaped (``&lt;s&gt;``), which the browser shows as ``<s>`` again; ``html.unescape`` of a tick
label gives back the token. Pieces sit at their positions and the ticks are the pieces as they
are (figures.common.token_axis): a piece that occurs twice shows twice.
"""

from __future__ import annotations

import difflib

import numpy as np
import plotly.graph_objects as go

from .common import CHAR_PX, CHART_WIDTH, fit_text, plotly_text, positions, readable, tick_text, token_axis

__all__ = ["PIECE", "SPECIAL", "UNKNOWN", "padded_batch_fig", "piece_kinds",
           "piece_spans_fig", "pieces_fig", "plotly_text", "round_trip_fig", "text_differences"]

PIECE, SPECIAL, UNKNOWN = 0, 1, 2
KIND_NAMES = {PIECE: "piece", SPECIAL: "special token", UNKNOWN: "unknown (<unk>)"}
KIND_COLOURS = {PIECE: "#cfe2f3", SPECIAL: "#d9d9d9", UNKNOWN: "#f4a6a6"}
BAND_COLOURS = ("#cfe2f3", "#ffe699")  # alternate pieces over the characters
PAD_COLOUR, SAME_COLOUR, CHANGED_COLOUR = "#bdbdbd", "#e2efda", "#f4a6a6"
SPACE = "␣"  # a visible space in cells and ticks


def _visible(ch: str) -> str:
    return SPACE if ch == " " else plotly_text(ch)


def _discrete(colours) -> list:
    """A colorscale giving integer z = 0 .. len(colours) - 1 one flat colour each."""
    n = len(colours)
    scale = []
    for k, colour in enumerate(colours):
        scale += [[k / n, colour], [(k + 1) / n, colour]]
    return scale


def piece_kinds(ids, special_ids, unk_id) -> np.ndarray:
    """PIECE, SPECIAL or UNKNOWN for every id (a special id of None: the tokenizer has no such
    token, as a TextVectorization source has no start or end word)."""
    special = {int(i) for i in special_ids if i is not None}
    return np.array([UNKNOWN if i == unk_id else SPECIAL if i in special else PIECE
                     for i in np.asarray(ids).tolist()], dtype=int)


def pieces_fig(pieces: list[str], ids, special_ids, unk_id: int,
               title: str | None = None) -> go.Figure:
    """One cell per piece, its id beneath: specials (<s>, </s>, <pad>) grey, unknowns red.

    pieces: the pieces as cut from the text (the unknown ones keep their own characters);
    ids: their ids. Cells at positions 0 .. n - 1, ticked with the pieces as they are. The
    heatmap's customdata row is the ids. A cell's text is shortened to what its width holds
    (fit_text; none in a cell narrower than three characters): the hover names every piece."""
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {ids.shape}")
    if len(ids) != len(pieces):
        raise ValueError(f"ids has {len(ids)} entries but there are {len(pieces)} pieces")
    kinds = piece_kinds(ids, special_ids, unk_id)
    cell_px = CHART_WIDTH / max(len(ids), 1)
    text = [f"{plotly_text(fit_text(p or '∅', cell_px))}<br>{fit_text(i, cell_px)}"
            if cell_px >= 3 * CHAR_PX else "" for p, i in zip(pieces, ids.tolist())]
    hover = [f"piece {n} ({plotly_text(p)})<br>id {i}<br>{KIND_NAMES[k]}"
             for n, (p, i, k) in enumerate(zip(pieces, ids.tolist(), kinds.tolist()))]
    fig = go.Figure(go.Heatmap(
        z=kinds[None, :], x=positions(pieces), y=["piece"], text=[text], texttemplate="%{text}",
        customdata=ids[None, :], hovertext=[hover],
        hovertemplate="%{hovertext}<extra></extra>",
        colorscale=_discrete(list(KIND_COLOURS.values())), zmin=-0.5, zmax=2.5,
        showscale=False, xgap=2))
    fig.update_yaxes(visible=False)
    fig.update_xaxes(**token_axis(pieces, title="piece (position order)"))
    fig.update_layout(title=title or "Pieces and ids (grey: special, red: unknown)", height=190,
                      margin=dict(l=10, r=10, t=40, b=10))
    return readable(fig)


def piece_spans_fig(text: str, spans, pieces: list[str], ids, unk_id: int,
                    title: str | None = None) -> go.Figure:
    """Colour bands over the characters of ``text``: each piece's span (begin, end), alternating
    colours, unknown pieces red, characters no piece covers (collapsed spaces) blank."""
    ids = np.asarray(ids).ravel()
    if not len(spans) == len(pieces) == len(ids):
        raise ValueError(f"spans has {len(spans)} entries, pieces {len(pieces)} and ids "
                         f"{len(ids)}: they must match")
    owner = np.full(len(text), -1)
    for k, (begin, end) in enumerate(spans):
        if not 0 <= begin <= end <= len(text):
            raise ValueError(f"span {k} = ({begin}, {end}) does not fit a text of {len(text)} "
                             "characters")
        owner[begin:end] = k
    z = np.full(len(text), np.nan)
    hover = []
    for c, k in enumerate(owner.tolist()):
        if k < 0:
            hover.append(f"character {c}: in no piece (normalized away)")
            continue
        z[c] = UNKNOWN if ids[k] == unk_id else k % 2
        hover.append(f"character {c} '{_visible(text[c])}'<br>piece {k} "
                     f"'{plotly_text(pieces[k])}', id {ids[k]}")
    chars = [_visible(ch) for ch in text]
    positions = np.arange(len(text))
    fig = go.Figure(go.Heatmap(
        z=z[None, :], x=positions, y=["text"], text=[chars], texttemplate="%{text}",
        textfont=dict(size=16), hovertext=[hover], hovertemplate="%{hovertext}<extra></extra>",
        colorscale=_discrete([*BAND_COLOURS, KIND_COLOURS[UNKNOWN]]), zmin=-0.5, zmax=2.5,
        showscale=False))
    # A line at each piece's start, set in one go (add_vline per piece is quadratic).
    fig.update_layout(shapes=[
        dict(type="line", x0=begin - 0.5, x1=begin - 0.5, y0=0, y1=1, yref="paper",
             line=dict(color="#444", width=2))
        for begin, end in spans if end > begin])
    fig.update_yaxes(visible=False)
    fig.update_xaxes(tickvals=positions.tolist(), ticktext=chars, title="character")
    fig.update_layout(title=title or "Piece boundaries over the preprocessed text", height=170,
                      margin=dict(l=10, r=10, t=40, b=10))
    return readable(fig, word_start_note=False)  # characters: ␣ is a space here


def padded_batch_fig(ids_matrix, tokens_matrix: list[list[str]], pad_id: int,
                     row_labels: list[str] | None = None, width: int = CHART_WIDTH) -> go.Figure:
    """A (B, T) batch as a grid: token and id in each cell, pad cells grey. A token longer
    than a cell of a `width`-pixel chart holds is shortened ("…"); the hover shows it whole.

    Trace 0 holds the ids of the real tokens (NaN at pads), trace 1 the pad cells."""
    ids = np.asarray(ids_matrix)
    if ids.ndim != 2:
        raise ValueError(f"ids_matrix must be 2-D, got shape {ids.shape}")
    if len(tokens_matrix) != ids.shape[0]:
        raise ValueError(f"tokens_matrix has {len(tokens_matrix)} rows but ids_matrix has "
                         f"{ids.shape[0]}")
    for b, row in enumerate(tokens_matrix):
        if len(row) != ids.shape[1]:
            raise ValueError(f"tokens_matrix row {b} has {len(row)} tokens but ids_matrix has "
                             f"{ids.shape[1]} columns")
    rows = row_labels if row_labels is not None else [f"sentence {b}" for b in range(ids.shape[0])]
    if len(rows) != ids.shape[0]:
        raise ValueError(f"row_labels has {len(rows)} labels but ids_matrix has "
                         f"{ids.shape[0]} rows")
    pad = ids == pad_id
    values = ids.astype(float)
    cell_px = (width - CHAR_PX * max(map(len, rows), default=0) - 40) / max(ids.shape[1], 1)
    text = [[f"{tick_text([fit_text(t, cell_px)])[0]}<br>{i}" for t, i in zip(tr, ir)]
            for tr, ir in zip(tokens_matrix, ids.tolist())]
    names = np.broadcast_to(np.array(tick_text(rows), dtype=object)[:, None], ids.shape)
    whole = np.array([tick_text(row) for row in tokens_matrix], dtype=object)
    common = dict(x=np.arange(ids.shape[1]), y=positions(rows), text=text,
                  customdata=np.stack([names, whole], axis=-1), texttemplate="%{text}",
                  textfont=dict(size=12), showscale=False, xgap=2, ygap=2,
                  hovertemplate="%{customdata[0]}, position %{x}<br>%{customdata[1]}, id "
                                "%{z:.0f}<extra></extra>")
    fig = go.Figure([
        go.Heatmap(z=np.where(pad, np.nan, values), name="tokens",
                   colorscale=[[0, KIND_COLOURS[PIECE]], [1, KIND_COLOURS[PIECE]]], **common),
        go.Heatmap(z=np.where(pad, values, np.nan), name="padding",
                   colorscale=[[0, PAD_COLOUR], [1, PAD_COLOUR]], **common),
    ])
    fig.update_yaxes(**token_axis(rows, autorange="reversed"))
    fig.update_xaxes(title="position", dtick=1)
    fig.update_layout(title=f"A padded batch ({pad.sum()} pad cells, id {pad_id}, grey)",
                      height=120 + 45 * ids.shape[0], margin=dict(l=10, r=10, t=40, b=10))
    return readable(fig)


def text_differences(original: str, decoded: str) -> list[dict]:
    """Where ``decoded`` differs from ``original``: {"change", "at", "original", "decoded"} each."""
    matcher = difflib.SequenceMatcher(None, original, decoded, autojunk=False)
    return [{"change": op, "at": i1, "original": original[i1:i2], "decoded": decoded[j1:j2]}
            for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def round_trip_fig(original: str, decoded: str) -> go.Figure:
    """The input and its round trip, aligned character by character; differing cells red.

    z is 0 where the characters agree and 1 where they differ (or one side has none)."""
    top, bottom = [], []
    matcher = difflib.SequenceMatcher(None, original, decoded, autojunk=False)
    for _op, i1, i2, j1, j2 in matcher.get_opcodes():
        a, b = list(original[i1:i2]), list(decoded[j1:j2])
        width = max(len(a), len(b))
        top += a + [""] * (width - len(a))
        bottom += b + [""] * (width - len(b))
    same = np.array([x == y for x, y in zip(top, bottom)], dtype=bool)
    z = np.tile((~same).astype(float), (2, 1))
    cells = [[_visible(c) for c in top], [_visible(c) for c in bottom]]
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(len(top)), y=["input", "decode(encode(input))"], text=cells,
        texttemplate="%{text}", textfont=dict(size=15), showscale=False, xgap=1, ygap=2,
        colorscale=[[0, SAME_COLOUR], [0.5, SAME_COLOUR], [0.5, CHANGED_COLOUR],
                    [1, CHANGED_COLOUR]], zmin=0, zmax=1,
        hovertemplate="%{y}, column %{x}: %{text}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(visible=False)
    changed = int((~same).sum())
    fig.update_layout(title=f"Round trip: {changed} character(s) differ" if changed
                      else "Round trip: identical", height=170, margin=dict(l=10, r=10, t=40, b=10))
    return readable(fig, word_start_note=False)  # characters: ␣ is a space here

