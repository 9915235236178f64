"""Attention Explorer: `streamlit run app.py`.

Navigation and the shared sidebar live here; each view is a thin page under views/.
"""

import streamlit as st

from explorer import links, sidebar

st.set_page_config(page_title="Attention Explorer", page_icon=":material/visibility:",
                   layout="wide")

PAGES = [
    st.Page("views/0_Home.py", title="Home", icon=":material/home:", default=True),
    st.Page("views/1_Model.py", title="Model", icon=":material/account_tree:"),
    st.Page("views/2_Tokenization.py", title="Tokenization", icon=":material/text_fields:"),
    st.Page("views/3_Positional_Encodings.py", title="Positional encodings",
            icon=":material/waves:"),
    st.Page("views/4_Masks.py", title="Masks", icon=":material/grid_on:"),
    st.Page("views/5_Attention_Maps.py", title="Attention maps", icon=":material/grid_view:"),
    st.Page("views/6_Linked_View.py", title="Linked view", icon=":material/link:"),
    st.Page("views/7_Aggregations.py", title="Aggregations and rollout",
            icon=":material/stacked_line_chart:"),
    st.Page("views/8_Token_View.py", title="Token view", icon=":material/share:"),
    st.Page("views/9_Head_Arithmetic.py", title="Arithmetic of one head",
            icon=":material/calculate:"),
    st.Page("views/10_Decoding.py", title="Step-by-step decoding", icon=":material/route:"),
    st.Page("views/11_Compare_Heads.py", title="Compare heads", icon=":material/compare:"),
    st.Page("views/12_Head_Statistics.py", title="Head statistics", icon=":material/analytics:"),
    st.Page("views/13_Ablation.py", title="Head ablation", icon=":material/content_cut:"),
]

page = st.navigation(PAGES)
links.restore_from_url()  # once per session, before any widget exists
sidebar.render()
links.begin(st.sidebar.container(), page.url_path)  # the link: drawn when the choices are final
page.run()
links.finish()  # the URL and the link, unless a fragment of the page drew them
