"""Attention Explorer: `streamlit run app.py`."""

import streamlit as st


def welcome() -> None:
    st.title("Attention Explorer")
    st.markdown(
        "See inside an encoder-decoder Transformer: how a sentence is tokenized, what the "
        "positional encodings and masks are, what every head of every layer attends to "
        "(encoder self-attention, decoder self-attention, cross-attention) and how greedy "
        "decoding picks each token."
    )


st.set_page_config(page_title="Attention Explorer", layout="wide")
st.navigation([st.Page(welcome, title="Welcome", icon=":material/home:", default=True)]).run()
