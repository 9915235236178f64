"""The pages' st.fragment parts through AppTest, rerun alone as a browser asks for it
(tests/fragments.py): a layer, head or kind change inside a fragment redraws the right figure,
keeps the URL and the sidebar's copy-link control current, and runs nothing else (no sidebar)."""

import json

import numpy as np
import pytest
from conftest import model_view_outline, open_page
from conftest import plotly_array as array

from explorer import state
from testkit.fragments import fragment_of, set_in_fragment

# (page, widget kind, key, value, a text the redrawn figure's title holds, URL parameters after)
CHANGES = [
    ("views/Positional_Encodings.py", "checkbox", "pe_shared_scale", False, None, {}),
    ("views/Masks.py", "selectbox", "mask_head", 2, "layer 0, head 2, query 0",
     {"mask_head": "2"}),
    ("views/Masks.py", "selectbox", "mask_row", 1, "Decoder mask, row 1", {}),
    ("views/Attention_Maps.py", "selectbox", "attn_head", 3,
     "Encoder self-attention, layer 0, head 3", {"attn_head": "3"}),
    ("views/Linked_View.py", "selectbox", "link_layer", 1, "Head 0: target row 0",
     {"link_layer": "1"}),
    ("views/Aggregations.py", "radio", "agg_kind", "Cross-attention",
     "Cross-attention: mean over heads", {"agg_kind": "cross"}),  # flow layer: its default
    ("views/Token_View.py", "selectbox", "tv_layer", 1, "Encoder self-attention, layer 1",
     {"tv_layer": "1"}),
    ("views/Head_Arithmetic.py", "selectbox", "arith_head", 2, "layer 0, head 2, query 0",
     {"arith_head": "2"}),
    ("views/Decoding.py", "selectbox", "dec_head", 2, "layer 0, head 2", {"dec_head": "2"}),
    ("views/Compare_Heads.py", "selectbox", "cmp_ckpt_head", "cross L1 H2", "cross L1 H2",
     {}),
    ("views/Head_Statistics.py", "radio", "stats_kind", "Cross-attention",
     "Cross-attention: ", {"stats_kind": "cross"}),
    ("views/Ablation.py", "multiselect", "abl_heads", ["cross L0 H0"],
     "Log-probability of each token", {}),
]


def titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"].get("title", {}).get("text") or ""
            for c in at.get("plotly_chart")]


def link(at) -> str:
    [shown] = [m.value for m in at.sidebar.markdown if m.value.startswith("```")]
    return shown


@pytest.mark.parametrize("page, kind, key, value, title, params", CHANGES,
                         ids=[f"{c[0].split('/')[1][:-3]}-{c[2]}" for c in CHANGES])
def test_a_change_inside_a_fragment_reruns_it_alone_with_the_right_view(app, monkeypatch, page,
                                                                        kind, key, value, title,
                                                                        params):
    from explorer import sidebar

    at = open_page(app, page)
    assert fragment_of(at, kind, key), f"{key} is drawn outside every fragment"
    assert fragment_of(at, "text_input", state.SOURCE) is None  # the sidebar is not
    renders = []
    original = sidebar.render
    monkeypatch.setattr(sidebar, "render", lambda: renders.append(1) or original())
    set_in_fragment(at, kind, key, value)
    assert not renders  # only the fragment ran: not app.py, not the sidebar
    assert at.get("plotly_chart"), "the fragment drew no figure"
    if title is not None:
        assert any(title in t for t in titles(at)), titles(at)
    assert at.query_params == params  # the URL follows the fragment's choices
    if params:  # ... and so does the link, which the fragment redraws in the sidebar
        assert all(f"{k}={v}" in link(at) for k, v in params.items()), link(at)
    at.run()  # a full rerun afterwards shows the same choice, the link once
    assert not at.exception, at.exception
    assert getattr(at, kind)(key=key).value == value
    assert at.query_params == params


def test_the_fragment_shows_the_models_true_slice(shared_app):
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    true_maps = load_checkpoint(DEFAULT_CHECKPOINT).attention(state.DEFAULT_SOURCE)
    at = shared_app.page("views/Attention_Maps.py")
    set_in_fragment(at, "radio", "attn_kind", "Cross-attention")
    set_in_fragment(at, "selectbox", "attn_layer", 1)
    set_in_fragment(at, "selectbox", "attn_head", 2)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["title"]["text"] == "Cross-attention, layer 1, head 2"
    expected = np.where(true_maps["cross_mask"], true_maps["cross"][1, 2], np.nan)
    np.testing.assert_allclose(array(spec["data"][0]["z"]), expected, rtol=0, atol=1e-6)
    model_view = json.loads(at.get("plotly_chart")[1].proto.spec)
    assert model_view_outline(model_view) == (1, 2)
    assert at.query_params == {"attn_kind": "cross", "attn_layer": "1", "attn_head": "2"}
