import pandas as pd
import streamlit as st

from explorer import about, models, screen
from explorer.widgets import plain, quoted
from figures.model import architecture_fig, history_fig
from transformer.model.summary import parameter_counts
from transformer.training.report import per_format_rows

ckpt = models.active_checkpoint()
config, meta = ckpt.config, ckpt.metadata
described = about.about_checkpoint(ckpt, models.examples(ckpt))
came_from = about.origin(meta)
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

for warning in getattr(ckpt, "metadata_warnings", None) or []:
    st.warning(warning, icon=":material/warning:")

what, where = st.columns(2)
with what:
    st.subheader("What it does")
    lines = [("Task", described.does), ("Languages", described.languages),
             ("Training data", described.training), ("Inputs it expects", described.inputs)]
    st.markdown("\n".join(f"- **{name}:** {plain(text)}" for name, text in lines if text))
    if described.examples:
        st.markdown("Examples: " + ", ".join(quoted(e) for e in described.examples))
with where:
    st.subheader("Where it came from")
    st.markdown(plain(came_from.how))
    if came_from.files:
        st.dataframe(pd.DataFrame(came_from.files), hide_index=True, key="model_source_files")
    if came_from.command:
        if came_from.files:
            st.caption("The same conversion on the command line:")
        st.code(came_from.command, language="sh", wrap_lines=True)

screen.chart(st, architecture_fig(config.to_dict()), key="model_architecture")

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

if isinstance(meta.get("history"), dict):
    st.subheader("Training")
    smoothing = meta.get("label_smoothing")
    screen.chart(st, history_fig({k: v for k, v in meta["history"].items() if isinstance(v, list)},
                                label_smoothing=smoothing if isinstance(smoothing, float) else None,
                                vocab_size=ckpt.config.tgt_vocab_size), key="model_history")
per_format = per_format_rows(meta)
if per_format:
    st.subheader("Held-out exact match per format")
    st.caption(f"{len(per_format)} formats, each measured on its own held-out pairs (days the "
               "model never saw in training, in any format); the example is one of them.")
    st.dataframe(pd.DataFrame(per_format), hide_index=True, key="model_per_format",
                 column_config={"exact match": st.column_config.NumberColumn(format="percent")})

notes = models.upload_notes()
if notes:
    with st.expander(f"Uploads in this session ({len(notes)})", icon=":material/upload:"):
        st.markdown("\n".join(f"- {':material/error:' if kind == 'error' else ':material/check:'} "
                              f"{plain(text)}" for kind, text in reversed(notes)))

with st.expander("All metadata"):
    st.json({k: v for k, v in meta.items() if k != "history"})
