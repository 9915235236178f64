"""figures.tokenization.pieces_fig with many pieces (a 64-token Marian translation on the Tokenization
page): a cell's text never spills into its neighbours' (it did, "▁br 93" in 14 px cells)."""

import html

import numpy as np

from figures.common import CHAR_PX, CHART_WIDTH
from figures.tokenization import pieces_fig


def test_cell_text_fits_its_cell():
    for n in (5, 40, 65, 200):
        pieces = ["<pad>"] + ["▁wednesday"] * (n - 1)
        fig = pieces_fig(pieces, np.arange(1000, 1000 + n), (1000,), 1)
        room = CHART_WIDTH / n // CHAR_PX
        for cell in fig.data[0].text[0]:
            shown = [html.unescape(line) for line in cell.split("<br>") if line]
            assert all(len(line) <= room for line in shown), (n, cell)
        if room < 3:  # no room for a piece and an ellipsis: no text at all
            assert not any(fig.data[0].text[0]), n
        assert len(fig.data[0].hovertext[0]) == n  # every piece still named on hover
    few = pieces_fig(["<s>", "▁a", "b"], [5, 6, 7], (5,), 0).data[0].text[0]
    assert list(few) == ["&lt;s&gt;<br>5", "␣a<br>6", "b<br>7"]  # room: kept whole, escaped
