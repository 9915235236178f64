"""Attention Explorer: `streamlit run app.py`.

Navigation and the shared sidebar live here; each view is a thin page under pages/.
"""

import streamlit as st

from explorer import links, sidebar

st.set_page_config(page_title="Attention Explorer", page_icon=":material/visibility:",
                   layout="wide")

PAGES = [
    st.Page("pages/0_Home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/1_Model.py", title="Model", icon=":material/account_tree:"),
    st.Page("pages/2_Tokenization.py", title="Tokenization", icon=":material/text_fields:"),
    st.Page("pages/3_Positional_Encodings.py", title="Positional encodings",
            icon=":material/waves:"),
    st.Page("pages/4_Masks.py", title="Masks", icon=":material/grid_on:"),
    st.Page("pages/5_Attention_Maps.py", title="Attention maps", icon=":material/grid_view:"),
    st.Page("pages/6_Linked_View.py", title="Linked view", icon=":material/link:"),
    st.Page("pages/7_Aggregations.py", title="Aggregations and rollout",
            icon=":material/stacked_line_chart:"),
    st.Page("pages/8_Token_View.py", title="Token view", icon=":material/share:"),
    st.Page("pages/9_Head_Arithmetic.py", title="Arithmetic of one head",
            icon=":material/calculate:"),
    st.Page("pages/10_Decoding.py", title="Step-by-step decoding", icon=":material/route:"),
    st.Page("pages/11_Compare_Heads.py", title="Compare heads", icon=":material/compare:"),
    st.Page("pages/12_Head_Statistics.py", title="Head statistics", icon=":material/analytics:"),
    st.Page("pages/13_Ablation.py", title="Head ablation", icon=":material/content_cut:"),
]

page = st.navigation(PAGES)
links.restore_from_url()  # once per session, before any widget exists
sidebar.render()
links.begin(st.sidebar.container(), page.url_path)  # the link: drawn when the choices are final
page.run()
links.finish()  # the URL and the link, unless a fragment of the page drew them
