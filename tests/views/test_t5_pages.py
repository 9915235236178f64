"""A T5 model (tests/fixtures/t5_v11: no absolute positions, RMSNorm, unscaled scores plus a
relative position bias) uploaded through the sidebar: every page runs on it, and the Arithmetic
of one head redoes the model's scores with T5's rule (no ÷ √d_k, the bias added as a term),
ending equal to the model's own attention row for every kind (issue 26)."""

from pathlib import Path

import pytest
from conftest import ROOT, open_page, set_widget, uploader

from explorer.pages import PAGE_FILES
from transformer.core.kinds import KINDS

T5 = ROOT / "tests" / "fixtures" / "t5_v11"
PAGES = PAGE_FILES  # every page, in the menus' order (explorer/pages.py)


@pytest.fixture(scope="module")
def t5_app():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    files = [(p.name, p.read_bytes(), "application/octet-stream")
             for p in sorted(Path(T5).iterdir()) if p.suffix != ".npz"]
    uploader(at).set_value(files).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_t5(t5_app, page):
    at = open_page(t5_app, page)
    assert not at.error, [e.value for e in at.error]


def test_the_arithmetic_of_one_head_is_t5s(t5_app):
    at = open_page(t5_app, "views/Head_Arithmetic.py")
    words = " ".join(m.value for m in at.markdown)
    assert "does not scale its dot products" in words and "position bias is added" in words
    for kind in KINDS.values():
        set_widget(at, "radio", "arith_kind", kind.label)
        assert not at.error, (kind.name, [e.value for e in at.error])
        (success,) = [s.value for s in at.success]
        assert "equals the model's attention row" in success
