"""Attention Explorer: `streamlit run app.py`.

Navigation and the shared sidebar live here; each view is a thin page under pages/.
"""

import streamlit as st

from explorer import sidebar

st.set_page_config(page_title="Attention Explorer", page_icon=":material/visibility:",
                   layout="wide")

PAGES = [
    st.Page("pages/0_Home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/1_Model.py", title="Model", icon=":material/account_tree:"),
    st.Page("pages/2_Tokenization.py", title="Tokenization", icon=":material/text_fields:"),
    st.Page("pages/3_Positional_Encodings.py", title="Positional encodings",
            icon=":material/waves:"),
    st.Page("pages/4_Masks.py", title="Masks", icon=":material/grid_on:"),
]

page = st.navigation(PAGES)
sidebar.render()
page.run()
