"""Attention Explorer: `make run` (`python -m explorer.serve`: `streamlit run app.py` with the
default model prepared while the server starts, explorer.warm).

Navigation and the shared sidebar live here; each view is a thin page under views/.
"""

from pathlib import Path

import streamlit as st

from explorer import load_tensorflow, warm  # light: TensorFlow comes with load_tensorflow
from explorer.pages import DEFAULT, Page
from explorer.pages import SECTIONS as PAGE_SECTIONS

# The favicon is a file the server sends: a material icon or an emoji as page_icon is fetched
# from a font or image host, which an offline machine cannot reach (issue 38).
st.set_page_config(page_title="Attention Explorer",
                   page_icon=str(Path(__file__).resolve().parent / "assets" / "favicon.png"),
                   layout="wide")


def _page(page: Page) -> st.Page:
    return st.Page(page.file, title=page.title, icon=f":material/{page.icon}:",
                   **({"default": True} if page.url_path == DEFAULT else
                      {"url_path": page.url_path}))


# Sections in a bar across the top: every page a click away (none behind "View more"), and the
# sidebar starts with the sentence. The pages, their order and URL paths: explorer/pages.py.
SECTIONS = {section: [_page(page) for page in pages] for section, pages in PAGE_SECTIONS.items()}
WITHOUT_SENTENCE = {"Home", "Model"}  # pages that show something when the sentence is empty

page = st.navigation(SECTIONS, position="top", expanded=True)  # expanded: on a phone
if warm.starting():  # the served app's first seconds: its progress, then the page
    starting = st.empty()
    with starting.container():
        st.title("Attention Explorer")
        st.caption("Starting: TensorFlow and the default model load while the page waits (once "
                   "per server start).")
        bar = st.progress(0.0)
    warm.first_page_drawn.set()  # the warm-up may take the interpreter now
    while warm.starting():
        text, fraction = warm.stage
        bar.progress(fraction, text=f"{text}…")
        warm.page_ready.wait(0.1)
    starting.empty()  # the page follows in this same run (a rerun cost 0.2-0.3 s more)
load_tensorflow()  # quietly, once (the served app's warm-up did it already)

from explorer import links, models, sidebar  # noqa: E402  (after TensorFlow's quiet import)

links.restore_from_url()  # once per session, before any widget exists
link_slot = sidebar.render()
# The served app prepares the model's other compiled functions while this page runs (once per
# architecture): the next pages' first visits only compute.
warm.prepare_in_background(models.active_checkpoint())
links.begin(link_slot, page.url_path)  # the link: drawn when the choices are final
try:
    if sidebar.has_sentence() or page.title in WITHOUT_SENTENCE:
        page.run()
    else:
        st.title(page.title)
        st.info(sidebar.ask_for_sentence(), icon=":material/edit:")
finally:  # a page that stopped early (st.stop) was shown too
    warm.page_shown.set()  # the warm-up's background work may start
links.finish()  # the URL and the link, unless a fragment of the page drew them
