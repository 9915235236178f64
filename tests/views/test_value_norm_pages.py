"""The "Show: Weights | Weight × value norm" choice of every attention view (issue 27, item 1)
through AppTest on the bundled model: picking value norms draws the arrays
OpenedModel.contributions(method="value_norm") gives (to 1e-5), and the Head arithmetic page's
transformed values have the norms contributions' "<kind>_norms" has."""

import json

import numpy as np
import pytest
from conftest import model_view_thumbnail, open_page, set_widget
from conftest import plotly_array as array

from explorer import show, state
from figures.token_view import MAX_LINES, drawn_lines

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def value_norms():
    """OpenedModel.contributions of the default sentence (its own translation), outside the app."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT).contributions(state.DEFAULT_SOURCE,
                                                             method="value_norm")


def figures(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def heatmaps(spec: dict) -> list[dict]:
    """The value heatmaps of a figure (not the grey blocked cells)."""
    return [t for t in spec["data"] if t["type"] == "heatmap" and t.get("name") != "blocked (masked)"]


def assert_drawn(z, expected):
    """A drawn heatmap's z (blocked cells NaN) equals the API's array where it is drawn."""
    z, expected = array(z), np.asarray(expected, float)
    assert z.shape == expected.shape
    drawn = ~np.isnan(z)
    assert drawn.any()
    np.testing.assert_allclose(z[drawn], expected[drawn], atol=TOLERANCE, rtol=0)


def no_error(at):
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


@pytest.fixture(scope="module")
def app():
    """app.py run once with the bundled model, shared by this module's tests (each opens its
    own page): one start instead of five."""
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    no_error(at)
    return at


def test_attention_maps_and_model_view(app, value_norms):
    at = open_page(app, "views/Attention_Maps.py")
    set_widget(at, "radio", "attn_kind", "Cross-attention")
    set_widget(at, "selectbox", "attn_layer", 1)
    set_widget(at, "selectbox", "attn_head", 2)
    set_widget(at, "radio", "attn_show", show.VALUE_NORM)
    no_error(at)
    head, model_view = figures(at)
    assert_drawn(heatmaps(head)[0]["z"], value_norms["cross"][1, 2])
    assert head["data"][0]["colorbar"]["title"]["text"] == show.NORM_NAME
    assert head["data"][0]["zmax"] == pytest.approx(value_norms["cross"].max(), rel=1e-5)
    assert_drawn(model_view_thumbnail(model_view, 0, 0), value_norms["cross"][0, 0])
    assert model_view["layout"]["coloraxis"]["cmax"] > 1  # its own scale, not 0 to 1
    assert any("Kobayashi" in c.value for c in at.caption)


def test_linked_view(app, value_norms):
    at = open_page(app, "views/Linked_View.py")
    set_widget(at, "selectbox", "link_head", 1)
    set_widget(at, "radio", "link_show", show.VALUE_NORM)
    no_error(at)
    (spec,) = figures(at)
    encoder, decoder, cross = heatmaps(spec)
    assert_drawn(encoder["z"], value_norms["encoder"][0, 1])
    assert_drawn(decoder["z"], value_norms["decoder"][0, 1])
    assert_drawn(cross["z"], value_norms["cross"][0, 1])
    assert spec["layout"]["coloraxis"]["colorbar"]["title"]["text"] == show.NORM_NAME
    assert any(show.NORM_NAME in m.value for m in at.markdown)


def test_aggregations(app, value_norms):
    at = open_page(app, "views/Aggregations.py")
    set_widget(at, "radio", "agg_show", show.VALUE_NORM)
    set_widget(at, "radio", "agg_kind", "Cross-attention")
    no_error(at)
    heads, rollout, flow = figures(at)
    assert len(heatmaps(heads)) == len(value_norms["cross"]) == 2
    for layer, trace in enumerate(heatmaps(heads)):  # the mean over heads at first
        assert_drawn(trace["z"], value_norms["cross"][layer].mean(axis=0))
    assert heads["layout"]["coloraxis"]["cmax"] == pytest.approx(value_norms["cross"].mean(
        axis=1).max(), rel=1e-5)
    set_widget(at, "radio", "agg_reduce", "summed")  # offered with value norms
    assert "‖Σₕ α f(x)‖" in figures(at)[0]["layout"]["title"]["text"]
    summed = heatmaps(figures(at)[0])
    assert len(summed) == 2
    for layer, trace in enumerate(summed):
        assert_drawn(trace["z"], value_norms["cross_summed"][layer])
    # Rollout and flow: each layer's reduced map with its rows renormalised explicitly
    from transformer.analysis.flow import attention_rollout, normalise_rows

    rows = normalise_rows(value_norms["encoder_summed"])[:, None]
    expected = attention_rollout(rows, residual=True)
    assert len(heatmaps(figures(at)[1])) == len(expected)
    for layer, trace in enumerate(heatmaps(figures(at)[1])):
        assert_drawn(trace["z"], expected[layer])
        np.testing.assert_allclose(array(trace["z"]).sum(axis=1), 1, atol=1e-5)
    assert any("renormalised explicitly" in m.value for m in at.markdown)
    set_widget(at, "radio", "agg_show", show.WEIGHTS)  # the sum is not offered for weights
    no_error(at)
    assert at.radio(key="agg_reduce").value == "mean"


def test_token_view(app, value_norms):
    at = open_page(app, "views/Token_View.py")
    set_widget(at, "radio", "tv_show", show.VALUE_NORM)
    set_widget(at, "slider", "tv_min_weight", 0.2)
    no_error(at)
    (spec,) = figures(at)
    values = value_norms["encoder"]
    scale = values.max()
    assert spec["layout"]["meta"]["scale"] == pytest.approx(scale, rel=1e-5)
    import plotly.graph_objects as go

    lines = set(drawn_lines(go.Figure(spec)))
    expected = {(h, q, k) for h, q, k in zip(*np.nonzero(values[0] >= 0.2 * scale))}
    assert 0 < len(expected) <= MAX_LINES and lines == expected


def test_head_arithmetic_value_norm_step(app, value_norms):
    at = open_page(app, "views/Head_Arithmetic.py")
    set_widget(at, "radio", "arith_kind", "Cross-attention")
    set_widget(at, "selectbox", "arith_layer", 1)
    set_widget(at, "selectbox", "arith_head", 3)
    set_widget(at, "selectbox", "arith_query", 2)
    no_error(at)
    spec = {s["layout"]["title"]["text"]: s for s in figures(at)}
    (steps,) = [s for s in figures(at) if any(t.get("name") == "‖f(x)‖" for t in s["data"])]
    traces = {t["name"]: array(t["z"])[0] for t in steps["data"]}
    np.testing.assert_allclose(traces["‖f(x)‖"], value_norms["cross_norms"][1, 3], atol=TOLERANCE)
    np.testing.assert_allclose(traces["‖α f(x)‖"], value_norms["cross"][1, 3, 2], atol=TOLERANCE)
    assert any(title.startswith("f(x)") for title in spec)


def test_an_imported_model():
    """A Hugging Face BART (tests/fixtures/bart) uploaded as its folder's files: value norms
    on the Attention maps page are its own (the encoder's: they depend on the source alone)."""
    from conftest import ROOT, uploader
    from streamlit.testing.v1 import AppTest

    from transformer import load_checkpoint

    folder = ROOT / "tests" / "fixtures" / "bart"
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    uploader(at).set_value([(path.name, path.read_bytes(), "application/octet-stream")
                            for path in sorted(folder.iterdir())]).run()
    no_error(at)
    assert at.session_state[state.MODEL].startswith(f"{state.UPLOADED}:")
    at = open_page(at, "views/Attention_Maps.py")
    set_widget(at, "radio", "attn_show", show.VALUE_NORM)
    no_error(at)
    expected = load_checkpoint(folder).contributions(state.DEFAULT_SOURCE, method="value_norm")
    assert_drawn(heatmaps(figures(at)[0])[0]["z"], expected["encoder"][0, 0])


def test_the_value_norm_figures_pass_plotly_validation():
    """The figures' new parameters (zmax, value_name, scale) and the Head arithmetic step's
    figure, built unvalidated, are accepted by Plotly's own validation."""
    import plotly.graph_objects as go

    from figures.arithmetic import value_norm_steps_fig
    from figures.attention_maps import attention_heatmap_fig, linked_view_fig, model_view_fig
    from figures.token_view import token_view_fig

    rng = np.random.default_rng(0)
    values, tokens = rng.random((2, 2, 3, 3)) * 5, ["a", "b", "c"]
    named = dict(value_name=show.NORM_NAME)
    built = [
        attention_heatmap_fig(values[0, 0], tokens, tokens, zmax=5.0, **named),
        model_view_fig(values, tokens, tokens, zmax=5.0, **named),
        linked_view_fig(values[0, 0], values[0, 1], values[1, 0], tokens, tokens, zmax=5.0,
                        selected_target=1, **named),
        token_view_fig(values[0], tokens, tokens, head_labels=["h0", "h1"], scale=5.0,
                       min_weight=1.0, **named),
        value_norm_steps_fig(values[0, 0, 0] / 5, values[1, 0, 0], tokens),
    ]
    for fig in built:
        go.Figure(fig.to_dict())
    assert built[0].data[0].colorbar.title.text == show.NORM_NAME
