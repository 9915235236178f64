"""figures.contribution_maps: the numbers drawn are the ones given, tokens are escaped once."""

import numpy as np
import pytest

from figures.contribution_maps import contribution_map_fig, source_share_fig, step_bars_fig


def test_share_lines_carry_each_methods_values_and_tokens_escaped_once():
    fig = source_share_fig(["a", "</s>"], {"ALTI+": [0.25, 0.75], "Saliency": [0.5, 1.0]})
    assert [t.name for t in fig.data] == ["ALTI+", "Saliency"]
    np.testing.assert_allclose(fig.data[1].y, [0.5, 1.0])
    assert list(fig.layout.xaxis.ticktext) == ["a", "&lt;/s&gt;"]
    with pytest.raises(ValueError, match="2 shares for 3 output tokens"):
        source_share_fig(["a", "b", "c"], {"ALTI+": [0.1, 0.2]})


def test_signed_maps_are_centred_on_zero_and_unsigned_start_at_zero():
    matrix = np.array([[0.5, -2.0], [1.0, 0.0]])
    signed = contribution_map_fig(matrix, ["x", "y"], ["p", "q"], signed=True)
    trace = signed.data[0]
    assert trace.zmid == 0 and trace.zmin == -2.0 and trace.zmax == 2.0
    np.testing.assert_allclose(np.asarray(trace.z, float), matrix)
    unsigned = contribution_map_fig(np.abs(matrix), ["x", "y"], ["p", "q"], zmax=1.0)
    assert unsigned.data[0].zmin == 0 and unsigned.data[0].zmax == 1.0
    with pytest.raises(ValueError, match="rows"):
        contribution_map_fig(matrix, ["x"], ["p", "q"])


def test_step_bars_put_source_then_prefix():
    fig = step_bars_fig(["s0", "s1"], [0.1, 0.2], ["<s>"], [0.7])
    assert [t.name for t in fig.data] == ["source", "target prefix"]
    np.testing.assert_allclose(fig.data[0].y, [0.1, 0.2])
    np.testing.assert_allclose(fig.data[1].y, [0.7])
    assert list(fig.data[1].x) == ["tgt 0: &lt;s&gt;"]
    with pytest.raises(ValueError, match="1 prefix values for 2 tokens"):
        step_bars_fig(["s0"], [0.1], ["<s>", "a"], [0.7])
