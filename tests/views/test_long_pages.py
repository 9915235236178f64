"""Every page with a 400-token typed target (issue 24, item 4), through AppTest: a small
untrained model that reads 512 positions is uploaded, a long source and a 400-token target
typed in the sidebar.
Every chart is at most MAX_HEIGHT pixels tall (it was 9,000-14,500), the token view draws at
most its cap of lines, and the decoding page folds its chips under "Show all"."""

import json

import pytest
from conftest import ROOT, open_page, uploader

from explorer import state
from figures.common import MAX_HEIGHT, WINDOW_ROWS
from figures.decoding import MAX_CHIPS
from figures.token_view import MAX_LINES

PAGES = ["views/Masks.py", "views/Attention_Maps.py", "views/Linked_View.py",
         "views/Aggregations.py", "views/Token_View.py", "views/Head_Arithmetic.py",
         "views/Decoding.py", "views/Compare_Heads.py", "views/Contributions.py"]
TARGET_IDS = 400


@pytest.fixture(scope="module")
def long_model() -> bytes:
    """testkit.tiny's model (dates tokenizers, 1 + 1 layers, 2 heads) reading 512 positions."""
    from testkit.tiny import tiny_checkpoint_bytes

    return tiny_checkpoint_bytes("long", max_len=512)


@pytest.fixture(scope="module")
def long_app(long_model):
    from streamlit.testing.v1 import AppTest

    from transformer import load_checkpoint

    ckpt = load_checkpoint(long_model)
    text = ""
    while len(ckpt.encode_target(text)) - 1 < TARGET_IDS:
        text += "2021-03-05 "
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state[state.SOURCE] = "friday, march 5, 2021 " * 40  # cut at the budget
    at.session_state[state.TARGET_MODE] = state.TARGET_TYPED
    at.session_state[state.TARGET] = text
    at.session_state[state.TARGET_STARTED] = True
    at.run()
    uploader(at).upload("long.ckpt", long_model).run()
    assert not at.exception, at.exception
    assert at.session_state[state.MODEL].startswith(state.UPLOADED)
    return at


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_of_every_page_keeps_a_bounded_height(long_app, page):
    at = open_page(long_app, page)
    specs = charts(at)
    windows = [abs(axis["range"][1] - axis["range"][0]) for spec in specs
               for name, axis in spec["layout"].items()
               if name.startswith("yaxis") and axis.get("range") and axis.get("autorange") is False
               or name == "yaxis" and spec["layout"].get("dragmode") == "pan"]
    assert WINDOW_ROWS in windows, page  # a long axis opens on a window of rows
    for spec in specs:
        assert spec["layout"].get("height", 450) <= MAX_HEIGHT + 60, (page, spec["layout"].get(
            "title"))


def test_the_token_view_draws_its_strongest_lines_and_says_how_many_it_left_out(long_app):
    at = open_page(long_app, "views/Token_View.py")
    at.slider(key="tv_min_weight").set_value(0.0).run()  # every weight above 0: ~10^5 lines
    (fig,) = [s for s in charts(at) if s["layout"].get("meta", {}).get("lines_possible")]
    assert fig["layout"]["meta"]["lines"] <= MAX_LINES < fig["layout"]["meta"]["lines_possible"]
    assert any("the strongest" in c.value for c in at.caption)
    at.toggle(key="tv_all_lines").set_value(True).run()
    (fig,) = [s for s in charts(at) if s["layout"].get("meta", {}).get("lines_possible")]
    assert fig["layout"]["meta"]["lines"] == fig["layout"]["meta"]["lines_possible"] > MAX_LINES
    at.toggle(key="tv_all_lines").set_value(False).run()


def test_the_decoding_page_folds_its_token_chips_under_show_all(long_app):
    at = open_page(long_app, "views/Decoding.py")
    chips = [m.value for m in at.markdown if "border-radius: 4px" in m.value
             and "padding: 2px 6px" in m.value]
    assert chips and all("<details>" in c for c in chips if c.count("padding: 2px 6px") > MAX_CHIPS)
    shown = [c.split("<details>")[0].count("padding: 2px 6px") for c in chips]
    assert max(shown) <= MAX_CHIPS
