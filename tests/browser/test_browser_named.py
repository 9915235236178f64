"""`python -m explorer.serve --model DIR` in headless Chromium (Debian's): the named model is
active on the first page, prepared while the server started; a folder typed in the sidebar's
"Open a model by name or folder" opens and becomes active; a name that is nothing is a sentence
and the model stays.

Screenshots land in test-artifacts/screenshots/ for a person to look at.
"""

import os
import time

import pytest
from conftest import ARTIFACTS, ROOT
from test_browser import browser, open_at, wait_for_app  # noqa: F401 - fixtures

from testkit.browser import served

pytestmark = pytest.mark.browser

BART = ROOT / "tests" / "fixtures" / "bart"
MARIAN = ROOT / "tests" / "fixtures" / "marian"


@pytest.fixture(scope="module")
def named_server():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    offline = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # the server's hub names: looked for in the cache only
    try:
        with served(ARTIFACTS / "streamlit_named.log", args=("--model", str(BART))) as url:
            yield url
    except RuntimeError as err:
        pytest.fail(f"{err}; see test-artifacts/streamlit_named.log")
    finally:
        if offline is None:
            os.environ.pop("HF_HUB_OFFLINE")
        else:
            os.environ["HF_HUB_OFFLINE"] = offline


def active_model(page) -> str:
    """The sidebar picker's shown choice (Streamlit draws it in the select's input or beside
    it, by version: both are read)."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(
        has_text="Active model")
    field = box.locator("input")
    shown = field.first.input_value() if field.count() else ""
    return f"{box.inner_text()} {shown} {box.locator('[value]').first.get_attribute('value') or ''}"


def test_model_named_at_start_and_one_opened_from_the_sidebar(named_server, browser):  # noqa: F811
    shots, page, errors = open_at(browser, f"{named_server}/Model")
    assert f"bart (folder {BART})" in active_model(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(shots / "named_model_at_start.png"), full_page=True)

    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("Open a model by name or folder").click()
    box = sidebar.locator('[data-testid="stTextInput"]').filter(
        has_text="Folder or Hugging Face name").locator("input")
    box.fill(str(MARIAN))
    box.press("Enter")  # submits the form
    page.wait_for_timeout(500)
    wait_for_app(page, timeout=180_000)
    # On a busy machine the rerun the form starts may begin after the app looked idle: wait for
    # the picker to change (or three minutes) before judging it.
    deadline = time.monotonic() + 180
    while f"marian (folder {MARIAN})" not in active_model(page) and time.monotonic() < deadline:
        page.wait_for_timeout(500)
        wait_for_app(page, timeout=180_000)
    assert f"marian (folder {MARIAN})" in active_model(page)
    page.locator('[data-testid="stMain"]').get_by_text("Marian", exact=False).first.wait_for(
        timeout=60_000)
    page.screenshot(path=str(shots / "named_model_opened_from_sidebar.png"), full_page=True)

    box.fill("nobody/no-such-model-here")
    box.press("Enter")
    page.wait_for_timeout(500)
    wait_for_app(page, timeout=120_000)
    error = sidebar.locator('[data-testid="stAlert"]').filter(has_text="Hugging Face cache")
    error.first.wait_for(timeout=60_000)
    assert "did not change" in error.first.inner_text()
    assert f"marian (folder {MARIAN})" in active_model(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert not errors, errors
