"""The real thing: `streamlit run app.py` in headless Chromium (Debian's), every page visited.

Screenshots land in test-artifacts/screenshots/ for a person to look at.
"""

import os
import re

import pytest
from conftest import ARTIFACTS

from testkit.browser import CHROMIUM, PHONE, figure_overlaps, launch_options, served

pytestmark = pytest.mark.browser

# (url path, a heading the page shows)
PAGES = [("", "Attention Explorer"), ("Model", "Model: dates"), ("Tokenization", "Tokenization"),
         ("Positional_Encodings", "Positional encodings"), ("Masks", "Masks"),
         ("Attention_Maps", "Attention maps"), ("Linked_View", "Linked view"),
         ("Aggregations", "Aggregations"), ("Token_View", "Token view"),
         ("Head_Arithmetic", "Arithmetic of one head"), ("Decoding", "decoding"),
         ("Compare_Heads", "Compare heads"), ("Head_Statistics", "Head statistics"),
         ("Ablation", "ablation"), ("Contributions", "Contributions"),
         ("Interventions", "Interventions")]


@pytest.fixture(scope="module")
def server():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        with served(ARTIFACTS / "streamlit.log") as url:
            yield url
    except RuntimeError as err:
        pytest.fail(f"{err}; see test-artifacts/streamlit.log")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), "Debian's chromium is not installed (make chromium)"
    with sync_playwright() as p:
        b = p.chromium.launch(**launch_options())
        yield b
        b.close()


def expect(locator):
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def wait_for_app(page, timeout=120_000):
    """Until the script has finished its run (Streamlit marks the app root)."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]',
                           timeout=timeout)
    page.wait_for_timeout(500)  # let Plotly draw


def nav_titles(page) -> list[str]:
    """Every page title the navigation offers: the top bar's sections opened one by one (a
    wide window), or the sidebar's list (a phone's, where the bar moves into the sidebar)."""
    sections = page.locator('[data-testid="stTopNavSection"]')
    titles = page.locator('[data-testid="stSidebarNavLink"]').all_inner_texts()
    for i in range(sections.count()):
        sections.nth(i).click()
        links = page.locator('[data-testid="stTopNavDropdownLink"]')
        links.first.wait_for()
        titles += links.all_inner_texts()
        page.keyboard.press("Escape")
        page.wait_for_timeout(200)
    return [t.split("\n")[-1].strip() for t in titles]  # after the icon's ligature


def open_from_nav(page, section: str, title: str) -> None:
    """Open a page through the top bar's section menu, in the same session."""
    page.locator('[data-testid="stTopNavSection"]').filter(has_text=section).click()
    page.locator('[data-testid="stTopNavDropdownLink"]').filter(has_text=title).click()
    page.wait_for_timeout(300)
    wait_for_app(page)


def test_deep_link_on_a_fresh_server_gets_the_full_app(server, browser):
    """The first request after a (re)start opens a page directly, not the home page: it must
    still get app.py's sidebar and navigation. (Runs first: the server is fresh.)"""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/Masks")
    wait_for_app(page)
    page.get_by_label("Source sentence").wait_for(timeout=60_000)
    assert page.get_by_label("Source sentence").input_value() == "Friday, March 5, 2021"
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "Tokenization" in nav_titles(page)


def test_every_page_renders_in_chromium(server, browser):
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    for path, heading in PAGES:
        page.goto(f"{server}/{path}")
        wait_for_app(page)
        assert page.locator('[data-testid="stException"]').count() == 0, \
            page.locator('[data-testid="stException"]').first.inner_text()
        main = page.locator('[data-testid="stMain"]')
        main.get_by_text(heading, exact=False).first.wait_for(timeout=30_000)
        if path:  # every page but home draws Plotly figures
            page.wait_for_selector(".js-plotly-plot", timeout=60_000)
            assert page.locator(".js-plotly-plot").count() >= 1
        page.screenshot(path=str(shots / f"{path or 'Home'}.png"), full_page=True)
        overlaps = figure_overlaps(page)  # issue 38: titles, legends, captions in the clear
        assert not overlaps, (path, overlaps)
    assert not errors, errors


def test_every_page_on_a_phone(server, browser):
    """Issue 38's walk on a phone (390 x 844, a phone's User-Agent: testkit.browser.PHONE):
    every page renders without an exception, its screenshot saved for a person to look at, and
    no text of its figures overlaps another or is cut at the chart's edge (explorer.screen
    wraps the titles to a phone's width); what was found is written to
    test-artifacts/phone-figure-texts.json."""
    import json

    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(**PHONE)
    page = context.new_page()
    errors, found = [], {}
    page.on("pageerror", lambda e: errors.append(str(e)))
    for path, heading in PAGES:
        page.goto(f"{server}/{path}")
        wait_for_app(page)
        assert page.locator('[data-testid="stException"]').count() == 0, path
        page.locator('[data-testid="stMain"]').get_by_text(heading, exact=False).first.wait_for(
            timeout=30_000)
        page.screenshot(path=str(shots / f"{path or 'Home'}-phone.png"))
        found[path or "Home"] = figure_overlaps(page)
        charts = page.locator(".stPlotlyChart")
        if charts.count():  # the first figure as a phone shows it (titles wrapped)
            charts.first.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            page.screenshot(path=str(shots / f"{path}-phone-chart.png"))
    context.close()
    (ARTIFACTS / "phone-figure-texts.json").write_text(json.dumps(found, indent=1))
    assert not errors, errors
    assert not any(found.values()), {path: texts for path, texts in found.items() if texts}


def test_a_phone_has_the_sentence_on_the_page_and_closes_the_menu(server, browser):
    """Issue 38, item 11: on a phone the sentence box is at the top of the page, in sight
    without opening the sidebar or scrolling past the page list, and picking a page in the
    sidebar closes it over the page that opens."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.goto(f"{server}/Attention_Maps")
    wait_for_app(page)
    main = page.locator('[data-testid="stMain"]')
    label = main.get_by_text("Sentence: Friday, March 5, 2021")
    box = label.bounding_box()
    assert box and 0 <= box["y"] and box["y"] + box["height"] <= 844, box
    label.click()
    source = main.get_by_label("Source sentence")
    source.wait_for()
    box = source.bounding_box()
    assert box and box["y"] + box["height"] <= 844, box
    source.fill("purple monkey dishwasher")
    source.press("Enter")
    wait_for_app(page)
    page.locator('[data-testid="stExpandSidebarButton"]').first.click()
    page.wait_for_timeout(500)
    sidebar = page.locator('[data-testid="stSidebar"]')
    assert sidebar.get_attribute("data-collapsed") == "false"
    assert sidebar.get_by_label("Source sentence").count() == 0  # one box: on the page
    sidebar.locator('[data-testid="stSidebarNavLink"]').filter(has_text="Masks").click()
    page.wait_for_timeout(300)
    wait_for_app(page)
    main.get_by_text("Masks", exact=False).first.wait_for()
    assert sidebar.get_attribute("data-collapsed") == "true"
    assert main.get_by_text("Sentence: purple monkey dishwasher").is_visible()
    page.screenshot(path=str(ARTIFACTS / "screenshots" / "Masks-phone-after-menu.png"))
    context.close()


VIEWPORTS = [(1440, 900), (1280, 720), (390, 844)]  # issue 24's desktop, laptop and phone


@pytest.mark.parametrize("width, height", VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_controls_in_sight_at_every_size(server, browser, width, height):
    """The sentence box in sight on load (the sidebar shows beside the page on a desktop or a
    laptop; on a phone, testkit.browser.PHONE, it is at the top of the page), the link control above the
    model picker, every page listed in the navigation (none behind "View more"). Screenshots
    of Home, Decoding and Attention maps at each size for a person to look at."""
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    phone = width < 640
    context = browser.new_context(**PHONE) if phone else browser.new_context(
        viewport={"width": width, "height": height})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/")
    wait_for_app(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    if not phone:  # beside the page, first in the sidebar: in sight without a scroll
        box = page.get_by_label("Source sentence").bounding_box()
    else:  # at the top of the page, in a box named by its sentence (the sidebar: pages first)
        box = page.locator('[data-testid="stMain"]').get_by_text("Sentence: ").bounding_box()
        page.locator('[data-testid="stExpandSidebarButton"]').first.click()  # closed over it
        page.wait_for_timeout(500)
    assert box and 0 <= box["y"] and box["y"] + box["height"] <= height, box
    link = sidebar.get_by_text("Link to this view").bounding_box()
    picker = sidebar.get_by_text("Active model").bounding_box()
    assert link["y"] < picker["y"], (link, picker)
    titles = nav_titles(page)
    assert len(titles) == len(PAGES) and "Step-by-step decoding" in titles, titles
    assert page.get_by_text(re.compile(r"View \d+ more")).count() == 0
    page.screenshot(path=str(shots / f"Home-{width}x{height}.png"))
    for path in ("Decoding", "Attention_Maps"):
        page.goto(f"{server}/{path}")
        wait_for_app(page)
        close = page.locator('[data-testid="stSidebarCollapseButton"] button')
        if width < 640 and close.count() and close.first.is_visible():  # the page, not the menu
            close.first.click()
            page.wait_for_timeout(500)
        assert page.locator('[data-testid="stException"]').count() == 0
        page.screenshot(path=str(shots / f"{path}-{width}x{height}.png"), full_page=True)
        chart = page.locator(".stPlotlyChart").first  # the main area scrolls on its own
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.screenshot(path=str(shots / f"{path}-{width}x{height}-chart.png"))
    context.close()
    assert not errors, errors


def test_the_server_prepared_the_default_model_while_it_started(server):
    """`make run`'s server (python -m explorer.serve) loads the default model and traces its
    decode loop and maps pass in the background as it starts (explorer.warm): its log says so,
    with no error. (bench/cold_start.py measures what it saves.)"""
    import time

    log = ARTIFACTS / "streamlit.log"
    deadline = time.monotonic() + 180
    while "Warm start:" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    text = log.read_text()
    assert re.search(r"Warm start: dates and its compiled loops ready in [\d.]+ s", text), text
    assert "Warm start failed" not in text
    # Issue 38: a quiet terminal: Streamlit's lines with the URL, none of TensorFlow's native
    # start-up lines, no warning about our own threads, no Uvicorn info
    assert re.search(r"URL: http://", text), text
    for noise in ("cudart_stub", "cuInit", "absl::InitializeLog", "cpu_feature_guard",
                  "missing ScriptRunContext", "Uvicorn server started", "Traceback"):
        assert noise not in text, (noise, text)


def open_at(browser, url: str, width: int = 1400, height: int = 1000):
    """(the screenshots' folder, made; a page of that size open at url once its script has run;
    the list its page errors are collected in)."""
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    wait_for_app(page)
    return shots, page, errors


def _contributions_page(server, browser):
    """(the screenshots' folder, a tall page open on Contributions once it has drawn, its main
    area, the page errors collected)."""
    shots, page, errors = open_at(browser, f"{server}/Contributions", height=3600)  # all of it
    main = page.locator('[data-testid="stMain"]')
    # Waits are long: on a loaded 2-core CI machine this page's first run took over a minute.
    main.get_by_text("Source share, step by step").wait_for(timeout=180_000)
    return shots, page, main, errors


def test_contributions_and_value_norms_in_chromium(server, browser):
    """Issue 27's choices in a real browser on the bundled model: the Contributions page draws
    ALTI+ and, picked, integrated gradients (a red-white-blue map); the attention maps switch to
    weight x value norm."""
    shots, page, main, errors = _contributions_page(server, browser)
    page.wait_for_function(  # share, 2 x 3 maps, bars (Plotly draws them one by one)
        "() => document.querySelectorAll('.js-plotly-plot').length >= 8", timeout=180_000)
    assert main.get_by_text("ALTI+", exact=False).count() > 0
    page.screenshot(path=str(shots / "Contributions-alti.png"), full_page=True)
    main.get_by_text("Integrated gradients", exact=True).click()
    page.wait_for_timeout(300)
    wait_for_app(page)
    # the steps until complete (issue 38): the default sentence needs 256, after 32, 64, 128
    main.get_by_text("Completeness: with 256 steps (after 32, 64, 128",
                     exact=False).wait_for(timeout=180_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(shots / "Contributions-integrated-gradients.png"), full_page=True)
    page.goto(f"{server}/Attention_Maps")
    wait_for_app(page)
    main.get_by_text("Weight × value norm", exact=True).first.click()
    page.wait_for_timeout(300)
    wait_for_app(page)
    main.get_by_text("Kobayashi et al. 2020", exact=False).first.wait_for(timeout=180_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(shots / "Attention_Maps-value-norm.png"), full_page=True)
    assert not errors, errors


def test_contrast_value_zeroing_and_decoder_lens_in_chromium(server, browser):
    """Issue 41 in a real browser on the bundled model: saliency against each step's
    runner-up, value zeroing beside the attention weights, and the Interventions page's
    DecoderLens and activation patching."""
    shots, page, main, errors = _contributions_page(server, browser)
    main.get_by_text("Saliency", exact=True).click()
    page.wait_for_timeout(300)
    wait_for_app(page)
    main.get_by_text("log p(token) − log p(runner-up)", exact=True).click()
    page.wait_for_timeout(300)
    wait_for_app(page)
    main.get_by_text("rather than the runner-up", exact=False).first.wait_for(timeout=180_000)
    main.get_by_text("Compute value zeroing", exact=False).click()
    page.wait_for_timeout(300)
    wait_for_app(page)
    main.get_by_text("value zeroing, each row normalised", exact=False).first.wait_for(
        timeout=180_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(shots / "Contributions-contrast-value-zeroing.png"), full_page=True)
    page.goto(f"{server}/Interventions")
    wait_for_app(page)
    main.get_by_text("the decoder reading encoder layer k", exact=False).first.wait_for(
        timeout=180_000)
    assert main.get_by_text("(the model)", exact=False).count() > 0
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(shots / "Interventions-decoder-lens.png"), full_page=True)
    # activation patching (item 4): the default sentence against the day changed
    box = main.get_by_role("textbox", name="Corrupted source sentence")
    box.fill("Friday, March 6, 2021")
    box.press("Enter")
    page.wait_for_timeout(300)
    wait_for_app(page)
    main.get_by_text("the share of the corruption", exact=False).first.wait_for(timeout=180_000)
    assert main.locator('[data-testid="stMetricValue"]').filter(has_text="5").count() > 0
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "inter_patch_corrupted=Friday" in page.url  # the link keeps the pair
    page.screenshot(path=str(shots / "Interventions-patching.png"), full_page=True)
    assert not errors, errors


def test_a_click_on_a_model_view_thumbnail_opens_that_head_in_chromium(server, browser):
    """The model view is one tiled heatmap with an invisible marker at each thumbnail's centre
    (figures.attention_maps.model_view_fig): a real click inside a thumbnail, off its centre,
    selects the nearest marker, and the page opens that head above (its pickers and its map)."""
    shots, page, errors = open_at(browser, f"{server}/Attention_Maps", height=1800)
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=180_000)
    # where layer 1, head 2's thumbnail is drawn: a quarter of the way in from its top left
    # corner, in the page's pixels (Plotly's axes map data to pixels)
    x, y = page.evaluate("""() => {
        const gd = document.querySelectorAll('.js-plotly-plot')[1];
        const m = gd.layout.meta.model_view, L = gd._fullLayout;
        const cell = gd.data.find(t => t.name === 'cell');
        const i = cell.customdata.findIndex(c => c[0] === 1 && c[1] === 2);
        const dx = (m.columns) / 4, dy = (m.rows) / 4;
        const box = gd.querySelector('.nsewdrag').getBoundingClientRect();
        return [box.left + L.xaxis.d2p(cell.x[i] - dx), box.top + L.yaxis.d2p(cell.y[i] - dy)];
    }""")
    page.mouse.move(x, y)
    page.wait_for_timeout(300)
    assert "layer 1, head 2" in page.locator(".hovertext").first.text_content()
    page.mouse.click(x, y)
    page.wait_for_timeout(500)
    wait_for_app(page)
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("layer 1, head 2", exact=False).first.wait_for(timeout=60_000)
    assert "attn_layer=1" in page.url and "attn_head=2" in page.url
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(shots / "Attention_Maps-model-view-click.png"), full_page=True)
    assert not errors, errors
