import streamlit as st

from explorer import about, models, results, sidebar, state
from explorer.widgets import plain, quoted

ckpt = models.active_checkpoint()
st.title("Attention Explorer")
st.markdown(
    "See inside an encoder-decoder Transformer: how a sentence is tokenized, what the positional "
    "encodings and masks are, what every head of every layer attends to (encoder "
    "self-attention, decoder self-attention, cross-attention) and how greedy decoding picks each "
    "token. Type a sentence in the sidebar; every page follows it."
)
source = state.current_source()
described = about.about_checkpoint(ckpt, models.examples(ckpt))
st.subheader("The active model")
left, right = st.columns(2)
left.metric("Model", ckpt.name)
if sidebar.has_sentence():
    result = results.translation(ckpt, source)
    right.metric("Translation of the sentence", plain(result.text) if result.text else "(empty)")
    st.caption(f"Source: {source!r}")
    for warning in about.input_warnings(ckpt, source):
        st.warning(warning, icon=":material/warning:")
else:
    right.info(sidebar.ask_for_sentence(), icon=":material/edit:")
st.markdown(f"**What it does.** {plain(described.does)}")
st.markdown(f"**What it expects.** {plain(described.inputs)}")
if described.examples:
    st.markdown("For example: " + ", ".join(quoted(e) for e in described.examples))
st.page_link("views/Model.py", label="What the model is made of", icon=":material/account_tree:")
st.page_link("views/Tokenization.py", label="How the sentence is tokenized",
             icon=":material/text_fields:")
