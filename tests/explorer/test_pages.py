"""The app's pages are declared once (explorer/pages.py): every page there has its script under
views/ named as its URL path, every script there is a page, and the links' URL keys belong to
pages that exist."""

from pathlib import Path

from explorer import links
from explorer.pages import DEFAULT, PAGE_FILES, PAGES

ROOT = Path(__file__).resolve().parents[2]


def test_every_page_has_its_script_and_every_script_is_a_page():
    scripts = sorted(f"views/{p.name}" for p in (ROOT / "views").glob("*.py"))
    assert sorted(PAGE_FILES) == scripts
    assert len(set(PAGE_FILES)) == len(PAGES) == 16
    assert all(not Path(f).stem[0].isdigit() for f in PAGE_FILES)  # the order is the table's
    assert PAGES[0].url_path == DEFAULT


def test_the_links_url_keys_name_pages_that_exist():
    paths = {page.url_path for page in PAGES}
    assert set(links.PAGE_KEYS) <= paths, set(links.PAGE_KEYS) - paths
