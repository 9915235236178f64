"""Links that reopen a view (explorer/links.py) through AppTest: the URL's query parameters are
read back in a fresh session, invalid ones fall back with a note, and the URL follows changes."""

import json

from conftest import ROOT, set_widget

from explorer import state

ATTN = "views/Attention_Maps.py"


def _fresh(params: dict, page: str | None = None):
    """A fresh session opened at a URL with these query parameters (on `page`, else Home)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params.update(params)
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def _heatmap_title(at) -> str:
    return json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]


def _link_notes(at) -> list[str]:
    return [i.value for i in at.sidebar.info if "could not be reopened" in i.value]


def test_a_link_reopens_an_attention_maps_view():
    at = _fresh({"model": "dates.epoch08.ckpt", "src": "Tuesday, June 9, 1987",
                 "attn_kind": "cross", "attn_layer": "1", "attn_head": "2"}, ATTN)
    assert at.selectbox(key=state.MODEL).value == "bundled:dates.epoch08.ckpt"
    assert at.text_input(key=state.SOURCE).value == "Tuesday, June 9, 1987"
    assert at.radio(key="attn_kind").value == "Cross-attention"
    assert (at.selectbox(key="attn_layer").value, at.selectbox(key="attn_head").value) == (1, 2)
    assert _heatmap_title(at) == "Cross-attention, layer 1, head 2"
    assert not _link_notes(at)
    # the link shown in the sidebar holds that view (only what differs from the defaults)
    [link] = [m.value for m in at.sidebar.markdown if m.value.startswith("```")]
    assert link == ("```text\n""./Attention_Maps?model=dates.epoch08.ckpt&src=Tuesday%2C+June+9%2C+1987"
                    "&attn_kind=cross&attn_layer=1&attn_head=2\n```")


def test_a_typed_target_in_the_link_is_kept():
    at = _fresh({"tgt": "2021-03-06"}, ATTN)
    assert at.radio(key=state.TARGET_MODE).value == state.TARGET_TYPED
    assert at.text_input(key=state.TARGET).value == "2021-03-06"  # not the model's translation
    assert at.query_params["tgt"] == "2021-03-06"


def test_invalid_parameters_fall_back_with_a_note():
    at = _fresh({"model": "nope.ckpt", "attn_layer": "99", "attn_head": "x",
                 "attn_kind": "sideways", "src": "Friday, March 5, 2021"}, ATTN)
    assert at.selectbox(key=state.MODEL).value == state.default_model_choice()
    assert at.radio(key="attn_kind").value == "Encoder self-attention"
    assert (at.selectbox(key="attn_layer").value, at.selectbox(key="attn_head").value) == (0, 0)
    [note] = _link_notes(at)
    for bad in ("nope.ckpt", "attn_layer=99", "'x'", "sideways"):
        assert bad in note
    # the stale parameters are gone from the URL: it now says the view shown (the defaults)
    assert at.query_params == {}


def test_an_upload_this_session_lacks_falls_back():
    at = _fresh({"model": "0123456789ab", "dec_layer": "1"}, "views/Decoding.py")
    assert at.selectbox(key=state.MODEL).value == state.default_model_choice()
    assert "upload" in _link_notes(at)[0]
    assert at.selectbox(key="dec_layer").value == 1


def test_the_url_follows_a_change_and_later_reruns_keep_it(app):
    at = app.switch_page(ATTN).run()
    assert at.query_params == {}  # the defaults: a short link
    at = set_widget(at, "radio", "attn_kind", "Decoder self-attention")
    at = set_widget(at, "selectbox", "attn_head", 3)
    assert at.query_params == {"attn_kind": "decoder", "attn_head": "3"}
    at = set_widget(at, "text_input", state.SOURCE, "Monday, May 1, 2000")
    assert at.query_params["src"] == "Monday, May 1, 2000"
    assert at.selectbox(key="attn_head").value == 3  # the URL is not read again


def test_another_page_writes_its_own_choices(app):
    at = app.switch_page("views/Linked_View.py").run()
    at = set_widget(at, "selectbox", "link_head", 1)
    assert at.query_params == {"link_head": "1"}


def test_a_page_that_stops_early_still_writes_the_url_and_the_link(app):
    """Head statistics stops when there are no pasted sentences: the URL and the sidebar's
    link still follow the sentence."""
    at = app.switch_page("views/Head_Statistics.py").run()
    at = set_widget(at, "radio", "stats_source", "pasted")
    assert any("No sentences to compute over" in i.value for i in at.info)
    at = set_widget(at, "text_input", state.SOURCE, "Tuesday, May 2, 2000")
    assert at.query_params["src"] == "Tuesday, May 2, 2000"
    assert any("Tuesday" in m.value for m in at.sidebar.markdown if "```" in m.value)


def test_a_link_reopens_weight_x_value_norm_and_a_contributions_view():
    from explorer import show

    at = _fresh({"attn_show": "value_norm", "attn_kind": "cross"}, ATTN)
    assert at.radio(key="attn_show").value == show.VALUE_NORM
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["colorbar"]["title"]["text"] == show.NORM_NAME
    assert at.query_params["attn_show"] == "value_norm"
    at = _fresh({"contrib_method": "integrated_gradients", "contrib_layer": "0",
                 "contrib_step": "2"}, "views/Contributions.py")
    assert at.radio(key="contrib_method").value == "Integrated gradients"
    assert at.selectbox(key="contrib_layer").value == 0  # the first layer, not the default last
    assert at.select_slider(key="contrib_step").value == 2
    assert not _link_notes(at)
    assert (at.query_params["contrib_method"], at.query_params["contrib_layer"],
            at.query_params["contrib_step"]) == ("integrated_gradients", "0", "2")
    set_widget(at, "radio", "contrib_method", "ALTI+")  # the default: no longer in the link
    assert "contrib_method" not in at.query_params


def test_an_unknown_option_falls_back_with_a_note():
    at = _fresh({"attn_show": "gradients"}, ATTN)
    assert at.radio(key="attn_show").value == "Weights"
    [note] = _link_notes(at)
    assert "attn_show='gradients'" in note and "weights, value_norm" in note


def test_a_link_reopens_an_interventions_view():
    """Issue 41, item 7: text, lists and a toggle reopen too (the patching pair, the knockout's
    edges, DecoderLens off)."""
    at = _fresh({"src": "March 5, 2021", "inter_patch_corrupted": "March 6, 2021",
                 "inter_patch_score": "difference", "inter_patch_step": "0",
                 "inter_ko_sources": "1,3", "inter_ko_layers": "1", "inter_ko_heads": "0,2",
                 "inter_lens_on": "0"}, "views/Interventions.py")
    assert not _link_notes(at)
    assert at.text_input(key="inter_patch_corrupted").value == "March 6, 2021"
    assert at.selectbox(key="inter_patch_step").value == 0  # a step named, 0 included
    assert at.multiselect(key="inter_ko_sources").value == [1, 3]
    assert at.multiselect(key="inter_ko_layers").value == [1]
    assert at.multiselect(key="inter_ko_heads").value == [0, 2]
    assert at.toggle(key="inter_lens_on").value is False
    assert {k: at.query_params[k] for k in ("inter_ko_sources", "inter_lens_on",
                                            "inter_patch_step")} == {
        "inter_ko_sources": "1,3", "inter_lens_on": "0", "inter_patch_step": "0"}
    set_widget(at, "multiselect", "inter_ko_heads", [0, 1, 2, 3])  # all: the default again
    assert "inter_ko_heads" not in at.query_params


def test_bad_list_and_flag_parameters_fall_back_with_a_note():
    at = _fresh({"inter_ko_heads": "0,9", "inter_ko_sources": "1;2", "inter_lens_on": "yes"},
                "views/Interventions.py")
    [note] = _link_notes(at)
    assert "inter_ko_heads=0,9 is out of range" in note
    assert "inter_ko_sources='1;2'" in note and "inter_lens_on='yes'" in note
    assert at.toggle(key="inter_lens_on").value is True
