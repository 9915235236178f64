"""views/Token_View.py through AppTest: every widget changes the lines drawn, the token
toggles drop or merge tokens. Bad input: tests/views/test_hardening.py."""

import json

from conftest import open_page

from explorer import state

TOKEN_VIEW = "views/Token_View.py"


def _run(at):
    at.run()
    assert not at.exception, at.exception
    return at


def _specs(at):
    return [c.proto.spec for c in at.get("plotly_chart")]


def _column(at, name):
    """The token texts of the token view's "queries" or "keys" column."""
    (chart,) = at.get("plotly_chart")
    (trace,) = [t for t in json.loads(chart.proto.spec)["data"] if t.get("name") == name]
    return trace["text"]


def test_token_view_draws_and_every_widget_changes_it(app):
    at = open_page(app, TOKEN_VIEW)
    assert len(_column(at, "queries")) == 13  # <s> friday , march ▁ 5 , ▁ 2 0 2 1 </s>
    assert at.get("download_button"), "no export"
    changes = [
        lambda: at.radio(key="tv_kind").set_value("Cross-attention"),
        lambda: at.selectbox(key="tv_layer").set_value(1),
        lambda: at.multiselect(key="tv_heads").set_value([0]),
        lambda: at.selectbox(key="tv_query").set_value(2),
        lambda: at.slider(key="tv_min_weight").set_value(0.3),
        lambda: at.toggle(key="tv_hide_special").set_value(True),
        lambda: at.toggle(key="tv_merge_words").set_value(True),
        lambda: at.text_input(key=state.SOURCE).set_value("5th of March 1999"),
    ]
    for change in changes:
        before = _specs(at)
        change()
        _run(at)
        assert _specs(at) and _specs(at) != before
    assert "&lt;s&gt;" not in _column(at, "keys")
    at.multiselect(key="tv_heads").set_value([])
    _run(at)
    assert not at.get("plotly_chart") and at.info


def test_token_view_toggles_reduce_the_tokens_shown(app):
    at = open_page(app, TOKEN_VIEW)
    pieces = _column(at, "keys")
    at.toggle(key="tv_hide_special").set_value(True)
    without_special = _column(_run(at), "keys")
    assert len(without_special) == len(pieces) - 2
    assert "&lt;s&gt;" not in without_special and "&lt;/s&gt;" not in without_special
    at.toggle(key="tv_merge_words").set_value(True)
    words = _column(_run(at), "keys")
    assert len(words) < len(without_special)
    assert "2021" in words and "march" in words  # "2" "0" "2" "1" merged
    at.toggle(key="tv_hide_special").set_value(False)
    assert len(_column(_run(at), "keys")) == len(words) + 2


def test_merging_words_keeps_the_pieces_of_a_target_without_word_boundaries(app):
    """Cross-attention of the dates model: the target "2021-03-05" is one "▁" word, so its
    pieces stay (and the page says so) while the source merges into words."""
    at = open_page(app, TOKEN_VIEW)
    at.radio(key="tv_kind").set_value("Cross-attention")
    at.toggle(key="tv_merge_words").set_value(True)
    _run(at)
    assert len(_column(at, "queries")) == 12  # <s> ▁ 2 0 2 1 - 0 3 - 0 5
    assert len(_column(at, "keys")) == 6  # <s> friday, march 5, 2021 </s>
    assert any("no word boundaries" in c.value for c in at.caption)
