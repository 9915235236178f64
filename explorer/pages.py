"""The app's pages, in the order of their menus: each one's file under views/, title, icon and
URL path, declared once. app.py builds the navigation from it; the tests walk the pages in this
order; a page's URL keys (links.PAGE_KEYS) are keyed by its url_path. A page's file is named as
its URL path (views/Decoding.py at /Decoding), with no number: the order is this table's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    url_path: str  # the page's address (the default page is the root as well)
    title: str
    icon: str  # a Material icon's name

    @property
    def file(self) -> str:
        """The page's script, relative to the project's root."""
        return f"views/{self.url_path}.py"


SECTIONS: dict[str, list[Page]] = {
    "Start": [Page("Home", "Home", "home"), Page("Model", "Model", "account_tree")],
    "The input": [Page("Tokenization", "Tokenization", "text_fields"),
                  Page("Positional_Encodings", "Positional encodings", "waves"),
                  Page("Masks", "Masks", "grid_on")],
    "Attention": [Page("Attention_Maps", "Attention maps", "grid_view"),
                  Page("Linked_View", "Linked view", "link"),
                  Page("Aggregations", "Aggregations and rollout", "stacked_line_chart"),
                  Page("Token_View", "Token view", "share"),
                  Page("Head_Arithmetic", "Arithmetic of one head", "calculate")],
    "Decoding": [Page("Decoding", "Step-by-step decoding", "route"),
                 Page("Contributions", "Contributions", "donut_small"),
                 Page("Interventions", "Interventions", "science")],
    "Heads": [Page("Compare_Heads", "Compare heads", "compare"),
              Page("Head_Statistics", "Head statistics", "analytics"),
              Page("Ablation", "Head ablation", "content_cut")],
}
DEFAULT = "Home"  # the page at the root
PAGES: list[Page] = [page for pages in SECTIONS.values() for page in pages]
PAGE_FILES: list[str] = [page.file for page in PAGES]  # every page's script, in menu order
