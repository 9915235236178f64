import base64
import os
import sys
from pathlib import Path

# Quiet TensorFlow's start-up logging; the suite runs on CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

import transformer  # noqa: E402, F401  (its TensorFlow settings apply before a test imports it)

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def tiny_checkpoint_bytes() -> bytes:
    """A real, tiny, untrained checkpoint (dates tokenizers) for upload tests."""
    from testkit.tiny import tiny_checkpoint_bytes as build

    return build()


@pytest.fixture(scope="session")
def from_scratch_run(tmp_path_factory) -> Path:
    """The "Transformer from scratch" notebook trained and saved with its own code, under TF 2.x
    Keras 2 (tf_keras, in its own process; about 30 s): tests/from_scratch_run.py says what the
    folder holds (the ModelCheckpoint folder, .weights.h5, .keras, vocabularies, its outputs)."""
    import subprocess

    pytest.importorskip("tf_keras")
    out = tmp_path_factory.mktemp("from_scratch")
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "from_scratch_run.py"), str(out)],
                         env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


@pytest.fixture
def app():
    """app.py run once with the bundled model, in a fresh session."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    return at


class SharedApp:
    """app.py run once for a test module's read-only tests: a page is run on the first test that
    reads it and then read as it is drawn, so a module's readers pay for one app and one run a
    page. A test that sets a widget, clicks or uploads takes `app`, a session of its own."""

    HOME = "views/Home.py"

    def __init__(self):
        from streamlit.testing.v1 import AppTest

        self._at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        self._at.run()
        assert not self._at.exception, self._at.exception
        self._shown = self.HOME  # the page the last run drew

    def page(self, path: str = HOME):
        """The app with `path` drawn (run now only if another page was drawn last)."""
        if path != self._shown:
            open_page(self._at, path)
            self._shown = path
        return self._at


@pytest.fixture(scope="module")
def shared_app() -> SharedApp:
    """One app for the module's tests that only read what a page draws (see SharedApp)."""
    return SharedApp()


def open_page(at, path):
    """Switch an AppTest to a page, run it, and fail on any exception."""
    at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def uploader(at):
    """The sidebar's uploader as it is this round (a handled upload clears it: a new key)."""
    from explorer import state

    return at.file_uploader(key=state.uploader_key(at.session_state))


def set_widget(at, kind, key, value):
    """Set a keyed widget (kind: "selectbox", "radio", ...), rerun, and fail on any exception."""
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception, at.exception
    return at


def plotly_array(value) -> np.ndarray:
    """A Plotly JSON array as floats: a plain list (None = NaN) or a typed array
    {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict):
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = [int(s) for s in str(value.get("shape", len(data))).split(",")]
        return data.reshape(shape).astype(float)
    return np.array([[np.nan if v is None else v for v in row] for row in value], float)


def model_view_thumbnail(spec: dict, layer: int, head: int) -> np.ndarray:
    """One head's thumbnail of a model view (figures.attention_maps.model_view_fig: one tiled
    heatmap, its sizes in layout.meta), from the figure's JSON or its dict."""
    from figures.attention_maps import model_view_tile

    sizes = spec["layout"]["meta"]["model_view"]
    (grid,) = [t for t in spec["data"] if t["type"] == "heatmap"]
    return plotly_array(grid["z"])[model_view_tile(layer, head, sizes["rows"], sizes["columns"])]


def model_view_outline(spec: dict) -> tuple[int, int]:
    """(layer, head) of the thumbnail a model view outlines (its shape "selected")."""
    from figures.attention_maps import model_view_tile

    sizes = spec["layout"]["meta"]["model_view"]
    (shape,) = [s for s in spec["layout"]["shapes"] if s["name"] == "selected"]
    step_y, step_x = sizes["rows"] + sizes["row_gap"], sizes["columns"] + sizes["column_gap"]
    layer, head = int((shape["y0"] + 0.5) // step_y), int((shape["x0"] + 0.5) // step_x)
    tile = model_view_tile(layer, head, sizes["rows"], sizes["columns"])
    assert (shape["x0"], shape["x1"]) == (tile[1].start - 0.5, tile[1].stop - 0.5)
    assert (shape["y0"], shape["y1"]) == (tile[0].start - 0.5, tile[0].stop - 0.5)
    return layer, head


# Models the inference tests share (a module that defines one of these names keeps its own): the
# bundled checkpoint, a small random pre-LN variant of it (learned positions, an embedding norm:
# testkit.variants) and the Marian fixture (a Hugging Face family: scaled embeddings, its own
# positions).
MARIAN = ROOT / "tests" / "fixtures" / "marian"


@pytest.fixture(scope="module")
def bundled():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def pre_ln(bundled):
    from testkit.variants import random_variant

    return random_variant(bundled, seed=13, norm_first=True, positional="learned",
                          embedding_norm=True)


@pytest.fixture(scope="module")
def marian():
    from transformer import load_checkpoint

    return load_checkpoint(MARIAN)
