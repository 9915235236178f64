import os
import sys
from pathlib import Path

# Quiet TensorFlow's start-up logging; the suite runs on CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def tiny_checkpoint_bytes() -> bytes:
    """A real, tiny, untrained checkpoint (dates tokenizers) for upload tests."""
    import keras

    from transformer import Tokenizer, Transformer, TransformerConfig
    from transformer.checkpoint import checkpoint_bytes
    from transformer.data import date_pairs

    keras.utils.set_random_seed(0)
    pairs = date_pairs(300, seed=1)
    source = Tokenizer.train([s for s, _ in pairs], 80, lowercase=True)
    target = Tokenizer.train([t for _, t in pairs], 20, lowercase=True)
    config = TransformerConfig(
        src_vocab_size=source.vocab_size, tgt_vocab_size=target.vocab_size, d_model=16,
        num_heads=2, dff=32, num_encoder_layers=1, num_decoder_layers=1, max_len=40,
        pad_id=target.pad_id, start_id=target.start_id, end_id=target.end_id)
    model = Transformer(config).build_weights()
    return checkpoint_bytes(model, source, target, {"name": "tiny-upload", "task": "dates"})


@pytest.fixture
def patched_pages_manager(monkeypatch):
    """Streamlit 1.67's AppTest marks apps with a pages/ folder as pages-directory apps, so
    switching pages skips app.py (no sidebar, no state). A real server clears the flag at the
    first st.navigation call: do the same. (The flag is read from the class, so set it there.)"""
    import streamlit.runtime.pages_manager as pages_manager

    original = pages_manager.PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        pages_manager.PagesManager.uses_pages_directory = False

    monkeypatch.setattr(pages_manager.PagesManager, "__init__", init)


@pytest.fixture
def app(patched_pages_manager):
    """app.py run once with the bundled model, in a fresh session."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    return at


def open_page(at, path):
    """Switch an AppTest to a page, run it, and fail on any exception."""
    at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def set_widget(at, kind, key, value):
    """Set a keyed widget (kind: "selectbox", "radio", ...), rerun, and fail on any exception."""
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception, at.exception
    return at
