"""figures.head_grids: one statistic as a layers x heads heatmap, and the head similarity
matrix in a given order. (The page that draws them: tests/views/test_page_head_statistics.py.)"""

import numpy as np
import pytest

from figures.head_grids import similarity_matrix_fig, stat_heatmap_fig


def test_stat_heatmap_fig_layers_down_heads_across():
    values = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, np.nan]])
    fig = stat_heatmap_fig(values, "Entropy <nats>", zmin=0.0, zmax=1.0)
    trace = fig.data[0]
    np.testing.assert_array_equal(np.asarray(trace.z), values)
    assert list(trace.x) == ["head 0", "head 1", "head 2"]
    assert list(trace.y) == ["layer 0", "layer 1"]
    assert trace.hovertemplate == "%{y}, %{x}: %{z:.3f}<extra></extra>"  # "layer 1, head 0: .."
    assert trace.texttemplate == "%{z:.3f}" and (trace.zmin, trace.zmax) == (0.0, 1.0)
    assert fig.layout.title.text == "Entropy &lt;nats&gt;"
    with pytest.raises(ValueError, match="2-D"):
        stat_heatmap_fig(np.zeros(3), "x")


def test_similarity_matrix_fig_puts_heads_in_the_given_order():
    matrix = np.array([[0.0, 0.9, 0.1], [0.9, 0.0, 0.8], [0.1, 0.8, 0.0]])
    labels = ["L0 H0", "L0 H1", "L1 H0"]
    fig = similarity_matrix_fig(matrix, labels, [0, 2, 1])
    trace = fig.data[0]
    assert list(trace.x) == ["L0 H0", "L1 H0", "L0 H1"] == list(trace.y)
    np.testing.assert_array_equal(np.asarray(trace.z),
                                  [[0.0, 0.1, 0.9], [0.1, 0.0, 0.8], [0.9, 0.8, 0.0]])
    assert trace.zmin == 0.0 and trace.zmax == 0.9 and "%{z:.3f}" in trace.hovertemplate
    assert list(similarity_matrix_fig(matrix, labels).data[0].x) == labels
    with pytest.raises(ValueError, match="every index"):
        similarity_matrix_fig(matrix, labels, [0, 0, 1])
    with pytest.raises(ValueError, match="3 rows but 2 row labels"):
        similarity_matrix_fig(matrix, labels[:2])
