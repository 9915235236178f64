"""views/Aggregations.py ("Aggregations and rollout") through AppTest.

The plotted numbers are checked against transformer.analysis.flow applied to OpenedModel.attention,
computed here independently of the app."""

import base64
import json

import numpy as np
import pytest

from explorer import state

PAGE = "views/Aggregations.py"
CHARTS = ("agg_heads_fig", "agg_rollout_fig", "agg_flow_fig")


def _array(value):
    """A Plotly JSON array: a list, or {"dtype", "bdata", "shape"} (Plotly >= 6 typed arrays)."""
    if isinstance(value, dict):
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = [int(s) for s in str(value.get("shape", len(data))).split(",")]
        return data.reshape(shape)
    return np.asarray(value)


def charts(at) -> dict:
    """{chart key: Plotly figure dict} of the page's charts."""
    found = {}
    for chart in at.get("plotly_chart"):
        for key in CHARTS:
            if chart.proto.id.endswith(key):
                found[key] = json.loads(chart.proto.spec)
    return found


def heatmaps(figure) -> list[np.ndarray]:
    return [_array(trace["z"]) for trace in figure["data"]]


def ticks(figure) -> list[str]:
    """The key tokens of the first map, as its x axis shows them (cells sit at positions)."""
    return list(figure["layout"]["xaxis"]["ticktext"])


@pytest.fixture
def page(app):
    app.switch_page(PAGE).run()
    assert not app.exception, app.exception
    return app


@pytest.fixture(scope="module")
def expected():
    """The default sentence's attention, from a checkpoint loaded here (not the app's cache)."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT).attention(state.DEFAULT_SOURCE)


def test_page_plots_the_true_aggregations(page, expected):
    from transformer.analysis.flow import attention_rollout, head_mean, source_to_target_flow

    shown = charts(page)
    assert set(shown) == set(CHARTS)
    heads = head_mean(expected["encoder"])
    np.testing.assert_allclose(heatmaps(shown["agg_heads_fig"]), heads, atol=1e-6)
    rollout = attention_rollout(expected["encoder"])  # residual on, mean over heads
    np.testing.assert_allclose(heatmaps(shown["agg_rollout_fig"]), rollout, atol=1e-6)
    flow = source_to_target_flow(expected["encoder"], expected["cross"])
    np.testing.assert_allclose(heatmaps(shown["agg_flow_fig"])[0], flow, atol=1e-6)
    trace = shown["agg_rollout_fig"]["data"][0]
    assert "query %{y" in trace["hovertemplate"] and "%{z:.4f}" in trace["hovertemplate"]
    assert ticks(shown["agg_rollout_fig"])[0] == "&lt;s&gt;"
    assert len(page.get("download_button")) == 6  # CSV + NPZ under each view

    page.toggle(key="agg_residual").set_value(False).run()
    assert not page.exception, page.exception
    np.testing.assert_allclose(heatmaps(charts(page)["agg_rollout_fig"]),
                               attention_rollout(expected["encoder"], residual=False), atol=1e-6)


@pytest.mark.parametrize("key, value, changes", [
    ("agg_kind", "Cross-attention", {"agg_heads_fig"}),
    ("agg_reduce", "max", set(CHARTS)),
    ("agg_rollout_kind", "Decoder self-attention", {"agg_rollout_fig"}),
    ("agg_residual", False, {"agg_rollout_fig", "agg_flow_fig"}),
    ("agg_hide_special", True, set(CHARTS)),
    ("agg_merge_words", True, set(CHARTS)),
    ("agg_flow_layer", 0, {"agg_flow_fig"}),
])
def test_every_widget_changes_its_figures(page, key, value, changes):
    before = charts(page)
    widget = {"agg_kind": page.radio, "agg_reduce": page.radio, "agg_rollout_kind": page.radio,
              "agg_flow_layer": page.selectbox}.get(key, page.toggle)
    widget(key=key).set_value(value).run()
    assert not page.exception, page.exception
    after = charts(page)
    assert {k for k in CHARTS if before[k] != after[k]} == changes
    if key == "agg_hide_special":
        assert not any("&lt;" in t for fig in after.values() for t in ticks(fig))
        for z in heatmaps(after["agg_rollout_fig"]):
            np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-6)
    if key == "agg_merge_words":
        assert "friday," in ticks(after["agg_rollout_fig"])


def test_bad_input_never_crashes(page):
    page.toggle(key="agg_hide_special").set_value(True).run()
    page.toggle(key="agg_merge_words").set_value(True).run()
    page.text_input(key=state.SOURCE).set_value("").run()
    assert not page.exception, page.exception
    assert page.info, "no note that every source token is hidden"
    page.text_input(key=state.SOURCE).set_value("March " * 100).run()  # cut to max_len
    assert not page.exception, page.exception
    assert set(charts(page)) == set(CHARTS)
    page.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED).run()
    page.text_input(key=state.TARGET).set_value("").run()
    assert not page.exception, page.exception
    page.toggle(key="agg_hide_special").set_value(False).run()
    assert set(charts(page)) == set(CHARTS)
    page.text_input(key=state.TARGET).set_value("1999-12-31 internationalisation").run()
    page.radio(key="agg_rollout_kind").set_value("Decoder self-attention").run()
    assert not page.exception, page.exception
    for z in heatmaps(charts(page)["agg_rollout_fig"]):
        assert np.all(np.triu(z, k=1) == 0.0)  # the decoder's rollout stays causal


def test_merging_words_follows_each_sides_word_boundaries(page, expected):
    """The dates target "2021-03-05" has one "▁" for the whole output: merging it would make
    one cell. Its pieces are kept (and the page says so); the source's words merge; with the
    max over heads no merged weight goes above 1."""
    page.toggle(key="agg_merge_words").set_value(True).run()
    page.radio(key="agg_kind").set_value("Cross-attention").run()
    page.radio(key="agg_rollout_kind").set_value("Decoder self-attention").run()
    assert not page.exception, page.exception
    shown = charts(page)
    target = expected["target_tokens"]
    cross = shown["agg_heads_fig"]
    assert heatmaps(cross)[0].shape == (len(target), 6)  # <s> friday, march 5, 2021 </s>
    assert "friday," in ticks(cross)
    assert heatmaps(shown["agg_rollout_fig"])[0].shape == (len(target), len(target))
    assert any("no word boundaries" in c.value for c in page.caption)
    page.radio(key="agg_reduce").set_value("max").run()
    for key, fig in charts(page).items():
        assert max(z.max() for z in heatmaps(fig)) <= 1.0 + 1e-6, key  # float32 weights
        assert fig["layout"]["coloraxis"]["cmax"] <= 1.0, key
