"""views/Attention_Maps.py through AppTest: it draws the model's true numbers, follows every
picker, and never re-runs the model for a new layer or head (nor does the linked view).
Bad input: tests/views/test_hardening.py."""

import json

import numpy as np
import pytest
from conftest import model_view_outline, model_view_thumbnail
from conftest import open_page as _page
from conftest import plotly_array as array
from conftest import set_widget as _set

from explorer import state
from transformer.core.kinds import kind_by_label

ATTN, LINK = "views/Attention_Maps.py", "views/Linked_View.py"


@pytest.fixture(scope="module")
def true_maps():
    """OpenedModel.attention of the default sentence, computed outside the app."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT).attention(state.DEFAULT_SOURCE)


@pytest.fixture
def attention_calls(monkeypatch):
    """Counts calls of OpenedModel.attention (the model run behind every attention map)."""
    from transformer import OpenedModel

    calls = []
    original = OpenedModel.attention

    def counted(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(OpenedModel, "attention", counted)
    return calls


def figure(at, index=0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def shown_matrix(at) -> np.ndarray:
    return array(figure(at)["data"][0]["z"])


def test_attention_page_default_render(shared_app):
    at = shared_app.page(ATTN)
    assert len(at.get("plotly_chart")) == 2  # the head, the model view
    spec = figure(at)
    assert spec["layout"]["title"]["text"] == "Encoder self-attention, layer 0, head 0"
    model_view = figure(at, 1)
    layers, heads = (len(at.selectbox(key=k).options) for k in ("attn_layer", "attn_head"))
    cells = [t for t in model_view["data"] if t.get("name") == "cell"]
    assert len(cells[0]["customdata"]) == layers * heads  # a marker per thumbnail
    assert [s["name"] for s in model_view["layout"]["shapes"]] == ["selected"]
    assert model_view_outline(model_view) == (0, 0)
    assert model_view_thumbnail(model_view, layers - 1, heads - 1).shape == \
        array(spec["data"][0]["z"]).shape  # (layer 0, head 0) is drawn above, as large
    assert at.get("download_button"), "no export buttons"


def test_attention_page_shows_the_models_true_slice(app, true_maps):
    at = _page(app, ATTN)
    before = shown_matrix(at)
    for kind_label, layer, head in [("Encoder self-attention", 1, 2),
                                    ("Decoder self-attention", 0, 3), ("Cross-attention", 1, 1)]:
        _set(at, "radio", "attn_kind", kind_label)
        _set(at, "selectbox", "attn_layer", layer)
        _set(at, "selectbox", "attn_head", head)
        kind = kind_by_label(kind_label).name
        expected = np.where(true_maps[f"{kind}_mask"], true_maps[kind][layer, head], np.nan)
        shown = shown_matrix(at)
        assert shown.shape != before.shape or not np.array_equal(shown, before, equal_nan=True)
        np.testing.assert_allclose(shown, expected, rtol=0, atol=1e-6)
        title = figure(at)["layout"]["title"]["text"]
        assert title == f"{kind_label}, layer {layer}, head {head}"
        model_view = figure(at, 1)  # the outline is on that head's thumbnail, which holds it
        assert model_view_outline(model_view) == (layer, head)
        np.testing.assert_allclose(model_view_thumbnail(model_view, layer, head),
                                   true_maps[kind][layer, head], rtol=0, atol=1e-6)
        before = shown


def test_decoder_rows_blocked_cells_and_colour_scale(app, true_maps):
    at = _set(_page(app, ATTN), "radio", "attn_kind", "Decoder self-attention")
    spec = figure(at)
    assert [t.get("name") for t in spec["data"]] == ["weight", "blocked (masked)"]
    assert spec["layout"]["yaxis"]["ticktext"][0] == "&lt;s&gt;"  # decoder inputs: <s> first
    _set(at, "radio", "attn_rows", "Predicted outputs")
    assert figure(at)["layout"]["yaxis"]["ticktext"][-1] == "&lt;/s&gt;"
    assert figure(at)["data"][0]["zmax"] == 1
    assert at.radio(key="attn_scale").options == ["Fixed", "Fitted to this map"]
    _set(at, "radio", "attn_scale", "Fitted to this map")
    shown = shown_matrix(at)
    assert figure(at)["data"][0]["zmax"] == pytest.approx(np.nanmax(shown), abs=1e-6)


def test_changing_layer_or_head_never_reruns_the_model(app, attention_calls):
    at = _page(app, ATTN)
    runs = len(attention_calls)
    for kind, key, value in [("selectbox", "attn_layer", 1), ("selectbox", "attn_head", 3),
                             ("radio", "attn_kind", "Cross-attention"),
                             ("selectbox", "attn_head", 1), ("radio", "attn_scale",
                                                             "Fitted to this map")]:
        _set(at, kind, key, value)
    at = _page(at, LINK)
    _set(at, "selectbox", "link_layer", 1)
    _set(at, "selectbox", "link_target", 2)
    assert len(attention_calls) == runs
    # The counter does see a model run: a new sentence is one.
    _set(at, "text_input", state.SOURCE, "Tuesday, June 9, 1987")
    assert len(attention_calls) == runs + 1


def test_a_click_on_a_thumbnail_opens_that_head(app):
    """What the browser sends when a model-view cell is clicked (the selection state of the
    chart's invisible marker, whose customdata is [layer, head])."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    at = _page(app, ATTN)
    chart = at.get("plotly_chart")[1]
    widgets = at._tree.get_widget_states()
    click = WidgetState(id=chart.proto.id, string_value=json.dumps({"selection": {
        "points": [{"curve_number": 1, "point_number": 6, "customdata": [1, 2]}],
        "point_indices": [6], "box": [], "lasso": []}}))  # the "cell" markers: 4 heads a layer
    widgets.widgets.append(click)
    at._run(widgets)
    assert not at.exception, at.exception
    assert (at.selectbox(key="attn_layer").value, at.selectbox(key="attn_head").value) == (1, 2)
    assert figure(at)["layout"]["title"]["text"].endswith("layer 1, head 2")
    scrolls = [h.proto.body for h in at.get("html") if "scrollIntoView" in h.proto.body]
    assert len(scrolls) == 1 and ".st-key-attn_opened" in scrolls[0]  # brought into view
    at.run()  # any other rerun does not scroll
    assert not [h for h in at.get("html") if "scrollIntoView" in h.proto.body]
