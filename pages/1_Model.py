import pandas as pd
import streamlit as st

from explorer import models
from figures.model import architecture_fig, history_fig
from transformer.summary import parameter_counts

ckpt = models.active_checkpoint()
config, meta = ckpt.config, ckpt.metadata
st.title(f"Model: {ckpt.name}")

held_out = meta.get("held_out") or {}
cols = st.columns(4)
cols[0].metric("Parameters", f"{ckpt.model.count_params():,}")
cols[1].metric("Layers (encoder + decoder)",
               f"{config.num_encoder_layers} + {config.num_decoder_layers}")
if isinstance(held_out.get("exact_match"), (int, float)):
    cols[2].metric("Held-out exact match", f"{held_out['exact_match']:.2%}")
if isinstance(held_out.get("token_accuracy"), (int, float)):
    cols[3].metric("Held-out token accuracy", f"{held_out['token_accuracy']:.2%}")

st.plotly_chart(architecture_fig(config.to_dict()), key="model_architecture")

left, right = st.columns(2)
with left:
    st.subheader("Configuration")
    st.dataframe(pd.DataFrame({"value": [str(v) for v in config.to_dict().values()]},
                              index=list(config.to_dict())), key="model_config")
with right:
    st.subheader("Parameters per component")
    counts = pd.DataFrame(parameter_counts(ckpt.model))
    st.dataframe(counts, hide_index=True, key="model_parameters")
    st.caption(f"Total {counts['parameters'].sum():,} (a shared embedding is counted once).")

st.subheader("Tokenizers")
st.dataframe(pd.DataFrame({"source": ckpt.source_tokenizer.spec(),
                           "target": ckpt.target_tokenizer.spec()}).astype(str),
             key="model_tokenizers")

st.subheader("Training")
if meta.get("command"):
    st.code(meta["command"], language="sh")
if isinstance(meta.get("history"), dict):
    st.plotly_chart(history_fig({k: v for k, v in meta["history"].items()
                                 if isinstance(v, list)}), key="model_history")
with st.expander("All metadata"):
    st.json({k: v for k, v in meta.items() if k != "history"})
