"""views/Ablation.py through AppTest: silencing heads changes the translation when it
should, and per-head importance covers every head. Bad input: tests/views/test_hardening.py."""

import json

from conftest import open_page as _page

from transformer.core.kinds import KIND_NAMES

ABLATION = "views/Ablation.py"


def chart(at, key) -> dict:
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(key)]
    assert len(found) == 1, (key, [c.proto.id for c in at.get("plotly_chart")])
    return json.loads(found[0].proto.spec)


def test_ablation_page_no_head_silenced_then_every_cross_head(app):
    at = _page(app, ABLATION)
    original, silenced, delta = (m.value for m in at.metric)
    assert original == silenced == "2021-03-05"
    assert delta == "+0.0000"  # self-check: silencing nothing changes nothing
    at.button(key="abl_all_cross").click().run()
    assert not at.exception, at.exception
    assert all(label.startswith("cross ") for label in at.multiselect(key="abl_heads").value)
    original, silenced, delta = (m.value for m in at.metric)
    assert original == "2021-03-05" and silenced != original
    assert float(delta) < 0
    tokens = chart(at, "abl_tokens")
    assert [t["name"] for t in tokens["data"]] == ["original model", "heads silenced"]


def test_ablation_page_per_head_importance(app):
    at = _page(app, ABLATION)
    assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("abl_importance")]
    at.button(key="abl_run_importance").click().run()
    assert not at.exception, at.exception
    spec = chart(at, "abl_importance")
    assert sum(len(t["y"]) for t in spec["data"]) == 24  # 3 kinds x 2 layers x 4 heads
    assert {t["name"] for t in spec["data"]} == set(KIND_NAMES)


def test_per_head_importance_again_and_in_another_session(app):
    """Issue 24 (a): the importance, computed once, comes from the cache when the button is
    pressed again, when every cross head is silenced after it, and in another session; a
    progress bar made outside the cached function broke each replay (CacheReplayClosureError)."""
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    at = _page(app, ABLATION)
    at.button(key="abl_run_importance").click().run()
    assert not at.exception, at.exception
    first = chart(at, "abl_importance")
    at.button(key="abl_run_importance").click().run()
    assert not at.exception, at.exception
    at.button(key="abl_all_cross").click().run()
    assert not at.exception, at.exception
    assert chart(at, "abl_importance") == first
    other = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    other.run()
    other = _page(other, ABLATION)
    other.button(key="abl_run_importance").click().run()
    assert not other.exception, other.exception
    assert chart(other, "abl_importance") == first
