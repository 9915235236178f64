"""Every page's keyed pickers run whatever type their session-state value comes back with.

A selectbox whose labels read the sentence (the Masks page's batch rows: "row 0 (sidebar):
hello") hands back the browser's old label, a string, when the sentence changes: Streamlit's
SelectboxSerde.deserialize returns a label it no longer offers as it is. Typing "hello" and then
"5/3/21" on the Masks page showed `TypeError: '>=' not supported between 'str' and 'int'` from
reset_if_out_of_range("mask_row") (issue 24). A link or an old session can bring any value too.
Each case here puts such a value under a page's key and runs the page: it must run, and the key
must be back to a value of the widget's own type."""

import pytest
from conftest import open_page

from explorer import choices
from transformer.core.kinds import KINDS as ALL_KINDS

# page: the keys its pickers fix before they are drawn (explorer.choices)
PAGES = {
    "views/Masks.py": ["mask_row", "mask_kind", "mask_layer", "mask_head", "mask_query"],
    "views/Attention_Maps.py": ["attn_kind", "attn_layer", "attn_head"],
    "views/Linked_View.py": ["link_layer", "link_head", "link_target"],
    "views/Aggregations.py": ["agg_kind", "agg_flow_layer"],
    "views/Token_View.py": ["tv_kind", "tv_layer", "tv_query", "tv_heads"],
    "views/Head_Arithmetic.py": ["arith_kind", "arith_layer", "arith_head", "arith_query"],
    "views/Decoding.py": ["dec_max_len", "dec_layer", "dec_head", "dec_ablate",
                             "dec_grad_steps"],
    "views/Compare_Heads.py": ["cmp_heads"],
    "views/Head_Statistics.py": ["stats_kind"],
    "views/Ablation.py": ["abl_heads"],
    "views/Contributions.py": ["contrib_method", "contrib_layer", "contrib_step",
                                  "contrib_steps"],
}
KINDS = {"mask_kind", "attn_kind", "agg_kind", "tv_kind", "arith_kind", "stats_kind"}
STALE = ["row 0 (sidebar): hello", 2.5, -3, 10**9, True, ["a"]]


def _open_with(app, page: str, values: dict):
    """Open `page` with `values` in session state, as a rerun or a link brings them (from
    another page, so that AppTest sends no widget state of its own for these keys)."""
    open_page(app, "views/Home.py")
    for key, value in values.items():
        app.session_state[key] = value
    return open_page(app, page)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("value", STALE, ids=repr)
def test_a_picker_state_of_any_type_runs(app, page, value):
    _open_with(app, page, dict.fromkeys(PAGES[page], value))
    for key in PAGES[page]:
        kept = app.session_state[key] if key in app.session_state else None
        assert not isinstance(kept, (bool, float)), (key, kept)
        if key in KINDS:  # a kind picker holds its kind's label
            assert kept is None or kept in {k.label for k in ALL_KINDS.values()}, (key, kept)
        elif isinstance(value, (str, float)) and not key.endswith(("_heads", "_ablate")):
            assert kept != value, (key, kept)


def test_masks_stale_row_label_is_reset(app):
    """The reported case: the browser's label of the old sentence's row comes back as the
    row's value."""
    _open_with(app, "views/Masks.py", {"mask_row": "row 0 (sidebar): hello"})
    assert not app.exception, app.exception
    assert app.session_state["mask_row"] == 0


@pytest.mark.parametrize("value, expected", [(3, 3), ("3", None), (3.0, None), (True, None),
                                             (None, None)])
def test_whole_number(value, expected):
    assert choices.whole_number(value) == expected
