"""figures.positional: pure figure functions, checked against transformer.positional_encoding."""

import numpy as np
import pytest
from figure_ticks import cell_data, ticks

from figures.positional import (
    dot_similarity,
    encoder_input_fig,
    positional_heatmap_fig,
    similarity_fig,
    sinusoids_fig,
)
from transformer import positional_encoding

TOKENS = ["<s>", "▁march", "0", "0", "</s>"]
SHOWN = ["<s>", "␣march", "0", "0", "</s>"]  # the word-start mark drawn visibly


def test_positional_heatmap_plots_the_encoding():
    pe = positional_encoding(12, 8)
    fig = positional_heatmap_fig(pe)
    assert len(fig.data) == 1 and fig.data[0].type == "heatmap"
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), pe)
    assert list(fig.data[0].x) == list(range(8)) and list(fig.data[0].y) == list(range(12))
    assert ":.4f" in fig.data[0].hovertemplate


def test_positional_heatmap_rejects_non_matrices():
    with pytest.raises(ValueError, match="2-D"):
        positional_heatmap_fig(np.zeros(5))


def test_sinusoids_fig_one_line_per_dimension():
    pe = positional_encoding(20, 6, base=100.0)
    fig = sinusoids_fig(pe, [0, 3, 5])
    assert [t.type for t in fig.data] == ["scatter"] * 3
    for trace, d in zip(fig.data, [0, 3, 5]):
        np.testing.assert_array_equal(np.asarray(trace.y), pe[:, d])
        np.testing.assert_array_equal(np.asarray(trace.x), np.arange(20))
        assert str(d) in trace.name and ":.4f" in trace.hovertemplate
    assert len(sinusoids_fig(pe, []).data) == 0


def test_sinusoids_fig_rejects_a_dimension_out_of_range_naming_both():
    with pytest.raises(ValueError, match=r"dimension 6 .* 6 dimensions"):
        sinusoids_fig(positional_encoding(4, 6), [0, 6])


def test_dot_similarity_is_every_pair_of_positions():
    pe = positional_encoding(10, 16)
    sim = dot_similarity(pe)
    assert sim.shape == (10, 10)
    np.testing.assert_allclose(sim, pe @ pe.T)
    np.testing.assert_allclose(np.diag(sim), 8.0, rtol=1e-5)  # sin² + cos² per pair
    # Sinusoids: the dot product depends only on the offset between positions.
    np.testing.assert_allclose(sim[1, 4], sim[5, 8], rtol=1e-5)
    with pytest.raises(ValueError, match="2-D"):
        dot_similarity(np.zeros(3))


def test_similarity_fig_labels_both_axes_with_the_tokens():
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(5, 5))
    fig = similarity_fig(matrix, TOKENS)
    heatmap = fig.data[0]
    assert heatmap.type == "heatmap"
    np.testing.assert_array_equal(np.asarray(heatmap.z), matrix)
    assert list(heatmap.x) == list(heatmap.y) == [0, 1, 2, 3, 4]
    assert ticks(fig.layout.xaxis) == ticks(fig.layout.yaxis) == list(enumerate(SHOWN))
    assert ":.4f" in heatmap.hovertemplate
    assert "position %{y:d} (%{customdata[0]}) · position %{x:d} (%{customdata[1]})" in (
        heatmap.hovertemplate)
    assert tuple(cell_data(heatmap)[2, 3]) == ("0", "0")  # the same token at two positions


def test_similarity_fig_of_positions_says_each_position_once():
    fig = similarity_fig(np.eye(3), ["0", "1", "2"])
    assert fig.data[0].hovertemplate.startswith("position %{y:d} · position %{x:d}<br>")
    # A plain position axis: Plotly's own round numbers (test_positional_polish.py).
    assert fig.layout.xaxis.tickmode == "auto" and fig.layout.xaxis.ticktext is None
    # nothing per cell to send (512 positions' label pairs were 6 MB of the figure's JSON)
    assert fig.data[0].customdata is None


def test_similarity_fig_rejects_a_mismatch_naming_both_sizes():
    with pytest.raises(ValueError, match=r"4 rows but 5 row labels"):
        similarity_fig(np.zeros((4, 4)), TOKENS)
    with pytest.raises(ValueError, match=r"4 columns but 5 column labels"):
        similarity_fig(np.zeros((5, 4)), TOKENS)


def _parts(n=None, d=8):
    n = len(TOKENS) if n is None else n
    rng = np.random.default_rng(1)
    token_part = rng.normal(size=(n, d)).astype(np.float32)
    position_part = positional_encoding(n, d)
    return token_part, position_part, token_part + position_part


@pytest.mark.parametrize("shared", [True, False])
def test_encoder_input_fig_three_heatmaps_of_the_parts(shared):
    token_part, position_part, total = _parts()
    fig = encoder_input_fig(token_part, position_part, total, TOKENS, shared_scale=shared)
    assert [t.type for t in fig.data] == ["heatmap"] * 3
    for trace, part in zip(fig.data, (token_part, position_part, total)):
        np.testing.assert_array_equal(np.asarray(trace.z), part)
        assert list(trace.y) == [0, 1, 2, 3, 4]
        assert "token %{y:d} (%{customdata})" in trace.hovertemplate
        assert cell_data(trace)[3, 0] == "0" and ":.4f" in trace.hovertemplate
    assert ticks(fig.layout.yaxis) == list(enumerate(SHOWN))
    assert [t.xaxis for t in fig.data] == ["x", "x2", "x3"]
    assert (fig.layout.coloraxis.colorscale is not None) == shared


def test_encoder_input_fig_rejects_mismatches_naming_both_sizes():
    token_part, position_part, total = _parts()
    with pytest.raises(ValueError, match=r"token_part has 5 rows but 4 row labels"):
        encoder_input_fig(token_part, position_part, total, TOKENS[:4])
    with pytest.raises(ValueError, match=r"position_part has 7 columns but 8 column labels"):
        encoder_input_fig(token_part, position_part[:, :7], total, TOKENS)
    with pytest.raises(ValueError, match=r"total has 4 rows but 5 row labels"):
        encoder_input_fig(token_part, position_part, total[:4], TOKENS)
