"""views/Linked_View.py through AppTest: the three maps of one head, the picked target row
outlined, its strongest source tokens read out with the model's numbers."""

import json

import numpy as np
import pytest
from conftest import open_page as _page
from conftest import plotly_array as array
from conftest import set_widget as _set

from explorer import state

LINK = "views/Linked_View.py"


@pytest.fixture(scope="module")
def true_maps():
    """OpenedModel.attention of the default sentence, computed outside the app."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT).attention(state.DEFAULT_SOURCE)


def figure(at, index=0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def test_linked_view_picker_moves_the_highlight(app, true_maps):
    at = _page(app, LINK)
    spec = figure(at)
    assert len([t for t in spec["data"] if t.get("name") == "weight"]) == 3

    def highlights(spec):
        return sorted((s["xref"], s["y0"]) for s in spec["layout"]["shapes"]
                      if s.get("name") == "highlight")

    assert highlights(spec) == [("x2", -0.5), ("x3", -0.5)]
    _set(at, "selectbox", "link_target", 3)
    assert highlights(figure(at)) == [("x2", 2.5), ("x3", 2.5)]
    _set(at, "selectbox", "link_layer", 1)
    _set(at, "selectbox", "link_head", 2)
    cross = true_maps["cross"][1, 2]
    weights = [t for t in figure(at)["data"] if t.get("name") == "weight"]
    shown = array(weights[-1]["z"])  # the cross panel (nothing blocked)
    np.testing.assert_allclose(shown, cross, rtol=0, atol=1e-6)
    best = int(np.argmax(cross[3]))
    readout = " ".join(m.value for m in at.markdown)
    assert f"source position {best}): weight **{cross[3, best]:.3f}**" in readout
    _set(at, "radio", "link_export", "Cross-attention")
    assert at.get("download_button")


def test_a_click_on_a_row_of_the_cross_panel_picks_that_target_row(app):
    """What the browser sends when a cell of the cross panel is clicked: the selection state of
    its invisible marker, whose customdata starts with the row."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    at = _page(app, LINK)
    spec = figure(at)
    pickers = [n for n, t in enumerate(spec["data"]) if t.get("name") == "pick a row"]
    assert len(pickers) == 2  # decoder self and cross panels
    cross = spec["data"][pickers[-1]]
    point = next(i for i, row in enumerate(cross["customdata"]) if row[0] == 4)
    widgets = at._tree.get_widget_states()
    widgets.widgets.append(WidgetState(id=at.get("plotly_chart")[0].proto.id,
                                       string_value=json.dumps({"selection": {
        "points": [{"curve_number": pickers[-1], "point_number": point,
                    "customdata": cross["customdata"][point]}],
        "point_indices": [point], "box": [], "lasso": []}})))
    at._run(widgets)
    assert not at.exception, at.exception
    assert at.selectbox(key="link_target").value == 4
    assert figure(at)["layout"]["title"]["text"].startswith("Head 0: target row 4")
