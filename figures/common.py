"""Helpers shared by the figure modules: token axes, escaped labels, matrix checks, and the
app's colour and text conventions.

Token axes place cells by POSITION (0 .. n - 1 on a numeric axis) and write the tokens as they
are as tick labels (Plotly tickvals / ticktext): a token that occurs twice shows twice, the
same text at two positions. SentencePiece's word-start mark "▁" is drawn as WORD_START_MARK,
which a subtitle explains (readable). Hover names the position and the token ("key 3 (2021)").
Tick labels are horizontal where they fit; Plotly rotates them only when they would overlap.
A long axis labels every k-th position (k = 1, 2, 5, 10, 20, 50, ...), each label written with
its position ("120: ␣the"), so a thinned axis never reads as a word made of the tokens it
skips; hover still names every cell.

Long sequences (a 400-token target): a figure is at most MAX_HEIGHT pixels tall, and a token
axis longer than WINDOW_ROWS opens on its first WINDOW_ROWS rows (token_axis(window=...)):
drag or zoom to move, double-click to see them all. The Plotly toolbar stands vertically at
the right edge (MODEBAR), off the titles on a narrow phone screen; a colour bar whose plot is
too short to hold it lies under the plot instead (horizontal), never squashed.

Colours, one convention for the app: attention weights (0..1) on WEIGHT_SCALE; signed values
(positional codes, q, K, V, differences of maps) on DIVERGING_SCALE centred at 0, positive blue
like the weights and negative red. Every colour bar has a title (colorbar).
"""

from __future__ import annotations

import copy
import functools
import html
import math
import re
import textwrap

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

MAX_TICKS = 60  # a longer token axis labels every k-th position (hover still names each one)
MAX_HEIGHT = 760  # the tallest figure drawn, in pixels (a longer axis opens on a window of rows)
WINDOW_ROWS = 50  # rows a long token axis shows at first (drag or zoom for the others)
MIN_COLORBAR_PX = 170  # a plot shorter than this gets its colour bar under it, horizontal
MAX_GAPPED = 60  # a heatmap with more rows or columns is drawn without gaps between cells
HOVER_TOKEN_CELLS = 40_000  # a larger map's hover names positions only (tokens: its axes)
# Plotly's toolbar down the right edge, never over the title; on hover it may lie over a
# colour bar's labels, so it has a light background of its own.
MODEBAR = dict(orientation="v", bgcolor="rgba(255, 255, 255, 0.85)")
WEIGHT_SCALE = "Blues"  # attention weights, 0 (white) .. 1 (dark blue)
DIVERGING_SCALE = "RdBu"  # signed values: negative red, 0 white, positive blue
TEXT_COLOUR = "#1f2937"  # tick labels and axis titles: dark, whatever the theme's grey
WORD_START, WORD_START_MARK = "▁", "␣"  # SentencePiece's mark, and how the figures draw it
# (byte-level BPE's Ġ reaches the figures as ▁ too: transformer.tokenizers.display)
# Short enough for a third of the page (issue 38: the longer wording was cut off mid-word in the
# Masks page's three panels and Contributions' three maps)
WORD_START_NOTE = "␣ starts a word (SentencePiece's ▁, byte-level BPE's Ġ)"
CHAR_PX = 7.5  # about how wide one character of a 12 px label is
CHART_WIDTH = 1000  # about how wide a full-width chart is drawn (1400 px window, sidebar open)


def colorbar(title: str, **settings) -> dict:
    """A colour bar with its title (every colour bar of the app says what it measures)."""
    return dict(title=dict(text=plotly_text(title)), **settings)


def diverging(bound: float) -> dict:
    """Heatmap settings for signed values: DIVERGING_SCALE, 0 in the middle, -bound .. bound."""
    bound = float(bound) if bound and np.isfinite(bound) and bound > 0 else 1e-6
    return dict(colorscale=DIVERGING_SCALE, zmid=0.0, zmin=-bound, zmax=bound)


def readable(fig, word_start_note: bool = True):
    """The app's finish for a figure: dark tick labels and axis titles, and a subtitle saying
    what WORD_START_MARK means when any axis, token column or cell shows it (word_start_note
    False: the figure draws characters, where the mark is a plain space). Returns the figure."""
    fig.update_xaxes(tickfont=dict(color=TEXT_COLOUR), title_font=dict(color=TEXT_COLOUR))
    fig.update_yaxes(tickfont=dict(color=TEXT_COLOUR), title_font=dict(color=TEXT_COLOUR))
    texts = []
    fig.for_each_xaxis(lambda axis: texts.extend(axis.ticktext or ()))
    fig.for_each_yaxis(lambda axis: texts.extend(axis.ticktext or ()))
    for trace in fig.data:  # token columns (token view) and cell text (a 1-D or 2-D list)
        text = getattr(trace, "text", None)
        if isinstance(text, (list, tuple)):
            for item in text:
                texts.extend(item if isinstance(item, (list, tuple)) else [item])
    if word_start_note and any(WORD_START_MARK in str(t) for t in texts):
        title, top = _word_start_subtitle(fig.layout.title.text, fig.layout.margin.t)
        fig.update_layout(title=title, margin=dict(t=top))
    fig.update_layout(modebar=MODEBAR)
    return fig


# A legend of a few traces, in one row at the figure's foot (below the x axis and its title:
# Plotly makes room for it), where neither a title with its subtitle nor a narrow column clips
# or covers it (issue 38: on the right, "original mod" / "heads silenc" in a narrow window; at
# the top, over the title's subtitle).
LEGEND_BELOW = dict(orientation="h", yref="container", yanchor="bottom", y=0.01, x=0,
                    xanchor="left")


_AXIS = re.compile(r"[xy]axis\d*")


def _word_start_subtitle(title, top) -> dict:
    """The title (text or dict) with WORD_START_NOTE as its subtitle, and the top margin."""
    title = dict(title) if isinstance(title, dict) else {"text": title}
    title["text"] = title.get("text") or ""
    title["subtitle"] = {"text": WORD_START_NOTE}
    # 24 px for the subtitle, and 18 more for each line of a title of several (the subtitle
    # went over the panels' titles under a two-line one: issue 38)
    return title, (top if top is not None else 60) + 24 + 18 * title["text"].count("<br>")


def unvalidated_figure(data: list[dict], layout: dict, word_start_note: bool = True) -> go.Figure:
    """readable's finish on plain trace and layout dicts, then a figure made from them without
    Plotly's per-property validation (measured in bench/figure_build.py: validating and copying
    every property costs more than the rest of building a large figure). Used by the figures
    redrawn on every layer or head change; tests/figures/test_figures_validation.py checks that Plotly's
    own validation accepts each of them. Axis and title texts must be written as dicts
    (title=dict(text=...)): nothing expands Plotly's shorthands here but a colour scale's
    name."""
    axes = [key for key in layout if _AXIS.fullmatch(key)] or ["xaxis", "yaxis"]
    texts = []
    for key in axes:
        axis = layout.setdefault(key, {})
        axis.setdefault("tickfont", {})["color"] = TEXT_COLOUR
        title = axis.get("title")
        title = dict(title) if isinstance(title, dict) else {} if title is None else {"text": title}
        title["font"] = {**title.get("font", {}), "color": TEXT_COLOUR}
        axis["title"] = title
        texts.extend(axis.get("ticktext") or ())
    for trace in data:
        text = trace.get("text")
        if isinstance(text, (list, tuple, np.ndarray)):
            texts.extend(np.asarray(text, dtype=object).ravel().tolist())
    if word_start_note and any(WORD_START_MARK in str(t) for t in texts):
        layout["title"], top = _word_start_subtitle(layout.get("title"),
                                                    layout.get("margin", {}).get("t"))
        layout["margin"] = {**layout.get("margin", {}), "t": top}
    for part in [*data, *(v for k, v in layout.items() if k.startswith("coloraxis"))]:
        if isinstance(part.get("colorscale"), str):  # as Plotly's validation expands a name
            part["colorscale"] = named_colorscale(part["colorscale"])
    layout.setdefault("modebar", dict(MODEBAR))
    _colorbars_that_fit(data, layout)
    return go.Figure({"data": data, "layout": layout}, _validate=False)


def plot_height(layout: dict) -> float:
    """About how tall a single plot's area is: the figure's height less its margins and a
    token axis's tick labels and title (40 px)."""
    margin = layout.get("margin") or {}
    return (layout.get("height") or 450) - margin.get("t", 100) - margin.get("b", 80) - 40


def _colorbars_that_fit(data: list[dict], layout: dict) -> None:
    """A colour bar is as tall as its plot: on a plot shorter than MIN_COLORBAR_PX (a one-row
    vector, a 1 x 1 map) it is laid under the figure, horizontal, instead of squashed."""
    if plot_height(layout) >= MIN_COLORBAR_PX or any(k.startswith("coloraxis") for k in layout):
        return
    scaled = [t for t in data if t.get("type") == "heatmap" and t.get("showscale", True)]
    for trace in scaled:
        bar = dict(trace.get("colorbar") or {})
        bar.update(orientation="h", yref="container", y=0.0, yanchor="bottom", x=0.5,
                   xanchor="center", len=0.6, thickness=12)
        bar["title"] = {**(bar.get("title") or {}), "side": "right"}  # clear of the x title
        trace["colorbar"] = bar
    if scaled:
        margin = layout.setdefault("margin", {})
        margin["b"] = margin.get("b", 10) + 70
        layout["height"] = (layout.get("height") or 450) + 60


def title_dict(text) -> dict:
    """A figure title for unvalidated_figure's layout: {"text": text}, or {} for None."""
    return {} if text is None else {"text": text}


def named_colorscale(name: str) -> list[list]:
    """A colour scale's name ("RdBu", "Blues_r") as the [[stop, colour], ...] list Plotly's
    validation makes of it: its colours at stops i / (n - 1), the same floats to the last bit
    (plotly.colors.get_colorscale's stops differ in the last bit)."""
    reverse = name.lower().endswith("_r")
    wanted = name.lower()[:-2] if reverse else name.lower()
    for module in (plotly.colors.sequential, plotly.colors.diverging, plotly.colors.cyclical):
        colours = {key.lower(): value for key, value in vars(module).items()
                   if isinstance(value, list) and not key.startswith("_")}.get(wanted)
        if colours:
            colours = colours[::-1] if reverse else colours
            return [[i / (len(colours) - 1), colour] for i, colour in enumerate(colours)]
    return [list(stop) for stop in plotly.colors.get_colorscale(name)]


@functools.lru_cache(maxsize=64)
def _grid_layout(rows: int, cols: int, options: tuple) -> dict:
    layout = make_subplots(rows=rows, cols=cols, **{
        key: list(value) if isinstance(value, tuple) else value for key, value in options}
    ).layout.to_plotly_json()
    layout.pop("template", None)  # the figure adds the default template itself
    return layout


def subplot_layout(rows: int, cols: int, **options) -> dict:
    """make_subplots(rows, cols, **options)'s layout (each subplot's axes and domains, the
    subplot titles) as a new plain dict for unvalidated_figure; cached per grid. A grid with
    no shared axes (options among PLAIN_GRID_OPTIONS) is computed as make_subplots computes it
    (_plain_grid), without building Plotly's validated layout: that took 1.0 s for a 12 x 16
    model view (NLLB's heads), on every new grid."""
    if set(options) <= PLAIN_GRID_OPTIONS:
        return _plain_grid(rows, cols, **options)
    key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()))
    return copy.deepcopy(_grid_layout(rows, cols, key))


PLAIN_GRID_OPTIONS = {"horizontal_spacing", "vertical_spacing", "subplot_titles", "row_titles",
                      "column_titles"}
TITLE_FONT = {"size": 16}  # make_subplots' subplot, column and row titles


def _plain_grid(rows: int, cols: int, horizontal_spacing=None, vertical_spacing=None,
                subplot_titles=None, row_titles=None, column_titles=None) -> dict:
    """make_subplots' layout of a rows x cols grid, its first cell top left, no axis shared:
    the same arithmetic (plotly/_subplots.py), in the same order, so every domain is the same
    float. tests/figures/test_figures_validation.py compares the two over a sweep of grids."""
    if rows < 1 or cols < 1:
        raise ValueError(f"a grid needs at least one row and one column, got {rows} x {cols}")
    hs = 0.2 / cols if horizontal_spacing is None else horizontal_spacing
    vs = (0.5 if subplot_titles is not None else 0.3) / rows if vertical_spacing is None \
        else vertical_spacing
    for spacing, size, name in ((hs, cols, "Horizontal"), (vs, rows, "Vertical")):
        if not 0 <= spacing <= 1 or (size > 1 and spacing > 1.0 / float(size - 1)):
            raise ValueError(f"{name} spacing {spacing} does not fit {size} subplots.")
    max_width = 0.98 if row_titles else 1.0
    widths = [(max_width - hs * (cols - 1)) / cols] * cols
    heights = [(1.0 - vs * (rows - 1)) / rows] * rows
    row_seq = range(rows)[::-1]  # the first row at the top
    grid = [[(sum(widths[:c]) + c * hs, sum(heights[:r]) + r * vs) for c in range(cols)]
            for r in row_seq]
    layout, domains, cells = {}, [[None] * cols for _ in range(rows)], []
    for r in range(rows):
        for c in range(cols):
            x_s, y_s = grid[r][c]
            x_e, y_e = x_s + widths[c], y_s + heights[-1 - r]
            y_s, y_e = (min(max(y, 0.0), 1.0) for y in (y_s, y_e))  # float error at the edges
            domains[r][c] = ([x_s, x_e], [y_s, y_e])
            cells.extend(domains[r][c])
            n = r * cols + c + 1
            suffix = n if n > 1 else ""
            layout[f"xaxis{suffix}"] = {"anchor": f"y{suffix}", "domain": [x_s, x_e]}
            layout[f"yaxis{suffix}"] = {"anchor": f"x{suffix}", "domain": [y_s, y_e]}
    annotations = _grid_titles(subplot_titles or [], cells, "top")
    if column_titles:
        annotations += _grid_titles(column_titles, [d for c in range(cols)
                                                    for d in domains[0][c]], "top")
    if row_titles:
        annotations += _grid_titles(row_titles, [d for r in range(rows)
                                                 for d in domains[r][-1]], "right")
    layout["annotations"] = annotations
    return layout


def _grid_titles(titles, domains: list, edge: str) -> list[dict]:
    """make_subplots' title annotations (_build_subplot_title_annotations): one per non-empty
    title, above its cell's x domain's middle ("top"), or right of its y domain's middle."""
    x_domains, y_domains = domains[::2], domains[1::2]
    out = []
    for i, text in enumerate(titles):
        if not text or i >= len(y_domains):
            continue
        if edge == "top":
            out.append({"font": dict(TITLE_FONT), "showarrow": False, "text": text,
                        "x": sum(x_domains[i]) / 2.0, "xanchor": "center", "xref": "paper",
                        "y": y_domains[i][1], "yanchor": "bottom", "yref": "paper"})
        else:
            out.append({"font": dict(TITLE_FONT), "showarrow": False, "text": text,
                        "textangle": 90, "x": x_domains[i][1], "xanchor": "left",
                        "xref": "paper", "y": sum(y_domains[i]) / 2.0, "yanchor": "middle",
                        "yref": "paper"})
    return out


def subplot_axes(row: int, col: int, cols: int) -> dict:
    """A trace's axis references for the subplot at (row, col), 1-based, of a make_subplots
    grid `cols` wide: {"xaxis": "x5", "yaxis": "y5"} (subplot 1: "x", "y")."""
    n = (row - 1) * cols + col
    return {"xaxis": f"x{n if n > 1 else ''}", "yaxis": f"y{n if n > 1 else ''}"}


def short_label(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a word boundary, "…" where cut (a first
    word longer than `width` is cut inside, as nothing else fits)."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = textwrap.shorten(text, width, placeholder=" …")
    return cut if cut != "…" and cut.strip() != "…" else text[:max(width - 1, 1)] + "…"


def fit_text(label: str, cell_px: float) -> str:
    """A label shortened ("…") to what a cell `cell_px` wide shows, so it never spills into
    the next cell (the hover keeps the whole label)."""
    label = str(label)
    room = max(1, int(cell_px // CHAR_PX))
    return label if len(label) <= room else label[:max(room - 1, 1)] + "…"


def plotly_text(label) -> str:
    """A label safe for Plotly, which reads "<s>" as a strike-through tag and shows nothing;
    SentencePiece's word-start mark ▁ drawn as WORD_START_MARK (readable's subtitle says so)."""
    return html.escape(str(label), quote=False).replace(WORD_START, WORD_START_MARK)


def tick_text(tokens) -> list[str]:
    """The tokens as Plotly shows them: as they are, markup escaped, the word-start mark ▁
    drawn as WORD_START_MARK (plotly_text; readable adds the note saying so)."""
    return [plotly_text(t) for t in tokens]


def positions(tokens) -> list[int]:
    """Where a token axis puts its cells: 0 .. len(tokens) - 1."""
    return list(range(len(tokens)))


def tick_step(n: int, max_ticks: int = MAX_TICKS) -> int:
    """How many positions apart a token axis of n positions is labelled: 1 up to max_ticks,
    beyond the smallest of 2, 5, 10, 20, 50, 100, ... that leaves at most max_ticks labels."""
    needed = math.ceil(n / max(max_ticks, 1))
    if needed <= 1:
        return 1
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= needed:
                return step * scale
        scale *= 10


def token_axis(tokens, window: int | None = None, **settings) -> dict:
    """Settings for a numeric axis whose cells sit at positions 0 .. n - 1, ticked with the
    tokens as they are. Up to MAX_TICKS tokens every position is ticked with its token; beyond,
    every tick_step(n)-th position, with its position and token ("120: ␣the"), so a label is
    never read as its neighbours' (hover names every cell); labels that are the positions
    themselves (a vector's dimensions) stay as they are ("120"). window: an axis longer than that
    many positions opens on its first `window` (drag or zoom for the others, double-click for
    all) and its title says so. Extra settings (title, tickangle, autorange, range) are passed
    through."""
    text = tick_text(tokens)
    n, step = len(text), tick_step(len(text))
    ticked = list(range(0, n, step))
    plain = text == [str(i) for i in range(n)]  # the labels are the positions (dimensions):
    # "5", not "5: 5" (issue 38)
    labels = [text[i] for i in ticked] if step == 1 or plain else [f"{i}: {text[i]}"
                                                                   for i in ticked]
    axis = dict(type="linear", tickmode="array", tickvals=ticked, ticktext=labels,
                showgrid=False, zeroline=False)
    if window and n > window:
        reverse = settings.pop("autorange", None) == "reversed"
        axis.update(range=[window - 0.5, -0.5] if reverse else [-0.5, window - 0.5],
                    autorange=False)
        title = settings.get("title")
        title = dict(title) if isinstance(title, dict) else {"text": title or ""}
        title["text"] = (f"{title['text']} " if title["text"] else "") + (
            f"(0-{window - 1} of {n} shown: drag to move, double-click for all)")
        settings["title"] = title
    return {**axis, **settings}


def window_height(n: int, *, base: int, per_row: float, minimum: int = 0,
                  window: int = WINDOW_ROWS) -> int:
    """A figure's height for n rows: base + per_row for each row shown (at most `window`, the
    rows token_axis(window=...) opens on), at least `minimum`, at most MAX_HEIGHT."""
    return int(min(MAX_HEIGHT, max(minimum, base + per_row * min(n, window))))


def cell_tokens(query_tokens, key_tokens) -> np.ndarray:
    """(q, k, 2) strings: the query token and the key token of every cell, escaped, for a
    heatmap's customdata (hover "query %{y:d} (%{customdata[0]})")."""
    rows, cols = tick_text(query_tokens), tick_text(key_tokens)
    out = np.empty((len(rows), len(cols), 2), dtype=object)
    for i, row in enumerate(rows):
        out[i, :, 0] = row
    for j, col in enumerate(cols):
        out[:, j, 1] = col
    return out


def tokens_in_hover(rows: int, cols: int) -> bool:
    """Whether a rows x cols map carries its tokens per cell for the hover (cell_tokens): up
    to HOVER_TOKEN_CELLS cells. A larger map (400 x 400: 10 MB of JSON) hovers positions only
    (position_hover), the tokens being on its axes."""
    return rows * cols <= HOVER_TOKEN_CELLS


def cell_hover_data(query_tokens, key_tokens, query_title: str = "query",
                    key_title: str = "key") -> tuple[np.ndarray | None, str]:
    """(customdata, hover lines) for a heatmap of query x key cells: cell_tokens and cell_hover
    while tokens_in_hover, else (None, position_hover)."""
    if tokens_in_hover(len(query_tokens), len(key_tokens)):
        return cell_tokens(query_tokens, key_tokens), cell_hover(query_title, key_title)
    return None, position_hover(query_title, key_title)


def gaps(shape, most: int = MAX_GAPPED) -> dict:
    """xgap / ygap of one pixel between heatmap cells while no side has more than `most`
    cells; none beyond (a 1 px gap would hide 400 cells of 2 px)."""
    return dict(xgap=1, ygap=1) if max(shape, default=0) <= most else {}


def position_hover(query_title: str = "query", key_title: str = "key") -> str:
    """cell_hover without tokens, for maps too large to carry them per cell."""
    return f"{query_title} %{{y:d}}<br>{key_title} %{{x:d}}"


def cell_hover(query_title: str = "query", key_title: str = "key") -> str:
    """The hover lines naming a heatmap cell by position and token, for customdata from
    cell_tokens: "query 2 (0)<br>key 3 (2021)". Positions are written "%{x:d}": a bare "%{x}"
    on a token axis shows the tick text (the token) instead of the position."""
    return (f"{query_title} %{{y:d}} (%{{customdata[0]}})<br>"
            f"{key_title} %{{x:d}} (%{{customdata[1]}})")


def number_text(value: float) -> str:
    """A number written for people: a true minus sign, no "+" or leading zeros in the exponent
    (-1e9 -> "−1e9", -10000.0 -> "−10000", -3.4e38 -> "−3.4e38")."""
    text = f"{float(value):g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text.replace("-", "−")


def probability_text(p: float) -> str:
    """A probability written so a token the model chose never reads as 0: three decimals from
    0.001 up ("0.473"), two significant digits in scientific form below ("3.2e−5"), and "0"
    only for exactly 0."""
    p = float(p)
    if p >= 0.001 or p <= 0 or not np.isfinite(p):
        return f"{p:.3f}" if p != 0 else "0"
    return number_text(float(f"{p:.2g}"))


def check_matrix(matrix, rows: int | None = None, cols: int | None = None, name="matrix"):
    """A 2-D float array, with ValueError naming both sizes when it does not fit the labels."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {matrix.shape}")
    if rows is not None and matrix.shape[0] != rows:
        raise ValueError(f"{name} has {matrix.shape[0]} rows but {rows} row labels")
    if cols is not None and matrix.shape[1] != cols:
        raise ValueError(f"{name} has {matrix.shape[1]} columns but {cols} column labels")
    return matrix


# ------------------------------------------------------------------------------- narrow screens

PHONE_CHART_PX = 358  # a full-width chart on a phone (390 px less Streamlit's padding)
_TAG = re.compile(r"<[^>]*>")
_TITLE_PX, _SUBPLOT_TITLE_PX, _AXIS_TITLE_PX = 17, 16, 14  # Plotly's default font sizes
_LINE = 1.3  # a line's height per px of its font


def wrap_words(text: str, chars: int) -> str:
    """text with "<br>" between words so that no line is longer than `chars` visible
    characters (tags such as <sup> not counted; its own "<br>"s kept; a longer word stays whole
    on its line)."""
    lines = []
    for line in str(text).split("<br>"):
        current = ""
        for word in line.split(" "):
            joined = f"{current} {word}" if current else word
            if current and len(_TAG.sub("", joined)) > chars:
                lines.append(current)
                current = word
            else:
                current = joined
        lines.append(current)
    return "<br>".join(lines)


def _wrapped(text, px: float, font: float) -> tuple[str, int]:
    """(text wrapped to `px` pixels at a `font`-px font, the lines it gained)."""
    if not text:
        return text, 0
    chars = max(8, int(px / (CHAR_PX * font / 12)))
    out = wrap_words(text, chars)
    return out, out.count("<br>") - str(text).count("<br>")


def narrow(fig: go.Figure, width_px: float = PHONE_CHART_PX) -> go.Figure:
    """The figure laid out for a chart `width_px` wide (a phone): its title, subtitle, subplot
    titles and axis titles wrapped at word boundaries to the width they have (a subplot title to
    its column's), the title pinned to the top with room under it for its lines and the subplot
    titles' lines, and the height grown by what the margins grew, so that the plots keep their
    size and no text is cut at the chart's edge or runs into another. A new figure; `fig` is
    unchanged."""
    fig = go.Figure(fig)
    layout = fig.layout
    margin = layout.margin
    left = margin.l if margin.l is not None else 80
    right = margin.r if margin.r is not None else 80
    old_top = margin.t if margin.t is not None else 100
    old_bottom = margin.b if margin.b is not None else 80
    plot_px = max(width_px - left - right, 0.3 * width_px)
    title = layout.title
    title_font = title.font.size or _TITLE_PX
    title_text, _ = _wrapped(title.text, width_px - 20, title_font)
    subtitle_text, _ = _wrapped(title.subtitle.text, width_px - 20, 13)
    block = (_lines(title_text) * title_font + _lines(subtitle_text) * 13) * _LINE
    domains = {}  # x domain centre -> its width, to find a subplot title's column
    fig.for_each_xaxis(lambda axis: domains.update(
        {round(sum(axis.domain) / 2, 3): axis.domain[1] - axis.domain[0]} if axis.domain else {}))
    above = 0
    for note in layout.annotations:
        if note.xref != "paper" or not note.text:
            continue
        share = domains.get(round(note.x, 3), 1.0) if note.x is not None else 1.0
        font = note.font.size or _SUBPLOT_TITLE_PX
        text, lines = _wrapped(note.text, plot_px * share, font)
        if lines:
            note.text = text
        if note.yanchor == "bottom" and (note.y or 0) >= 0.99:  # over its plot: room above
            above = max(above, _lines(text) * font * _LINE)
    below, beside = 0, 0
    for name in [key for key in layout.to_plotly_json() if _AXIS.fullmatch(key)]:
        axis = layout[name]
        span = (axis.domain[1] - axis.domain[0]) if axis.domain else 1.0
        if name.startswith("x"):
            text, lines = _wrapped(axis.title.text, plot_px * span, _AXIS_TITLE_PX)
            below = max(below, lines * _AXIS_TITLE_PX * _LINE)
        else:
            text, lines = _wrapped(axis.title.text, 0.8 * layout_height(layout) * span,
                                   _AXIS_TITLE_PX)
            beside = max(beside, lines * _AXIS_TITLE_PX * _LINE)
        if lines:
            axis.title.text = text
    top = max(old_top, _TITLE_TOP + block + 8 + above) if block else old_top + above
    height = layout_height(layout) + (top - old_top) + below
    if title_text:  # at the top, its lines downwards (Plotly centres it in the margin)
        fig.update_layout(title=dict(text=title_text, y=1 - _TITLE_TOP / height,
                                     yanchor="top", yref="container"))
    if subtitle_text:
        fig.update_layout(title_subtitle_text=subtitle_text)
    if top != old_top or below or beside:
        fig.update_layout(margin=dict(t=top, b=old_bottom + below, l=left + beside),
                          height=height)
    return fig


def _lines(text) -> int:
    """How many lines a Plotly text has (0 for none)."""
    return str(text).count("<br>") + 1 if text else 0


_TITLE_TOP = 10  # px above a phone's figure title

def layout_height(layout) -> float:
    """A figure's height in pixels (Plotly's 450 when it sets none)."""
    return layout.height or 450
