"""A model that computes NaN for the user's sentence: every page shows the sentence naming the
layer and position (explorer.results turns transformer.inference.numerics.NumericalError into
st.error), never a traceback and never a map of NaN.

No file can load such a model any more (transformer.model.bounds refuses it, and the probe
behind it), so both checks are switched off here while a checkpoint whose every source
embedding row is 1e30 is uploaded: the model the second line exists for."""

import pytest
from conftest import open_page, uploader

from explorer import state

SAYS = ("The model computed NaN or an infinity in encoder layer 0's self-attention at source "
        "position 0; nothing is drawn from it.")
PAGES = ["views/Attention_Maps.py", "views/Decoding.py", "views/Ablation.py",
         "views/Contributions.py"]


@pytest.fixture
def hostile_bytes(tiny_checkpoint_bytes, monkeypatch) -> bytes:
    """The tiny upload checkpoint with every source embedding row at 1e30, and the load-time
    checks switched off for this test (the app runs in this process)."""
    from transformer import load_checkpoint
    from transformer.checkpoint.format import checkpoint_bytes

    monkeypatch.setattr("transformer.model.bounds.check_weight_bounds", lambda *args: {})
    monkeypatch.setattr("transformer.checkpoint.format._check_finite", lambda model: None)
    ckpt = load_checkpoint(tiny_checkpoint_bytes)
    table = ckpt.model.source_token_embedding.embeddings
    table.assign(table.numpy() * 0 + 1e30)
    return checkpoint_bytes(ckpt.model, ckpt.source_tokenizer, ckpt.target_tokenizer,
                            {"name": "hostile", "task": "dates"})


def test_every_page_says_where_the_model_computed_nan(app, hostile_bytes):
    app.text_input(key=state.SOURCE).set_value("July 14, 2003").run()
    uploader(app).upload("hostile.ckpt", hostile_bytes).run()
    assert not app.exception, app.exception
    assert app.session_state[state.MODEL].startswith("upload:")
    assert SAYS in [e.value for e in app.error], [e.value for e in app.error]
    for path in PAGES:
        at = open_page(app, path)  # no exception
        assert SAYS in [e.value for e in at.error], (path, [e.value for e in at.error])
        assert not at.get("plotly_chart"), path  # nothing drawn from the NaN
