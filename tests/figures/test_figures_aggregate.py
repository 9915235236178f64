"""figures.aggregate: the layer grid (one colour axis for every map) and the stacked CSV table.
(The page that draws them: tests/views/test_page_aggregations.py.)"""

import numpy as np
import pytest
from figure_ticks import cell_data, ticks

from figures.aggregate import layer_grid_fig, stacked_table


def test_layer_grid_fig_shares_one_colour_axis_and_checks_shapes():
    maps = np.array([[[0.25, 0.75], [1.0, 0.0]], [[0.5, 0.5], [0.125, 0.875]]])
    fig = layer_grid_fig(maps, ["<s>", "a"], ["a", "a"], ["layer 0", "layer 1"])
    assert [t.coloraxis for t in fig.data] == ["coloraxis", "coloraxis"]
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1.0
    np.testing.assert_array_equal(np.asarray(fig.data[1].z), maps[1])
    assert list(fig.data[0].y) == [0, 1] and list(fig.data[0].x) == [0, 1]
    assert ticks(fig.layout.yaxis) == [(0, "<s>"), (1, "a")]
    assert ticks(fig.layout.xaxis) == [(0, "a"), (1, "a")]  # the same token at two positions
    assert ticks(fig.layout.xaxis2) == [(0, "a"), (1, "a")]
    assert fig.layout.yaxis.ticktext[0] == "&lt;s&gt;"
    assert "query %{y:d} (%{customdata[0]})<br>key %{x:d} (%{customdata[1]})" in (
        fig.data[0].hovertemplate)
    assert tuple(cell_data(fig.data[1])[0, 1]) == ("<s>", "a")
    assert layer_grid_fig(maps, "ab", "ab", ["x", "y"], zmax=0.5).layout.coloraxis.cmax == 0.5
    with pytest.raises(ValueError, match="2 rows but 3 row labels"):
        layer_grid_fig(maps, "abc", "ab", ["x", "y"])
    with pytest.raises(ValueError, match="2 maps but 1 titles"):
        layer_grid_fig(maps, "ab", "ab", ["x"])


def test_stacked_table_labels_rows_by_map_and_token():
    maps = np.arange(8.0).reshape(2, 2, 2)
    table, labels = stacked_table(maps, ["<s>", "a"], ["layer 0", "layer 1"])
    np.testing.assert_array_equal(table, [[0, 1], [2, 3], [4, 5], [6, 7]])
    assert labels == ["layer 0 | <s>", "layer 0 | a", "layer 1 | <s>", "layer 1 | a"]
