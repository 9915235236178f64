"""The screen a page is drawn on, and the one call that puts a figure on it.

A phone is told by its browser's User-Agent (Streamlit's st.context.headers: "Mobile",
"Android", "iPhone", "iPad"), the only thing a server sees of the screen. There Streamlit stacks
columns, so each chart is the page's width, about figures.common.PHONE_CHART_PX: chart() then
draws figures.common.narrow's figure, whose titles, subplot titles and axis titles are wrapped
to the width they have instead of cut at the chart's edge (issue 38). The sidebar (explorer.
sidebar) puts the sentence at the top of the page on a phone, where the page list does not push
it below the fold; Streamlit itself closes the sidebar when a page is picked on a phone.
"""

from __future__ import annotations

import re

import streamlit as st

from figures.common import narrow

_PHONE = re.compile(r"Mobi|Android|iPhone|iPad|iPod")


def on_a_phone() -> bool:
    """Whether the browser says it is a phone or a tablet (its User-Agent)."""
    try:
        agent = st.context.headers.get("User-Agent") or ""
    except Exception:  # no browser behind this run (AppTest, a bare script)
        return False
    return bool(_PHONE.search(agent))


def chart(container, fig, **kwargs):
    """container.plotly_chart(fig, **kwargs), the figure fitted to a phone's width there.
    Returns what plotly_chart returns (the selection, for a chart with on_select)."""
    if on_a_phone():
        fig = narrow(fig)
    return container.plotly_chart(fig, **kwargs)
