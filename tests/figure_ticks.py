"""What a figure's token axis shows, read back as the browser shows it (markup unescaped)."""

import html

import numpy as np


def ticks(axis) -> list[tuple[int, str]]:
    """(position, tick text) of every tick of a token axis."""
    return [(int(v), html.unescape(str(t))) for v, t in zip(axis.tickvals, axis.ticktext)]


def tick_texts(axis) -> list[str]:
    """The tick texts, unescaped, in position order."""
    return [text for _, text in ticks(axis)]


def cell_data(trace) -> np.ndarray:
    """A trace's customdata as an object array, strings unescaped."""
    data = np.array(trace.customdata, dtype=object)
    return np.vectorize(lambda x: html.unescape(x) if isinstance(x, str) else x,
                        otypes=[object])(data)
